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


def _carry_by_or(x):
    """Wrong: the code built as (exponent << 3) | mantissa, so a mantissa rounded up to 8 loses its carry."""
    x = np.asarray(x, np.float32)
    want = S.encode_e4m3(x)
    carried = ((want & 0x07) == 0) & ((want & 0x78) >= 0x10) & (want & 0x7F != 0x7E)  # rounded up to 2**e
    exponent = ((want & 0x78) >> 3) - 1
    return np.where(carried & (exponent % 2 == 1), (want & 0x80) | ((exponent << 3) | 0x08 & 0x78), want).astype(
        np.uint8
    )


@edit_of(S.PrefixTree.evict, ("key=lambda x: (x.last_used, x.order)", "key=lambda x: (x.last_used, x.keys)"))
def _tie_by_keys(self, n):
    """Wrong: a tie of last_used goes to the smaller keys, not the older node."""


class _TreeTieByKeys(S.PrefixTree):
    evict = _tie_by_keys


def test_a_lost_carry_is_told_that_each_wrong_value_rounds_up_to_a_power_of_two():
    verdict = track.feedback(6, _carry_by_or)
    assert not verdict.passed and "should round up to a power of two" in verdict.message, verdict


def test_a_tie_broken_by_keys_is_caught_where_the_older_leaf_has_the_larger_keys():
    verdict = track.feedback(4, _TreeTieByKeys)
    assert verdict.problem == "eviction_tie" and "a tie goes to the older node" in verdict.message, verdict


def test_a_page_listed_twice_and_returned_twice_is_told_so_not_that_it_was_freed_while_held():
    from ropepool.track.mistakes import BY_PART

    verdict = track.feedback(2, BY_PART[2]["freed_twice"])
    assert verdict.problem == "freed_twice" and "freed while held" not in verdict.message, verdict


@edit_of(S.schedule_step, ('need = max(0, n - r["spare"])', 'need = max(0, r["uncached"] - r["spare"])'))
def _rows_from_uncached(running, waiting, max_step_tokens, free_rows):
    """Wrong: a running request's new rows counted from all its uncached tokens, not this step's n."""


def test_a_preemption_nobody_needed_says_the_rows_this_step_needs():
    verdict = track.feedback(5, _rows_from_uncached)
    assert verdict.problem == "too_many_preempted" and "where nobody needs to go" in verdict.message, verdict
    assert "n = 1, 0 new rows" in verdict.message, verdict
