"""Why continuous batching: tokens per second for 1, 2, 4, 8 requests, and the memory a shared pool saves.

:func:`measure` serves n requests at once through ``ropepool.engine.generate`` and through mlx-lm
(its ``BatchGenerator``, what ``mlx_lm.batch_generate`` runs, and optionally its one-request
``generate_step`` loop, one request after the other), in one process, the methods interleaved at
every n, each run timed from the first prompt token to the last new token (prefill included).
Greedy decoding, no stop token: every request writes exactly ``new`` tokens, so every method does
the same work. :func:`pool_memory` counts what one shared pool holds against one contiguous cache
per request.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..engine import generate
from ..engine.mlx_lm_loop import greedy

ENGINE = "ropepool engine"
MLX_BATCH = "mlx-lm batch_generate"
MLX_ALONE = "mlx-lm, one request at a time"


def mlx_lm_batch(model, prompts: Sequence[Sequence[int]], new: int) -> list[list[int]]:
    """mlx-lm's batched greedy generation: the ``BatchGenerator`` loop of ``mlx_lm.batch_generate``,
    without stop tokens (``batch_generate`` takes them from a tokenizer). One token list per prompt."""
    from mlx_lm.generate import BatchGenerator  # mlx-lm: imported when used

    gen = BatchGenerator(model, stop_tokens=[])
    uids = gen.insert([list(p) for p in prompts], [new] * len(prompts))
    out: dict[int, list[int]] = {uid: [] for uid in uids}
    try:
        while responses := gen.next_generated():
            for r in responses:
                out[r.uid].append(int(r.token))
    finally:
        gen.close()
    return [out[uid] for uid in uids]


def _run(method: str, model, prompts, new: int, steps: list | None = None) -> list[list[int]]:
    if method == ENGINE:
        rows = sum(len(p) + new - 1 for p in prompts)  # every request fits: nobody waits
        passes = []

        def count(engine, batch):
            passes.append(len(batch.tokens))

        out = [r.tokens for r in generate(model, prompts, new, pool_rows=rows, on_step=count)]
        if steps is not None:
            steps.append(len(passes))
        return out
    if method == MLX_BATCH:
        return mlx_lm_batch(model, prompts, new)
    if method == MLX_ALONE:
        return [g.tokens for g in greedy(model, prompts, new)]
    raise ValueError(f"unknown method {method!r}; choose {ENGINE!r}, {MLX_BATCH!r} or {MLX_ALONE!r}")


@dataclass
class Throughput:
    """Medians of :func:`measure`: ``tokens_per_s[method][i]`` for ``requests[i]`` requests at once; the
    tokens each method wrote; ``engine_steps[i]``, the forward passes the engine ran (where it ran)."""

    requests: list[int]
    new: int
    tokens_per_s: dict[str, list[float]] = field(default_factory=dict)
    tokens: dict[str, list[list[list[int]]]] = field(default_factory=dict)  # method -> per n -> per request
    engine_steps: list[int] = field(default_factory=list)  # forward passes the engine ran, per n
    seconds: dict[str, list[list[float]]] = field(default_factory=dict)  # method -> per n -> per repeat

    def ratio_range(
        self, method: str, n: int, other: str | None = None, m: int | None = None
    ) -> tuple[float, float, float]:
        """:meth:`ratio` round by round: ``(median, lowest, highest)`` over the repeats, each repeat's
        tokens/s of ``method`` at n over ``other``'s at m in the same repeat (they ran interleaved)."""
        other, m = other or method, m or self.requests[0]
        a, b = self.seconds[method][self.requests.index(n)], self.seconds[other][self.requests.index(m)]
        ratios = [(n / ta) / (m / tb) for ta, tb in zip(a, b)]
        return statistics.median(ratios), min(ratios), max(ratios)

    def ratio(self, method: str, n: int, other: str | None = None, m: int | None = None) -> float:
        """tokens/s of ``method`` at n requests over ``other`` (default: the same method) at m (default 1)."""
        other, m = other or method, m or self.requests[0]
        return self.tokens_per_s[method][self.requests.index(n)] / self.tokens_per_s[other][self.requests.index(m)]

    def table(self) -> str:
        """One row per request count: tokens/s of each method."""
        names = list(self.tokens_per_s)
        lines = ["requests | " + " | ".join(f"{n:>22}" for n in names) + "   (tokens/s, median)"]
        for i, n in enumerate(self.requests):
            lines.append(f"{n:8} | " + " | ".join(f"{self.tokens_per_s[m][i]:22.1f}" for m in names))
        return "\n".join(lines)


def measure(
    model,
    prompts: Sequence[Sequence[int]],
    *,
    new: int,
    counts: Sequence[int] = (1, 2, 4, 8),
    methods: Sequence[str] = (ENGINE, MLX_BATCH),
    repeats: int = 1,
    progress: Callable[[str], None] | None = print,
) -> Throughput:
    """Tokens per second of each method serving the first n of ``prompts`` at once, for n in ``counts``.

    One warm-up run of each method first (MLX compiles and allocates on first use). Then, for each
    n and each repeat, the methods run one after the other (interleaved), so a busy machine slows
    them alike; the median over repeats is kept. ``progress`` gets one line per n, as it is measured.

    Raises
    ------
    ValueError
        Fewer prompts than the largest count, ``new`` < 1, or an unknown method.
    """
    if len(prompts) < max(counts):
        raise ValueError(f"measure: {max(counts)} requests need {max(counts)} prompts, got {len(prompts)}")
    if new < 1:
        raise ValueError(f"measure: new must be >= 1, got {new}")
    for m in methods:
        _run(m, model, prompts[:1], 1)  # warm-up (also rejects an unknown method)
    out = Throughput(list(counts), new, {m: [] for m in methods}, {m: [] for m in methods})
    out.seconds = {m: [] for m in methods}
    for n in counts:
        times: dict[str, list[float]] = {m: [] for m in methods}
        last: dict[str, list[list[int]]] = {}
        for _ in range(repeats):
            steps: list[int] = []
            for m in methods:
                start = time.perf_counter()
                last[m] = _run(m, model, prompts[:n], new, steps)
                times[m].append(time.perf_counter() - start)
        if steps:
            out.engine_steps.append(steps[-1])
        for m in methods:
            out.tokens_per_s[m].append(n * new / statistics.median(times[m]))
            out.seconds[m].append(times[m])
            out.tokens[m].append(last[m])
        if progress is not None:
            progress(
                f"{n} request{'s' if n > 1 else ''} at once: "
                + ", ".join(f"{m} {out.tokens_per_s[m][-1]:.1f} tokens/s" for m in methods)
            )
    return out


def step_split(model, prompts: Sequence[Sequence[int]], new: int, repeats: int = 3) -> dict[str, float]:
    """Where a step's time goes, serving ``prompts`` at once: median seconds per decode step of the
    engine's phases (``"schedule"``: the scheduler's bookkeeping and slot tables; ``"build"``: the Python
    that builds the step's lazy MLX graph, the op's argument handling included; ``"evaluate"``: MLX
    running the graph; ``"postprocess"``: tokens appended, rows freed) and of mlx-lm's ``batch_generate``
    loop as a whole (``"batch_generate step"``). Interleaved: each repeat runs both. Decode steps only
    (the first step, the prefill, is left out of the engine's medians)."""
    import mlx.core as mx

    from ..engine import Engine

    phases: dict[str, list[float]] = {
        k: [] for k in ("schedule", "build", "evaluate", "postprocess", "batch_generate step")
    }
    rows = sum(len(p) + new - 1 for p in prompts)
    mlx_lm_batch(model, prompts[:1], 1)  # warm-up
    for _ in range(repeats):
        engine = Engine(model, pool_rows=rows)
        for p in prompts:
            engine.add_request(p, new)
        sched, runner, marks = engine.scheduler, engine.runner, {}

        def timed(name, fn):
            def wrapper(*a, **kw):
                start = time.perf_counter()
                out = fn(*a, **kw)
                marks[name] = time.perf_counter() - start
                return out

            return wrapper

        sched.schedule, sched.postprocess = timed("schedule", sched.schedule), timed("postprocess", sched.postprocess)
        run = runner.run
        runner.run = timed("build", lambda batch: run(batch))
        first = True
        while not engine.done:
            start = time.perf_counter()
            engine.step()
            total = time.perf_counter() - start
            if not first:
                for k in ("schedule", "build", "postprocess"):
                    phases[k].append(marks[k])
                phases["evaluate"].append(total - marks["schedule"] - marks["build"] - marks["postprocess"])
            first = False
        start = time.perf_counter()
        mlx_lm_batch(model, prompts, new)
        phases["batch_generate step"].append((time.perf_counter() - start) / new)
        mx.synchronize()
    return {k: statistics.median(v) for k, v in phases.items()}


@dataclass(frozen=True)
class PoolMemory:
    """Bytes of one shared pool against one contiguous cache per request (all layers, k and v)."""

    pool_rows: int  # rows of the shared pool
    pool_bytes: int
    requests: int
    reserved_per_request: int  # tokens a contiguous cache reserves for each request
    contiguous_bytes: int  # requests x reserved_per_request tokens
    bytes_per_token: int


def pool_memory(pool_rows: int, requests: int, bytes_per_token: int, reserve: int) -> PoolMemory:
    """A shared pool of ``pool_rows`` rows against ``requests`` contiguous caches that each reserve
    ``reserve`` tokens (a maximum length, or a growth step such as mlx-lm's 256).

    >>> m = pool_memory(16, 3, bytes_per_token=512, reserve=256)
    >>> m.pool_bytes, m.contiguous_bytes, m.contiguous_bytes // m.pool_bytes
    (8192, 393216, 48)
    """
    return PoolMemory(
        pool_rows, pool_rows * bytes_per_token, requests, reserve, requests * reserve * bytes_per_token, bytes_per_token
    )


def reserve_ratio(
    lengths: Sequence[int], pool_rows: int | None = None, *, step: int = 256, max_len: int | None = None
) -> float:
    """Bytes that one contiguous cache per request reserves over the bytes of one shared pool.

    A request of ``L`` tokens reserves ``step * ceil(L / step)`` tokens in a cache that grows by
    ``step`` (mlx-lm's ``KVCache``: 256), or ``max_len`` in a static cache; the pool holds ``pool_rows``
    rows (default: ``sum(lengths)``, every request live at once; fewer where finished requests' rows are
    reused). Per token the bytes are the same on both sides, so they cancel::

        ratio = sum(reserve(L) for L in lengths) / pool_rows

    With every request live (no reuse) the request count cancels too: ``step * ceil(L / step) / L``.

    >>> reserve_ratio([6, 6, 6], pool_rows=16)  # notebook 07: three toy requests, rows reused
    48.0
    >>> round(reserve_ratio([1000] * 8), 3)  # eight 1,000-token requests: 1,024 reserved each
    1.024
    """
    reserve = [max_len if max_len is not None else step * -(-n // step) for n in lengths]
    return sum(reserve) / (pool_rows if pool_rows is not None else sum(lengths))
