"""One-shot check of ropepool's fused kernel on an NVIDIA GPU (MLX's CUDA back-end).

Not yet run by this project: no session so far had an NVIDIA machine. Prepared so that a
session that gets one can run it in one go (device time is short):

    pip install -e '.[cuda]'          # mlx[cuda13]; the CUDA toolkit headers must be findable
    python benchmarks/cuda_check.py   # about a minute; exit status 0 only if every check passed

What it does, printing one line per check and a pass/fail table at the end:

1. environment: MLX version, default device, ``mx.cuda.is_available()``, ropepool's backends;
2. the kernel alone (``ropepool.kernels.fused.rope_pool_cuda``) against the float64 reference,
   over MHA / GQA (Llama-3-8B) / MQA, D = 2 .. 256, T in {1, irregular}, each dtype, with
   slot -1 skipped; pool rows bit-identical to k_rot; untouched rows unchanged;
3. out-of-range slots with values unchecked (P, P+1, 2**31-1, -5): pools unchanged;
4. the public op with ``backend="auto"`` picks cuda and agrees with the MLX path on the GPU;
5. timings (medians, ms) at Llama-3-8B shapes: cuda kernel vs the MLX path vs
   ``mx.fast.rope`` + scatter, and per-call time at P = 4,096 vs 1,048,576.

MLX caches compiled PTX on disk by kernel name; ropepool's kernel names carry a hash of the
source, so a stale cache cannot run old code. Set MLX_PTX_CACHE_DIR to a fresh folder to be sure.
"""

from __future__ import annotations

import sys
import time
import traceback

import mlx.core as mx
import numpy as np

import ropepool
from ropepool.kernels import fused, source
from ropepool.reference import rope_pool_reference
from ropepool.shapes import Shapes

ORDER = ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")
EPS = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}
DTYPES = ("float32", "float16", "bfloat16")
# (name, T, Hq, Hkv, D)
CASES = [("mha", 5, 4, 4, 8), ("gqa-llama3", 7, 32, 8, 128), ("mqa", 3, 4, 1, 64), ("d2", 4, 2, 1, 2),
         ("d256", 2, 4, 2, 256), ("t1-decode", 1, 32, 8, 128), ("t-irregular", 37, 8, 2, 96)]

results: list[tuple[str, bool, str]] = []


def record(name: str, ok: bool, detail: str = "") -> None:
    results.append((name, ok, detail))
    print(f"{'PASS' if ok else 'FAIL'}  {name}  {detail}", flush=True)


def f64(a) -> np.ndarray:
    return np.array(a.astype(mx.float32), np.float64)


def bits(a) -> np.ndarray:
    return np.array(a.view(mx.uint32 if a.dtype == mx.float32 else mx.uint16))


def check_case(name, T, Hq, Hkv, D, dtype):
    P = T + 4
    slots = [int(s) for s in np.random.default_rng(T + D).permutation(P)[:T]]
    slots[T // 2] = -1
    positions = [int(p) for p in np.random.default_rng(D).integers(0, 100_000, T)]
    kw = ropepool.make_inputs(Shapes(T, Hq, Hkv, D, P), dtype, slots=slots, positions=positions)
    args = [kw[n] for n in ORDER]
    before = (bits(kw["k_pool"]), bits(kw["v_pool"]))
    out = fused.rope_pool_cuda(*args, rope_base=kw["rope_base"])
    mx.eval(*out)
    ref = rope_pool_reference(*args, rope_base=kw["rope_base"])
    problems = []
    for label, got, want, x in (("q_rot", out[0], ref[0], kw["q"]), ("k_rot", out[1], ref[1], kw["k"])):
        r = np.abs(f64(x)).max() * np.sqrt(2)
        tol = r * (2 * EPS[dtype] + 2.0**-22 * (max(positions) + 1))
        err = np.abs(f64(got) - want).max()
        if not err <= tol:
            problems.append(f"{label} error {err:.3g} > {tol:.3g}")
    written = [t for t in range(T) if slots[t] >= 0]
    if not np.array_equal(bits(out[2])[[slots[t] for t in written]], bits(out[1])[written]):
        problems.append("k_pool rows differ from k_rot bits")
    if not np.array_equal(bits(out[3])[[slots[t] for t in written]], bits(kw["v"])[written]):
        problems.append("v_pool rows differ from v bits")
    untouched = np.setdiff1d(np.arange(P), [slots[t] for t in written])
    if not (np.array_equal(bits(out[2])[untouched], before[0][untouched])
            and np.array_equal(bits(out[3])[untouched], before[1][untouched])):
        problems.append("an untouched pool row changed")
    record(f"kernel {name} {dtype} T={T} Hq={Hq} Hkv={Hkv} D={D}", not problems, "; ".join(problems))


def check_out_of_range(dtype):
    P = 6
    kw = ropepool.make_inputs(Shapes(4, 8, 2, 16, P), dtype, slots=[P, P + 1, 2**31 - 1, -5])
    before = (bits(kw["k_pool"]), bits(kw["v_pool"]))
    out = ropepool.rope_pool_fused(**kw, backend="cuda", check_values=False)
    mx.eval(*out)
    ok = np.array_equal(bits(out[2]), before[0]) and np.array_equal(bits(out[3]), before[1])
    record(f"out-of-range slots write nothing ({dtype})", ok)


def check_auto_and_mlx_path(dtype):
    kw = ropepool.make_inputs(Shapes(16, 32, 8, 128, 64), dtype, positions=list(range(1000, 1016)))
    picked = ropepool.best_backend()
    a = ropepool.rope_pool_fused(**kw)
    b = ropepool.rope_pool_fused(**kw, backend="mlx")
    mx.eval(*a, *b)
    worst = max(float(np.abs(f64(x) - f64(y)).max()) for x, y in zip(a[:2], b[:2]))
    bound = 8 * EPS[dtype] * 4 + 2.0**-22 * 1016 * 8
    record(f"auto picks cuda and agrees with the MLX path on the GPU ({dtype})", picked == "cuda" and worst <= bound,
           f"auto={picked!r}, max |cuda - mlx| = {worst:.3g}")


def median_ms(fn, repeats=20, warmup=3):
    ts = []
    for i in range(warmup + repeats):
        t0 = time.perf_counter()
        fn()
        if i >= warmup:
            ts.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(ts))


def timings():
    from ropepool.bench import LLAMA3_8B, compare

    print("\nTimings (medians, ms; ropepool = backend 'auto'):", flush=True)
    for dtype in DTYPES:
        for T in (1, 64, 2048):
            rows = compare(Shapes(T, pool_rows=4096, **LLAMA3_8B), dtype, repeats=10,
                           methods=("ropepool", "ropepool-unchecked", "mx.fast.rope", "copy (mlx)"))
            print(f"  {dtype:<9} T={T:<5} " + "  ".join(f"{r.method} {r.median_ms:.3f}" for r in rows), flush=True)
    for P in (4096, 1048576):
        rows = compare(Shapes(64, pool_rows=P, **LLAMA3_8B), "float16", repeats=10, methods=("ropepool",))
        print(f"  float16 T=64 P={P:<8} ropepool {rows[0].median_ms:.3f}", flush=True)


def main() -> int:
    print(f"mlx {mx.__version__}, default device {mx.default_device()}, "
          f"cuda available: {hasattr(mx, 'cuda') and mx.cuda.is_available()}")
    for status in ropepool.available_backends().values():
        print(f"  {status}")
    print(f"kernel name: {source.kernel_name('cuda')}", flush=True)
    if not (hasattr(mx, "cuda") and mx.cuda.is_available()):
        record("CUDA back-end present", False, "mx.cuda.is_available() is False: nothing to check here")
    else:
        for name, T, Hq, Hkv, D in CASES:
            for dtype in DTYPES:
                try:
                    check_case(name, T, Hq, Hkv, D, dtype)
                except Exception:
                    record(f"kernel {name} {dtype}", False, traceback.format_exc(limit=3).replace("\n", " | "))
        for dtype in DTYPES:
            for check in (check_out_of_range, check_auto_and_mlx_path):
                try:
                    check(dtype)
                except Exception:
                    record(f"{check.__name__} {dtype}", False, traceback.format_exc(limit=3).replace("\n", " | "))
        try:
            timings()
        except Exception:
            record("timings", False, traceback.format_exc(limit=3).replace("\n", " | "))
    passed = sum(ok for _, ok, _ in results)
    print(f"\n{'check':<70} result")
    for name, ok, _ in results:
        print(f"{name:<70} {'pass' if ok else 'FAIL'}")
    print(f"\n{passed}/{len(results)} checks passed")
    return 0 if results and passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
