"""The build-track checkers against a second set of parts written from scratch (tests/build_tester_parts.py,
whose docstring says how): each wrong part gets the hint naming its mistake, each correct one passes."""

import pytest

from ropepool import track

from build_tester_parts import RIGHT, WRONG


@pytest.mark.parametrize(("n", "problem", "part"), WRONG, ids=[f"part{n}-{p.__name__}" for n, _, p in WRONG])
def test_a_wrong_part_gets_the_hint_naming_its_mistake(n, problem, part):
    verdict = track.feedback(n, part)
    assert not verdict.passed and verdict.problem == problem, verdict
    assert "hint:" in verdict.message or verdict.problem in ("not_int",), verdict


@pytest.mark.parametrize(("n", "part"), RIGHT, ids=[f"part{n}-{p.__name__}" for n, p in RIGHT])
def test_a_correct_part_written_another_way_passes(n, part):
    assert track.check(n, part).passed


def test_the_set_spans_every_part():
    assert {n for n, _, _ in WRONG} == set(track.PARTS) == {n for n, _ in RIGHT}
    assert len(WRONG) >= 20 and len(RIGHT) >= 5
