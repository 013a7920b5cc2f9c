"""The build-track checkers against parts written blind (tests/build_blind_parts/, whose README says how:
from notebooks 12-14's text only, by a tester who never read the checkers nor ran them).

Each wrong part must be rejected with the problem code its mistake names, written below per file from
the mistake in the manifest; each correct part must pass. At the first run all 27 wrong parts were
rejected and all 8 correct ones passed, but only 18 of the 27 verdicts named the mistake: the other 9
got a hint for another mistake or a generic one (GPT-J pairs written back as halves, freed pages queued
sorted, requests reordered, positions starting at cached + 1 (an IndexError with no word on why), an
empty leaf kept, held pages evicted, a match that does not mark what it walks, a preempted request still
run, ties to the smaller code). Now all 27 do: 26 by their own problem code, and the IndexError's verdict
says where positions start.
"""

import importlib.util
import json
from pathlib import Path

import pytest

from ropepool import track

FOLDER = Path(__file__).parent / "build_blind_parts"
MANIFEST = json.loads((FOLDER / "MANIFEST.json").read_text(encoding="utf-8"))

# file -> the problem code the checker must name, from the mistake the manifest states.
EXPECTED = {
    "p1_wrong_gptj_output_in_halves.py": "gptj_halves",
    "p1_wrong_overwrites_a_first.py": "reused_turned_a",
    "p1_wrong_row_index_as_position.py": "token_index",
    "p1_wrong_turns_backwards.py": "rotation_sign",
    "p1_wrong_writes_into_x.py": "modified_input",
    "p2_wrong_freed_in_sorted_order.py": "release_order",
    "p2_wrong_release_duplicates_unchecked.py": "no_double_free_error",
    "p2_wrong_release_not_atomic.py": "partial_release",
    "p2_wrong_retain_of_free_page.py": "retain_free_page",
    "p3_wrong_decodes_first.py": "request_order",
    "p3_wrong_offset_from_chunk_start.py": "offset_in_chunk",
    "p3_wrong_page_not_scaled.py": "page_not_scaled",
    "p3_wrong_positions_start_after_cached.py": "raised",  # IndexError in the learner's code; see below
    "p4_wrong_empty_leaf_kept.py": "empty_leaf_kept",
    "p4_wrong_evict_drops_held_pages.py": "evicted_held",
    "p4_wrong_insert_no_retain.py": "refcount",
    "p4_wrong_insert_returns_request_pages.py": "insert",
    "p4_wrong_match_keeps_clock.py": "match_clock",
    "p5_wrong_admits_after_preempting.py": "admitted_after_preemption",
    "p5_wrong_ignores_spare.py": "ignores_spare",
    "p5_wrong_no_chunk_for_new_prompt.py": "not_admitted",
    "p5_wrong_preempted_self_still_runs.py": "preempted_runs",
    "p5_wrong_stops_at_first_misfit.py": "blocked_queue",
    "p6_wrong_infinity_is_nan.py": "no_saturation",
    "p6_wrong_minus_zero_positive.py": "sign",
    "p6_wrong_no_subnormals.py": "subnormals_flushed",
    "p6_wrong_ties_to_smaller.py": "tie_to_smaller",
}


def load(entry: dict):
    """The part a manifest entry names, loaded by importlib from its file in FOLDER."""
    path = FOLDER / entry["file"]
    spec = importlib.util.spec_from_file_location(f"build_blind_parts_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, entry["name"])


WRONG_ENTRIES = [m for m in MANIFEST if m["verdict"] == "wrong"]
RIGHT_ENTRIES = [m for m in MANIFEST if m["verdict"] == "correct"]
#: (part, problem the checker must name, the part), as tests/build_tester_parts.py's WRONG
WRONG = [(m["part"], EXPECTED[m["file"]], load(m)) for m in WRONG_ENTRIES]


def test_the_manifest_lists_every_file_once_and_every_wrong_file_has_its_code():
    files = sorted(p.name for p in FOLDER.glob("*.py"))
    assert sorted(m["file"] for m in MANIFEST) == files
    assert sorted(EXPECTED) == sorted(m["file"] for m in WRONG_ENTRIES)
    assert (len(WRONG_ENTRIES), len(RIGHT_ENTRIES)) == (27, 8)
    assert {m["part"] for m in WRONG_ENTRIES} == set(track.PARTS) == {m["part"] for m in RIGHT_ENTRIES}


@pytest.mark.parametrize("entry", WRONG_ENTRIES, ids=[m["file"][:-3] for m in WRONG_ENTRIES])
def test_a_blind_wrong_part_is_rejected_naming_its_mistake(entry):
    verdict = track.feedback(entry["part"], load(entry))
    assert not verdict.passed and verdict.problem == EXPECTED[entry["file"]], verdict
    if verdict.problem == "raised":
        # positions from cached + 1: the last one has no page; the verdict says where positions start
        assert "IndexError" in verdict.message and "they start at cached" in verdict.message, verdict
    else:
        assert "\n  hint:     " in verdict.message, verdict


@pytest.mark.parametrize("entry", RIGHT_ENTRIES, ids=[m["file"][:-3] for m in RIGHT_ENTRIES])
def test_a_blind_correct_part_passes(entry):
    assert track.check(entry["part"], load(entry)).passed
