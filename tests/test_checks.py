"""The notebook helpers: a held claim prints one line; a false claim fails the cell."""

import numpy as np
import pytest

from ropepool.teaching import checks
from ropepool.teaching.checks import check, check_close, check_equal


def test_check_prints_what_held(capsys):
    check(True, "k_pool row 5 == k_rot[0], bit for bit")
    assert capsys.readouterr().out == "[ok] k_pool row 5 == k_rot[0], bit for bit\n"


@pytest.mark.parametrize("condition", [False, 0, None, np.bool_(False), []])
def test_check_fails_on_a_false_claim(condition, capsys):
    with pytest.raises(AssertionError, match=r"^row 5 == k_rot\[0\]$"):
        check(condition, "row 5 == k_rot[0]")
    assert capsys.readouterr().out == ""  # nothing claims success


def test_check_names_the_detail():
    with pytest.raises(AssertionError, match="error under the bound: float16"):
        check(False, "error under the bound", "float16")


def test_check_close_and_equal(capsys):
    check_close(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]), "x ~= y", atol=1e-6)
    check_equal(np.arange(3), [0, 1, 2], "a == b")
    assert capsys.readouterr().out == "[ok] x ~= y (rtol=1e-07, atol=1e-06)\n[ok] a == b\n"
    with pytest.raises(AssertionError, match="x ~= y"):
        check_close(np.array([1.0]), np.array([1.1]), "x ~= y", atol=1e-6)
    with pytest.raises(AssertionError, match="bit for bit"):
        check_equal(np.float32([1.0]), np.float32([np.nextafter(np.float32(1), np.float32(2))]), "bit for bit")
    assert "[ok]" not in capsys.readouterr().out


def test_no_emoji_needed():
    assert checks.OK.isascii()


def test_the_claim_defaults_to_the_source(capsys):
    rows = [5, 1, 6]
    check(rows == [5, 1, 6])  # row slots[t] holds token t
    check_equal(np.array(rows), [5, 1, 6])
    check_close(np.float64(1.0), 1.0 + 1e-9, atol=1e-6)
    assert capsys.readouterr().out.splitlines() == [
        "[ok] rows == [5, 1, 6]  # row slots[t] holds token t",
        "[ok] np.array(rows) == [5, 1, 6]",
        "[ok] np.float64(1.0) ~= 1.0 + 1e-9 (rtol=1e-07, atol=1e-06)",
    ]
    with pytest.raises(AssertionError, match=r"^rows == \[1\]: why$"):
        check(rows == [1], detail="why")


def test_a_long_claim_wraps_at_word_boundaries(capsys):
    claim = "rest == source.body('metal').split(newline, 1)[1] for every backend  # the same body everywhere"
    check(True, claim)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) > 1 and all(len(line) <= checks.WIDTH for line in lines)
    assert " ".join(" ".join(lines).split()) == " ".join(f"[ok] {claim}".split())  # no word cut


def test_a_timing_claim_asserts_in_the_lab_and_reports_under_the_suite(monkeypatch, capsys):
    from ropepool.teaching.checks import TIMING_ENV, check_timing

    monkeypatch.delenv(TIMING_ENV, raising=False)  # the lab: a claim that fails stops the cell
    with pytest.raises(AssertionError, match="faster"):
        check_timing(0.8 > 1, "faster")
    monkeypatch.setenv(TIMING_ENV, "report")  # the suite: said, not asserted
    check_timing(0.8 > 1, "faster")
    check_timing(1.3 > 1, "faster again")
    out = capsys.readouterr().out
    assert "[timing] faster: did not hold this run" in out and "[timing] faster again: held this run" in out
