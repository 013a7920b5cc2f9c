"""The scheduler's checker shows the smallest state on which a part differs, found by shrinking, and checks
states the engine's own runs never reach without a prefix cache (a decode behind a prompt's chunk)."""

from ropepool import track
from ropepool.track import solutions as S
from ropepool.track.mistakes import edit_of
from ropepool.track.shrink import smallest, without_each


def _decodes_ignore_budget(running, waiting, max_step_tokens, free_rows):
    """Wrong: a decode (uncached 1) always runs, even once the prompts' chunks spent the budget."""
    run, pre = S.schedule_step(running, waiting, max_step_tokens, free_rows)
    skipped = [r for r in running if r["uncached"] == 1 and r["rid"] not in dict(run) and r["rid"] not in pre]
    return run + [(r["rid"], 1) for r in skipped], pre


@edit_of(S.schedule_step, ('if w["tokens"] <= free_rows:', 'if w["tokens"] < free_rows:'))
def _strict_fit(running, waiting, max_step_tokens, free_rows):
    """Wrong: a waiting request is admitted only when its tokens are fewer than the free rows."""


@edit_of(S.schedule_step, ("free_rows -= need", "pass"))
def _no_rows_taken(running, waiting, max_step_tokens, free_rows):
    """Wrong: the running requests' new rows are not subtracted from the free rows."""


def test_a_decode_run_past_the_budget_behind_a_chunk_is_caught():
    verdict = track.feedback(5, _decodes_ignore_budget)
    assert not verdict.passed and verdict.problem == "over_budget", verdict
    assert "a decode too is skipped once the budget is spent" in verdict.message, verdict


def test_the_state_shown_is_the_smallest_that_still_differs():
    verdict = track.feedback(5, _decodes_ignore_budget)
    assert "made smallest" in verdict.message, verdict
    line = next(x for x in verdict.message.splitlines() if x.strip().startswith("input:"))
    assert line.count("uncached") == 2 and "waiting []" in line and "max_step_tokens 1;" in line, line


def test_a_request_left_waiting_is_probed_for_why():
    verdict = track.feedback(5, _strict_fit)
    assert not verdict.passed and verdict.problem == "not_admitted", verdict
    assert "With one row more free your plan admits it" in verdict.message, verdict


def test_an_admission_without_rows_says_which_rows_were_taken():
    verdict = track.feedback(5, _no_rows_taken)
    assert not verdict.passed and verdict.problem == "admitted_without_rows", verdict
    assert "taken this step before its turn: request 0: 1 new row" in verdict.message, verdict


def test_smallest_shrinks_to_a_local_minimum():
    big = [5, 1, 7, 3, 9, 2]
    small = smallest(big, without_each, lambda xs: sum(xs) > 10)
    assert sum(small) > 10 and all(sum(x) <= 10 for x in without_each(small)), small
    assert big == [5, 1, 7, 3, 9, 2]  # the caller's case is not changed


def test_a_tree_is_shown_the_fewest_operations_and_the_smallest_pool_that_still_differ():
    from ropepool.track.mistakes import BY_PART

    verdict = track.feedback(4, BY_PART[4]["evict_leak"])
    assert verdict.problem == "evict_leak" and "made smallest" in verdict.message, verdict
    assert "input:    a pool of 3 pages; request A [1, 2, 3]; finish A; now evict(3)" in verdict.message, verdict
