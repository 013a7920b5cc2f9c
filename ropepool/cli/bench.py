"""``python -m ropepool bench``: ropepool against what a user would write instead, and the floor.

Methods timed (each call evaluated with ``mx.eval``, pools rebound so MLX can donate them):

===================  ===========================================================================
ropepool             ``rope_pool_fused(...)`` on the best backend here (``backend="auto"``), as a
                     user calls it: values checked on the host (``check_values=True``)
ropepool-unchecked   the same with ``check_values=False`` (positions not read on the host; slots still are, to plan the write)
ropepool-inplace     the same as "ropepool" with ``inplace=True``: the rows written into the pools
                     passed, as SGLang's kernel does (:mod:`ropepool.inplace`): no MLX evaluation
ropepool-inplace-np  the same call with NumPy arrays (inputs and pools), as a NumPy user calls it
                     (NumPy has no bfloat16: not timed for it)
mx.fast.rope         the unfused composition: :func:`rope_fast_scatter`, ``mx.fast.rope`` on q
                     and on k, then ``k_pool[slots] = k_rot`` and ``v_pool[slots] = v``
numpy                :func:`rope_pool_numpy`, float32 NumPy math, pools written in place
                     (NumPy has no bfloat16: not timed for it)
copy (mlx)           the floor: one MLX copy of each buffer the op writes (q_rot, k_rot, the k and
                     v rows), i.e. the bytes the op must move, with MLX's per-call overhead
memcpy (numpy)       the same bytes with ``np.copyto`` into preallocated buffers: the machine's floor
===================  ===========================================================================

Methods run round-robin inside each repetition (so noise from other processes hits all of
them alike) after a warm-up, in a new random order each round (seeded): which method runs just
before another matters (a call that follows the NumPy methods finds MLX's worker thread asleep),
and a fixed order would charge that to the same method every time. The table gives medians. No
method is timed on out-of-range slots: the composition does not skip them (MLX does not
bound-check a scatter).

What shapes the numbers on a CPU:

- At decode sizes (T = 1) every method pays MLX's per-node dispatch and ropepool also pays its
  validation; the copy floor is a 4-node graph.
- float16 arithmetic is emulated in software by MLX's CPU back-end on x86 (no native half type
  there), so float16 costs several times bfloat16 for every MLX method; ropepool's kernel converts
  with the CPU's F16C instructions where it has them.
- Large buffers (float32 q_rot at T = 2048) come fresh from the kernel on every call and are
  page-faulted in; every method pays this alike.
- ``mx.fast.rope`` on the CPU rotates in the input's precision: its bfloat16 error against the
  float64 reference is about twice ropepool's (float32 math, one rounding).
- Other processes on the machine add noise; compare ratios within one run.

For a short run from a notebook::

    >>> from ropepool.cli.bench import compare
    >>> from ropepool.shapes import Shapes
    >>> rows = compare(Shapes(tokens=8, num_qo_heads=8, num_kv_heads=2, head_dim=64, pool_rows=256),
    ...                "float16", repeats=3, methods=("ropepool", "mx.fast.rope"))
    >>> [r.method for r in rows]
    ['ropepool', 'mx.fast.rope']
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import mlx.core as mx
import numpy as np

from ..cache import UnsafeFile, writable_file, write_file
from ..inputs import make_inputs
from ..op import rope_pool_fused
from ..reference import inverse_frequencies
from ..shapes import DTYPE_BYTES, Shapes

ARGS = ("q", "k", "v", "positions", "slots")
METHODS = (
    "ropepool",
    "ropepool-unchecked",
    "ropepool-inplace",
    "ropepool-inplace-np",
    "mx.fast.rope",
    "numpy",
    "copy (mlx)",
    "memcpy (numpy)",
)
NUMPY_METHODS = ("ropepool-inplace-np", "numpy", "memcpy (numpy)")

#: Llama-3-8B attention: Hq = 32, Hkv = 8, D = 128.
LLAMA3_8B = dict(num_qo_heads=32, num_kv_heads=8, head_dim=128)


def rope_fast_scatter(q, k, v, positions, slots, k_pool, v_pool, *, rope_base: float):
    """The unfused composition a user would write: ``mx.fast.rope`` twice, then two scatters.

    ``mx.fast.rope`` takes positions as ``offset + arange(L)`` along the second-to-last axis,
    with ``offset`` a scalar or one per batch row. Per-token positions therefore need each
    token to be its own batch row: x ``[T, H, D]`` becomes ``[T, H, 1, D]`` (L = 1) and
    ``offset=positions`` gives token t the position ``positions[t]``. ``traditional=False`` is
    NeoX's pairing. The scatter assumes every slot is in ``[0, P)``.
    """
    T, Hq, D = q.shape  # [T, Hq, D]
    Hkv = k.shape[1]

    def rope(x, heads):
        x4 = x.reshape(T, heads, 1, D)  # [T, H, L=1, D]: one batch row per token
        return mx.fast.rope(x4, D, traditional=False, base=rope_base, scale=1.0, offset=positions).reshape(T, heads, D)

    q_rot, k_rot = rope(q, Hq), rope(k, Hkv)
    k_pool[slots] = k_rot  # [T, Hkv, D] into [P, Hkv, D]
    v_pool[slots] = v
    return q_rot, k_rot, k_pool, v_pool


def rope_pool_numpy(q, k, v, positions, slots, k_pool, v_pool, *, rope_base: float):
    """A NumPy implementation: float32 math, one rounding, pools written in place (O(T))."""
    D = q.shape[-1]
    half = D // 2
    inv_freq = inverse_frequencies(D, rope_base).astype(np.float32)  # [D/2]
    theta = positions.astype(np.float32)[:, None] * inv_freq[None, :]  # [T, D/2]
    cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]  # [T, 1, D/2]

    def rotate(x):
        x32 = x.astype(np.float32)
        x1, x2 = x32[..., :half], x32[..., half:]  # [T, H, D/2]
        return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1).astype(x.dtype)

    q_rot, k_rot = rotate(q), rotate(k)
    keep = (slots >= 0) & (slots < k_pool.shape[0])  # [T]
    k_pool[slots[keep]] = k_rot[keep]
    v_pool[slots[keep]] = v[keep]
    return q_rot, k_rot, k_pool, v_pool


@dataclass
class Timing:
    """One method at one configuration: medians over ``repeats`` calls, in milliseconds."""

    method: str
    dtype: str
    tokens: int
    pool_rows: int
    median_ms: float
    best_ms: float
    repeats: int
    ratio: float = float("nan")  # median / ropepool's median at the same configuration
    ratio_range: tuple = (float("nan"), float("nan"))  # lowest, highest of this time / ropepool's in one round


def _time_call(method: str, kw: dict, state: dict) -> float:
    """Seconds for one call of ``method``. ``state["pools"]`` holds the MLX pools between calls:
    every MLX method takes them and gives back its new (donated) pools, so only one pair lives."""
    if method == "memcpy (numpy)":
        a = state["np_args"]
        t0 = time.perf_counter()
        for dst, src in zip(state["np_out"], (a["q"], a["k"], a["k"], a["v"])):
            np.copyto(dst, src)
        return time.perf_counter() - t0
    if method == "numpy":
        a = state["np_args"]
        t0 = time.perf_counter()
        rope_pool_numpy(*(a[n] for n in ARGS), *state["np_pools"], rope_base=kw["rope_base"])
        return time.perf_counter() - t0
    if method == "ropepool-inplace-np":
        a = state["np_args"]
        t0 = time.perf_counter()
        rope_pool_fused(
            *(a[n] for n in ARGS),
            *state["np_pools"],
            head_dim=kw["head_dim"],
            num_qo_heads=kw["num_qo_heads"],
            num_kv_heads=kw["num_kv_heads"],
            rope_base=kw["rope_base"],
            inplace=True,
        )
        return time.perf_counter() - t0
    args = [kw[n] for n in ARGS]
    if method == "copy (mlx)":
        t0 = time.perf_counter()
        mx.eval(*[mx.array(a) for a in (kw["q"], kw["k"], kw["k"], kw["v"])])  # fresh copies
        return time.perf_counter() - t0
    k_pool, v_pool = state.pop("pools")  # ours now: the call's result will be the only owner
    t0 = time.perf_counter()
    if method == "mx.fast.rope":
        out = rope_fast_scatter(*args, k_pool, v_pool, rope_base=kw["rope_base"])
    else:
        out = rope_pool_fused(
            *args,
            k_pool,
            v_pool,
            head_dim=kw["head_dim"],
            num_qo_heads=kw["num_qo_heads"],
            num_kv_heads=kw["num_kv_heads"],
            rope_base=kw["rope_base"],
            check_values=(method != "ropepool-unchecked"),
            inplace=(method == "ropepool-inplace"),
        )
    del k_pool, v_pool
    mx.eval(*out)
    elapsed = time.perf_counter() - t0
    state["pools"] = [out[2], out[3]]
    return elapsed


def _inputs(shapes: Shapes, dtype: str, seed: int = 0):
    """Call kwargs (pools excluded) and the two pools, made in place (a 2**20-row pool is GiBs)."""
    small = Shapes(shapes.tokens, shapes.num_qo_heads, shapes.num_kv_heads, shapes.head_dim, 1)
    slots = np.random.default_rng(seed).permutation(shapes.pool_rows)[: shapes.tokens]
    kw = make_inputs(small, dtype, seed=seed, slots=slots)
    kw.pop("k_pool"), kw.pop("v_pool")
    pools = [mx.full(shapes.pool, 0.5, getattr(mx, dtype)) for _ in range(2)]  # contents don't matter
    mx.eval(*pools, *(kw[n] for n in ARGS))
    return kw, pools


def _prepare_kernel(shapes: Shapes) -> None:
    """Build the 'cpu' kernel's specialisation for these shapes before timing: a first call would
    start it in the background, and the warm-up would then time the run-time-shape build."""
    from ..backends import best_backend
    from ..kernels import host
    from ..rope import plain

    if best_backend() == "cpu":
        try:
            host.specialise(
                host.shape_key(
                    shapes.num_qo_heads, shapes.num_kv_heads, shapes.head_dim, plain(shapes.head_dim, 10000.0)
                )
            )
        except RuntimeError:  # the run-time-shape build serves; the table says what it measured
            pass


def compare(
    shapes: Shapes, dtype: str = "float16", repeats: int = 10, methods=METHODS, warmup: int = 2
) -> list[Timing]:
    """Time ``methods`` at one configuration; one :class:`Timing` per method, in ``methods`` order.

    Parameters
    ----------
    shapes : Shapes, ``T, Hq, Hkv, D, P`` (slots are T distinct rows, so ``T <= P``)
    dtype : "float16", "bfloat16" or "float32"
    repeats : timed calls per method (after ``warmup`` untimed ones); the median is reported
    methods : names from :data:`METHODS`; "numpy" and "memcpy (numpy)" are left out for bfloat16

    Returns
    -------
    list of Timing, with ``ratio`` = median / ropepool's median when "ropepool" was timed, and
    ``ratio_range`` the lowest and highest of the same ratio taken round by round.
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {list(METHODS)}")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {list(DTYPE_BYTES)}, got {dtype!r}")
    if dtype == "bfloat16":
        methods = [m for m in methods if m not in NUMPY_METHODS]
    kw, pools = _inputs(shapes, dtype)
    _prepare_kernel(shapes)
    state = {"pools": pools}
    del pools
    if any(m in methods for m in NUMPY_METHODS):
        a = state["np_args"] = {n: np.array(kw[n]) for n in ARGS}
        state["np_pools"] = [np.array(p) for p in state["pools"]]
        state["np_out"] = [np.empty_like(a["q"]), np.empty_like(a["k"]), np.empty_like(a["k"]), np.empty_like(a["v"])]
    times: dict[str, list[float]] = {m: [] for m in methods}
    rng = np.random.default_rng(0)
    for i in range(warmup + repeats):
        for m in rng.permutation(list(methods)).tolist():  # a new order each round (see the docstring)
            t = _time_call(m, kw, state)
            if i >= warmup:
                times[m].append(t)
    rows = [
        Timing(m, dtype, shapes.tokens, shapes.pool_rows, 1e3 * float(np.median(ts)), 1e3 * float(np.min(ts)), repeats)
        for m, ts in times.items()
    ]
    base = next((r.median_ms for r in rows if r.method == "ropepool"), None)
    for r in rows:
        r.ratio = r.median_ms / base if base else float("nan")
        if "ropepool" in times:  # the rounds' own ratios: the methods ran back to back in each
            per_round = np.array(times[r.method]) / np.array(times["ropepool"])
            r.ratio_range = (float(per_round.min()), float(per_round.max()))
    return rows


# ---- the full run: python -m ropepool bench ---------------------------------------------------


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(
    tokens=(1, 64, 2048),
    dtypes=("float16", "bfloat16", "float32"),
    pools=(4096, 16384, 65536, 262144, 1048576),
    repeats: int = 10,
    pool_tokens: int = 64,
    pool_dtype: str = "float16",
    out_dir: str | Path = "artifacts",
    plot: bool = True,
    command: str = "python -m ropepool bench",
) -> dict:
    """The whole benchmark: Llama-3-8B shapes per dtype and T, then time against pool size; writes
    ``out_dir``/bench.json (and bench.png with ``plot``)."""
    from ..backends import best_backend

    results = {
        "backend": best_backend(),
        "device": str(mx.default_device()),
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "command": command,
        "shapes": [],
        "pools": [],
    }
    configs = [(dt, T) for dt in dtypes for T in tokens]
    for n, (dt, T) in enumerate(configs, 1):
        _progress(f"[bench {n}/{len(configs)}] {dt} T={T} (Llama-3-8B shapes, P=4096)")
        # cheap calls get more repeats: their medians are what other processes' noise moves most
        reps = 5 * repeats if T <= 16 else 2 * repeats if T <= 256 else repeats
        results["shapes"] += compare(Shapes(T, pool_rows=4096, **LLAMA3_8B), dt, reps)
    # Each pool size twice, in ascending then descending order, and the two medians averaged:
    # a drift in the machine's load then cannot pass for a trend in P.
    sweep = list(pools) + list(pools)[::-1]
    by_p: dict[int, list[list[Timing]]] = {}
    for n, P in enumerate(sweep, 1):
        _progress(f"[bench pool {n}/{len(sweep)}] {pool_dtype} T={pool_tokens} P={P}")
        by_p.setdefault(P, []).append(
            compare(
                Shapes(pool_tokens, pool_rows=P, **LLAMA3_8B),
                pool_dtype,
                2 * repeats,
                methods=("ropepool", "ropepool-unchecked", "ropepool-inplace", "mx.fast.rope"),
            )
        )
    for P in pools:
        first, second = by_p[P]
        for a, b in zip(first, second):
            a.median_ms, a.best_ms, a.repeats = (
                (a.median_ms + b.median_ms) / 2,
                min(a.best_ms, b.best_ms),
                2 * a.repeats,
            )
        results["pools"] += first
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = {k: ([asdict(r) for r in v] if isinstance(v, list) else v) for k, v in results.items()}
    write_file(out_dir / "bench.json", json.dumps(data, indent=1), "bench --out")
    if plot:
        results["plot"] = str(plot_results(results, out_dir / "bench.png"))
    return results


def _lookup(rows, **key):
    return {r.method: r for r in rows if all(getattr(r, k) == v for k, v in key.items())}


def report(results: dict) -> str:
    """The tables, as text (``benchmarks/op_bench.py`` adds the targets)."""
    lines = [
        f"ropepool bench: backend {results['backend']!r} on {results['device']}; medians in ms",
        "",
        "Llama-3-8B (Hq=32, Hkv=8, D=128), P=4096; x = median / ropepool's",
    ]
    methods = [m for m in METHODS if any(r.method == m for r in results["shapes"])]
    head = f"{'dtype':<9} {'T':>5}  " + "  ".join(f"{m:>20}" for m in methods)
    lines += [head, "-" * len(head)]
    for dt, T in sorted({(r.dtype, r.tokens) for r in results["shapes"]}):
        got = _lookup(results["shapes"], dtype=dt, tokens=T)
        cells = [f"{got[m].median_ms:>11.3f} ({got[m].ratio:>5.2f}x)" if m in got else f"{'n/a':>20}" for m in methods]
        lines.append(f"{dt:<9} {T:>5}  " + "  ".join(cells))
    if results["pools"]:
        pm = [m for m in METHODS if any(r.method == m for r in results["pools"])]
        r0 = results["pools"][0]
        lines += [
            "",
            f"Per-call time against pool size ({r0.dtype}, T={r0.tokens}, Llama-3-8B)",
            f"{'P':>9}  " + "  ".join(f"{m:>20}" for m in pm),
        ]
        for P in sorted({r.pool_rows for r in results["pools"]}):
            got = _lookup(results["pools"], pool_rows=P)
            lines.append(f"{P:>9}  " + "  ".join(f"{got[m].median_ms:>20.3f}" for m in pm))
    if "plot" in results:
        lines += ["", f"plot: {results['plot']}"]
    return "\n".join(lines)


def machine() -> str:
    """One line naming what the numbers were measured on: OS, CPU, core count, Python, MLX, NumPy."""
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} cores; Python "
        f"{platform.python_version()}, MLX {mx.__version__}, NumPy {np.__version__}"
    )


def plot_results(results: dict, path: str | Path) -> Path:
    """Two panels: median time per method (Llama-3-8B, by dtype and T); time against pool size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    keys = sorted({(r.dtype, r.tokens) for r in results["shapes"]})
    methods = [m for m in METHODS if any(r.method == m for r in results["shapes"])]
    width = 0.8 / max(1, len(methods))
    for j, m in enumerate(methods):
        ys = [_lookup(results["shapes"], dtype=dt, tokens=T).get(m) for dt, T in keys]
        xs = [i + j * width for i, y in enumerate(ys) if y]
        ax1.bar(xs, [y.median_ms for y in ys if y], width, label=m)
    ax1.set_xticks([i + 0.4 - width / 2 for i in range(len(keys))], [f"{dt}\nT={T}" for dt, T in keys], fontsize=7)
    ax1.set_yscale("log")
    ax1.set_ylabel("median ms per call (log)")
    ax1.set_title(f"Llama-3-8B shapes, P=4096 (ropepool backend: {results['backend']})")
    ax1.legend(fontsize=7)
    pm = [m for m in METHODS if any(r.method == m for r in results["pools"])]
    for m in pm:
        rows = sorted((r for r in results["pools"] if r.method == m), key=lambda r: r.pool_rows)
        ax2.plot([r.pool_rows for r in rows], [r.median_ms for r in rows], marker="o", label=m)
    if results["pools"]:
        r0 = results["pools"][0]
        ax2.set_title(f"per-call time against pool size ({r0.dtype}, T={r0.tokens})")
    ax2.set_xscale("log", base=2)
    ax2.set_yscale("log")
    ax2.set_xlabel("pool rows P")
    ax2.set_ylabel("median ms per call (log)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    plt.close(fig)
    return write_file(path, image.getvalue(), "bench --out")


def bad_arguments(repeats: int | None, out_dir: str | Path) -> str | None:
    """Why ``--repeats``/``--out`` cannot work, checked before any timing; None if they can."""
    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1):
        return f"--repeats must be a whole number >= 1, got {repeats!r}"
    out = Path(out_dir)
    if not str(out_dir).strip():
        return "--out must name a folder, got an empty string"
    if out.exists() and not out.is_dir():
        return f"--out {out_dir}: exists and is not a folder"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"--out {out_dir}: cannot create it ({e.strerror or e})"
    try:
        for name in ("bench.json", "bench.png"):
            writable_file(out / name, "--out")
    except UnsafeFile as e:
        return str(e)
    return None


def main(
    quick: bool = False,
    repeats: int | None = None,
    out_dir: str = "artifacts",
    plot: bool = True,
    readme: str | None = None,
) -> int:
    """Entry point of ``python -m ropepool bench``; ``quick`` runs small sizes in seconds. Prints the
    tables; writes ``out_dir``/bench.json and bench.png. The targets and docs/measured.md's table belong
    to the repository's ``benchmarks/op_bench.py``, which runs the same :func:`run`; ``readme``
    hands the whole command to it (``--readme FILE`` pastes the table into FILE).

    Returns 2, with a one-line message on stderr, for a bad ``repeats``, ``out_dir`` or ``readme``
    (checked before any timing).
    """
    if readme is not None:
        return _op_bench(quick, repeats, out_dir, plot, readme)
    problem = bad_arguments(repeats, out_dir)
    if problem:
        print(f"python -m ropepool bench: {problem}", file=sys.stderr)
        return 2
    results = run_default(
        quick,
        repeats,
        out_dir,
        plot,
        "python -m ropepool bench" + (" --quick" if quick else "") + (f" --repeats {repeats}" if repeats else ""),
    )
    print(report(results))
    print("\ntargets met or missed, and docs/measured.md's table: python benchmarks/op_bench.py")
    return 0


def _op_bench(quick, repeats, out_dir, plot, readme) -> int:
    """``benchmarks/op_bench.py`` of the checkout this package runs from, with the same arguments."""
    import runpy

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "op_bench.py"
    if not script.is_file():
        print(
            "python -m ropepool bench: --readme needs the repository's benchmarks/op_bench.py (not installed "
            "with the package): run it from a checkout",
            file=sys.stderr,
        )
        return 2
    argv = (
        (["--quick"] if quick else [])
        + (["--repeats", str(repeats)] if repeats is not None else [])
        + ["--out", str(out_dir), "--readme", str(readme)]
        + ([] if plot else ["--no-plot"])
    )
    return runpy.run_path(str(script), run_name="op_bench")["main"](argv)


def run_default(quick: bool, repeats: int | None, out_dir: str | Path, plot: bool, command: str) -> dict:
    """:func:`run` at the command line's sizes: the full run, or with ``quick`` small sizes in seconds."""
    if quick:
        return run(
            tokens=(1, 64),
            dtypes=("float16", "bfloat16", "float32"),
            pools=(4096, 65536),
            repeats=repeats or 5,
            pool_tokens=16,
            out_dir=out_dir,
            plot=plot,
            command=command,
        )
    return run(repeats=repeats or 10, out_dir=out_dir, plot=plot, command=command)
