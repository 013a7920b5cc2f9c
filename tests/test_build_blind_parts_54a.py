"""The build-track checkers against blind set 54a (tests/build_blind_parts_54a/, whose README says how it
was written: from notebooks 12-14's text only, by a tester who never read the checkers nor ran them).

Every wrong part is rejected and every correct one passes; the score of each feedback, read by a person,
is kept in ``verdicts.json`` and printed by ``benchmarks/track_blind.py``.
"""

import importlib.util
import json
import re
from pathlib import Path

import pytest

from ropepool import track

FOLDER = Path(__file__).parent / "build_blind_parts_54a"
CASES = json.loads((FOLDER / "cases.json").read_text(encoding="utf-8"))


def load(case: dict):
    """(part number, the part) of one case, loaded by importlib from its file."""
    n = int(re.search(r"part (\d)", case["part"]).group(1))
    path = FOLDER / case["file"]
    spec = importlib.util.spec_from_file_location(f"blind_54a_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return n, getattr(module, track.PARTS[n][1])


WRONG = [c for c in CASES if c["kind"] == "wrong"]
RIGHT = [c for c in CASES if c["kind"] == "correct"]


def test_the_set_is_whole():
    assert sorted(c["file"] for c in CASES) == sorted(f"parts/{p.name}" for p in (FOLDER / "parts").glob("*.py"))
    assert (len(WRONG), len(RIGHT)) == (15, 4)  # one written as correct is wrong (README)


@pytest.mark.parametrize("case", WRONG, ids=[c["id"] for c in WRONG])
def test_a_wrong_part_is_rejected(case):
    verdict = track.feedback(*load(case))
    assert not verdict.passed, verdict


@pytest.mark.parametrize("case", RIGHT, ids=[c["id"] for c in RIGHT])
def test_a_correct_part_passes(case):
    verdict = track.feedback(*load(case))
    assert verdict.passed, verdict


# id -> (problem code, words the hint must hold): the difference the part makes, said with its direction
NAMED = {
    "p4_tree_w_evicts_held_pages": ("evicted_held", ["freed pages 0, 1, which that request still holds"]),
    "p4_tree_w_partial_edge_not_touched": ("partial_match_clock", ["match ended inside", "only partly matched"]),
    "p3_slots_w_contiguous_rows": ("wrong_rows", ["run on one row at a time", "crossing a page boundary"]),
    "p6_e4m3_w_subnormal_bias": ("not_nearest", ["in the subnormal range", "too large, about 2x", "Right: the normal"]),
    "p1_rotate_w_inplace_halves": ("reused_turned_a", ["computed from the first one already turned", "in place"]),
    "p1_rotate_w_gptj_tiled_freqs": ("wrong_frequency", ["GPT-J pairs", "inv_freq[1]'s angle", "np.repeat"]),
    "p5_sched_w_victim_spare_not_counted": ("too_many_preempted", ["1 request too many", "spare ones included"]),
    "p5_sched_w_strict_fit": ("not_admitted", ["left waiting", "exactly enough"]),
    "p5_sched_w_admits_zero_token": ("zero_tokens", ["admitted for 0 tokens", "budget was spent"]),
    "p2_alloc_c_ordered_dict": ("outside_pool", ["page -1 is outside the pool", "refs[-1] is page 2"]),
}


@pytest.mark.parametrize("cid", sorted(NAMED))
def test_a_wrong_part_is_told_what_it_did(cid):
    case = next(c for c in CASES if c["id"] == cid)
    verdict = track.feedback(*load(case))
    problem, words = NAMED[cid]
    assert verdict.problem == problem and all(w in verdict.message for w in words), verdict


def test_a_hint_is_never_a_catalogued_mistake_the_part_did_not_make():
    """Set A's scheduler that skips a request fitting exactly was told it stops at the first misfit."""
    case = next(c for c in CASES if c["id"] == "p5_sched_w_strict_fit")
    assert "not a wall" not in track.feedback(*load(case)).message


def test_the_checker_counts_steps_as_the_engine_and_the_viewer_do():
    """Step 1 is the first step everywhere: the engine's batch history, the viewer and the checker."""
    case = next(c for c in CASES if c["id"] == "p5_sched_w_admits_zero_token")
    assert "'the budget spent by decodes: the waiting prompt waits, step 1," in track.feedback(*load(case)).message


def test_a_count_of_one_is_singular():
    case = next(c for c in CASES if c["id"] == "p5_sched_w_admits_zero_token")
    message = track.feedback(*load(case)).message
    assert re.search(r"waiting \[\d: 1 token, \d: 1 token\]", message) and "(1 token, all run by" in message, message


def test_the_scorer_has_a_reading_of_every_feedback_the_checkers_give_now(capsys):
    """benchmarks/track_blind.py: every case's feedback was read (verdicts.json) as it is now, and scores
    every wrong part named, none asserting something false, no correct part rejected."""
    _scorer().main([str(FOLDER), "--label", "track", "--quiet"])
    out = capsys.readouterr().out
    assert "named 15 (100%)" in out and "asserts-false 0" in out and "rejected 0" in out, out
    assert "unread (no verdict for this feedback): 0" in out, out


def _scorer():
    spec = importlib.util.spec_from_file_location("track_blind", FOLDER.parent.parent / "benchmarks" / "track_blind.py")
    scorer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scorer)
    return scorer


def test_the_scorer_reads_a_part_given_by_its_leading_number(tmp_path, capsys):
    """A set may write "1 rotate" where set A writes "notebook 12 part 1 rotate": the scorer says which part."""
    (tmp_path / "rot.py").write_text("from ropepool.track.solutions import rotate\n", encoding="utf-8")
    (tmp_path / "enc.py").write_text(
        "import numpy as np\nfrom ropepool.track.solutions import encode_e4m3 as right\n\n\n"
        "def encode_e4m3(x):\n    return right(np.abs(np.asarray(x, np.float32)))\n",
        encoding="utf-8",
    )
    cases = [
        dict(id="a", part="1 rotate", kind="correct", file="rot.py", mistake="none"),
        dict(id="b", part="6", kind="wrong", file="enc.py", mistake="every sign dropped"),
    ]
    for c in cases:
        c.update(good_feedback_must_say=[], must_not_say=[])
    (tmp_path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    assert _scorer().main([str(tmp_path), "--label", "t"]) == 0
    out = capsys.readouterr().out
    assert "== a (correct, part 1: rotate): accepted [None]" in out, out
    assert "== b (wrong, part 6: encode_e4m3): caught [sign]" in out, out


@pytest.mark.parametrize("field", ["rotate", "notebook 12", "7 rotate", "part 9"])
def test_the_scorer_refuses_a_part_field_naming_no_part(field):
    with pytest.raises(ValueError, match=f"part {field!r}: no part number of \\[1, 2, 3, 4, 5, 6\\]"):
        _scorer().part_number(field, track.PARTS)
