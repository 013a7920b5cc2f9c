"""Feedback said from the part's own behaviour: a catalogued hint only where the part's codes are that
mistake's, the inputs the stubs allow beyond what the engine's runs make, and eviction told with clocks."""

import numpy as np

from ropepool import track
from ropepool.track import solutions as S
from ropepool.track.mistakes import edit_of


def _flushes_below_smallest_subnormal(x):
    """Wrong: |x| below 2**-9 flushed to (signed) zero; 2**-10 < |x| < 2**-9 should round up to code 1."""
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < 2.0**-9, np.signbit(x).astype(np.uint8) << 7, S.encode_e4m3(x)).astype(np.uint8)


@edit_of(S.schedule_step, ("while need > free_rows:", "if need > free_rows:"))
def _one_victim_only(running, waiting, max_step_tokens, free_rows):
    """Wrong: preempts one request at most, then runs on rows that are not free."""


def test_a_flush_below_the_smallest_subnormal_is_not_told_it_truncates():
    verdict = track.feedback(6, _flushes_below_smallest_subnormal)
    assert not verdict.passed and "toward zero" not in verdict.message, verdict
    assert "are flushed to 0: |x| from 0.000976" in verdict.message, verdict


def test_a_scheduler_that_preempts_one_victim_at_most_is_caught():
    verdict = track.feedback(5, _one_victim_only)
    assert not verdict.passed and verdict.problem == "too_few_preempted", verdict
    assert "preempt the newest (the end of running) until they do" in verdict.message, verdict


def _nan_past_470(x):
    """Wrong: only |x| > 470 (not > 464) is refused saturation: it gives NaN there; 448 < |x| <= 470 is right."""
    x = np.asarray(x, np.float32)
    codes = S.encode_e4m3(x)
    return np.where(np.abs(x) > 470, 0x7F | (codes & 0x80), codes).astype(np.uint8)


def test_a_value_s_rule_hint_is_kept_where_the_part_behaves_as_that_mistake():
    verdict = track.feedback(6, _nan_past_470)
    assert verdict.problem == "no_saturation" and "clip |x| to 448 before rounding" in verdict.message, verdict


def test_a_match_that_does_not_split_is_told_the_split_it_did_not_make():
    from ropepool.track.mistakes import BY_PART

    verdict = track.feedback(4, BY_PART[4]["missing_split"])
    assert verdict.problem == "missing_split" and "a match that stops inside an edge splits it there" in verdict.message
    assert "in one node where the engine's tree holds" in verdict.message, verdict
