"""``rope_pool_fused``: validate, pick a backend, plan the write, run it, answer in the kind of q.

The call is two halves, which an engine calls apart (:mod:`ropepool.engine.runner`):

- :func:`plan_step`, once per step: what depends on the step alone (positions and slots, their
  values checked, the slots read on the host once, the rows to write planned, and the RoPE table
  rows of those positions, made at the first layer that turns with a RoPE); a :class:`StepPlan`;
- :func:`apply_plan`, once per layer: what depends on the layer (q, k, v, its pools, its RoPE and
  fusion settings, the backend) with the step's plan. No host read, no re-validation.

:func:`rope_pool_fused` is SGLang's signature and contract: validate everything
(:func:`ropepool.validation.validate`, in the order of :data:`ropepool.errors.CODES`, the backend
last), plan the write (:func:`ropepool.pool_write.plan`), apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._arrays import native, to_mx, to_numpy
from .backends import resolve
from .errors import fail
from .fusion import PLAIN, Fusion
from .inplace import INPLACE_BACKENDS
from .mlx_ops import angles, rotate_mlx
from .mrope import rotate_mrope
from .pool_write import Plan, write, write_in_place
from .pool_write import plan as plan_write
from .rope import Rope
from .validation import Checked, validate, validate_indices


@dataclass(frozen=True)
class StepPlan:
    """One step's write, made once and applied to every layer.

    positions : int32 ``[T]``, as given (mx.array or native NumPy)
    write : :class:`ropepool.pool_write.Plan`, which token writes which pool row
    pool_rows : int, P of the pools it was planned for
    tables : the RoPE table rows of ``positions`` made so far, one ``(cos, sin_signed)`` per
        :class:`~ropepool.rope.Rope` (:meth:`angles`)
    """

    positions: object
    write: Plan
    pool_rows: int
    tables: dict = field(default_factory=dict, compare=False, repr=False)

    def angles(self, rope: Rope):
        """The RoPE table rows of the step's positions for ``rope`` (:func:`ropepool.mlx_ops.angles`):
        made by the first layer that asks, read by every other layer that turns with the same RoPE."""
        if rope not in self.tables:
            self.tables[rope] = angles(to_mx(self.positions), rope)
        return self.tables[rope]

    @property
    def tokens(self) -> int:
        """T."""
        return self.positions.shape[-1]  # [T], or mrope's [3, T]

    def check_layer(self, name: str, x, pool_name: str, pool) -> None:
        """``index_len`` unless a layer's ``x`` ``[T, ...]`` has the plan's T tokens and ``pool`` its P rows."""
        if x.shape[0] != self.tokens or pool.shape[0] != self.pool_rows:
            raise fail(
                "index_len",
                expected=f"{name} for the plan's {self.tokens} tokens, {pool_name} of its {self.pool_rows} rows",
                got=f"{name} {tuple(x.shape)}, {pool_name} {tuple(pool.shape)}",
                hint="make the plan (plan_step) from this step's positions and slots and the pools' rows.",
            )


def plan_step(positions, slots, pool_rows: int, *, check_values: bool = True) -> StepPlan:
    """The step's half of ``rope_pool_fused``: positions and slots checked, slots read on the host once, write planned.

    Parameters
    ----------
    positions, slots : int32 ``[T]`` (mx.array or NumPy), as :func:`rope_pool_fused` takes them
    pool_rows : int, P, the rows of every layer's pools
    check_values : bool, check their values too (range, duplicate slots), as :func:`rope_pool_fused`

    Raises
    ------
    RopePoolError
        The problems of positions and slots in ``ropepool.errors.CODES``, with the op's messages.

    Example
    -------
    >>> import numpy as np
    >>> plan = plan_step(np.array([7, 8], np.int32), np.array([3, 4], np.int32), pool_rows=16)
    >>> plan.write.rows.tolist(), plan.write.start, plan.tokens
    ([3, 4], 3, 2)
    """
    host_slots = validate_indices(positions, slots, pool_rows, check_values=check_values)
    return StepPlan(native(positions), plan_write(host_slots, pool_rows, checked=check_values), pool_rows)


def apply_plan(
    q, k, v, k_pool, v_pool, plan: StepPlan, *, rope: Rope, fusion: Fusion = PLAIN, backend="auto", inplace=False
):
    """The layer's half of ``rope_pool_fused``: rotate q and k with ``rope`` (after ``fusion``'s QK-norm),
    write k_rot and v (FP8-encoded where ``fusion`` says) into the pools as ``plan`` says.

    q ``[T, Hq, D]``, k and v ``[T, Hkv, D]`` and the pools ``[P, Hkv, D]`` are the caller's to get
    right (:func:`rope_pool_fused` checks them; a model runner builds them): only T and P are checked
    against the plan. ``rope``: :func:`ropepool.rope.rope_table`; ``fusion``:
    :func:`ropepool.validation.fusion_settings`. Returns what :func:`rope_pool_fused` returns.
    """
    plan.check_layer("q", q, "k_pool", k_pool)
    positions = plan.positions
    name, rotate = resolve(backend, inplace)
    numpy_out = isinstance(q, np.ndarray)
    # NumPy in, NumPy out on a host backend: the rows go into one copy of each pool (the caller's stay as they were)
    host_write = inplace or (
        name in INPLACE_BACKENDS and numpy_out and isinstance(k_pool, np.ndarray) and isinstance(v_pool, np.ndarray)
    )
    q, k, v = native(q), native(k), native(v)  # any NumPy layout or byte order
    if name != "cpu":  # the cpu backend reads NumPy and MLX memory alike
        q, k, v, positions = (to_mx(x) for x in (q, k, v, positions))
    if rope.mrope_section:  # [3, T] positions: one pass per run of pairs (ropepool.mrope)
        q_rot, k_rot, k_rows, v_rows = rotate_mrope(rotate, q, k, v, positions, rope=rope, fusion=fusion)
    else:
        q_rot, k_rot, k_rows, v_rows = rotate_step(rotate, q, k, v, plan, rope=rope, fusion=fusion, positions=positions)
    if host_write:
        if not inplace:
            k_pool, v_pool = _fresh_copy(k_pool), _fresh_copy(v_pool)
        write_in_place(plan.write, k_pool, v_pool, k_rows, v_rows)
    else:
        k_pool, v_pool = write(plan.write, to_mx(native(k_pool)), to_mx(native(v_pool)), k_rows, v_rows)
        if numpy_out:
            k_pool, v_pool = to_numpy(k_pool), to_numpy(v_pool)
    if numpy_out:
        q_rot, k_rot = to_numpy(q_rot), to_numpy(k_rot)
    return q_rot, k_rot, k_pool, v_pool


def rotate_step(rotate, q, k, v, plan: StepPlan, *, rope: Rope, fusion: Fusion = PLAIN, positions=None):
    """``rotate(q, k, v, positions, rope=rope, fusion=fusion)`` (a backend's, :func:`ropepool.backends.resolve`)
    at the plan's positions (or ``positions``, the same values as the backend reads them), with the
    step's RoPE table rows where the backend reads a table: the kernels turn positions into angles
    in registers, as SGLang's does; MLX ops read :meth:`StepPlan.angles`, made once per step."""
    table = {"table": plan.angles(rope)} if rotate is rotate_mlx else {}
    return rotate(q, k, v, plan.positions if positions is None else positions, rope=rope, fusion=fusion, **table)


def rope_pool_fused(
    q,
    k,
    v,
    positions,
    slots,
    k_pool,
    v_pool,
    *,
    head_dim,
    num_qo_heads,
    num_kv_heads,
    rope_base,
    rotary_dim=None,
    is_neox=True,
    rope_scaling=None,
    max_position_embeddings=None,
    backend="auto",
    check_values=True,
    inplace=False,
    q_norm_weight=None,
    k_norm_weight=None,
    norm_eps=1e-6,
    k_scale=1.0,
    v_scale=1.0,
):
    """Rotate q and k with RoPE and write rotated k and raw v into the KV pools.

    By default the rotation is SGLang's: NeoX RoPE over the whole head, as in
    :mod:`ropepool.reference` (pair ``i`` with ``i + D/2``). ``rotary_dim``, ``is_neox`` and
    ``rope_scaling`` give any model's rotation (:mod:`ropepool.rope`; ``ropepool.models.from_config``
    reads them from a config). Computed in float32 with one rounding to the output dtype.

    Parameters
    ----------
    q : mx.array or np.ndarray ``[T, Hq, D]``
    k, v : ``[T, Hkv, D]``, q's dtype (float16, bfloat16 or float32)
    positions : int32 ``[T]``, each in ``[0, 2**24)``; with an mrope ``rope_scaling`` also ``[3, T]``
        (time, height, width: :mod:`ropepool.rope`, :mod:`ropepool.mrope`)
    slots : int32 ``[T]``; token t writes pool row ``slots[t]``; ``slots[t] < 0`` writes nothing
    k_pool, v_pool : ``[P, Hkv, D]``, q's dtype; or both uint8: an FP8 e4m3 cache (see below)
    head_dim, num_qo_heads, num_kv_heads : int, D, Hq and Hkv (Hq a multiple of Hkv)
    rope_base : float, the config's ``rope_theta``
    rotary_dim : int or None, the leading dimensions of each head that turn (None: all D);
        the others are copied bit for bit
    is_neox : bool, NeoX pairs ``(i, i + rotary_dim/2)``; False: GPT-J pairs ``(2i, 2i + 1)``
    rope_scaling : dict or None, the config's ``rope_scaling`` (linear, llama3, yarn, longrope, mrope)
    max_position_embeddings : int or None, the config's (longrope and some yarn configs need it)
    backend : "auto", "metal", "cuda", "cpu" or "mlx" (see :func:`ropepool.available_backends`)
    check_values : bool, also check positions and slots by value (range, duplicate slots).
        The slots are read on the host either way, to plan the write (:mod:`ropepool.pool_write`).
        With False, an out-of-range slot still writes nothing, and of tokens naming one slot the
        last one wins the row.
    inplace : bool, write the rows into ``k_pool`` and ``v_pool`` themselves, as SGLang's
        kernel does, and return those same objects (see :mod:`ropepool.inplace` for what the
        pools must be, and which backends can)
    q_norm_weight, k_norm_weight : array ``[D]`` (float16, bfloat16 or float32) or None: QK-norm.
        Given, each head of q (k) is RMS-normalised over D and scaled by the weight before it
        turns, as Qwen3 does: ``x / sqrt(mean(x**2) + norm_eps) * w`` (:mod:`ropepool.fusion`)
    norm_eps : float >= 1e-30 (smaller is refused), QK-norm's epsilon (the model's ``rms_norm_eps``)
    k_scale, v_scale : float > 0, per-tensor FP8 scales (vLLM's): with uint8 pools each written
        row holds the e4m3 codes (:mod:`ropepool.fp8`) of the float32 quotients ``k_rot / k_scale``
        and ``v / v_scale`` (vLLM's rule), rounded to nearest even, saturated to ±448, NaN as 0x7F.
        Must be 1.0 with float pools. q_rot and k_rot keep q's dtype either way

    Returns
    -------
    (q_rot ``[T, Hq, D]``, k_rot ``[T, Hkv, D]``, k_pool_new, v_pool_new ``[P, Hkv, D]``), of the
    kind of q (mx.array or NumPy). Pool rows no token writes keep their bits. Unless
    ``inplace``, the pools passed are not mutated: rebind mx.array pools (``k_pool = k_pool_new``)
    so MLX can reuse their buffers (O(T) a call); NumPy pools are copied once each (O(P): NumPy
    cannot hand a buffer over) and the rows written into the copies. With ``inplace``,
    k_pool_new and v_pool_new are the pools passed, written in place, O(T): the call to use
    for NumPy pools in a decode loop.

    Raises
    ------
    RopePoolError
        For every problem in ``ropepool.errors.CODES``, before anything is written; of two problems,
        the one listed first in ``CODES`` (the checks run in its order). Those SGLang raises from C++ (``index_dtype``, ``head_dim_odd``, ``unsupported_dtype``) are also
        ``RuntimeError``, as there.

    Example
    -------
    >>> import ropepool
    >>> from ropepool.shapes import Shapes
    >>> kw = ropepool.make_inputs(Shapes(tokens=2, num_qo_heads=4, num_kv_heads=2, head_dim=8, pool_rows=5))
    >>> q_rot, k_rot, k_pool, v_pool = ropepool.rope_pool_fused(**kw)
    >>> k_pool.shape
    (5, 2, 8)
    """
    checked = validate(
        q,
        k,
        v,
        positions,
        slots,
        k_pool,
        v_pool,
        head_dim=head_dim,
        num_qo_heads=num_qo_heads,
        num_kv_heads=num_kv_heads,
        rope_base=rope_base,
        rotary_dim=rotary_dim,
        is_neox=is_neox,
        rope_scaling=rope_scaling,
        max_position_embeddings=max_position_embeddings,
        check_values=check_values,
        inplace=inplace,
        q_norm_weight=q_norm_weight,
        k_norm_weight=k_norm_weight,
        norm_eps=norm_eps,
        k_scale=k_scale,
        v_scale=v_scale,
    )  # the backend is resolved after validation (the catalog's last checks)
    step = checked_step(
        checked, positions, k_pool.shape[0], check_values=check_values, backend=backend, inplace=inplace
    )
    fusion, rope = checked.fusion, checked.rope
    return apply_plan(q, k, v, k_pool, v_pool, step, rope=rope, fusion=fusion, backend=backend, inplace=inplace)


def checked_step(
    checked: Checked, positions, pool_rows: int, *, check_values: bool, backend, inplace: bool
) -> StepPlan:
    """After an op's validation (:class:`~ropepool.validation.Checked`): the backend resolved (the catalog's
    last checks, ``unknown_backend`` and ``backend_unavailable``), then the call's one-step plan of its
    write into pools of ``pool_rows`` rows (:func:`ropepool.pool_write.plan`)."""
    resolve(backend, inplace)
    return StepPlan(native(positions), plan_write(checked.slots, pool_rows, checked=check_values), pool_rows)


def _fresh_copy(pool: np.ndarray) -> np.ndarray:
    """A row-contiguous, native-order copy of a NumPy pool that nothing else references."""
    out = native(pool)
    return out.copy() if np.may_share_memory(out, pool) else out
