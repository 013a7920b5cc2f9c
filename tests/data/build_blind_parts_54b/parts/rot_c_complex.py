"""
part: 1 (rotate)
kind: correct
mistake: none. Written unusually: each pair is read as a complex number a + ib and multiplied by
    exp(i theta), with the GPT-J case done by a reshape to [T, D/2, 2] and the NeoX case by splitting
    the halves; the result is cast back to float32 when x is float32 (float32's rounding is allowed).
good feedback must say: passed / correct (all cases right); it may save the part for notebook 14.
must NOT say: any mistake name (pairs swapped, off by one, float16, sign...); that complex numbers are
    not allowed.
"""
import numpy as np


def rotate(x, positions, inv_freq, is_neox):
    """One head x [T, D] turned by RoPE at positions [T]: pair i turns by positions[t] * inv_freq[i].

    is_neox: pairs (i, i + D/2); otherwise GPT-J pairs (2i, 2i + 1). Return a new [T, D] array.
    """
    x = np.asarray(x)
    out_dtype = np.float32 if x.dtype == np.float32 else np.float64
    x64 = x.astype(np.float64)
    T, D = x64.shape
    turn = np.exp(1j * np.multiply.outer(np.asarray(positions, dtype=np.float64),
                                         np.asarray(inv_freq, dtype=np.float64)))  # [T, D/2]
    if is_neox:
        z = (x64[:, : D // 2] + 1j * x64[:, D // 2:]) * turn
        return np.concatenate([z.real, z.imag], axis=1).astype(out_dtype)
    z = x64.reshape(T, D // 2, 2) @ np.array([1.0, 1j])  # a + ib per GPT-J pair
    z = z * turn
    return np.stack([z.real, z.imag], axis=-1).reshape(T, D).astype(out_dtype)
