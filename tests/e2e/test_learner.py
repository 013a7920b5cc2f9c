"""End to end, as a learner meets them in JupyterLab: ``explain`` run from a notebook cell, the answers
streamed while the engine runs (``LiveAnswers``, redrawn in place), the rotation explorer whose axis
names the angle, a build-track check that fails with its message first and its hint within 8 lines,
and a lab that starts without JupyterLab's news pop-up. (Notebook 10's memory-vs-error
figure, drawn inside an ``if``, is checked in notebook 10 itself: ``test_lab.py`` runs 10 in the browser.)

One scratch notebook is written into the learner's copy the server serves (never into notebooks/),
opened, and run cell by cell with Run All; what the page shows is then read back.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from .conftest import Lab, wait_for

pytestmark = pytest.mark.e2e

NAME = "e2e_learner_scratch.ipynb"
SEEDS_ERROR = "k shape must be [num_tokens, num_kv_heads, head_dim], got (6, 32, 128)"

CELLS = [
    # explain, as an engineer runs it: the command line, from a cell
    "import subprocess, sys\n"
    f"cmd = [sys.executable, '-m', 'ropepool', 'explain', {SEEDS_ERROR!r}, '--model', 'qwen2.5-7b']\n"
    "done = subprocess.run(cmd, capture_output=True, text=True)\n"
    "print(done.stdout + done.stderr + f'exit status {done.returncode}')",
    # the answers of a tiny model streamed while generate() runs
    "import mlx.core as mx\n"
    "from mlx_lm.models import llama\n"
    "from ropepool.engine import generate\n"
    "from ropepool.teaching.viz.engine import LiveAnswers\n"
    "mx.random.seed(0)\n"
    "model = llama.Model(llama.ModelArgs(model_type='llama', hidden_size=32, num_hidden_layers=1, intermediate_size=64,\n"
    "    num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, vocab_size=64))\n"
    "live = LiveAnswers(lambda t: ' '.join(map(str, t)), total_tokens=6)\n"
    "out = generate(model, [[1, 2, 3], [4, 5]], 3, pool_rows=16, on_step=live)",
    # the rotation explorer: its right panel plots the angle theta_i, and says so
    "from ropepool.teaching.widgets.rotation import RotationExplorer\n"
    "explorer = RotationExplorer()\n"
    "print('ylabel:', explorer.figure.axes[1].get_ylabel())\n"
    "explorer",
    # a failing check of the build track, as a learner meets it: the message first, the hint within 8 lines
    "import numpy as np\n"
    "from ropepool import track\n"
    "from ropepool.track import solutions\n"
    "def rotate(x, positions, inv_freq, is_neox):\n"
    "    return solutions.rotate(x, np.asarray(positions) + 1, inv_freq, is_neox)\n"
    "track.check(1, rotate)",
]

OUTPUT_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel .jp-Notebook-cell')].map(c => ({
    prompt: (c.querySelector(':scope .jp-InputPrompt') || {textContent: ''}).textContent.trim(),
    text: [...c.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText).join('\\n'),
    images: [...c.querySelectorAll('.jp-OutputArea img')].filter(im => im.complete && im.naturalWidth > 0).length,
  }))"""


def _session(lab: Lab):
    return next((s for s in lab.api("/api/sessions") if s.get("path") == NAME), None)


@pytest.fixture
def scratch(lab: Lab):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = lab.root / NAME
    nbformat.write(nb, path)
    yield path
    session = _session(lab)
    if session is not None:
        lab.api(f"/api/sessions/{session['id']}", method="DELETE")
    path.unlink(missing_ok=True)


def test_explain_stream_and_explorer_in_jupyterlab(browser, lab: Lab, scratch):
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    context.set_default_timeout(120_000)
    page = context.new_page()
    try:
        page.goto(
            f"{lab.base}/lab/workspaces/e2e-learner/tree/{NAME}?token={lab.token}", wait_until="commit", timeout=240_000
        )
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-cell", timeout=240_000)
        wait_for(
            "kernel idle", lambda: (_session(lab) or {}).get("kernel", {}).get("execution_state") == "idle", 240, lab
        )
        assert not page.locator(".jp-Notification-Toast", has_text=re.compile("news", re.I)).count(), (
            "JupyterLab's news question covers the page"
        )
        page.locator(".jp-NotebookPanel .jp-Notebook-cell").first.locator(".jp-InputPrompt").click()
        page.locator("li.lm-MenuBar-item", has_text=re.compile("^Run$")).click()
        page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()

        def finished():
            cells = page.evaluate(OUTPUT_JS)
            done = all(re.fullmatch(r"\[\d+\]:", c["prompt"]) for c in cells)
            return cells if done and cells[2]["images"] else None

        cells = wait_for("Run All finished, the explorer drawn", finished, 300, lab, poll=0.5)
        explain_text = " ".join(cells[0]["text"].split())
        assert "check k_shape, SGLang's Python wrapper" in explain_text
        assert "case foreign_k (heads): k has 32 heads, neither Hq = 28 nor Hkv = 4" in explain_text
        assert "Build k with this model's projection: [T, 4, 128]" in explain_text
        assert "exit status 0" in explain_text

        stream = cells[1]["text"]  # one output area, redrawn at every step: only the last state is left
        assert re.search(r"^step 3: 2 tokens in this pass; 6 of at most 6 new tokens", stream, re.M), stream
        assert re.search(r"^request 0: \d+ \d+ \d+ \[done\]$", stream, re.M) and re.search(
            r"^request 1: ", stream, re.M
        )
        assert stream.count("step ") == 1, f"the stream was appended, not redrawn in place:\n{stream}"

        failed = [line for line in cells[3]["text"].splitlines() if line.strip()]
        hint = next((i for i, line in enumerate(failed) if line.lstrip().startswith("hint:")), None)
        assert failed and failed[0].startswith("ExerciseFailed: Part 1"), failed[:12]
        assert hint is not None and hint < 8, f"the hint is line {hint} of the failing check's output: {failed[:12]}"
        assert not any("ropepool/track" in line for line in failed[: hint + 1]), failed[: hint + 1]

        assert "ylabel: angle theta_i (radians)" in cells[2]["text"]
        cell = page.locator(".jp-NotebookPanel .jp-Notebook-cell").nth(2)
        box = cell.locator(".widget-text").filter(has=page.locator("label", has_text="position")).locator("input").first
        before = cell.locator(".jp-OutputArea img").first.get_attribute("src")
        box.fill("5000")
        box.press("Enter")
        wait_for(
            "the explorer redrew for position 5000",
            lambda: cell.locator(".jp-OutputArea img").first.get_attribute("src") != before,
            30,
            lab,
        )
    finally:
        context.close()


def test_the_server_turns_the_news_question_off(lab: Lab):
    """The workspace's overrides reach the server: the news and update defaults are off for every user."""
    settings = lab.api("/lab/api/settings/@jupyterlab/apputils-extension:notification")
    props = settings["schema"]["properties"]
    assert props["fetchNews"]["default"] == "false" and props["checkForUpdates"]["default"] is False
