"""``benchmarks/compare.py``: a revision against the working tree, each side its own ropepool, the
temporary worktree gone afterwards, and a slip named only when the medians and most rounds agree."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("compare_bench", ROOT / "benchmarks" / "compare.py")
compare = sys.modules["compare_bench"] = importlib.util.module_from_spec(_spec)  # its dataclass looks itself up
_spec.loader.exec_module(compare)


def _git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


needs_git = pytest.mark.skipif(_git("rev-parse", "HEAD").returncode != 0, reason="not a git checkout")


def _run(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "compare.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@needs_git
def test_quick_run_against_head_prints_every_benchmark_and_removes_its_worktree():
    got = _run("HEAD", "--quick", "--rounds", "2")
    assert got.returncode in (0, 1), got.stderr[-2000:]  # 1: noise named a slip; the format is what is checked
    lines = got.stdout.splitlines()
    head = re.match(r"compare: old = HEAD \(([0-9a-f]{10}), a worktree at (\S+), removed after\); new = ", lines[0])
    assert head, lines[0]
    assert _git("rev-parse", "HEAD").stdout.startswith(head[1])
    tree = Path(head[2].rstrip(","))
    number = r"\s+[\d.]+ (us|ms)\s+[\d.]+ (us|ms)\s+[\d.]+\s+\d/2"
    for name, ref in (
        ("decode float32 mx", "composition"),
        ("decode float32 numpy", "NumPy op"),
        ("prefill float32 T=64", "composition"),
        ("engine tiny Llama step", None),
    ):
        (row,) = [line for line in lines if line.startswith(name)]
        assert re.match(re.escape(name) + number, row), row
        if ref:
            assert re.search(rf"[\d.]+x -> [\d.]+x over the {ref} \(new/old [\d.]+\)", row), row
    assert lines[-1].startswith("Slips (new/old > 1.10 in the median and in most rounds): ")
    assert ("SLIP" in got.stdout) == (got.returncode == 1)
    assert not tree.exists() and not tree.parent.exists()  # the worktree and its private folder
    assert f"worktree {tree}\n" not in _git("worktree", "list", "--porcelain").stdout  # unregistered too


@needs_git
def test_a_revision_that_is_no_commit_is_refused_before_anything_runs():
    got = _run("no-such-revision-here", "--quick")
    assert got.returncode == 2 and got.stdout == ""
    assert "'no-such-revision-here' is no commit" in got.stderr


def _bench(old, new, ref=True):
    """A benchmark with these rounds' seconds (the reference at 1.0 s, or its given time)."""
    b = compare.Bench("x", {}, "composition" if ref else "")
    b.old = [o if isinstance(o, tuple) else (o, 1.0) for o in old]
    b.new = [n if isinstance(n, tuple) else (n, 1.0) for n in new]
    return b


def test_a_slip_is_named_only_when_the_medians_and_most_rounds_agree():
    assert compare.slipped(_bench([1, 1, 1, 1, 1], [1.2, 1.3, 1.25, 1.0, 1.3]), 0.10) == (4, True)
    # one slow round moves neither the median nor most rounds
    assert compare.slipped(_bench([1, 1, 1, 1, 1], [1.0, 5.0, 1.0, 1.0, 1.0]), 0.10) == (1, False)
    # 5% slower is within the threshold, in every round
    assert compare.slipped(_bench([1, 1, 1], [1.05, 1.05, 1.05]), 0.10) == (0, False)
    # without a reference (the engine's step) the times alone decide
    assert compare.slipped(_bench([1, 1, 1], [1.5, 1.5, 1.5], ref=False), 0.10) == (3, True)


def test_a_load_that_slows_the_reference_as_much_is_no_slip():
    # new ran while the machine was twice as busy: its reference took twice as long too
    b = _bench([1, 1, 1], [(2.0, 2.0), (2.1, 2.0), (1.9, 2.0)])
    assert compare.slipped(b, 0.10) == (3, False)
    ratio, _, norm, _ = compare.ratios(b)
    assert ratio == pytest.approx(2.0) and norm == pytest.approx(1.0)
    lines, slips = compare.table([b], 0.10)
    assert slips == [] and "1.00x -> 1.00x over the composition (new/old 1.00)" in lines[1]
