"""The MLX path: ``rope_pool_fused`` from MLX ops, on any MLX device (the CPU included).

No custom kernel. The math follows :mod:`ropepool.reference` (NeoX pairing) in float32
with one rounding to the output dtype, so a pool row holds exactly the bits of its k_rot row.

Pool writes cost O(T), not O(P): :func:`scatter_rows` scatters into the pool without
reading it, and MLX donates the pool's buffer to the scatter when nothing else holds it at
evaluation time. So the call pattern that keeps it O(T) is::

    q_rot, k_rot, k_pool, v_pool = rope_pool_fused(..., k_pool, v_pool, ...)  # rebind the pools
    mx.eval(q_rot, k_rot, k_pool, v_pool)

If you keep a reference to the old pool, MLX must copy it (O(P)) to honour it.
"""

from __future__ import annotations

from functools import lru_cache

import mlx.core as mx
import numpy as np

from . import fp8
from .fusion import PLAIN, Fusion
from .rope import Rope, plain


def rope_cos_sin(positions: mx.array, head_dim: int, rope_base: float) -> tuple[mx.array, mx.array]:
    """cos and sin of theta, float32 ``[T, 1, D/2]`` each (the 1 broadcasts over heads): plain RoPE."""
    inv_freq = mx.array(plain(head_dim, rope_base).inv_freq32())  # [D/2]
    theta = positions.astype(mx.float32)[:, None] * inv_freq[None, :]  # [T, D/2]
    return mx.cos(theta)[:, None, :], mx.sin(theta)[:, None, :]  # [T, 1, D/2]


def rotate(x: mx.array, cos: mx.array, sin: mx.array) -> mx.array:
    """NeoX-rotate ``x [T, H, D]`` in float32 with cos, sin ``[T, 1, D/2]``; one rounding back to x's dtype.

    The textbook form, for reading; :func:`rotate_qk` computes the same bits faster and for every
    :class:`~ropepool.rope.Rope`.
    """
    half = x.shape[-1] // 2
    x32 = x.astype(mx.float32)
    x1, x2 = x32[..., :half], x32[..., half:]  # [T, H, D/2]
    return mx.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1).astype(x.dtype)  # [T, H, D]


# The fast form, used by every path here. The rotated part of x, viewed so that a pair axis of
# length 2 holds (x_a, x_b), is [T, H, 2, RD/2] for NeoX pairs and [T, H, RD/2, 2] for GPT-J
# pairs; the same view with its pair axis reversed holds (x_b, x_a), rotate_half up to a sign,
# which goes into sin. Then y = x*cos + swapped*sin_signed is one elementwise expression that
# mx.compile fuses (upcast, two products, sum, rounding). Bit for bit the kernel's results:
# x1*cos + x2*(-sin) == x1*cos - x2*sin in IEEE arithmetic, and cos, sin carry the Rope's scale
# as the kernel's do. The tables' shapes tell the pairing: sign [1, 1, 2, 1] is NeoX,
# [1, 1, 1, 2] GPT-J; freq holds inv_freq laid out like the pairs, so its size is RD.


@lru_cache(maxsize=64)
def _pair_tables(rope: Rope) -> tuple[mx.array, mx.array, mx.array]:
    """inv_freq laid out like the pairs (float32, RD elements), the signs (-1, +1) of sin, and the scale ``[1]``."""
    inv_freq = rope.inv_freq32()  # [RD/2]
    if rope.is_neox:
        freq = np.stack([inv_freq, inv_freq])[None, None]  # [1, 1, 2, RD/2]
        sign = np.array([-1.0, 1.0], np.float32).reshape(1, 1, 2, 1)
    else:
        freq = np.stack([inv_freq, inv_freq], axis=-1)[None, None]  # [1, 1, RD/2, 2]
        sign = np.array([-1.0, 1.0], np.float32).reshape(1, 1, 1, 2)
    return mx.array(freq), mx.array(sign), mx.array(np.array([rope.scale], np.float32))


def _rotate_pairs(x: mx.array, cos: mx.array, sin_signed: mx.array, dtype=None) -> mx.array:
    """``x [T, H, D]`` rotated, rounded once to ``dtype`` (default x's; a float32 x normalised by QK-norm
    is rounded to the input's dtype here, with its pass-through dimensions)."""
    dtype = dtype or x.dtype
    T, H, D = x.shape
    RD = cos.shape[2] * cos.shape[3]  # rotated dimensions
    pair_shape = (T, H, 2, RD // 2) if sin_signed.shape[2] == 2 else (T, H, RD // 2, 2)  # NeoX or GPT-J
    pair_axis = 2 if sin_signed.shape[2] == 2 else 3
    x4 = x[..., :RD].reshape(pair_shape)  # (x_a, x_b) along the pair axis
    swapped = x4[:, :, ::-1, :] if pair_axis == 2 else x4[..., ::-1]  # (x_b, x_a)
    y = x4.astype(mx.float32) * cos + swapped.astype(mx.float32) * sin_signed  # float32
    y = y.astype(dtype).reshape(T, H, RD)  # one rounding
    return y if RD == D else mx.concatenate([y, x[..., RD:].astype(dtype)], axis=-1)  # [T, H, D]; the rest copied


def rotate_qk(q: mx.array, k: mx.array, positions: mx.array, rope: Rope,
              fusion: Fusion = PLAIN) -> tuple[mx.array, mx.array]:
    """``(q_rot [T, Hq, D], k_rot [T, Hkv, D])``: the rotation alone (after ``fusion``'s QK-norm), as
    :func:`rope_pool_mlx` computes it."""
    if not (fusion.qnorm or fusion.knorm):
        return _rope_qk(q, k, positions, *_pair_tables(rope))
    one = _ONE()
    qw = norm_weight32(fusion.q_norm_weight) if fusion.qnorm else one
    kw = norm_weight32(fusion.k_norm_weight) if fusion.knorm else one
    eps = mx.array([fusion.norm_eps], mx.float32)
    return _normed_rope_qk(fusion.qnorm, fusion.knorm)(q, k, positions, *_pair_tables(rope), qw, kw, eps)


@lru_cache(maxsize=1)
def _ONE() -> mx.array:
    return mx.array([1.0], mx.float32)


def norm_weight32(w) -> mx.array:
    """A QK-norm weight ``[D]`` as float32 (exact from float16 and bfloat16)."""
    return (w if isinstance(w, mx.array) else mx.array(np.asarray(w, np.float32))).astype(mx.float32)


def rms_normed(x: mx.array, w: mx.array, eps: mx.array) -> mx.array:
    """QK-norm of ``x [T, H, D]`` over D, float32: ``x * (1 / sqrt(mean(x**2) + eps)) * w`` (w float32 ``[D]``)."""
    x32 = x.astype(mx.float32)
    ss = mx.sum(x32 * x32, axis=-1, keepdims=True)  # [T, H, 1]
    return (x32 * (1.0 / mx.sqrt(ss / x.shape[-1] + eps))) * w  # [T, H, D]


@lru_cache(maxsize=4)
def _normed_rope_qk(qnorm: bool, knorm: bool):
    """The compiled QK-norm + rotation for one choice of which sides are normalised."""

    def f(q, k, positions, freq, sign, scale, qw, kw, eps):
        theta = positions.astype(mx.float32)[:, None, None, None] * freq
        cos, sin_signed = mx.cos(theta) * scale, (mx.sin(theta) * scale) * sign
        qx = rms_normed(q, qw, eps) if qnorm else q
        kx = rms_normed(k, kw, eps) if knorm else k
        return _rotate_pairs(qx, cos, sin_signed, q.dtype), _rotate_pairs(kx, cos, sin_signed, k.dtype)

    return mx.compile(f)


def encode_kv(k_rot: mx.array, v: mx.array, fusion: Fusion) -> tuple[mx.array, mx.array]:
    """An FP8 cache's rows: the e4m3 codes (uint8 ``[T, Hkv, D]``) of ``k_rot / k_scale`` and ``v / v_scale``."""
    return _encode_kv(k_rot, v, mx.array(fusion.inv_scales()))


@mx.compile
def _encode_kv(k_rot, v, inv):
    return fp8.encode(k_rot.astype(mx.float32) * inv[0]), fp8.encode(v.astype(mx.float32) * inv[1])


@mx.compile
def _rope_qk(q, k, positions, freq, sign, scale):
    theta = positions.astype(mx.float32)[:, None, None, None] * freq  # [T, 1, 2, RD/2] or [T, 1, RD/2, 2]
    cos, sin_signed = mx.cos(theta) * scale, (mx.sin(theta) * scale) * sign  # (c, c), (-s, s), scaled
    return _rotate_pairs(q, cos, sin_signed), _rotate_pairs(k, cos, sin_signed)


def _row_word(x: mx.array):
    """The widest unsigned integer type whose size divides a row's last axis (D elements) in bytes.

    The scatters move bits, not values, and MLX's CPU scatter costs about the same per element
    whatever its width: a float16 row moved as uint64 words is a quarter as many elements.
    """
    nbytes = x.shape[-1] * x.dtype.size
    return next(w for w in (mx.uint64, mx.uint32, mx.uint16) if nbytes % w.size == 0 and w.size >= x.dtype.size)


def _write_rows(pool: mx.array, rows: mx.array, slots: mx.array) -> mx.array:
    """The plain scatter, for when every slot is known (on the host) to be in ``[0, P)``."""
    word = _row_word(pool)
    out = pool.view(word)  # a new object (the caller's pool keeps its value), same buffer; [P, Hkv, W]
    out[slots] = rows.view(word)  # [T, Hkv, W] into [P, Hkv, W], bit for bit
    return out.view(pool.dtype)


def scatter_rows(pool: mx.array, rows: mx.array, slots: mx.array, host_slots: np.ndarray | None = None) -> mx.array:
    """``pool [P, Hkv, D]`` with ``rows[t]`` written at row ``slots[t]``; O(T) when donated.

    A slot outside ``[0, P)`` (-1 by convention) writes nothing, without a host
    synchronisation and without reading the pool. The write works on the rows' bits as
    unsigned integers, in two scatters: ``minimum`` with 0 clears a written row's bits,
    then ``maximum`` with the new bits sets them. A skipped token is sent to row 0 with
    the identities of both (all ones, then 0), so it changes nothing even when a real
    token writes row 0 too: min and max do not depend on the order of colliding updates.
    (Reading the pool instead, e.g. to rewrite a row with its own value, makes MLX's
    donation of the pool's buffer depend on scheduling, and then the pool gets copied.)
    When several tokens name one row (possible only with ``check_values=False``), the last of
    them wins: :func:`last_writers` drops the others, on the device, before the scatters.
    With ``host_slots`` (slots already read on the host, as value validation does) the
    skipped tokens are dropped on the host instead, and one plain scatter does the write
    (cheaper than the two integer scatters).
    The caller's ``pool`` object is not mutated.
    """
    if host_slots is not None:
        out = mx.array(pool)  # a new object: the caller's pool keeps its value
        keep = np.flatnonzero((host_slots >= 0) & (host_slots < pool.shape[0]))  # writing tokens
        if keep.size == 0:
            return out
        if keep.size == slots.shape[0]:
            return _write_rows(pool, rows, slots)
        return _write_rows(pool, rows[mx.array(keep.astype(np.int32))], mx.array(host_slots[keep].astype(np.int32)))
    if slots.shape[0] == 0 or pool.shape[0] == 0:  # nothing can be written (an empty pool has no row 0)
        return mx.array(pool)
    word = _row_word(pool)  # widest word: fewer elements to scatter, the same bits
    ones = mx.array(-1, dtype=mx.int64).view(mx.uint64).astype(word)  # all bits set (uint64 can't take the literal)
    zero = mx.array(0, dtype=word)
    writes = last_writers(slots, (slots >= 0) & (slots < pool.shape[0]))[:, None, None]  # [T, 1, 1]
    idx = mx.where(writes[:, 0, 0], slots, 0)  # [T], skipped tokens aim at row 0
    bits = pool.view(word)  # [P, Hkv, W], same buffer
    bits = bits.at[idx].minimum(mx.where(writes, zero, ones))  # clear written rows
    bits = bits.at[idx].maximum(mx.where(writes, rows.view(word), zero))  # set their bits
    return bits.view(pool.dtype)


#: Up to this many tokens :func:`last_writers` compares all pairs rather than sorting.
PAIRWISE_TOKENS = 64


def last_writers(slots: mx.array, writes: mx.array) -> mx.array:
    """``writes [T]`` (bool) without the tokens whose row a later writing token writes too: the last wins.

    On the device, no host synchronisation. One token (decode) needs nothing; up to
    :data:`PAIRWISE_TOKENS` tokens compare every pair (``[T, T]``); more sort the writing tokens
    by (slot, t), O(T log T): a token is its row's last writer where the next one in that order
    names another row.
    """
    T = slots.shape[0]
    if T < 2:
        return writes
    if T <= PAIRWISE_TOKENS:
        row = mx.where(writes, slots, -1)  # [T]
        t = mx.arange(T)
        later = ((row[:, None] == row[None, :]) & (t[:, None] < t[None, :])).any(axis=1)  # [T]
        return writes & ~later
    row = mx.where(writes, slots, -1).astype(mx.int64)  # [T]
    order = mx.argsort(row * T + mx.arange(T, dtype=mx.int64))  # [T]: by row, then token
    sorted_row = row[order]
    last = mx.concatenate([sorted_row[1:] != sorted_row[:-1], mx.array([True])])  # [T], in sorted order
    return writes & last[mx.argsort(order)]  # [T], back in token order


def drop_overwritten(host_slots: np.ndarray, pool_rows: int) -> np.ndarray:
    """Slots read on the host, with -1 for every token whose row a later token writes: the last wins.

    The same rule as :func:`last_writers`, for the paths that read the slots anyway.
    """
    host_slots = np.asarray(host_slots)
    if host_slots.size < 2:
        return host_slots
    idx = np.flatnonzero((host_slots >= 0) & (host_slots < pool_rows))  # writing tokens
    rows = host_slots[idx]
    uniq, last_rev = np.unique(rows[::-1], return_index=True)
    if uniq.size == rows.size:
        return host_slots
    keep = idx[::-1][last_rev]  # the last token of each row
    out = np.full_like(host_slots, -1)
    out[keep] = host_slots[keep]
    return out


def place_rows(k_pool, v_pool, k_rot, v, slots, host_slots: np.ndarray):
    """Both pools with ``k_rot`` and ``v`` written at ``slots`` read on the host; O(T) when donated.

    When every slot is in ``[0, P)`` (the common case) this is one compiled graph, cheaper to
    build per call than two :func:`scatter_rows`; and when the slots are one run of consecutive
    rows (every decode step of one sequence, a prefill into fresh rows) the rows are copied in
    as one block, ``mx.slice_update``, not scattered (cheaper, with the pools donated).
    """
    kind = write_kind(host_slots, k_pool.shape[0])
    if kind == "block":
        return _write_block(k_pool, v_pool, k_rot, v, mx.array(host_slots[:1].astype(np.int32)))
    if kind == "rows":
        return _write_both(k_pool, v_pool, k_rot, v, slots)
    return scatter_rows(k_pool, k_rot, slots, host_slots), scatter_rows(v_pool, v, slots, host_slots)


def write_kind(host_slots: np.ndarray, pool_rows: int) -> str:
    """How slots read on the host can be written: "block" (every slot in ``[0, P)``, one run of
    consecutive rows), "rows" (every slot in ``[0, P)``), else "some" (some tokens skip)."""
    if not (host_slots.size and ((host_slots >= 0) & (host_slots < pool_rows)).all()):
        return "some"
    return "block" if (np.diff(host_slots) == 1).all() else "rows"


@mx.compile
def _write_both(k_pool, v_pool, k_rot, v, slots):
    return _write_rows(k_pool, k_rot, slots), _write_rows(v_pool, v, slots)


def _copy_block(pool: mx.array, rows: mx.array, start: mx.array) -> mx.array:
    """``rows [T, Hkv, D]`` copied over pool rows ``start .. start + T - 1``, bit for bit."""
    word = _row_word(pool)
    out = mx.slice_update(pool.view(word), rows.view(word), start, axes=(0,))
    return out.view(pool.dtype)


@mx.compile
def _write_block(k_pool, v_pool, k_rot, v, start):
    return _copy_block(k_pool, k_rot, start), _copy_block(v_pool, v, start)


def write_pools(k_pool, v_pool, k_rows, v_rows, slots, host_slots):
    """Both pools with their rows written at ``slots``: :func:`place_rows` where the slots were read on
    the host, else :func:`scatter_rows` (guarded, on the device). Rows are moved as bits."""
    if host_slots is None:
        return scatter_rows(k_pool, k_rows, slots), scatter_rows(v_pool, v_rows, slots)
    return place_rows(k_pool, v_pool, k_rows, v_rows, slots, host_slots)


def rope_pool_mlx(q, k, v, positions, slots, k_pool, v_pool, *, rope_base=None, rope=None, host_slots=None,
                  fusion: Fusion = PLAIN):
    """MLX-ops implementation; same arguments as the reference, validated mx.arrays.

    ``rope``: the :class:`~ropepool.rope.Rope` to apply (default: plain RoPE of ``rope_base``).
    ``host_slots``: the slots as a NumPy array when validation already read them, else None.
    ``fusion``: QK-norm and FP8 (:mod:`ropepool.fusion`); the plain call takes one compiled graph.
    """
    rope = rope or plain(q.shape[-1], rope_base)
    if not fusion.plain:
        q_rot, k_rot = rotate_qk(q, k, positions, rope, fusion)
        k_rows, v_rows = encode_kv(k_rot, v, fusion) if fusion.fp8 else (k_rot, v)
        return (q_rot, k_rot, *write_pools(k_pool, v_pool, k_rows, v_rows, slots, host_slots))
    tables = _pair_tables(rope)  # freq, sign, scale
    if host_slots is None:
        return _rope_pool_device_slots(q, k, v, positions, slots, k_pool, v_pool, *tables)
    kind = write_kind(host_slots, k_pool.shape[0])
    if kind == "block":  # see place_rows
        start = mx.array(host_slots[:1].astype(np.int32))
        return _rope_pool_block(q, k, v, positions, start, k_pool, v_pool, *tables)
    if kind == "rows":
        return _rope_pool_all_write(q, k, v, positions, slots, k_pool, v_pool, *tables)
    q_rot, k_rot = _rope_qk(q, k, positions, *tables)  # [T, Hq, D], [T, Hkv, D]; = rotate(), fused
    return q_rot, k_rot, scatter_rows(k_pool, k_rot, slots, host_slots), scatter_rows(v_pool, v, slots, host_slots)


# The whole op as one compiled graph for the two common cases: fewer graph nodes to build per
# call (what decode, T = 1, pays for) and the rotation fused. MLX still donates the pools'
# buffers to the scatters inside a compiled graph, so the cost stays O(T).


@mx.compile
def _rope_pool_device_slots(q, k, v, positions, slots, k_pool, v_pool, freq, sign, scale):
    """Slots left on the device (check_values=False): scatter_rows' integer scatters skip bad slots."""
    q_rot, k_rot = _rope_qk(q, k, positions, freq, sign, scale)
    return q_rot, k_rot, scatter_rows(k_pool, k_rot, slots), scatter_rows(v_pool, v, slots)


@mx.compile
def _rope_pool_all_write(q, k, v, positions, slots, k_pool, v_pool, freq, sign, scale):
    """Every slot known, on the host, to be in [0, P): two plain scatters."""
    q_rot, k_rot = _rope_qk(q, k, positions, freq, sign, scale)
    return q_rot, k_rot, _write_rows(k_pool, k_rot, slots), _write_rows(v_pool, v, slots)


@mx.compile
def _rope_pool_block(q, k, v, positions, start, k_pool, v_pool, freq, sign, scale):
    """Every slot in [0, P) and consecutive from ``start``: two block copies."""
    q_rot, k_rot = _rope_qk(q, k, positions, freq, sign, scale)
    return q_rot, k_rot, _copy_block(k_pool, k_rot, start), _copy_block(v_pool, v, start)
