"""One-shot check of ropepool's CUDA kernel on an NVIDIA GPU: the one script for such a machine.

Runs in one go on a machine with **no network**, Python 3.10+, NumPy, CuPy (``cupy-cuda13x``) and NVIDIA's
CUDA 13 wheels (``nvidia-cuda-nvrtc``, ``nvidia-cuda-runtime``, ``nvidia-cuda-cccl``); MLX is
optional (its CUDA wheel is 90 MB). From the repository root::

    python benchmarks/cuda_check.py            # a minute or two; exit status 0 only if every check passed
    python benchmarks/cuda_check.py --quick    # fewer tokens and repeats

(a) CuPy. The text ``mx.fast.cuda_kernel`` would compile (:func:`benchmarks.nvrtc.kernel_text`,
    built from the kernel's own source) compiled by CuPy's ``RawModule`` (NVRTC) and run:

    * every dtype at every preset's (Hq, Hkv, D) plus MQA D = 2, T = 1 and T = 37: q_rot and
      k_rot against the float64 reference (:mod:`ropepool.reference`);
    * the guarded in-kernel pool write (``RP_WRITE_POOL``) with guard rows before and after
      both pools and slots -1, -5, P, P + 1, 2**31 - 1 mixed in: written rows hold k_rot's and
      v's exact bits, every other row and every guard row is unchanged;
    * timings (CUDA events, medians) at Llama-3-8B heads, T in {1, 64, 2048}: the kernel
      against a device-to-device copy of the same number of bytes (GB/s, fraction of copy).
(b) MLX. With MLX's CUDA back-end (``pip install -e '.[cuda]'``): ``rotate_cuda`` and ``pool_write`` against the
    reference, out-of-range slots, ``backend="auto"``. Otherwise skipped, with the reason.

Out: ``<out>/cuda_check.json`` (every check and timing) and ``<out>/cuda_check.svg`` (fraction of
copy bandwidth per dtype and T). MLX's CUDA back-end caches PTX on disk by kernel name;
ropepool's names carry a hash of the source, so a stale cache cannot run old code.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _mlx_importable() -> bool:
    try:
        import mlx.core  # noqa: F401
    except Exception:  # absent, or present without a back-end for this machine
        return False
    return True


HAVE_MLX = _mlx_importable()
if not HAVE_MLX:
    # ropepool's package __init__ files import MLX; the modules this part needs do not. Make the
    # two packages bare namespaces so that importing those modules runs only their own code.
    for _name, _path in (("ropepool", ROOT / "ropepool"), ("ropepool.kernels", ROOT / "ropepool" / "kernels")):
        if _name not in sys.modules:  # the package, its __init__ not run
            _spec = importlib.util.spec_from_file_location(
                _name, _path / "__init__.py", submodule_search_locations=[str(_path)]
            )
            sys.modules[_name] = importlib.util.module_from_spec(_spec)

from ropepool import models  # noqa: E402
from benchmarks import nvrtc  # noqa: E402
from ropepool.kernels import source  # noqa: E402
from ropepool.reference import rotate  # noqa: E402
from ropepool.rope import Rope, plain, rope_table  # noqa: E402
from ropepool.tolerance import pair_norms  # noqa: E402
from ropepool.tolerance import error_bound  # noqa: E402

DTYPES = ("float32", "float16", "bfloat16")
ITEM_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
GUARD_ROWS = 2
ROPE_BASE = 10000.0
# (name, Hq, Hkv, D): every preset's heads, and the awkward corner.
CASES = [
    (n, models.preset(n).num_qo_heads, models.preset(n).num_kv_heads, models.preset(n).head_dim)
    for n in models.preset_names()
] + [("gpt-j-6b", 16, 16, 256), ("mqa-d2", 2, 1, 2)]
#: Each case's rotation: the preset's own (scaling, partial rotary), GPT-J pairs, plain RoPE.
ROPES = {
    **{n: models.preset(n).rope() for n in models.preset_names()},
    "gpt-j-6b": rope_table(256, ROPE_BASE, rotary_dim=64, is_neox=False),
    "mqa-d2": plain(2, ROPE_BASE),
}
LLAMA3_8B = (32, 8, 128)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Check ropepool's CUDA kernel on an NVIDIA GPU (CuPy; MLX if present).")
    p.add_argument("--out", default="artifacts", help="folder for cuda_check.json and cuda_check.svg")
    p.add_argument("--repeats", type=int, default=50, help="timed launches per measurement (median)")
    p.add_argument(
        "--tokens",
        type=lambda s: [int(t) for t in s.split(",")],
        default=[1, 64, 2048],
        help="comma-separated T values for the timings (Llama-3-8B heads)",
    )
    p.add_argument("--quick", action="store_true", help="T = 1,64 and 10 repeats")
    p.add_argument("--skip-mlx", action="store_true", help="skip part (b) even where MLX's CUDA back-end imports")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats must be at least 1, got {args.repeats}")
    if any(t < 1 for t in args.tokens):
        p.error(f"--tokens must be positive, got {args.tokens}")
    if args.quick:
        args.repeats, args.tokens = min(args.repeats, 10), [t for t in args.tokens if t <= 64] or [1]
    return args


# ---------------------------------------------------------------------------------------------
# CPU side: storage formats, the reference comparison, the pool check (tested in tests/test_cuda_check.py)


def bfloat16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (uint16), rounded to nearest even as CUDA's ``__float2bfloat16_rn``."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def to_storage(x: np.ndarray, dtype: str) -> np.ndarray:
    """What the kernel reads for ``dtype``: float32, float16, or bfloat16 as uint16 bits."""
    return bfloat16_bits(x) if dtype == "bfloat16" else np.asarray(x, dtype)


def to_float64(stored: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return (stored.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return stored.astype(np.float64)


def poisoned(shape, dtype: str) -> np.ndarray:
    """NaN in ``dtype``'s storage: an element the kernel leaves unwritten shows in the comparison."""
    if dtype == "bfloat16":
        return np.full(shape, 0x7FC0, np.uint16)
    return np.full(shape, np.nan, dtype)


def bits(stored: np.ndarray) -> np.ndarray:
    """The raw bits of a stored array, for bit-exact comparisons."""
    return stored.view({4: np.uint32, 2: np.uint16}[stored.dtype.itemsize])


def rotation_error(
    got: np.ndarray, x: np.ndarray, positions: np.ndarray, dtype: str, rope: Rope | None = None
) -> tuple[float, float]:
    """``(max |got - reference|, tolerance)`` for a rotated ``[T, H, D]`` (both float64).

    Tolerance: :func:`ropepool.tolerance.error_bound` at the largest position, times the largest
    pair norm. A NaN anywhere counts as an infinite error.
    """
    rope = rope or plain(x.shape[-1], ROPE_BASE)
    want = rotate(x, positions, rope)  # [T, H, D]
    r = float(max(pair_norms(x, rope).max(), np.abs(x).max())) if x.size else 0.0
    tol = float(error_bound(dtype, float(np.max(positions, initial=0)), r))
    diff = np.abs(got - want)
    err = float("inf") if np.isnan(diff).any() else float(diff.max(initial=0.0))
    return err, tol


def pool_problems(after: np.ndarray, before: np.ndarray, rows: np.ndarray, slots: np.ndarray, guard: int) -> list[str]:
    """What is wrong with a pool buffer ``[guard + P + guard, Hkv, D]`` after the guarded write.

    ``rows [T, Hkv, D]`` are what slot ``slots[t]`` should hold, bit for bit, where
    ``0 <= slots[t] < P``; every other pool row and every guard row must be unchanged.
    """
    a, b, r = bits(after), bits(before), bits(rows)
    P = a.shape[0] - 2 * guard
    problems = []
    if not (np.array_equal(a[:guard], b[:guard]) and np.array_equal(a[guard + P :], b[guard + P :])):
        problems.append("a guard row changed (a write outside the pool)")
    valid = [(t, int(s)) for t, s in enumerate(slots) if 0 <= s < P]
    for t, s in valid:
        if not np.array_equal(a[guard + s], r[t]):
            problems.append(f"pool row {s} (token {t}) differs from the expected bits")
            break
    untouched = np.setdiff1d(np.arange(P), [s for _, s in valid])
    if not np.array_equal(a[guard + untouched], b[guard + untouched]):
        problems.append("an untouched pool row changed")
    return problems


def make_case(T: int, Hq: int, Hkv: int, D: int, dtype: str, seed: int) -> dict:
    """NumPy inputs for one case: stored q, k, v; positions; slots over P = T + 8 with bad slots mixed in."""
    rng = np.random.default_rng(seed)
    P = T + 8
    slots = rng.permutation(P)[:T].astype(np.int32)
    for t, bad in zip(range(0, T, 3), (-1, P, -5, 2**31 - 1, P + 1)):
        slots[t] = bad
    return {
        "q": to_storage(rng.standard_normal((T, Hq, D)).astype(np.float32), dtype),  # [T, Hq, D]
        "k": to_storage(rng.standard_normal((T, Hkv, D)).astype(np.float32), dtype),  # [T, Hkv, D]
        "v": to_storage(rng.standard_normal((T, Hkv, D)).astype(np.float32), dtype),  # [T, Hkv, D]
        "positions": rng.integers(0, 100_000, T).astype(np.int32),  # [T]
        "slots": slots,  # [T]
        "pool_rows": P,
    }


def moved_bytes(T: int, Hq: int, Hkv: int, D: int, dtype: str, write_pool: bool) -> int:
    """Bytes one launch reads and writes: q and k in, q_rot and k_rot out (and v in, two pool rows out)."""
    rows = T * (Hq + Hkv) * D * ITEM_BYTES[dtype]
    extra = 3 * T * Hkv * D * ITEM_BYTES[dtype] if write_pool else 0
    return 2 * rows + extra + 4 * T + 4 * (D // 2) + (4 * T if write_pool else 0)


class Checks:
    """Every check's name, result and detail, printed as it happens."""

    def __init__(self):
        self.rows: list[dict] = []

    def record(self, name: str, ok: bool, detail: str = "") -> None:
        self.rows.append({"check": name, "ok": bool(ok), "detail": detail})
        print(f"{'PASS' if ok else 'FAIL'}  {name}  {detail}", flush=True)

    def guard(self, name: str, fn, *args):
        try:
            return fn(*args)
        except Exception:
            self.record(name, False, traceback.format_exc(limit=4).replace("\n", " | "))
            return None


# ---------------------------------------------------------------------------------------------
# (a) CuPy


def _shape_arg(first: int):
    """A ``Shape`` (``cuda::std::array<int32_t, MAX_NDIM>``) by value, as a NumPy structured scalar."""
    value = np.zeros((), np.dtype([("v", np.int32, (nvrtc.MAX_NDIM,))]))
    value["v"][0] = first
    return value[()]


class CupyKernels:
    """CuPy modules for the kernel's specialisations, compiled once each by ``RawModule``."""

    def __init__(self, cp):
        self.cp = cp
        self.modules = {}
        self._headers = tempfile.TemporaryDirectory(prefix="ropepool-cuda-")  # removed with this object
        self.include = Path(self._headers.name)
        for name, text in nvrtc.device_headers().items():  # the stand-in utils.cuh where MLX's is absent
            (self.include / name).parent.mkdir(parents=True, exist_ok=True)
            (self.include / name).write_text(text)
        self.options = tuple(f"--include-path={d}" for d in [self.include, *nvrtc.include_dirs()])

    def function(self, dtype, Hq, Hkv, D, write_pool, rope: Rope):
        kernel = nvrtc.kernel_text(
            dtype, Hq, Hkv, D, rotary_dim=rope.rotary_dim, is_neox=rope.is_neox, write_pool=write_pool
        )
        if kernel.name not in self.modules:
            mod = self.cp.RawModule(code=kernel.text, options=self.options, name_expressions=[kernel.qualified_name])
            self.modules[kernel.name] = (kernel, mod.get_function(kernel.qualified_name))
        return self.modules[kernel.name]

    def launch(self, dtype, Hq, Hkv, D, arrays: dict, write_pool=False, rope: Rope | None = None):
        """One launch over whole blocks of ``source.BLOCK`` threads, arguments in the kernel's order."""
        kernel, fn = self.function(dtype, Hq, Hkv, D, write_pool, rope or plain(D, ROPE_BASE))
        T = int(arrays["positions"].shape[0])
        grid = source.grid_size(T, Hq, Hkv, D)
        args = []
        for name, kind in kernel.params:
            if kind == "shape":
                args.append(_shape_arg(int(arrays[name[: -len("_shape")]].shape[0])))
            else:
                args.append(arrays[name])
        fn(((grid + source.BLOCK - 1) // source.BLOCK,), (source.BLOCK,), tuple(args))


def check_rotation_and_pool(
    cp, kernels: CupyKernels, checks: Checks, name, Hq, Hkv, D, dtype, T, rope: Rope | None = None
):
    rope = rope or plain(D, ROPE_BASE)
    case = make_case(T, Hq, Hkv, D, dtype, seed=T * 1000 + D)
    P, g = case["pool_rows"], GUARD_ROWS
    dev = {n: cp.asarray(case[n]) for n in ("q", "k", "v", "positions", "slots")}
    dev["inv_freq"] = cp.asarray(np.ascontiguousarray(rope.inv_freq32()))  # [RD/2]
    dev["cos_sin_scale"] = cp.asarray(np.array([rope.scale], np.float32))
    label = f"{name} {dtype} T={T} Hq={Hq} Hkv={Hkv} D={D}"

    # "mlx": the text MLX compiles (rotation only); "pool": the guarded in-kernel pool write.
    for variant in ("mlx", "pool"):
        out = {n: cp.asarray(poisoned(case[src].shape, dtype)) for n, src in (("q_rot", "q"), ("k_rot", "k"))}
        arrays = {**dev, **out}
        if variant == "pool":
            rng = np.random.default_rng(D)
            pools = {
                n: to_storage(rng.standard_normal((g + P + g, Hkv, D)).astype(np.float32), dtype)
                for n in ("k_pool", "v_pool")
            }  # [g + P + g, Hkv, D]
            dev_pools = {n: cp.asarray(p) for n, p in pools.items()}
            arrays.update({n: p[g : g + P] for n, p in dev_pools.items()})  # the kernel sees rows g .. g+P-1
        kernels.launch(dtype, Hq, Hkv, D, arrays, write_pool=(variant == "pool"), rope=rope)
        cp.cuda.runtime.deviceSynchronize()
        problems = []
        for out_name, src in (("q_rot", "q"), ("k_rot", "k")):
            got = to_float64(cp.asnumpy(out[out_name]), dtype)
            err, tol = rotation_error(got, to_float64(case[src], dtype), case["positions"], dtype, rope)
            if not err <= tol:
                problems.append(f"{out_name} error {err:.3g} > {tol:.3g}")
        if variant == "pool":
            k_rot = cp.asnumpy(out["k_rot"])
            problems += [
                "k_pool: " + p
                for p in pool_problems(cp.asnumpy(dev_pools["k_pool"]), pools["k_pool"], k_rot, case["slots"], g)
            ]
            problems += [
                "v_pool: " + p
                for p in pool_problems(cp.asnumpy(dev_pools["v_pool"]), pools["v_pool"], case["v"], case["slots"], g)
            ]
        checks.record(f"cupy {variant:<4} {label}", not problems, "; ".join(problems))


def _median_ms(cp, fn, repeats: int) -> float:
    fn()  # warm-up (and compile)
    cp.cuda.runtime.deviceSynchronize()
    times = []
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return float(np.median(times))


def time_against_copy(cp, kernels: CupyKernels, dtype: str, T: int, write_pool: bool, repeats: int) -> dict:
    """Median kernel time against a device-to-device copy moving the same bytes (read + write)."""
    Hq, Hkv, D = LLAMA3_8B
    case = make_case(T, Hq, Hkv, D, dtype, seed=T)
    P = case["pool_rows"]
    arrays = {n: cp.asarray(case[n]) for n in ("q", "k", "v", "positions", "slots")}
    arrays["inv_freq"] = cp.asarray(np.ascontiguousarray(plain(D, ROPE_BASE).inv_freq32()))
    arrays["cos_sin_scale"] = cp.asarray(np.ones(1, np.float32))
    arrays["q_rot"], arrays["k_rot"] = cp.empty_like(arrays["q"]), cp.empty_like(arrays["k"])
    arrays["k_pool"] = cp.zeros((P, Hkv, D), arrays["k"].dtype)
    arrays["v_pool"] = cp.zeros((P, Hkv, D), arrays["k"].dtype)
    kernel_ms = _median_ms(cp, lambda: kernels.launch(dtype, Hq, Hkv, D, arrays, write_pool=write_pool), repeats)
    moved = moved_bytes(T, Hq, Hkv, D, dtype, write_pool)
    src, dst = cp.empty(moved // 2, cp.uint8), cp.empty(moved // 2, cp.uint8)  # a copy reads and writes moved/2
    copy_ms = _median_ms(cp, lambda: dst.data.copy_from_device(src.data, moved // 2), repeats)
    gbps = moved / (kernel_ms * 1e-3) / 1e9
    copy_gbps = moved / (copy_ms * 1e-3) / 1e9
    return {
        "dtype": dtype,
        "T": T,
        "variant": "pool" if write_pool else "mlx",
        "heads": list(LLAMA3_8B),
        "bytes": moved,
        "kernel_ms": kernel_ms,
        "copy_ms": copy_ms,
        "kernel_GBps": gbps,
        "copy_GBps": copy_gbps,
        "fraction_of_copy": gbps / copy_gbps,
    }


def part_cupy(args, checks: Checks) -> dict:
    try:
        import cupy as cp
    except Exception as err:
        checks.record("cupy imports", False, f"{type(err).__name__}: {err}")
        return {"skipped": f"CuPy does not import: {err}"}
    reason = nvrtc.unavailable_reason()
    if reason is not None:
        checks.record("CUDA headers for the kernel", False, reason)
        return {"skipped": reason}
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    env = {
        "gpu": props["name"].decode(),
        "compute_capability": dev.compute_capability,
        "cupy": cp.__version__,
        "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
        "nvrtc": list(nvrtc.version()),
        "device_headers": "MLX's" if not nvrtc.device_headers() else "ropepool's stand-in utils.cuh",
    }
    print(f"(a) CuPy {env['cupy']} on {env['gpu']} (sm_{env['compute_capability']}), NVRTC {env['nvrtc']}", flush=True)
    kernels = CupyKernels(cp)
    for name, Hq, Hkv, D in CASES:
        for dtype in DTYPES:
            for T in (1, 37):
                checks.guard(
                    f"cupy {name} {dtype} T={T}",
                    check_rotation_and_pool,
                    cp,
                    kernels,
                    checks,
                    name,
                    Hq,
                    Hkv,
                    D,
                    dtype,
                    T,
                    ROPES[name],
                )
    timings = []
    print(f"\nTimings at Llama-3-8B heads {LLAMA3_8B} (medians of {args.repeats}, CUDA events):", flush=True)
    for dtype in DTYPES:
        for T in args.tokens:
            for write_pool in (False, True):
                row = checks.guard(
                    f"timing {dtype} T={T}", time_against_copy, cp, kernels, dtype, T, write_pool, args.repeats
                )
                if row:
                    timings.append(row)
                    print(
                        f"  {dtype:<9} T={T:<5} {row['variant']:<4} kernel {row['kernel_ms']:.4f} ms "
                        f"{row['kernel_GBps']:7.1f} GB/s, copy {row['copy_ms']:.4f} ms {row['copy_GBps']:7.1f} GB/s, "
                        f"{row['fraction_of_copy']:.2f} of copy",
                        flush=True,
                    )
    return {"environment": env, "timings": timings}


# ---------------------------------------------------------------------------------------------
# (b) MLX's CUDA back-end


def mlx_skip_reason() -> str | None:
    """Why part (b) cannot run here, or None."""
    if not HAVE_MLX:
        return "MLX does not import here (pip install -e '.[cuda]' installs mlx[cuda13])"
    import mlx.core as mx

    if not (hasattr(mx, "cuda") and mx.cuda.is_available()):
        return f"MLX {mx.__version__} imports but has no CUDA back-end (mx.cuda.is_available() is False)"
    return None


def part_mlx(checks: Checks) -> dict:
    import mlx.core as mx

    import ropepool
    from ropepool import pool_write
    from ropepool.kernels import fused
    from ropepool.shapes import Shapes

    def f64(a):
        return np.array(a.astype(mx.float32), np.float64)

    def mbits(a):
        return np.array(a.view(mx.uint32 if a.dtype == mx.float32 else mx.uint16))

    def kernel_case(name, T, Hq, Hkv, D, dtype, rope):
        P = T + 4
        slots = [int(s) for s in np.random.default_rng(T + D).permutation(P)[:T]]
        slots[T // 2] = -1
        positions = [int(p) for p in np.random.default_rng(D).integers(0, 100_000, T)]
        kw = ropepool.make_inputs(Shapes(T, Hq, Hkv, D, P), dtype, slots=slots, positions=positions)
        before = (mbits(kw["k_pool"]), mbits(kw["v_pool"]))
        q_rot, k_rot, k_rows, v_rows = fused.rotate_cuda(kw["q"], kw["k"], kw["v"], kw["positions"], rope=rope)
        out = (
            q_rot,
            k_rot,
            *pool_write.write(pool_write.plan(np.array(slots), P), kw["k_pool"], kw["v_pool"], k_rows, v_rows),
        )
        mx.eval(*out)
        problems = []
        for label, got, x in (("q_rot", out[0], kw["q"]), ("k_rot", out[1], kw["k"])):
            err, tol = rotation_error(f64(got), f64(x), np.array(positions), dtype, rope)
            if not err <= tol:
                problems.append(f"{label} error {err:.3g} > {tol:.3g}")
        written = [t for t in range(T) if slots[t] >= 0]
        if not np.array_equal(mbits(out[2])[[slots[t] for t in written]], mbits(out[1])[written]):
            problems.append("k_pool rows differ from k_rot bits")
        if not np.array_equal(mbits(out[3])[[slots[t] for t in written]], mbits(kw["v"])[written]):
            problems.append("v_pool rows differ from v bits")
        untouched = np.setdiff1d(np.arange(P), [s for s in slots if s >= 0])
        if not (
            np.array_equal(mbits(out[2])[untouched], before[0][untouched])
            and np.array_equal(mbits(out[3])[untouched], before[1][untouched])
        ):
            problems.append("an untouched pool row changed")
        checks.record(f"mlx kernel {name} {dtype} T={T}", not problems, "; ".join(problems))

    def out_of_range(dtype):
        P = 6
        kw = ropepool.make_inputs(Shapes(4, 8, 2, 16, P), dtype, slots=[P, P + 1, 2**31 - 1, -5])
        before = (mbits(kw["k_pool"]), mbits(kw["v_pool"]))
        out = ropepool.rope_pool_fused(**kw, backend="cuda", check_values=False)
        mx.eval(*out)
        checks.record(
            f"mlx out-of-range slots write nothing ({dtype})",
            np.array_equal(mbits(out[2]), before[0]) and np.array_equal(mbits(out[3]), before[1]),
        )

    def auto_picks_cuda(dtype):
        kw = ropepool.make_inputs(Shapes(16, 32, 8, 128, 64), dtype, positions=list(range(1000, 1016)))
        picked = ropepool.best_backend()
        a = ropepool.rope_pool_fused(**kw)
        b = ropepool.rope_pool_fused(**kw, backend="mlx")
        mx.eval(*a, *b)
        worst = max(float(np.abs(f64(x) - f64(y)).max()) for x, y in zip(a[:2], b[:2]))
        bound = 2 * float(error_bound(dtype, 1015, 8))  # each within the bound of the reference; pairs < 8
        checks.record(
            f"mlx auto picks cuda and agrees with the MLX path ({dtype})",
            picked == "cuda" and worst <= bound,
            f"auto={picked!r}, max |cuda - mlx| = {worst:.3g}",
        )

    print(f"\n(b) MLX {mx.__version__}, default device {mx.default_device()}", flush=True)
    for name, Hq, Hkv, D in CASES:
        for dtype in DTYPES:
            for T in (1, 37):
                checks.guard(f"mlx kernel {name} {dtype} T={T}", kernel_case, name, T, Hq, Hkv, D, dtype, ROPES[name])
    for dtype in DTYPES:
        checks.guard(f"mlx out-of-range {dtype}", out_of_range, dtype)
        checks.guard(f"mlx auto {dtype}", auto_picks_cuda, dtype)
    return {"mlx": mx.__version__, "device": str(mx.default_device())}


# ---------------------------------------------------------------------------------------------
# Output


def svg_plot(timings: list[dict], title: str) -> str:
    """A bar chart (no plotting library needed): the kernel's fraction of copy bandwidth per dtype and T."""
    bars = timings
    width, height, left, bottom, top = 80 + 46 * max(1, len(bars)), 320, 60, 70, 40
    plot_h = height - bottom - top
    scale = max([1.0] + [b["fraction_of_copy"] for b in bars])
    colors = {"mlx": "#3b6ea5", "pool": "#d08c2f"}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        f'font-size="11">',
        f'<text x="{left}" y="20" font-size="13">{title}</text>',
    ]
    for frac in (0.25, 0.5, 0.75, 1.0):
        y = top + plot_h * (1 - frac / scale)
        out.append(
            f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ccc"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{frac:.2f}</text>'
        )
    for i, b in enumerate(bars):
        h = plot_h * b["fraction_of_copy"] / scale
        x = left + 10 + 46 * i
        out.append(
            f'<rect x="{x}" y="{top + plot_h - h:.1f}" width="36" height="{h:.1f}" fill="{colors[b["variant"]]}"/>'
        )
        out.append(
            f'<text x="{x + 18}" y="{height - bottom + 14}" text-anchor="middle">{b["dtype"][:4]}</text>'
            f'<text x="{x + 18}" y="{height - bottom + 28}" text-anchor="middle">T={b["T"]}</text>'
            f'<text x="{x + 18}" y="{height - bottom + 42}" text-anchor="middle">{b["variant"]}</text>'
        )
    out.append(
        f'<text x="12" y="{top + plot_h / 2}" transform="rotate(-90 12 {top + plot_h / 2})" '
        f'text-anchor="middle">fraction of copy bandwidth</text></svg>'
    )
    return "\n".join(out)


def main(argv=None) -> int:
    args = parse_args(argv)
    checks = Checks()
    report = {
        "platform": f"{platform.system()} {platform.machine()}, Python {platform.python_version()}",
        "kernel": source.kernel_name("cuda"),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    start = time.perf_counter()
    report["cupy"] = part_cupy(args, checks)
    skip = "--skip-mlx given" if args.skip_mlx else mlx_skip_reason()
    if skip is None:
        report["mlx"] = checks.guard("mlx part", part_mlx, checks) or {}
    else:
        print(f"\n(b) MLX path skipped: {skip}", flush=True)
        report["mlx"] = {"skipped": skip}
    report["seconds"] = time.perf_counter() - start
    report["checks"] = checks.rows
    passed = sum(r["ok"] for r in checks.rows)
    report["passed"], report["total"] = passed, len(checks.rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cuda_check.json").write_text(json.dumps(report, indent=2))
    gpu = report["cupy"].get("environment", {}).get("gpu", "no GPU")
    (out / "cuda_check.svg").write_text(
        svg_plot(report["cupy"].get("timings", []), f"ropepool CUDA kernel vs a device copy of the same bytes ({gpu})")
    )
    print(
        f"\n{passed}/{len(checks.rows)} checks passed in {report['seconds']:.0f} s; "
        f"wrote {out / 'cuda_check.json'} and {out / 'cuda_check.svg'}"
    )
    return 0 if checks.rows and passed == len(checks.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
