"""The op's FP8 pool bytes against torch's ``float8_e4m3fn`` conversion, on every float16 and bfloat16 value.

Two steps, two environments (torch is not a dependency of ropepool):

    .venv/bin/python benchmarks/fp8_vs_torch.py write /tmp/fp8_codes.npz     # the op's codes, every backend here
    /path/to/torch/python benchmarks/fp8_vs_torch.py check /tmp/fp8_codes.npz  # needs only torch and numpy

``write`` runs ``rope_pool_fused`` with uint8 pools on every finite float16 and bfloat16 bit pattern as
``v``, at several ``v_scale``s, and stores the pool bytes. ``check`` computes vLLM's rule with torch,
``(float32(x) / float32(scale)).to(torch.float8_e4m3fn)`` (``reshape_and_cache_flash`` divides by the
scale and converts with ``__NV_SATFINITE``; torch's conversion does not saturate, so values are clamped
to ±448 first, as SATFINITE does), and prints how many codes differ.
NaN inputs are left out of the comparison: NVIDIA's conversion writes 0x7F for a NaN of either sign,
torch's CPU conversion keeps the sign (0xFF), and ropepool follows NVIDIA (tests/test_fusions.py).
"""

from __future__ import annotations

import sys

import numpy as np

SCALES = (1.0, 1.7, 0.3, 5.0, 0.0123, 3.0)


def _inputs() -> dict[str, np.ndarray]:
    """Every finite, non-NaN float16 and bfloat16 value, as float32, padded to a multiple of 8."""
    bits = np.arange(2**16, dtype=np.uint32)
    f16 = bits.astype(np.uint16).view(np.float16).astype(np.float32)
    bf16 = (bits << 16).view(np.float32)
    out = {}
    for name, x in (("float16", f16), ("bfloat16", bf16)):
        x = x[np.isfinite(x)]
        out[name] = np.concatenate([x, np.zeros((-x.size) % 8, np.float32)])
    return out


def write(path: str) -> None:
    import mlx.core as mx

    import ropepool

    store = {}
    for name, x in _inputs().items():
        T = x.size // 8
        rows = mx.array(x.reshape(T, 1, 8)).astype(getattr(mx, name))
        for backend, state in ropepool.available_backends().items():
            if not state.available:
                continue
            for scale in SCALES:
                pool = mx.zeros((T, 1, 8), mx.uint8)
                _, _, _, v_pool = ropepool.rope_pool_fused(
                    rows,
                    rows,
                    rows,
                    mx.zeros(T, mx.int32),
                    mx.arange(T, dtype=mx.int32),
                    pool,
                    pool,
                    head_dim=8,
                    num_qo_heads=1,
                    num_kv_heads=1,
                    rope_base=1e4,
                    v_scale=scale,
                    backend=backend,
                )
                store[f"{name}/{backend}/{scale}"] = np.array(v_pool).reshape(-1)
        store[f"{name}/values"] = x
    np.savez(path, **store)
    print(f"wrote {len(store)} arrays to {path}")


def check(path: str) -> int:
    import torch

    data = np.load(path)
    worst = 0
    for key in sorted(k for k in data.files if not k.endswith("/values")):
        name, backend, scale = key.split("/")
        x = torch.from_numpy(data[f"{name}/values"].copy())  # float32, exactly the float16/bfloat16 values
        q = x / torch.tensor(float(scale), dtype=torch.float32)  # vLLM: float32(x) / scale
        q = q.clamp(-448.0, 448.0)  # __NV_SATFINITE
        want = q.to(torch.float8_e4m3fn).view(torch.uint8).numpy()
        differ = int((want != data[key]).sum())
        worst = max(worst, differ)
        print(f"{name:>9} {backend:>4} v_scale {scale:>7}: {differ} of {want.size} codes differ from torch's")
    print("every code matches torch's float8_e4m3fn of float32(x) / scale" if worst == 0 else "MISMATCH")
    return int(worst != 0)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    sys.exit(write(sys.argv[2]) if sys.argv[1] == "write" else check(sys.argv[2]))
