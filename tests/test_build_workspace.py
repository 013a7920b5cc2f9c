"""Parts carried from notebook 12/13 to 14 (ropepool.track.workspace), "show me the solution", the last hint."""

import inspect
import linecache

import build_tester_parts as parts
import numpy as np
import pytest

from ropepool import track
from ropepool.track import solutions

#: A notebook cell as a learner writes it: a helper class, the part, and the line that hands it to the track.
TREE_CELL = (
    inspect.getsource(parts._Node)
    + "\n\n"
    + inspect.getsource(parts.TreeFromScratch)
    + "\n\nTreeFromScratch = track.use(4, TreeFromScratch)  # yours\n"
)
SLOTS_CELL = inspect.getsource(parts.slots_numpy) + "\n\nslots_numpy = track.use(3, slots_numpy)\n"


def _cell(text, name, number):
    """Run ``text`` as IPython runs a cell: its source registered in linecache under a file name of its own."""
    filename = f"/tmp/ipykernel_0/{number}.py"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace = {"track": track, "np": np}
    exec(compile(text, filename, "exec"), namespace)
    return namespace[name]


@pytest.fixture
def folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ROPEPOOL_TRACK_DIR", str(tmp_path / "track"))
    monkeypatch.delenv("ROPEPOOL_TRACK", raising=False)
    track.demo(False)
    return tmp_path / "track"


def test_a_part_kept_in_one_notebook_is_loaded_in_another(folder, capsys):
    part = _cell(SLOTS_CELL, "slots_numpy", 11)
    assert track.check(3, part, keep=True).passed
    assert f"part 3 kept for notebook 14: {folder / 'part3.py'}" in capsys.readouterr().out
    assert "track.use" not in (folder / "part3.py").read_text()
    loaded = track.kept(3)
    assert "your slot_mapping, from" in capsys.readouterr().out
    assert loaded is not solutions.slot_mapping and track.check(3, loaded).passed


def test_a_class_defined_in_a_cell_is_kept_with_the_helpers_of_its_cell(folder, capsys):
    part = _cell(TREE_CELL, "TreeFromScratch", 12)
    track.check(4, part, keep=True)
    loaded = track.kept(4)
    assert loaded.__name__ == "TreeFromScratch" and loaded is not part and track.check(4, loaded).passed


def test_nothing_kept_means_the_reference_with_a_line_saying_so(folder, capsys):
    assert track.kept(1) is solutions.rotate
    assert "the reference rotate stands in" in capsys.readouterr().out


def test_a_kept_file_that_no_longer_loads_falls_back_and_says_why(folder, capsys):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "part1.py").write_text("def rotate(:\n")
    assert track.kept(1) is solutions.rotate
    assert "does not load (SyntaxError" in capsys.readouterr().out


def test_the_demo_switch_keeps_nothing(folder, capsys, monkeypatch):
    monkeypatch.setenv("ROPEPOOL_TRACK", "solutions")
    track.check(3, solutions.slot_mapping, keep=True)
    assert not (folder / "part3.py").exists() and "[demo] part 3" in capsys.readouterr().out
    assert track.kept(3) is solutions.slot_mapping


def test_a_failing_part_is_not_kept(folder):
    with pytest.raises(AssertionError):
        track.check(3, lambda requests, page_size: ([], []), keep=True)
    assert not (folder / "part3.py").exists()


@pytest.mark.parametrize("n", sorted(track.PARTS))
def test_show_solution_prints_the_reference_that_passes(n, capsys):
    text = track.show_solution(n)
    assert f"# part {n}: the reference" in capsys.readouterr().out
    namespace = {}
    exec(text, namespace)  # runnable as it stands, as a cell: its imports included
    assert track.check(n, namespace[track.PARTS[n][1]]).passed


def test_a_hint_shows_as_text_not_a_quoted_string():
    said = track.hint(2)
    assert repr(said) == str(said) and said.startswith("Hint ")


def test_the_last_hint_points_to_the_solution():
    said = [track.hint(1) for _ in range(3)]
    assert "show_solution(1)" in said[-1] and "show_solution" not in said[0]
