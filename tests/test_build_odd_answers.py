"""Every build-track checker turns an odd answer into a "not yet" verdict showing what came back, never a
traceback out of the checker nor a pass; and every problem a checker can name is reached by some part."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from ropepool import track
from ropepool.track import mistakes, solutions, stubs

from build_tester_parts import WRONG as TESTER_WRONG
from test_build_blind_parts import WRONG as BLIND_WRONG
from test_build_checkers import RefusesHalfway, _float16_positions

ODD = [
    None,
    "abc",
    5,
    2.5,
    float("inf"),
    [[1, [2]], [3]],
    [1.5],
    [float("inf")],
    ["a"],
    {"a": 1},
    True,
    [True],
    ([float("inf")], [0]),
    ([0.5], [1.5]),
    ([("a", 1)], []),
    ([(99, 1)], []),
    ([(0, float("inf"))], []),
    ([(0, 1)], [99]),
    ([(0, 1.5)], []),
    np.array(["x"]),
]


def _returning(value):
    return lambda *args: value


@pytest.mark.parametrize("n", [1, 3, 5, 6])
@pytest.mark.parametrize("value", ODD, ids=lambda v: repr(v)[:24])
def test_a_function_part_returning_an_odd_value_gets_a_verdict(n, value):
    verdict = track.feedback(n, _returning(value))
    assert not verdict.passed and verdict.problem and "\n  input:    " in verdict.message, verdict


@pytest.mark.parametrize("method", ["allocate", "release", "retain", "num_free", "refs"])
@pytest.mark.parametrize("value", [None, "abc", 5, float("inf"), [1.5], [float("inf")], {1, 2}], ids=repr)
def test_an_allocator_answering_an_odd_value_gets_a_verdict(method, value):
    if method in ("num_free", "refs"):
        attrs = {method: property(lambda self: value)}
    else:
        attrs = {method: _returning(value)}
    verdict = track.feedback(2, type("Odd", (solutions.Allocator,), attrs))
    assert not verdict.passed and verdict.problem and "\n  input:    " in verdict.message, verdict


@pytest.mark.parametrize("method", ["match", "insert", "evict", "num_evictable"])
@pytest.mark.parametrize("value", [None, "abc", 5, float("inf"), [1.5], [-1], [10**30], np.array([300])], ids=repr)
def test_a_tree_answering_an_odd_value_gets_a_verdict(method, value):
    verdict = track.feedback(4, type("Odd", (solutions.PrefixTree,), {method: _returning(value)}))
    assert not verdict.passed and verdict.problem and "\n  input:    " in verdict.message, verdict


def test_an_odd_answer_is_shown_in_the_verdict():
    verdict = track.feedback(3, _returning(([float("inf")], [0])))
    assert verdict.problem == "not_int" and "inf" in verdict.message
    verdict = track.feedback(5, _returning(([(99, 1)], [])))
    assert verdict.problem == "unknown_rid" and "99" in verdict.message


# Problems a checker names on its own (a stub, an error the learner raises, a malformed answer): reached
# by the tests above and in test_build_checkers.py, not by a wrong part's hint.
GENERIC = {
    "not_implemented",
    "raised",
    "not_int",
    "not_a_plan",
    "not_two_lists",
    "unknown_rid",
    "bad_pages",
    "missing_attribute",
    "refs",
    "returned_none",
    "dtype_or_shape",
    "modified_input",
    "not_real",
    "shape",
    "wrong_length",
    "evict_short",
    "float16_result",
}
# Catch-alls, said when no mistake is recognised.
FALLBACK = {"wrong_answer", "wrong_plan", "not_nearest", "wrong_rows", "mismatch", "positions", "preemption"}

TESTED = {(n, code) for n, parts in mistakes.BY_PART.items() for code in parts} | {
    (n, code) for n, code, _ in TESTER_WRONG + BLIND_WRONG
}


@pytest.mark.parametrize("n", sorted(track.PARTS))
def test_every_hint_a_checker_can_give_is_reached_by_a_wrong_part(n):
    """Every problem code in the checker's source (a quoted name returned, or given to rejected or
    wrong_case) is named for some wrong part of mistakes.BY_PART, tests/build_tester_parts.py or
    tests/build_blind_parts/, or is
    one of the generic verdicts: a hint that no part reaches would be shadowed by one tried before it."""
    module = track.PARTS[n][0].__module__
    source = Path(__import__(module, fromlist=["x"]).__file__).read_text()
    codes = set(re.findall(r'return "([a-z0-9_]+)", ', source))
    codes |= set(re.findall(r'(?:rejected|wrong_case)\(\s*PART,\s*"([a-z0-9_]+)"', source))
    codes |= set(re.findall(r'^    "([a-z0-9_]+)": \(', source, re.M))  # a MISTAKES table's keys
    # a checker's DIFFERENCES: where a part first differs, said with its numbers when no mistake fits
    differences = set(getattr(sys.modules[module], "DIFFERENCES", ()))
    unreached = sorted(c for c in codes - GENERIC - FALLBACK - differences if (n, c) not in TESTED)
    assert not unreached, f"part {n}: no wrong part reaches {unreached}"


# --- Wrong parts that reach the hints no other part reaches ------------------------------------------


def _rotate_half_sign(x, positions, inv_freq, is_neox):
    """a cos + b sin in the first of each pair (rotate_half's minus sign lost)."""
    x = np.asarray(x, np.float64)
    D = x.shape[1]
    theta = np.outer(positions, inv_freq)
    a, b = (np.arange(D // 2), np.arange(D // 2) + D // 2) if is_neox else (np.arange(0, D, 2), np.arange(1, D, 2))
    out = x.copy()
    out[:, a] = x[:, a] * np.cos(theta) + x[:, b] * np.sin(theta)
    out[:, b] = x[:, a] * np.sin(theta) + x[:, b] * np.cos(theta)
    return out


class _QueuesStillHeld(solutions.Allocator):
    """Returns the right pages, but queues every page given, still held or not."""

    def release(self, pages):
        freed = super().release(pages)
        self.free.extend(p for p in pages if p not in freed)
        return freed


class _ReleasesReversed(solutions.Allocator):
    """Frees the pages of a release last given first: the right pages, queued in the reverse order."""

    def release(self, pages):
        return super().release(list(pages)[::-1])


class _RefusesRepeats(solutions.Allocator):
    """Refuses a page given twice in one call, even when it is held twice."""

    def release(self, pages):
        if len(set(pages)) != len(pages):
            raise ValueError("a page twice")
        return super().release(pages)


class _RefusesZero(solutions.Allocator):
    """A careful allocator that refuses to hand out fewer than one page."""

    def allocate(self, n):
        if n < 1:
            raise ValueError(f"allocate({n}): ask for at least one page")
        return super().allocate(n)


def _slots_pages_as_rows(requests, page_size):
    positions, slots = solutions.slot_mapping(requests, page_size)
    rows = [
        r["pages"][p] * page_size if p < len(r["pages"]) else -1
        for r in requests
        for p in range(r["cached"], r["cached"] + r["new"])
    ]
    return positions, rows


def _slots_next_row(requests, page_size):
    """Each token given the next position's row."""
    positions, slots = solutions.slot_mapping(requests, page_size)
    nxt = [(r, p + 1) for r in requests for p in range(r["cached"], r["cached"] + r["new"])]
    rows = [
        r["pages"][q // page_size] * page_size + q % page_size if q // page_size < len(r["pages"]) else -1
        for r, q in nxt
    ]
    return positions, rows


class _InsertGivesPagesBack(solutions.PrefixTree):
    """Keeps the right pages, but insert answers with the pages it was given."""

    def insert(self, keys, pages):
        super().insert(keys, pages)
        return list(pages)


def _plan_never_preempts(running, waiting, max_step_tokens, free_rows):
    """Runs the plan as if rows were never short: nobody is preempted."""
    run, preempted = solutions.schedule_step(running, waiting, max_step_tokens, free_rows)
    return run, []


def _plan_admits_by_chunk_rows(running, waiting, max_step_tokens, free_rows):
    """Admits a waiting request when the rows of its first chunk are free, not those of all its tokens."""
    run, preempted = solutions.schedule_step(running, [], max_step_tokens, free_rows)
    budget = max_step_tokens - sum(n for _, n in run)
    free = free_rows - sum(max(0, n - r["spare"]) for (rid, n) in run for r in running if r["rid"] == rid)
    for w in waiting:
        if budget == 0 or preempted:
            break
        n = min(w["tokens"], budget)
        if n <= free:
            free, budget = free - n, budget - n
            run.append((w["rid"], n))
    return run, preempted


REACH = [
    (1, "rotate_half_sign", _rotate_half_sign),
    (1, "positions_float16", _float16_positions),
    (2, "freed_while_held", _QueuesStillHeld),
    (2, "partial_release", RefusesHalfway),
    (2, "wrong_error", _RefusesRepeats),
    (2, "release_order", _ReleasesReversed),
    (2, "zero_pages", _RefusesZero),
    (3, "pages_as_rows", _slots_pages_as_rows),
    (3, "off_by_one", _slots_next_row),
    (4, "insert", _InsertGivesPagesBack),
    (4, "partial_match_clock", mistakes.TreePartialMatchKeepsClock),
    (4, "evict_one_leaf", mistakes.TreeEvictsOneLeaf),
    (5, "too_few_preempted", _plan_never_preempts),
    (5, "admitted_without_rows", _plan_admits_by_chunk_rows),
]
TESTED |= {(n, code) for n, code, _ in REACH}


@pytest.mark.parametrize(("n", "problem", "part"), REACH, ids=[f"part{n}-{c}" for n, c, _ in REACH])
def test_a_hint_no_other_part_reaches_is_reached(n, problem, part):
    verdict = track.feedback(n, part)
    assert not verdict.passed and verdict.problem == problem, verdict


class _HalfWritten(stubs.Allocator):
    """__init__ written, num_free still the stub's (a property that raises NotImplementedError)."""

    def __init__(self, num_pages):
        self.refs = [0] * num_pages


class _RefsRaises(solutions.Allocator):
    refs = property(lambda self: 1 / 0, lambda self, value: None)


@pytest.mark.parametrize(("part", "problem"), [(_HalfWritten, "not_implemented"), (_RefsRaises, "raised")])
def test_an_allocator_property_that_raises_gets_a_verdict(part, problem):
    verdict = track.feedback(2, part)
    assert verdict.problem == problem, verdict


@pytest.mark.parametrize("n", sorted(track.PARTS))
def test_a_part_that_raises_is_told_its_line_and_the_input(n):
    def raises(*args):
        raise KeyError("mine")

    part = raises if n in (1, 3, 5, 6) else type("Raises", (getattr(solutions, track.PARTS[n][1]),), {})
    if n == 2:
        part.allocate = raises
    elif n == 4:
        part.insert = raises
    verdict = track.feedback(n, part)
    lines = verdict.message.splitlines()
    assert verdict.problem == "raised" and "raised KeyError: 'mine'" in lines[0], verdict
    assert lines[1].startswith("  at:       test_build_odd_answers.py") and lines[2].startswith("  input:    "), verdict


ALL_WRONG = (
    [(n, code, part) for n, parts in mistakes.BY_PART.items() for code, part in parts.items()]
    + TESTER_WRONG
    + REACH
    + [(n, code, part) for n, code, part in BLIND_WRONG if code not in GENERIC]
)


@pytest.mark.parametrize(
    ("n", "problem", "part"), ALL_WRONG, ids=[f"part{n}-{c}-{i}" for i, (n, c, _) in enumerate(ALL_WRONG)]
)
def test_every_hint_says_what_the_mistake_would_do_in_the_engine(n, problem, part):
    hint = next(line for line in track.feedback(n, part).message.splitlines() if line.startswith("  hint:"))
    assert "In the engine" in hint, hint
