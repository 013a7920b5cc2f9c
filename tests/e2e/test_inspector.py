"""The recorded run in Chromium: the page from disk and the viewer in a real JupyterLab.

Both are moved step by step (the page with its arrow keys and its slider, the lab's viewer with the
slider's keyboard); at each step what is drawn (``data-step``, every row square's ``data-state`` and
``data-owners``) must be that step's books, which tests/test_recording.py holds equal to a fresh engine
stopped there.
"""

from __future__ import annotations

import re

import nbformat
import pytest
from helpers import drawn_states

from ropepool.teaching.inspector import scenarios
from ropepool.teaching.inspector.page import page

from .conftest import Lab, wait_for

pytestmark = pytest.mark.e2e

DRAWN_JS = """root => {
  const frame = root.querySelector('.rp-frame');
  if (!frame) return null;
  const rows = [...frame.querySelectorAll('.rp-pool[aria-label="pool rows"] div')];
  return {step: +frame.dataset.step, states: rows.map(d => d.dataset.state),
          owners: rows.map(d => d.dataset.owners), width: frame.getBoundingClientRect().width};
}"""


def expected(state) -> dict:
    return {
        "step": state.step,
        "states": drawn_states(state),
        "owners": [" ".join(map(str, o)) for o in state.row_owners()],
    }


def drawn(locator) -> dict | None:
    got = locator.evaluate(DRAWN_JS)
    return None if got is None else {k: got[k] for k in ("step", "states", "owners")}


def test_the_page_travels_forwards_and_backwards(browser, tmp_path):
    run = scenarios.run("preemption", "tiny")
    states = list(run.recording.states())
    path = tmp_path / "run.html"
    path.write_text(page(run.recording, run.title, about=run.about), encoding="utf-8")
    context = browser.new_context(viewport={"width": 1024, "height": 768}, offline=True)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    try:
        pg.goto(path.as_uri())
        body = pg.locator("body")
        assert drawn(body) == expected(states[0])
        for k in range(1, len(states)):
            pg.keyboard.press("ArrowRight")
            assert drawn(body) == expected(states[k]), f"step {k}"
        pg.keyboard.press("ArrowRight")  # past the end: stays on the last step
        assert drawn(body)["step"] == len(states) - 1
        for k in reversed(range(len(states) - 1)):
            pg.locator("#rp-back").click()
            assert drawn(body) == expected(states[k]), f"back to step {k}"
        middle = len(states) // 2
        pg.locator("#rp-step").fill(str(middle))  # the slider, dragged to the middle
        assert drawn(body) == expected(states[middle])
        assert pg.locator("#rp-label").inner_text() == f"step {middle} of {len(states) - 1}"
        width = pg.evaluate("document.documentElement.scrollWidth")
        assert width <= 1024, f"the page is {width} px wide at 1024x768: it scrolls sideways"
        assert not errors, errors
    finally:
        context.close()


NAME = "e2e_inspector_scratch.ipynb"
CELLS = [
    "from ropepool.teaching.inspector import scenarios\n"
    "from ropepool.teaching.inspector.widget import Inspector\n"
    "run = scenarios.run('sharing', 'tiny')\n"
    "Inspector(run.recording, title='sharing')",
]


def test_the_viewer_in_jupyterlab_shows_each_step(browser, lab: Lab):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = lab.root / NAME
    nbformat.write(nb, path)
    run = scenarios.run("sharing", "tiny")  # the same run the notebook records (the tiny model is seeded)
    states = list(run.recording.states())
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    context.set_default_timeout(120_000)
    pg = context.new_page()
    try:
        pg.goto(
            f"{lab.base}/lab/workspaces/e2e-inspector/tree/{NAME}?token={lab.token}",
            wait_until="commit",
            timeout=240_000,
        )
        pg.wait_for_selector(".jp-NotebookPanel .jp-Notebook-cell", timeout=240_000)
        session = lambda: next((s for s in lab.api("/api/sessions") if s.get("path") == NAME), None)  # noqa: E731
        wait_for("kernel idle", lambda: (session() or {}).get("kernel", {}).get("execution_state") == "idle", 240, lab)
        pg.locator(".jp-NotebookPanel .jp-Notebook-cell").first.locator(".jp-InputPrompt").click()
        pg.locator("li.lm-MenuBar-item", has_text=re.compile("^Run$")).click()
        pg.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
        viewer = pg.locator(".rp-inspector")
        wait_for("the viewer drawn", lambda: viewer.count() and drawn(viewer) is not None, 300, lab, poll=0.5)
        assert drawn(viewer) == expected(states[0])
        handle = viewer.locator(".slider-container .noUi-handle, .ui-slider-handle").first
        handle.focus()
        for k in range(1, len(states)):
            handle.press("ArrowRight")
            wait_for(f"step {k} drawn", lambda k=k: (drawn(viewer) or {}).get("step") == k, 30, lab, poll=0.2)
            assert drawn(viewer) == expected(states[k]), f"step {k}"
        for k in reversed(range(len(states) - 1)):
            handle.press("ArrowLeft")
            wait_for(f"back to step {k}", lambda k=k: (drawn(viewer) or {}).get("step") == k, 30, lab, poll=0.2)
            assert drawn(viewer) == expected(states[k]), f"back to step {k}"
        width = viewer.evaluate(DRAWN_JS)["width"]
        assert width <= 1024, f"the viewer's frame is {width} px wide at 1024x768"
    finally:
        context.close()
        s = next((s for s in lab.api("/api/sessions") if s.get("path") == NAME), None)
        if s is not None:
            lab.api(f"/api/sessions/{s['id']}", method="DELETE")
        path.unlink(missing_ok=True)
