"""A failing check shows its message first: in a notebook (a real IPython kernel) nothing of the checker's
code and the hint within the first 8 lines; in plain Python a traceback of the learner's line and one more."""

import subprocess
import sys
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parent.parent
CELL = "from ropepool import track\nfrom ropepool.track import mistakes\ntrack.check(6, mistakes.encode_sign_dropped)"


def test_in_a_notebook_a_failing_check_shows_only_its_message_and_the_hint_within_8_lines():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(CELL)]
    nbclient.NotebookClient(nb, timeout=120, allow_errors=True, resources={"metadata": {"path": str(ROOT)}}).execute()
    error = next(o for o in nb.cells[0].outputs if o.output_type == "error")
    lines = "\n".join(error.traceback).splitlines()
    hint = next(i for i, line in enumerate(lines) if line.lstrip().startswith("hint:"))
    assert hint < 8, lines
    assert lines[0].startswith("ExerciseFailed: Part 6 [sign]"), lines
    assert not any(".py" in line or "Traceback" in line for line in lines), lines


def test_in_plain_python_the_traceback_is_the_learners_line_and_one_more():
    script = CELL.replace("\n", "; ")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    frames = [line for line in run.stderr.splitlines() if line.startswith("  File ")]
    assert len(frames) == 2 and '"<string>"' in frames[0], run.stderr
    assert "hint:" in run.stderr and "e4m3.py" not in run.stderr, run.stderr


def test_in_a_notebook_the_engine_s_refusal_of_a_plugged_part_shows_its_message_alone():
    nb = nbformat.v4.new_notebook()
    cell = (
        "from ropepool.engine import Request\nfrom ropepool.engine.scheduler import Batch\n"
        "Batch().add(Request(7, [1, 2, 3], 2), 0)"
    )
    nb.cells = [nbformat.v4.new_code_cell(cell)]
    nbclient.NotebookClient(nb, timeout=120, allow_errors=True, resources={"metadata": {"path": str(ROOT)}}).execute()
    error = next(o for o in nb.cells[0].outputs if o.output_type == "error")
    assert error.traceback == [
        "ContractError: request 7 put in the batch for 0 tokens: a request runs 1 to its 3 tokens not computed yet"
    ]
