"""Each GPU kernel variant checked the first time it is used: built, run on a tiny case of its own
kind against the float64 reference, and on failure replaced by ``mlx`` for that variant alone.

A variant is what makes MLX compile another kernel: the dtype, the head counts and head_dim, the
rotation (partial, GPT-J pairs; a scaled table is checked on its own too), QK-norm on q and/or k,
FP8 pools. :func:`self_check` (``kernels/__init__.py``) checks the plain float32 kernel before the
backend is offered at all; this checks every other one on its first call, with two tokens of the
caller's own shapes, rotation and fusion. A failure prints one line on stderr naming the variant and
the first line of the compiler's (or the comparison's) message, and ``python -m ropepool doctor``
lists it (:data:`FALLEN_BACK`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import mlx.core as mx
import numpy as np

from ..fusion import PLAIN, Fusion
from ..mlx_ops import rotate_mlx
from ..rope import Rope

#: ``{(backend, variant): why}`` for each variant that failed its check in this process and runs on mlx.
FALLEN_BACK: dict[tuple[str, str], str] = {}


def describe(q: mx.array, k: mx.array, rope: Rope, fusion: Fusion) -> str:
    """The variant of a call in words, e.g. ``bfloat16 Hq=32 Hkv=8 D=128, GPT-J pairs, QK-norm q+k, FP8 pools``."""
    parts = [f"{str(q.dtype).rsplit('.', 1)[-1]} Hq={q.shape[1]} Hkv={k.shape[1]} D={rope.head_dim}"]
    if rope.rotary_dim != rope.head_dim:
        parts.append(f"partial rotary {rope.rotary_dim}")
    if not rope.is_neox:
        parts.append("GPT-J pairs")
    if rope.scale != 1.0 or rope.rope_type != "default":
        parts.append(f"scaled table ({rope.rope_type})")
    if fusion.qnorm or fusion.knorm:
        parts.append("QK-norm " + "+".join(n for n, on in (("q", fusion.qnorm), ("k", fusion.knorm)) if on))
    if fusion.fp8:
        parts.append("FP8 pools")
    return ", ".join(parts)


def first_message(text: str) -> str:
    """The first line of an error, and the compiler's first ``error:`` line where it comes later."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()] or [""]
    error = next((line for line in lines[1:] if "error" in line.lower()), None)
    return lines[0] if error is None else f"{lines[0]}: {error}"


def check(rotate: Callable, q: mx.array, k: mx.array, rope: Rope, fusion: Fusion) -> str | None:
    """None if ``rotate`` agrees with the reference on two tokens of this call's kind; else one line why."""
    from ..reference import quantize_rows, rms_norm
    from ..reference import rotate as rotate_ref
    from ..tolerance import error_ratio

    T, Hq, D = 2, q.shape[1], q.shape[2]
    rng = np.random.default_rng(0)
    q32, k32, v32 = (rng.standard_normal((T, h, D)).astype(np.float32) for h in (Hq, k.shape[1], k.shape[1]))
    qx, kx, vx = (mx.array(a).astype(q.dtype) for a in (q32, k32, v32))
    positions = mx.array([3, 1000], mx.int32)
    try:
        out = rotate(qx, kx, vx, positions, rope=rope, fusion=fusion)
        mx.eval(*out)
    except Exception as err:  # a compile or launch failure: this variant only
        return f"{type(err).__name__}: {first_message(str(err))}"
    dtype = str(q.dtype).rsplit(".", 1)[-1]
    pos = np.array(positions)
    for label, got, x, w in (
        ("q_rot", out[0], qx, fusion.q_norm_weight if fusion.qnorm else None),
        ("k_rot", out[1], kx, fusion.k_norm_weight if fusion.knorm else None),
    ):
        x = np.array(x.astype(mx.float32), np.float64)
        if w is not None:
            x = rms_norm(x, np.array(mx.array(w).astype(mx.float32)), fusion.norm_eps)
        want = rotate_ref(x, pos, rope)
        got = np.array(got.astype(mx.float32))
        ratio = error_ratio(got, want, x, pos, dtype, rope, norm_dim=D if w is not None else 0)
        if not ratio <= 1.0:
            return f"{label} differs from the reference ({ratio:.3g} x the tolerance)"
    if fusion.fp8:
        for label, got, rows, scale in (
            ("k codes", out[2], out[1], fusion.k_scale),
            ("v codes", out[3], vx, fusion.v_scale),
        ):
            if not np.array_equal(np.array(got), quantize_rows(rows, scale)):
                return f"the FP8 {label} differ from e4m3 of the rows it rotated"
    return None


def guarded(backend: str, rotate: Callable) -> Callable:
    """``rotate`` for ``backend``, each variant checked on its first call and run on mlx if it fails."""
    chosen: dict[tuple, Callable] = {}

    def rotate_checked(q, k, v, positions, *, rope: Rope, fusion: Fusion = PLAIN):
        key = (q.dtype, q.shape[1], k.shape[1], rope, fusion.qnorm, fusion.knorm, fusion.fp8)
        impl = chosen.get(key)
        if impl is None:
            variant = describe(q, k, rope, fusion)
            problem = check(rotate, q, k, rope, fusion)
            impl = chosen[key] = rotate if problem is None else rotate_mlx
            if problem is not None:
                FALLEN_BACK[(backend, variant)] = problem
                if sys.stderr is not None:
                    print(
                        f"ropepool: the {backend} kernel's variant {variant} failed its first check and runs "
                        f"on mlx from now on: {problem}",
                        file=sys.stderr,
                        flush=True,
                    )
        return impl(q, k, v, positions, rope=rope, fusion=fusion)

    rotate_checked.__name__ = rotate_checked.__qualname__ = f"{rotate.__name__}_checked"
    rotate_checked.__doc__ = rotate.__doc__
    rotate_checked.checked = chosen
    return rotate_checked


def sweep(rotate_checked: Callable) -> None:
    """Run ``rotate_checked`` (from :func:`guarded`) once on each kind of variant, on a small head
    (Hq=4, Hkv=2, D=8): each dtype plain, then float32 with partial rotary, GPT-J pairs, a scaled
    table, QK-norm and FP8 pools. Failures land in :data:`FALLEN_BACK`."""
    from ..rope import plain, rope_table

    D, eps = 8, 1e-6
    ones = mx.ones((D,), mx.float32)
    kinds = [(dtype, plain(D, 1e4), PLAIN) for dtype in (mx.float32, mx.float16, mx.bfloat16)]
    rotations = (
        rope_table(D, 1e4, rotary_dim=4),
        rope_table(D, 1e4, is_neox=False),
        rope_table(D, 1e4, rope_scaling={"rope_type": "linear", "factor": 2.0}),
    )
    kinds += [(mx.float32, rope, PLAIN) for rope in rotations]
    kinds += [(mx.float32, plain(D, 1e4), Fusion(ones, ones, eps)), (mx.float32, plain(D, 1e4), Fusion(fp8=True))]
    for dtype, rope, fusion in kinds:
        q, k = mx.zeros((1, 4, D), dtype), mx.zeros((1, 2, D), dtype)
        rotate_checked(q, k, k, mx.array([0], mx.int32), rope=rope, fusion=fusion)
