"""mrope on every backend: one pass of the backend's rotation per (time, height, width) run of pairs.

mrope (:mod:`ropepool.rope`) turns pair ``i`` of run ``j`` by ``positions[j, t] * inv_freq[i]``. Every
backend rotates with one position per token, so the op makes three passes: pass ``j`` rotates at
``positions[j]`` with :meth:`Rope.section` ``(j)``, whose other pairs have inverse frequency 0 and
come back bit for bit (``x * 1 - y * 0 = x``, then a rounding of a value already in the dtype). So
each pair is rotated once and rounded once: the same bits as a one-pass mrope kernel, for three
times the rotation's cost and no new kernel text. An FP8 cache is encoded in the last pass, from the
final k_rot. QK-norm would be applied before the first pass only and rounded between passes: refused.
"""

from __future__ import annotations

from dataclasses import replace

from .errors import fail
from .fusion import PLAIN, Fusion
from .rope import Rope


def rotate_mrope(rotate, q, k, v, positions, *, rope: Rope, fusion: Fusion = PLAIN):
    """``(q_rot, k_rot, k_rows, v_rows)`` as a backend's ``rotate`` gives them, for an mrope ``rope``.

    positions : int32 ``[3, T]`` (time, height, width) or ``[T]`` (every axis the same: a text token)
    """
    if fusion.qnorm or fusion.knorm:
        raise fail(
            "rope_type_refused",
            rope_type="mrope",
            expected="mrope without QK-norm",
            got="q_norm_weight or k_norm_weight given",
            hint="normalise q and k first (the model's q_norm, k_norm), then call with rope_scaling "
            "type mrope and no norm weights.",
        )
    rows = positions if positions.ndim == 2 else (positions, positions, positions)
    last = replace(fusion, q_norm_weight=None, k_norm_weight=None)
    for axis in range(3):
        final = axis == 2
        q, k, k_rows, v_rows = rotate(q, k, v, rows[axis], rope=rope.section(axis), fusion=last if final else PLAIN)
    return q, k, k_rows, v_rows
