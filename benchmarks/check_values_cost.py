"""What ``check_values`` costs a call: ``rope_pool_fused`` with the values checked (the default)
against ``check_values=False``, interleaved call by call in one process, pools rebound after
every call, medians and their ratio.

    PYTHONPATH=$PWD python benchmarks/check_values_cost.py [--calls 300] [--backends cpu mlx]

Cases: a decode step (T = 1, one slot) and a prefill of 16 tokens into consecutive rows,
SmolLM2-135M's attention shapes (Hq 9, Hkv 3, D 64), float32, a pool of 4096 rows, mx.arrays.
"""

from __future__ import annotations

import argparse
import os
import random
import time

import mlx.core as mx
import numpy as np

import ropepool
from ropepool.shapes import Shapes

CASES = [  # (label, T, first slot)
    ("decode T=1", 1, 17),
    ("prefill T=16, consecutive rows", 16, 100),
]


def race(backend: str, T: int, start: int, calls: int, warmup: int) -> dict[bool, float]:
    """Median seconds per call for check_values True and False, interleaved in a random order per round."""
    kw = ropepool.make_inputs(
        Shapes(T, 9, 3, 64, 4096), "float32", slots=list(range(start, start + T)), positions=list(range(1000, 1000 + T))
    )
    args = {n: kw[n] for n in ("q", "k", "v", "positions", "slots")}
    rest = dict(head_dim=64, num_qo_heads=9, num_kv_heads=3, rope_base=1e5, backend=backend)
    pools = {c: (mx.array(kw["k_pool"]), mx.array(kw["v_pool"])) for c in (True, False)}
    mx.eval(*pools[True], *pools[False])
    times: dict[bool, list] = {True: [], False: []}
    rng = random.Random(0)
    for i in range(warmup + calls):
        order = [True, False]
        rng.shuffle(order)
        for check in order:
            k_pool, v_pool = pools[check]
            t0 = time.perf_counter()
            out = ropepool.rope_pool_fused(**args, k_pool=k_pool, v_pool=v_pool, check_values=check, **rest)
            mx.eval(*out)
            dt = time.perf_counter() - t0
            pools[check] = out[2], out[3]  # rebound: MLX may donate the buffers
            if i >= warmup:
                times[check].append(dt)
    return {c: float(np.median(t)) for c, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--backends", nargs="+", default=["cpu", "mlx"])
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; {a.calls} calls each after {a.warmup}")
    print(f"{'backend':8} {'case':32} {'checked us':>11} {'unchecked us':>13} {'unchecked/checked':>18}")
    for backend in a.backends:
        if not ropepool.available_backends()[backend].available:
            print(f"{backend:8} not available here")
            continue
        for label, T, start in CASES:
            med = race(backend, T, start, a.calls, a.warmup)
            print(
                f"{backend:8} {label:32} {med[True] * 1e6:11.1f} {med[False] * 1e6:13.1f} "
                f"{med[False] / med[True]:18.3f}"
            )


if __name__ == "__main__":
    main()
