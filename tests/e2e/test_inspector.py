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


FIT_JS = """root => {
  const squares = [...root.querySelectorAll('.rp-pool[aria-label="pool rows"] div')];
  const box = squares[0].closest('.widget-html') || document.documentElement;  // the viewer's view, or the page
  const edge = box.getBoundingClientRect().left + box.clientWidth;
  return {right: Math.max(...squares.map(d => d.getBoundingClientRect().right)), edge,
          width: document.documentElement.clientWidth, scroll: document.documentElement.scrollWidth};
}"""

#: Notebook 09's pool: 320 rows, drawn 32 squares a line where there is room.
WIDE_RUN = (
    "from ropepool.engine import Engine\n"
    "from ropepool.engine.recording import record\n"
    "from ropepool.loaders.tiny import build\n"
    "from ropepool.teaching.inspector import scenarios\n"
    "wide = Engine(build('llama-gqa'), pool_rows=320)\n"
    "for p in scenarios.tiny_prompts(4, 40, 4):\n"
    "    wide.add_request(p, 4)\n"
    "wide_run = record(wide)\n"
    "while not wide.done:\n"
    "    wide.step()\n"
)


def wide_run():
    scope: dict = {}
    exec(WIDE_RUN, scope)
    return scope["wide_run"]


def in_view(fit: dict) -> bool:
    return fit["right"] <= min(fit["edge"], fit["width"]) and fit["scroll"] <= fit["width"]


@pytest.mark.parametrize("width", [1024, 640])
def test_the_page_fits_labels_its_controls_and_goes_to_the_first_and_last_step(browser, tmp_path, width):
    """At 1024x768 (and half a projector's width) every pool square is in view, the last column too, without
    scrolling sideways; each control has a name and a visible title; Home and End go to the first and last step."""
    rec = wide_run()
    path = tmp_path / "run.html"
    path.write_text(page(rec, "320 rows"), encoding="utf-8")
    context = browser.new_context(viewport={"width": width, "height": 768}, offline=True)
    pg = context.new_page()
    try:
        pg.goto(path.as_uri())
        body = pg.locator("body")
        fit = body.evaluate(FIT_JS)
        assert in_view(fit), f"at {width} px the pool's last column ends at {fit['right']:.0f} px: {fit}"
        for control in ("#rp-back", "#rp-step", "#rp-next"):
            named = pg.locator(control)
            assert named.get_attribute("aria-label") and named.get_attribute("title"), control
        assert pg.get_by_role("button", name="next step").is_visible()
        pg.keyboard.press("End")
        assert drawn(body)["step"] == len(rec) and pg.locator("#rp-step").input_value() == str(len(rec))
        assert pg.locator("#rp-label").inner_text() == f"step {len(rec)} of {len(rec)}"
        pg.keyboard.press("Home")
        assert drawn(body)["step"] == 0 and pg.locator("#rp-step").input_value() == "0"
    finally:
        context.close()


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
    WIDE_RUN + "Inspector(wide_run, title='320 rows')",
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
        viewer, wide = pg.locator(".rp-inspector").first, pg.locator(".rp-inspector").nth(1)
        wait_for("both viewers drawn", lambda: wide.count() and drawn(wide) is not None, 300, lab, poll=0.5)
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
        check_wide_viewer(pg, wide, lab)
    finally:
        context.close()
        s = next((s for s in lab.api("/api/sessions") if s.get("path") == NAME), None)
        if s is not None:
            lab.api(f"/api/sessions/{s['id']}", method="DELETE")
        path.unlink(missing_ok=True)


def check_wide_viewer(pg, wide, lab: Lab) -> None:
    """Notebook 09's viewer (a pool of 320 rows) at 1024x768: every square in the output's view, the last column
    too; labelled buttons (no unlabelled icon), play running the steps to the last, Home and End on the slider."""
    fit = wide.evaluate(FIT_JS)
    assert in_view(fit), f"the pool's last column ends at {fit['right']:.0f} px, the view at {fit['edge']:.0f}: {fit}"
    buttons = wide.locator("button").filter(visible=True)
    labels = [(b.inner_text().strip(), b.get_attribute("title")) for b in buttons.all()]
    assert len(labels) == 3 and all(text and title for text, title in labels), labels
    last = len(wide_run())
    step = lambda: (drawn(wide) or {}).get("step")  # noqa: E731
    wide.get_by_role("button", name="play").click()
    wait_for("play to reach the last step", lambda: step() == last, 60, lab, poll=0.3)
    wide.get_by_role("button", name="back").click()
    wait_for("back one step", lambda: step() == last - 1, 30, lab, poll=0.2)
    handle = wide.locator(".slider-container .noUi-handle").first
    handle.focus()
    handle.press("Home")
    wait_for("Home: the first step", lambda: step() == 0, 30, lab, poll=0.2)
    handle.press("End")
    wait_for("End: the last step", lambda: step() == last, 30, lab, poll=0.2)
