"""Why fuse, measured: one ``rope_pool_fused`` call against the same work as seven separate MLX ops.

The work is one decode step of one attention layer with QK-norm and an FP8 cache (Qwen3's attention
served with ``kv_dtype="fp8"``): RMSNorm q, RMSNorm k, RoPE q, RoPE k, FP8-encode k and v, scatter k
into the pool, scatter v into the pool. :func:`unfused` does it as a user of MLX would without the
op, one MLX op per step, each evaluated before the next (one dispatch each, as an eager engine issues
them); :func:`measure` races it against the fused call, interleaved round by round, and
:func:`traffic` counts the bytes each way reads and writes, from the shapes alone.

Shapes: q ``[T, Hq, D]``, k and v ``[T, Hkv, D]``, positions and slots ``[T]`` (int32), pools
``[P, Hkv, D]`` uint8 (e4m3 codes), norm weights ``[D]``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import mlx.core as mx
import numpy as np

from ..op import rope_pool_fused

FUSED, UNFUSED = "fused: 1 call", "unfused: separate MLX ops"


@dataclass(frozen=True)
class Step:
    """One decode step's inputs (see the module docstring for shapes) and the model's constants."""

    q: mx.array
    k: mx.array
    v: mx.array
    positions: mx.array
    slots: mx.array
    k_pool: mx.array
    v_pool: mx.array
    q_norm_weight: mx.array
    k_norm_weight: mx.array
    norm_eps: float = 1e-6
    rope_base: float = 1e6
    k_scale: float = 1.0
    v_scale: float = 1.0

    @property
    def extras(self) -> bool:
        """QK-norm and an FP8 cache: seven steps; else SGLang's op alone, four."""
        return self.q_norm_weight is not None

    @property
    def steps(self) -> tuple[str, ...]:
        """The unfused steps, in order; each is one MLX op (FP8-encode: one per side) and one evaluation."""
        if self.extras:
            return ("RMSNorm q", "RMSNorm k", "RoPE q", "RoPE k", "FP8-encode k, v", "scatter k", "scatter v")
        return ("RoPE q", "RoPE k", "scatter k", "scatter v")

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        """``(T, Hq, Hkv, D, P)``."""
        T, Hq, D = self.q.shape
        return T, Hq, self.k.shape[1], D, self.k_pool.shape[0]


def decode_step(
    T: int = 8,
    Hq: int = 16,
    Hkv: int = 8,
    D: int = 128,
    P: int = 4096,
    dtype=mx.bfloat16,
    seed: int = 0,
    fused_extras: bool = True,
) -> Step:
    """A decode step of T requests (one token each, at scattered positions) for Qwen3-0.6B's attention
    shapes (Hq 16, Hkv 8, D 128) by default: with ``fused_extras``, QK-norm weights and uint8 pools of P
    rows (seven steps); without, no norm and pools of q's dtype (SGLang's op: RoPE q, RoPE k, scatter k, v)."""
    rng = np.random.default_rng(seed)
    q, k, v = (mx.array(rng.standard_normal((T, H, D)).astype(np.float32)).astype(dtype) for H in (Hq, Hkv, Hkv))
    positions = mx.array(rng.integers(0, 2000, T).astype(np.int32))
    slots = mx.array(rng.choice(P, T, replace=False).astype(np.int32))
    pools = [mx.zeros((P, Hkv, D), mx.uint8 if fused_extras else dtype) for _ in range(2)]
    weights = [mx.array(1 + 0.1 * rng.standard_normal(D).astype(np.float32)).astype(dtype) for _ in range(2)]
    weights = weights if fused_extras else [None, None]
    step = Step(q, k, v, positions, slots, *pools, *weights)
    mx.eval(q, k, v, positions, slots, *pools, *[w for w in weights if w is not None])
    return step


def fused(s: Step, backend: str = "auto"):
    """The one call, writing the step's pools in place as SGLang's kernel does: ``(q_rot, k_rot, k_pool,
    v_pool)``, evaluated."""
    T, Hq, Hkv, D, _ = s.shape
    out = rope_pool_fused(
        s.q,
        s.k,
        s.v,
        s.positions,
        s.slots,
        s.k_pool,
        s.v_pool,
        head_dim=D,
        num_qo_heads=Hq,
        num_kv_heads=Hkv,
        rope_base=s.rope_base,
        q_norm_weight=s.q_norm_weight,
        k_norm_weight=s.k_norm_weight,
        norm_eps=s.norm_eps,
        k_scale=s.k_scale,
        v_scale=s.v_scale,
        backend=backend,
        check_values=False,
        inplace=True,
    )
    mx.eval(*out)
    return out


def _rope(x: mx.array, positions: mx.array, base: float) -> mx.array:
    """mx.fast.rope (NeoX pairs) of x ``[T, H, D]`` at per-token positions."""
    D = x.shape[-1]
    return mx.fast.rope(x[:, :, None, :], D, traditional=False, base=base, scale=1.0, offset=positions)[:, :, 0, :]


def unfused(s: Step, evaluations: list | None = None):
    """The same work as separate MLX ops (``s.steps``), each evaluated before the next, as an eager
    engine dispatches them; ``evaluations`` (a list) gets one entry per evaluation. Writes the step's
    pools (MLX's scatter, as mlx-lm's KVCache writes its rows). Returns ``(q_rot, k_rot, k_pool, v_pool)``."""

    def sync(*arrays):
        mx.eval(*arrays)
        if evaluations is not None:
            evaluations.append(len(arrays))

    qn, kn = s.q, s.k
    if s.q_norm_weight is not None:
        qn = mx.fast.rms_norm(s.q, s.q_norm_weight, s.norm_eps)  # [T, Hq, D], over each head's D
        sync(qn)
        kn = mx.fast.rms_norm(s.k, s.k_norm_weight, s.norm_eps)  # [T, Hkv, D]
        sync(kn)
    q_rot = _rope(qn, s.positions, s.rope_base)
    sync(q_rot)
    k8 = k_rot = _rope(kn, s.positions, s.rope_base)
    sync(k_rot)
    v8 = s.v
    if s.k_pool.dtype == mx.uint8:
        k8 = mx.to_fp8(k_rot.astype(mx.float32) / s.k_scale)  # [T, Hkv, D] uint8
        v8 = mx.to_fp8(s.v.astype(mx.float32) / s.v_scale)
        sync(k8, v8)
    s.k_pool[s.slots] = k8  # MLX's scatter, written as mlx-lm's KVCache writes its rows
    sync(s.k_pool)
    s.v_pool[s.slots] = v8
    sync(s.v_pool)
    return q_rot, k_rot, s.k_pool, s.v_pool


def traffic(s: Step) -> dict[str, tuple[int, int]]:
    """Bytes read and written by the fused call and by the unfused steps, the least each must move
    (every input read once, every output written once; weights, positions and slots included)."""
    T, Hq, Hkv, D, _ = s.shape
    b = s.q.itemsize
    q, kv, w, idx = T * Hq * D * b, T * Hkv * D * b, D * b, T * 4
    row = T * Hkv * D * s.k_pool.itemsize  # one pool's new rows: 1 byte an element in FP8
    steps = {
        "RMSNorm q": (q + w, q),
        "RMSNorm k": (kv + w, kv),
        "RoPE q": (q + idx, q),
        "RoPE k": (kv + idx, kv),
        "FP8-encode k, v": (2 * kv, 2 * row),
        "scatter k": (row + idx, row),
        "scatter v": (row + idx, row),
    }
    steps = {name: steps[name] for name in s.steps}
    weights = 2 * w if s.extras else 0
    unf = (sum(r for r, _ in steps.values()), sum(wr for _, wr in steps.values()))
    return {FUSED: (q + 2 * kv + weights + 2 * idx, q + kv + 2 * row), UNFUSED: unf, **steps}


@dataclass
class FusionCost:
    """Medians of :func:`measure`: seconds per call of each method, and the unfused/fused ratio of
    each round (its spread is the claim's spread)."""

    shape: tuple[int, int, int, int, int]
    rounds: int
    seconds: dict[str, float] = field(default_factory=dict)
    ratios: list[float] = field(default_factory=list)  # unfused / fused, one per round
    evaluations: dict[str, int] = field(default_factory=dict)  # unfused: MLX evaluations counted; fused: its one call

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def spread(self) -> tuple[float, float]:
        """The 10th and 90th percentiles of the per-round ratios."""
        lo, hi = np.percentile(self.ratios, [10, 90])
        return float(lo), float(hi)


def measure(s: Step, rounds: int = 40, calls: int = 5, backend: str = "auto") -> FusionCost:
    """Race :func:`fused` and :func:`unfused` on the same step, interleaved: each round times ``calls``
    calls of one, then of the other (the order alternating round by round); medians over rounds."""
    for _ in range(3):  # warm-up: MLX builds and caches its kernels on first use
        fused(s, backend), unfused(s)
    times = {FUSED: [], UNFUSED: []}
    run = {FUSED: lambda: fused(s, backend), UNFUSED: lambda: unfused(s)}
    for r in range(rounds):
        for name in (FUSED, UNFUSED) if r % 2 == 0 else (UNFUSED, FUSED):
            start = time.perf_counter()
            for _ in range(calls):
                run[name]()
            times[name].append((time.perf_counter() - start) / calls)
    counted: list = []
    unfused(s, counted)
    out = FusionCost(
        s.shape,
        rounds,
        {n: statistics.median(t) for n, t in times.items()},
        evaluations={FUSED: 1, UNFUSED: len(counted)},
    )
    out.ratios = [u / f for u, f in zip(times[UNFUSED], times[FUSED])]
    return out


def why_fuse(backend: str = "auto", rounds: int = 30) -> dict[str, tuple[Step, FusionCost]]:
    """The two races notebook 10 shows: SGLang's op (RoPE + pool write, 4 steps unfused) at one decode
    token (10 calls a round: each is a fraction of a millisecond), and the full call (QK-norm + RoPE + FP8
    + pool write, 7 steps) for a decode batch of 8 (3 calls a round)."""
    out = {}
    for name, T, extras, calls in (
        ("RoPE + write, T = 1", 1, False, 10),
        ("QK-norm + RoPE + FP8 + write, T = 8", 8, True, 3),
    ):
        step = decode_step(T=T, fused_extras=extras)
        out[name] = (step, measure(step, rounds=rounds, calls=calls, backend=backend))
    return out


def report(races: dict[str, tuple[Step, FusionCost]]) -> str:
    """One block per race: evaluations, bytes read + written, median time per call, and the ratio."""
    lines = []
    for name, (step, cost) in races.items():
        moved = {m: sum(traffic(step)[m]) for m in (FUSED, UNFUSED)}
        lo, hi = cost.spread
        lines.append(f"{name} (T, Hq, Hkv, D, P = {cost.shape}, {step.q.dtype}):")
        for m in (FUSED, UNFUSED):
            lines.append(
                f"  {m:28} {cost.evaluations[m]} evaluation(s), {moved[m] / 1024:6.1f} KiB moved, "
                f"{cost.seconds[m] * 1e6:8.0f} us (median of {cost.rounds} rounds)"
            )
        lines.append(
            f"  unfused / fused time: {cost.ratio:.2f}x (rounds' 10th-90th percentile {lo:.2f}x-{hi:.2f}x); "
            f"bytes {moved[UNFUSED] / moved[FUSED]:.2f}x"
        )
    return "\n".join(lines)
