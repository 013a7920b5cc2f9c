"""Measure the notebook suite's run time and one widget update's time.

    .venv/bin/python benchmarks/suite_timing.py            # both
    .venv/bin/python benchmarks/suite_timing.py --widgets  # widget updates only (seconds)

Widget updates: the median and worst of several value changes per control, each change a
new value (no cache hit), timed from setting the value to the widget's outputs being updated
(figure rendered to PNG). The suite: every notebook executed by nbmake, two workers, as the
README's test command runs them. Prints the numbers; asserts nothing (it is not a test).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _time_changes(widget, control, values) -> list[float]:
    times = []
    for value in values:
        start = time.perf_counter()
        setattr(control, "value", value)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def widget_updates() -> list[tuple[str, float, float]]:
    from ropepool.teaching.widgets.errors import BreakIt
    from ropepool.teaching.widgets.gqa import GQAExplorer
    from ropepool.teaching.widgets.pool import PoolPlayground
    from ropepool.teaching.widgets.rotation import RotationExplorer
    from ropepool.teaching.catalog import CATALOG

    gqa, rot, pool, brk = GQAExplorer("llama-3-8b"), RotationExplorer(), PoolPlayground(), BreakIt()
    cases = [
        ("GQA: Hkv slider (diagram redrawn)", gqa, gqa.num_kv_heads, [1, 2, 4, 8, 16, 32, 1, 2]),
        ("GQA: tokens slider", gqa, gqa.tokens, [3, 5, 7, 9, 11, 13, 15, 17]),
        ("rotation: position", rot, rot.position, [1, 50, 300, 900, 2000, 7000, 30000, 90000]),
        ("rotation: head_dim", rot, rot.head_dim, [8, 16, 32, 128, 256, 8, 16, 32]),
        ("rotation: rope_base", rot, rot.base, [100.0, 1e3, 1e4, 1e5, 1e6, 5e6, 300.0, 3e3]),
        ("pool: slots", pool, pool.slots, ["0, 1", "3, 5, -1", "2", "9, 8, 7", "11, -1, 4", "1, 2, 3", "5", "6, 0"]),
        ("pool: first position", pool, pool.start, [5, 17, 40, 100, 300, 500, 700, 900]),
        ("break-it: mistake", brk, brk.mistake, list(CATALOG)[:8]),
    ]
    rows = []
    for label, widget, control, values in cases:
        times = _time_changes(widget, control, values)
        rows.append((label, statistics.median(times), max(times)))
    return rows


def suite_seconds() -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--nbmake", "notebooks"],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widgets", action="store_true", help="only the widget updates")
    args = parser.parse_args()
    print("one widget update (ms): median, worst")
    for label, median, worst in widget_updates():
        print(f"  {label:<36} {median:7.1f}  {worst:7.1f}")
    if not args.widgets:
        print(f"notebook suite under nbmake, 2 workers: {suite_seconds():.1f} s", flush=True)


if __name__ == "__main__":
    main()
