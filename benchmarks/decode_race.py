"""The decode op's own cost: ``rope_pool_fused`` at T = 1 against what a user would write instead.

    .venv/bin/python benchmarks/decode_race.py                    # Llama-3-8B heads, every dtype, 150 calls
    .venv/bin/python benchmarks/decode_race.py --heads 9 3 64     # SmolLM2's heads (what the engine pays)

One process; two races per dtype, each calling its methods in turn, in a new random order each
round, each with its own pools rebound after every call (:func:`ropepool.cli.bench.compare`);
medians of ``--repeats`` calls. MLX inputs: ropepool (as the engine calls it, and in place)
against the composition, ``mx.fast.rope`` on q and on k plus ``pool[slots] = rows`` for k and v.
NumPy inputs: ropepool in place against a NumPy implementation. The two races run apart: a NumPy
call between MLX calls lets MLX's worker thread fall asleep and would charge its wake-up to
whichever MLX method follows.
Prints each median, the ratios and the targets met or MISS.
"""

from __future__ import annotations

import argparse
import os

import mlx.core as mx

from ropepool.backends import best_backend
from ropepool.cli.bench import compare
from ropepool.shapes import Shapes

TARGET_MX = 1.5  # ropepool at least this much faster than the composition, mx inputs
TARGET_NUMPY = 1.0  # ropepool on NumPy inputs at least as fast as the NumPy implementation
MLX_RACE = ("ropepool", "ropepool-inplace", "mx.fast.rope")
NUMPY_RACE = ("ropepool-inplace-np", "numpy")
LLAMA3_8B_HEADS = (32, 8, 128)  # Hq, Hkv, D


def race(dtype: str, repeats: int, methods=MLX_RACE, *, tokens: int = 1, heads=LLAMA3_8B_HEADS, pool: int = 4096):
    """One race of ``methods`` (:func:`ropepool.cli.bench.compare`) at ``tokens`` tokens of ``heads``
    (Hq, Hkv, D) and ``pool`` rows: ``{method: Timing}``, medians of ``repeats`` interleaved calls."""
    shapes = Shapes(tokens, *heads, pool)
    return {r.method: r for r in compare(shapes, dtype, repeats, methods=methods)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", type=int, nargs=3, default=LLAMA3_8B_HEADS, metavar=("HQ", "HKV", "D"))
    ap.add_argument("--pool", type=int, default=4096, help="pool rows P")
    ap.add_argument("--repeats", type=int, default=150)
    ap.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16", "float32"])
    args = ap.parse_args(argv)
    Hq, Hkv, D = args.heads
    print(
        f"rope_pool_fused at T=1, Hq={Hq}, Hkv={Hkv}, D={D}, P={args.pool}; backend {best_backend()} on "
        f"{mx.default_device()}; medians of {args.repeats} interleaved calls; load {os.getloadavg()[0]:.1f}"
    )
    checks = []
    for dtype in args.dtypes:
        rows = race(dtype, args.repeats, heads=args.heads, pool=args.pool)
        if dtype != "bfloat16":  # NumPy has no bfloat16
            rows.update(race(dtype, args.repeats, NUMPY_RACE, heads=args.heads, pool=args.pool))
        print(f"\n{dtype}: " + ", ".join(f"{m} {r.median_ms * 1e3:.0f} us" for m, r in rows.items()))
        comp = rows["mx.fast.rope"].median_ms
        for m in ("ropepool", "ropepool-inplace"):
            x = comp / rows[m].median_ms
            checks.append((f"{dtype:<9} {m:<17} {x:.2f}x the composition", x >= TARGET_MX))
        if "numpy" in rows:
            x = rows["numpy"].median_ms / rows["ropepool-inplace-np"].median_ms
            checks.append((f"{dtype:<9} NumPy inputs      {x:.2f}x the NumPy implementation", x >= TARGET_NUMPY))
    print(f"\nTargets (>= {TARGET_MX}x mx.fast.rope + scatter; NumPy inputs >= {TARGET_NUMPY}x NumPy)")
    print("\n".join(f"  {'met ' if ok else 'MISS'}  {text}" for text, ok in checks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
