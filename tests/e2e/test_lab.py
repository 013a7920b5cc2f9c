"""End to end: the suite in a real JupyterLab, in a real (headless) Chromium, as a learner runs it.

nbmake runs every notebook; here run the notebooks that show widgets, since only a browser renders
and drives them (:data:`IN_THE_BROWSER`). For each: open it, clear the outputs it was saved with,
Run > Run All Cells, wait until the kernel is idle and no cell is queued, then check what the page
shows: no error output in any cell, every widget rendered as controls, an image in every cell
tagged ``plot``, and what a learner's use of some widgets shows:
01's shape table after the Hkv slider and the Model dropdown, 03's slider after typing a position,
02's BreakIt card after picking another mistake (that error's text, no label cut, no word broken),
04's slots playground after typing duplicate then valid slots (the error, then a picture; never a
broken image). With ROPEPOOL_SCREENSHOTS=all, full-page screenshots of each at 1280x800 and 1024x768 go to
artifacts/screenshots/ (one is always taken of a page that failed); a notebook over 12 screens at 1280x800 must say why in its first cell.
Also: the server serves the learner's copy, and a notebook edited and saved there leaves
``git status`` as it was; the server refuses its API without the token and listens on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import time
import warnings
from pathlib import Path

import nbformat
import pytest

from ropepool.cli.lab import NOTEBOOKS as NOTEBOOKS_DIR

from .conftest import ROOT, SCREENSHOTS, Lab, port_open, wait_for

pytestmark = pytest.mark.e2e

NOTEBOOKS = sorted(ROOT.glob("*.ipynb"))

# A code line that shows a widget: a widget class from ropepool's teaching widgets or the step viewer, or ipywidgets.
SHOWS_WIDGETS = re.compile(
    r"^\s*(from ropepool\.teaching\.(widgets\.\w+|inspector\.widget) import .*\b[A-Z]\w*|import ipywidgets|from ipywidgets)",
    re.M,
)


def _shows_widgets(path: Path) -> bool:
    nb = nbformat.read(path, as_version=4)
    return any(SHOWS_WIDGETS.search(c.source) for c in nb.cells if c.cell_type == "code")


# No widget, but a figure the browser must be seen to show: 10 draws memory-vs-error inside an ``if``, 15 the
# gap per layer and the key splits.
ALSO_IN_THE_BROWSER = {"10_what_engines_fuse_today", "15_same_prompt_different_logits"}
# The build-it track's stubs raise until a learner fills them in (nbmake runs them with the demo switch,
# notebooks/conftest.py); the viewer 14 shows is driven in tests/e2e/test_inspector.py.
STUBS = {"12_build_rotate_and_fp8", "13_build_allocator_and_slots", "14_build_tree_and_scheduler"}
IN_THE_BROWSER = [p for p in NOTEBOOKS if (_shows_widgets(p) or p.stem in ALSO_IN_THE_BROWSER) and p.stem not in STUBS]
DRIVEN = {"01_gqa_shapes", "02_error_gallery", "03_rotation", "04_pool_layout"}  # widgets used below
RUN_TIMEOUT = (
    600  # s, one notebook's Run All (the browser runs the widget notebooks, seconds each; generous for busy cores)
)
OPEN_TIMEOUT = 240  # s, from navigating to a notebook until its cells are on the page

# A stderr output that is an exception (a traceback, or IPython's short form of a SyntaxError),
# not a warning. JupyterLab renders a cell's error output with the stderr mime type, like a
# stream to stderr; warnings ("path.py:12: UserWarning: ...") are reported, not failed.
ERROR_TEXT = re.compile(
    r"Traceback \(most recent call last\)|^\s*Cell In\[\d+\], line \d+"
    r"|^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b(:|$)",
    re.M,
)

# The state of every cell on the page, in order (windowingMode "none": all cells are attached).
CELLS_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel .jp-Notebook-cell')].map(c => ({
    kind: c.classList.contains('jp-CodeCell') ? 'code' : c.classList.contains('jp-MarkdownCell') ? 'markdown' : 'raw',
    prompt: (c.querySelector(':scope .jp-InputPrompt') || {textContent: ''}).textContent.trim(),
    stderr: [...c.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
      .map(o => o.innerText),
    images: [...c.querySelectorAll('.jp-OutputArea img')].map(im => im.complete && im.naturalWidth > 0),
    plain: [...c.querySelectorAll('.jp-OutputArea-output[data-mime-type="text/plain"]')].map(o => o.innerText),
    stdout: [...c.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stdout"]')]
      .map(o => o.innerText),
    widget_errors: [...c.querySelectorAll('.jupyter-widgets-error-widget')].map(e => e.innerText || e.title || '?'),
  }))"""

# What the wait for Run All reads, often: each cell's prompt and error text, by textContent (innerText
# would lay the page out again at every look).
PROGRESS_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel .jp-Notebook-cell')].map(c => ({
    prompt: (c.querySelector(':scope .jp-InputPrompt') || {textContent: ''}).textContent.trim(),
    stderr: [...c.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
      .map(o => o.textContent),
  }))"""

# A widget shown as its text repr ("VBox(children=(Dropdown(...": the widget manager did not render
# it (front-end extension missing or broken) and the learner sees text instead of controls.
WIDGET_AS_TEXT = re.compile(r"^[A-Z]\w*\(((children|value|options|description|layout|outputs|min|max)=|\)$)")

STATUS_JS = """() => (document.querySelector('.jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator')
  || {dataset: {}}).dataset.status || null"""


def _cells(page) -> list[dict]:
    return page.evaluate(CELLS_JS)


def _session(lab: Lab, name: str) -> dict | None:
    return next((s for s in lab.api("/api/sessions") if s.get("path") == name), None)


def _dialogs(page) -> list[str]:
    return [t.strip() for t in page.locator(".jp-Dialog").all_inner_texts()]


def _open(page, lab: Lab, name: str) -> None:
    """Open the notebook in a workspace of its own; wait for its kernel, answering the kernel dialog."""
    workspace = "e2e-" + re.sub(r"\W", "-", Path(name).stem)
    # Wait for the server's answer only, not for the page's "load" event: that waits for every
    # bundle JupyterLab fetches, which on a busy 2-core machine (the other worker running a
    # notebook, two servers and two browsers starting at once) took over 60 s in CI. What the test
    # needs is the notebook's cells, and that wait has the whole budget.
    page.goto(
        f"{lab.base}/lab/workspaces/{workspace}/tree/{name}?token={lab.token}",
        wait_until="commit",
        timeout=OPEN_TIMEOUT * 1000,
    )
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-cell", timeout=OPEN_TIMEOUT * 1000)
    _wait_for_kernel(page, lab, name)


def _open_from_path(page, lab: Lab, name: str) -> None:
    """In a lab already on the page: File > Open from Path..., the notebook's name, Open; wait for its kernel."""
    assert not page.locator(".jp-NotebookPanel").count(), f"{name}: a notebook is still open on the page"
    _menu(page, "File", "filebrowser:open-path")
    page.locator(".jp-Dialog input").fill(name)
    page.locator(".jp-Dialog .jp-mod-accept").click()
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-cell", timeout=OPEN_TIMEOUT * 1000)
    _wait_for_kernel(page, lab, name)


def _close_unsaved(page, lab: Lab, name: str) -> None:
    """File > Close Tab on the notebook just run, answering "Discard" to JupyterLab's "Save your work": the
    file is never written (its kernel is still running: the caller shuts its session down)."""
    _menu(page, "File", "application:close")
    wait_for(f"{name}: the save-or-discard dialog", lambda: page.locator(".jp-Dialog").count(), 30, lab)
    page.locator(".jp-Dialog button", has_text=re.compile(r"^\s*Discard\s*$")).click()
    page.wait_for_selector(".jp-NotebookPanel", state="detached", timeout=30_000)


def _wait_for_kernel(page, lab: Lab, name: str) -> None:
    """Until the notebook's kernel is idle, on the server and on the page; answers the kernel dialog."""

    def ready():
        if page.locator(".jp-Dialog").count():
            header = page.locator(".jp-Dialog .jp-Dialog-header").all_inner_texts()
            # "Select Kernel": only where a notebook has no kernelspec metadata; take the default
            assert any("Kernel" in h for h in header), f"{name}: unexpected dialog: {_dialogs(page)}"
            warnings.warn(f"{name}: JupyterLab asked which kernel to use (no kernelspec in the notebook's metadata)")
            page.locator(".jp-Dialog .jp-mod-accept").first.click()
            return False
        session = _session(lab, name)
        return (
            session is not None
            and session["kernel"]["execution_state"] == "idle"
            and page.evaluate(STATUS_JS) == "idle"
        )

    try:
        wait_for(f"{name}: kernel started and idle", ready, OPEN_TIMEOUT, lab)
    except AssertionError as e:
        sessions = [(s.get("path"), s["kernel"]["execution_state"]) for s in lab.api("/api/sessions")]
        raise AssertionError(f"{e}\nsessions (path, state): {sessions}; the page says {page.evaluate(STATUS_JS)!r}")


def _menu(page, menu: str, command: str) -> None:
    page.locator("li.lm-MenuBar-item", has_text=re.compile(rf"^{menu}$")).click()
    page.locator(f".lm-Menu-item[data-command='{command}']").click()


def _run_all(page, lab: Lab, name: str, code_cells: list[int]) -> list[dict]:
    """Clear outputs, Run All Cells, wait until every cell has run (or the run stopped at an error)."""
    # Focus the notebook, as a learner would: a click on the first cell's prompt area (not its
    # centre, where a markdown link could be).
    page.locator(".jp-NotebookPanel .jp-Notebook-cell").first.locator(".jp-InputPrompt").click()
    _menu(page, "Edit", "editmenu:clear-all")  # saved outputs must not pass for fresh ones
    wait_for(
        f"{name}: outputs cleared",
        lambda: not any(c["stderr"] or c["images"] or re.search(r"\d", c["prompt"]) for c in _cells(page)),
        30,
        lab,
    )
    _menu(page, "Run", "runmenu:run-all")

    def finished():
        # e.g. "Kernel Restarting: the kernel appears to have died"; fail now, not at the timeout
        assert not page.locator(".jp-Dialog").count(), f"{name}: dialog during Run All: {_dialogs(page)}"
        cells = page.evaluate(PROGRESS_JS)  # the whole state (_cells) only once the run is over
        prompts = [cells[i]["prompt"] for i in code_cells if i < len(cells)]
        if any("*" in p for p in prompts) or page.evaluate(STATUS_JS) != "idle":
            return None
        session = _session(lab, name)
        state = session["kernel"]["execution_state"] if session else None
        assert state != "dead", f"{name}: the kernel died during Run All\n{lab.log_tail(15)}"
        if state != "idle":
            return None
        ran = all(re.search(r"\d", p) for p in prompts)
        stopped = any(ERROR_TEXT.search(t) for c in cells for t in c["stderr"])
        return _cells(page) if ran or stopped else None

    wait_for(f"{name}: Run All finished, kernel idle", finished, RUN_TIMEOUT, lab, poll=0.5)
    time.sleep(1.0)  # let the last outputs (images decode, widget views) settle, then look again
    return wait_for(f"{name}: Run All finished, kernel idle", finished, 30, lab)


#: The screen sizes pictured, a laptop's and a projector's: pictures for a person to look at, taken only
#: where ROPEPOOL_SCREENSHOTS=all asks (two seconds each a notebook); the height check reads the page.
SCREEN_SIZES = [(1280, 800), (1024, 768)] * (os.environ.get("ROPEPOOL_SCREENSHOTS") == "all")
MAX_SCREENS = 12  # at 1280x800: a workshop slot; a longer notebook says why in its first cell
#: Scroll the notebook to its top; how far its last cell reaches below the visible part, in pixels.
TO_TOP_JS = """() => { const s = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer');
                       const cells = document.querySelectorAll('.jp-NotebookPanel .jp-Notebook-cell');
                       if (!s || !cells.length) return 0;
                       s.scrollTop = 0;
                       return cells[cells.length - 1].getBoundingClientRect().bottom - s.getBoundingClientRect().bottom }"""


def _notebook_height(page) -> int:
    """The page's height with every cell in view, in pixels at the viewport's width: the viewport's height
    and how far the last cell reaches below it (what a full-page picture's height is)."""
    # Make the first cell the active one: on a resize JupyterLab scrolls the active cell into view,
    # and Run All leaves the last cell active. A click on its prompt area selects it in command mode.
    page.locator(".jp-NotebookPanel .jp-Notebook-cell").first.locator(".jp-InputPrompt").click()
    return page.viewport_size["height"] + max(int(page.evaluate(TO_TOP_JS)) + 40, 0)


def _long_notebook_says_why(nb, name: str, height: int, screen: int) -> None:
    screens = height / screen
    print(f"{name}: {screens:.1f} screens at 1280x800")
    if screens > MAX_SCREENS:
        first = nb.cells[0].source.lower()
        assert "longer than" in first, (
            f"{name} is {screens:.1f} screens at 1280x800 (> {MAX_SCREENS}); shorten "
            "it or say at its top why it is longer than a workshop slot"
        )


def _screenshot(page, name: str, suffix: str = "") -> Path:
    """Full-page PNG: grow the viewport to the notebook's height so every cell is in the picture."""
    size = page.viewport_size
    # Capped at 32,000 px (headless Chromium captures that; the suite's longest notebook is ~15,000).
    page.set_viewport_size({"width": size["width"], "height": min(_notebook_height(page), 32_000)})
    page.wait_for_timeout(300)
    page.evaluate(TO_TOP_JS)
    page.wait_for_timeout(500)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{Path(name).stem}{suffix}.png"
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(size)
    return path


SHAPE_ROWS_JS = """cell => Object.fromEntries([...cell.querySelectorAll('table.ropepool-shapes tr')]
  .map(tr => [...tr.querySelectorAll('td, th')].map(td => td.innerText.trim()))
  .filter(r => r.length).map(r => [r[0], r.slice(1).join(' | ')]))"""


FIND_MODEL_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel .jp-Notebook-cell')].findIndex(c =>
  [...c.querySelectorAll('.widget-dropdown > label')].some(l => l.textContent.trim() === 'Model'))"""


def _gqa_dropdown(page, lab: Lab) -> None:
    """Pick another model in the "Model" dropdown; the q and k rows must show its Hq, Hkv and D."""
    from ropepool.models import preset, preset_names

    index = page.evaluate(FIND_MODEL_JS)
    assert index >= 0, "01_gqa_shapes: no ipywidgets Dropdown labelled 'Model' on the page"
    cell = page.locator(".jp-NotebookPanel .jp-Notebook-cell").nth(index)
    select = (
        cell.locator(".widget-dropdown")
        .filter(has=page.locator("label", has_text=re.compile(r"^\s*Model\s*$")))
        .locator("select")
        .first
    )
    assert cell.locator("table.ropepool-shapes").count(), (
        f"01_gqa_shapes: cell {index}, which shows the Model dropdown, shows no <table class='ropepool-shapes'>"
    )
    before = cell.evaluate(SHAPE_ROWS_JS)
    assert "k" in before and "q" in before, f"shape table has no q/k rows: {before}"
    current = select.input_value()
    options = select.locator("option").evaluate_all("os => os.map(o => o.value)")
    old = preset(current) if current in preset_names() else None
    targets = [
        o
        for o in options
        if o in preset_names()
        and o != current
        and (old is None or (preset(o).num_kv_heads, preset(o).head_dim) != (old.num_kv_heads, old.head_dim))
    ]
    assert targets, f"no other preset to pick among {options} (current {current!r})"
    target = preset(targets[0])
    select.select_option(targets[0])
    k_re = re.compile(rf"\(\d+, {target.num_kv_heads}, {target.head_dim}\)")
    q_re = re.compile(rf"\(\d+, {target.num_qo_heads}, {target.head_dim}\)")

    def updated():
        rows = cell.evaluate(SHAPE_ROWS_JS)
        return rows if k_re.search(rows.get("k", "")) and q_re.search(rows.get("q", "")) else None

    try:
        after = wait_for(f"shape table for {targets[0]}", updated, 30, lab)
    except AssertionError:
        raise AssertionError(
            f"01_gqa_shapes: picked {targets[0]!r} (Hq={target.num_qo_heads}, "
            f"Hkv={target.num_kv_heads}, D={target.head_dim}) but the table shows "
            f"{cell.evaluate(SHAPE_ROWS_JS)} (before: {before})"
        ) from None
    assert after["k"] != before["k"]


FIND_WIDGET_JS = """label => [...document.querySelectorAll('.jp-NotebookPanel .jp-Notebook-cell')].findIndex(c =>
  [...c.querySelectorAll('.widget-inline-hbox > label, .widget-label')].some(l => l.textContent.trim() === label))"""


def _widget_cell(page, label: str):
    index = page.evaluate(FIND_WIDGET_JS, label)
    assert index >= 0, f"no widget labelled {label!r} on the page"
    return page.locator(".jp-NotebookPanel .jp-Notebook-cell").nth(index)


def _hkv_slider(page, lab: Lab) -> None:
    """01: one ArrowLeft on the Hkv slider moves one stop (8 -> 7 heads), and the shape table follows."""
    cell = _widget_cell(page, "Hkv (num_kv_heads)")
    slider = (
        cell.locator(".widget-hslider, .widget-slider")
        .filter(has=page.locator("label", has_text="Hkv (num_kv_heads)"))
        .first
    )
    before = slider.locator(".widget-readout").inner_text().strip()
    slider.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowLeft")
    wait_for(
        "Hkv slider moved one stop", lambda: slider.locator(".widget-readout").inner_text().strip() != before, 15, lab
    )
    after = slider.locator(".widget-readout").inner_text().strip()
    assert (before, after) == ("8", "7"), f"one key press moved Hkv from {before} to {after}"
    wait_for(
        "shape table shows Hkv = 7",
        lambda: re.search(r"\(\d+, 7, \d+\)", cell.evaluate(SHAPE_ROWS_JS).get("k", "")),
        15,
        lab,
    )


def _position_box(page, lab: Lab) -> None:
    """03: typing a position into the number box moves the log slider to its nearest stop."""
    cell = _widget_cell(page, "position")
    box = cell.locator(".widget-text").filter(has=page.locator("label", has_text="position")).locator("input").first
    box.fill("1234")
    box.press("Enter")
    readouts = cell.locator(".widget-readout")
    wait_for("position slider at the stop nearest 1234", lambda: "1,000" in readouts.all_inner_texts(), 15, lab)


# What a BreakIt card shows: its code, the error text, how that text wraps, and which words of it
# the browser broke across two lines (a word whose glyphs sit on more than one line box).
ERROR_CARD_JS = """cell => { const card = cell.querySelector('.ropepool-error-card'); if (!card) return null;
  const pre = card.querySelector('pre'); if (!pre) return {code: card.dataset.code, text: null};
  const cs = getComputedStyle(pre), split = [];
  const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode());) {
    for (const m of node.data.matchAll(/\\S+/g)) {
      const r = document.createRange(); r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
      const tops = new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top)));
      if (tops.size > 1) split.push(m[0]);
    } }
  return {code: card.dataset.code, heading: (card.querySelector('h4 code') || {}).textContent,
          text: pre.innerText, word_break: cs.wordBreak, overflow_wrap: cs.overflowWrap, split} }"""

# Option labels of a <select> wider than its text box (measured in the select's own font), and
# whether the select reaches past the output area that holds it (its right end would be cut).
SELECT_FIT_JS = """sel => { const cs = getComputedStyle(sel), ctx = document.createElement('canvas').getContext('2d');
  ctx.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
  const room = sel.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  const area = sel.closest('.jp-OutputArea-output').getBoundingClientRect();
  return {room, cut: [...sel.options].map(o => [o.text, ctx.measureText(o.text).width]).filter(([t, w]) => w > room),
          past_area: sel.getBoundingClientRect().right - area.right} }"""


def _template_re(template: str) -> re.Pattern:
    """A catalog message template ("k shape must be ..., got {shape}") as a regex for its formatted text."""
    return re.compile(".+?".join(re.escape(part) for part in re.split(r"\{[^{}]*\}", template)) + "$")


def _break_it(page, lab: Lab) -> None:
    """02: pick another mistake in BreakIt's dropdown; the card shows that error's catalog text, whole."""
    from ropepool.teaching.catalog import CATALOG

    cell = _widget_cell(page, "Mistake")
    select = (
        cell.locator(".widget-dropdown")
        .filter(has=page.locator("label", has_text=re.compile(r"^\s*Mistake\s*$")))
        .locator("select")
        .first
    )
    # ipywidgets' <option>s carry the labels ("k_shape: num_kv_heads taken from ..."), not the codes
    current = select.input_value().partition(":")[0]
    before = cell.evaluate(ERROR_CARD_JS)
    assert before and before["code"] == current, f"BreakIt shows {before} with {current!r} picked"
    labels = select.locator("option").evaluate_all("os => os.map(o => o.textContent)")
    label = next(t for t in labels if t.partition(":")[0] in CATALOG and t.partition(":")[0] != current)
    target = label.partition(":")[0]
    select.select_option(label=label)
    try:
        card = wait_for(
            f"BreakIt card for {target}",
            lambda: (c := cell.evaluate(ERROR_CARD_JS)) and c["code"] == target and c["text"] and c,
            15,
            lab,
        )
    except AssertionError:
        shown = cell.evaluate(ERROR_CARD_JS) or {}
        raise AssertionError(
            f"BreakIt: picked {target!r}, the card still shows {shown.get('code')!r}: "
            f"{(shown.get('text') or '').splitlines()[:1]}"
        ) from None
    assert card["heading"] == target, f"BreakIt card for {target} is headed {card['heading']!r}"
    first = card["text"].splitlines()[0]
    assert _template_re("RopePoolError: " + CATALOG[target].message).match(first), (
        f"BreakIt picked {target!r}: expected its catalog message {CATALOG[target].message!r}, shows {first!r}"
    )
    assert first != before["text"].splitlines()[0], f"the error text did not change from {current!r}: {first!r}"
    assert card["word_break"] in ("normal", "keep-all") and card["overflow_wrap"] == "normal", (
        f"the error text may break words mid-word: word-break {card['word_break']}, "
        f"overflow-wrap {card['overflow_wrap']}"
    )
    assert not card["split"], f"words of the error text broken across lines: {card['split']}"
    fit = select.evaluate(SELECT_FIT_JS)
    assert not fit["cut"] and fit["past_area"] <= 1, (
        f"BreakIt's dropdown ({fit['room']:.0f} px of text) cuts labels {fit['cut']}, "
        f"or reaches {fit['past_area']:.0f} px past its output area"
    )


# The images a learner sees in a cell (hidden ones, display: none, are not shown), each loaded or not.
SHOWN_IMAGES_JS = """cell => [...cell.querySelectorAll('.jp-OutputArea img')].filter(im => im.getClientRects().length)
  .map(im => ({ok: im.complete && im.naturalWidth > 0, src: im.getAttribute('src')?.slice(0, 40)}))"""


def _slots_box(page, lab: Lab) -> None:
    """04: duplicate slots show the duplicate_slot error and no broken image; valid ones a picture again."""
    cell = _widget_cell(page, "slots")
    box = (
        cell.locator(".widget-text")
        .filter(has=page.locator("label", has_text=re.compile(r"^\s*slots\s*$")))
        .locator("input")
        .first
    )
    output = cell.locator(".jp-OutputArea")
    assert "duplicate_slot" not in output.inner_text(), "the playground shows duplicate_slot before any typing"

    def enter(text: str, shows: str) -> None:  # continuous_update=False: the value is sent on Enter
        box.fill(text)
        box.press("Enter")
        wait_for(f"slots {text!r}: the page shows {shows!r}", lambda: shows in output.inner_text(), 15, lab)
        # every message of that update has reached the page once the kernel is idle again
        wait_for("kernel idle", lambda: page.evaluate(STATUS_JS) == "idle", 15, lab)
        page.wait_for_timeout(300)  # image decode

    enter("5, 5", "duplicate_slot")
    shown = cell.evaluate(SHOWN_IMAGES_JS)
    assert all(im["ok"] for im in shown), f"slots '5, 5': a broken image shows next to the error: {shown}"
    enter("7, 2, -1, 4", "wrote rows [2, 4, 7]")
    text = output.inner_text()
    assert "duplicate_slot" not in text and "RopePoolError" not in text, f"the error stays after valid slots: {text}"
    try:
        wait_for(
            "the pool picture after valid slots",
            lambda: (s := cell.evaluate(SHOWN_IMAGES_JS)) and all(im["ok"] for im in s),
            10,
            lab,
        )
    except AssertionError:
        raise AssertionError(
            f"slots '7, 2, -1, 4': no loaded pool picture shows: {cell.evaluate(SHOWN_IMAGES_JS)}"
        ) from None


def test_the_notebooks_whose_widgets_are_driven_run_in_the_browser():
    if ROOT == NOTEBOOKS_DIR.resolve():
        assert DRIVEN <= {p.stem for p in IN_THE_BROWSER}, [p.stem for p in IN_THE_BROWSER]
    assert _shows_widgets(NOTEBOOKS_DIR / "02_error_gallery.ipynb")
    assert not _shows_widgets(NOTEBOOKS_DIR / "05_inside_the_kernel.ipynb")  # no widget: nbmake's run suffices
    ten = NOTEBOOKS_DIR / "10_what_engines_fuse_today.ipynb"
    cells = nbformat.read(ten, as_version=4).cells
    drawn_in_an_if = [c for c in cells if "memory_vs_error" in c.source and c.source.startswith("if ")]
    assert drawn_in_an_if and all("plot" in c.metadata.get("tags", []) for c in drawn_in_an_if)


class LabPage:
    """One JupyterLab page at 1280x800 (a workspace of its own) in which the notebooks open in turn, from the
    File menu, as a learner opens one after another: the lab starts once, not once a notebook. A test that
    fails leaves the page to be closed; the next test starts a new one."""

    def __init__(self, browser, lab: Lab):
        self.browser, self.lab, self.context, self.page = browser, lab, None, None

    def get(self):
        if self.page is None:
            self.context = self.browser.new_context(viewport={"width": 1280, "height": 800})
            self.context.set_default_timeout(120_000)  # a busy 2-core CI machine is slow, not broken
            self.page = self.context.new_page()
            # a workspace never used before: the server keeps each workspace's layout, and a page on an old one
            # would open again the tabs it last saved
            workspace = f"e2e-notebooks-{secrets.token_hex(4)}"
            self.page.goto(
                f"{self.lab.base}/lab/workspaces/{workspace}?token={self.lab.token}",
                wait_until="commit",
                timeout=OPEN_TIMEOUT * 1000,
            )
            self.page.wait_for_selector(".jp-Launcher", state="visible", timeout=OPEN_TIMEOUT * 1000)
        return self.page

    def close(self) -> None:  # no beforeunload: nothing is saved
        if self.context is not None:
            self.context.close()
        self.context = self.page = None


@pytest.fixture(scope="session")  # the browser tests of other modules run between these: the page stays
def lab_page(browser, lab: Lab):
    shared = LabPage(browser, lab)
    yield shared
    shared.close()


@pytest.mark.parametrize("path", IN_THE_BROWSER, ids=[p.name for p in IN_THE_BROWSER])
def test_notebook_in_jupyterlab(lab_page: LabPage, lab: Lab, path: Path):
    name = path.relative_to(ROOT).as_posix()
    nb = nbformat.read(path, as_version=4)
    code_cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()]
    plot_cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "plot" in c.metadata.get("tags", [])]
    log_start = lab.log.stat().st_size
    checkpoint = lab.root / ".ipynb_checkpoints" / f"{path.stem}-checkpoint.ipynb"
    checkpoint_before = checkpoint.stat().st_mtime_ns if checkpoint.exists() else None

    page = lab_page.get()
    page_errors: list[str] = []

    def noted(e):
        page_errors.append(str(e))

    page.on("pageerror", noted)
    failed = True
    try:
        _open_from_path(page, lab, name)
        cells = _run_all(page, lab, name, code_cells)
        assert len(cells) == len(nb.cells), f"{name}: {len(cells)} cells on the page, {len(nb.cells)} in the file"
        for i, (cell, on_page) in enumerate(zip(nb.cells, cells)):
            assert on_page["kind"] == cell.cell_type or cell.cell_type == "raw", (
                f"{name}: cell {i} is {cell.cell_type} in the file but {on_page['kind']} on the page"
            )

        errors = {i: t for i, c in enumerate(cells) for t in c["stderr"] if ERROR_TEXT.search(t)}
        assert not errors, f"{name}: error output on the page in cell(s) {sorted(errors)}:\n" + "\n\n".join(
            f"--- cell {i} ---\n{nb.cells[i].source}\n--- shows ---\n{t}" for i, t in errors.items()
        )
        broken = {
            i: (c["widget_errors"] or [t for t in c["plain"] if WIDGET_AS_TEXT.match(t)]) for i, c in enumerate(cells)
        }
        broken = {i: v for i, v in broken.items() if v}
        assert not broken, f"{name}: widgets not rendered (error widget, or text repr instead): {broken}"
        not_run = [i for i in code_cells if not re.fullmatch(r"\[\d+\]:", cells[i]["prompt"])]
        assert not not_run, f"{name}: code cells without an execution count after Run All: {not_run}"
        for i, c in enumerate(cells):
            for t in c["stderr"]:
                warnings.warn(f"{name} cell {i} writes to stderr (shown to learners): {t[:300]}")

        def no_image(i):  # a plot cell that says it skipped (no real model here) draws nothing, by design
            return not any(cells[i]["images"]) and not any(t.startswith("SKIPPED:") for t in cells[i]["stdout"])

        missing = [i for i in plot_cells if no_image(i)]
        if missing:  # images from data: URLs decode asynchronously; give them a moment
            time.sleep(2)
            cells = _cells(page)
            missing = [i for i in plot_cells if no_image(i)]
        assert not missing, f"{name}: plot-tagged cell(s) {missing} show no image after running"

        if path.stem == "01_gqa_shapes":
            _hkv_slider(page, lab)  # first: the dropdown below switches the model away from Hkv = 8
            _gqa_dropdown(page, lab)
        if path.stem == "03_rotation":
            _position_box(page, lab)
        if path.stem == "02_error_gallery":
            _break_it(page, lab)
        if path.stem == "04_pool_layout":
            _slots_box(page, lab)
        for width, height in SCREEN_SIZES:  # a laptop, and a projector
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(500)
            _screenshot(page, name, f"-{width}x{height}")
        page.set_viewport_size({"width": 1280, "height": 800})
        _long_notebook_says_why(nb, name, _notebook_height(page), 800)
        _close_unsaved(page, lab, name)
        failed = False
        for e in page_errors:  # uncaught JavaScript errors: reported, not failed (JupyterLab has some)
            warnings.warn(f"{name}: JavaScript error on the page: {e[:300]}")
    except Exception:
        try:
            _screenshot(page, name, "-FAILED")  # what the page showed when it failed
        except Exception:
            pass
        if page_errors:
            print(f"{name}: JavaScript errors on the page:", *page_errors, sep="\n  ")
        raise
    finally:
        lab.remember_kernels()
        page.remove_listener("pageerror", noted)
        if failed:
            lab_page.close()
        session = _session(lab, name)
        if session is not None:  # shut the kernel down now: memory stays low across notebooks
            lab.api(f"/api/sessions/{session['id']}", method="DELETE")

    # autosave is off and nothing is saved: the tracked notebooks must stay as they are
    saved = [line for line in lab.log_since(log_start).splitlines() if "Saving file at" in line]
    assert not saved, f"{name}: the server wrote files while the test ran: {saved}"
    checkpoint_after = checkpoint.stat().st_mtime_ns if checkpoint.exists() else None
    assert checkpoint_after == checkpoint_before, f"{name}: the server wrote {checkpoint}"
    wait_for("no kernel left running", lambda: lab.api("/api/kernels") == [], 30, lab)


def _listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of the TCP sockets process ``pid`` listens on: /proc on Linux, else lsof."""
    if not Path(f"/proc/{pid}/fd").is_dir():
        if shutil.which("lsof") is None:
            pytest.skip("neither /proc nor lsof here to list the server's listening sockets")
        out = subprocess.run(
            ["lsof", "-nP", "-a", "-p", str(pid), "-iTCP", "-sTCP:LISTEN", "-Fn"], capture_output=True, text=True
        ).stdout
        found = set()
        for line in out.splitlines():  # "n127.0.0.1:8888", "n[::1]:8888", "n*:8888"
            if line.startswith("n"):
                addr, _, port = line[1:].rpartition(":")
                found.add((addr.strip("[]").replace("*", "0.0.0.0"), int(port)))
        return found
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, size in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            addr_hex, port_hex = local.split(":")
            raw = bytes.fromhex(addr_hex)
            if size == 4:
                addr = socket.inet_ntop(socket.AF_INET, raw[::-1])
            else:  # /proc prints IPv6 as four little-endian 32-bit words
                addr = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))
            found.add((addr, int(port_hex, 16)))
    return found


def _outward_address() -> str | None:
    """This machine's address on its default route (no packet is sent), or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: only picks the route
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") or addr == "0.0.0.0" else addr


@pytest.mark.parametrize("path", ["/api/contents", "/api/kernels", "/api/sessions", "/api/status"])
def test_api_needs_the_token(lab: Lab, path: str):
    assert lab.request("GET", path, token=None)[0] == 403  # Jupyter Server 2: 403 Forbidden, not 401
    assert lab.request("GET", path, token="0" * 48)[0] == 403
    assert lab.request("GET", path)[0] == 200


def test_token_not_on_the_command_line(lab: Lab):
    """The token travels in JUPYTER_TOKEN: the process list (readable by every local user) lacks it."""
    cmdline = Path(f"/proc/{lab.pid}/cmdline").read_bytes().decode(errors="replace")
    assert len(lab.token) >= 32 and lab.token not in cmdline and lab.token not in " ".join(lab.argv)


def test_listens_on_loopback_only(lab: Lab):
    sockets = _listening(lab.pid)
    assert sockets == {("127.0.0.1", lab.port)}, f"server PID {lab.pid} listens on {sockets}"
    outward = _outward_address()
    if outward is not None:
        assert not port_open(lab.port, outward), f"port {lab.port} answers on {outward}"


def test_settings_the_browser_test_relies_on(lab: Lab):
    """windowingMode "none" (all cells in the DOM) and no autosave reach the server's settings."""
    tracker = lab.api("/lab/api/settings/@jupyterlab/notebook-extension:tracker")["settings"]
    docmanager = lab.api("/lab/api/settings/@jupyterlab/docmanager-extension:plugin")["settings"]
    assert tracker["windowingMode"] == "none" and docmanager["autosave"] is False


# A learner's edit, saved (Ctrl+S) in the lab: it lands in the learner's copy, and the repository's
# working tree (notebooks/ included) stays as git saw it before.
EDIT = "# a learner's note, saved by the browser test"


def _git_status() -> str | None:
    from .conftest import REPO

    if shutil.which("git") is None or not (REPO / ".git").exists():
        return None
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout


def test_saving_in_the_lab_leaves_git_status_clean(browser, lab: Lab):
    before = _git_status()
    if before is None:
        pytest.skip("not a git checkout")
    name = NOTEBOOKS[0].name
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(120_000)  # a busy 2-core CI machine is slow, not broken
    page = context.new_page()
    try:
        _open(page, lab, name)
        first_code = page.locator(".jp-NotebookPanel .jp-CodeCell").first
        first_code.locator(".cm-content").click()
        page.keyboard.press("Control+Home")
        page.keyboard.type(EDIT + "\n")
        page.keyboard.press("Control+s")
        wait_for(
            f"{name}: the edit saved into the learner's copy", lambda: EDIT in (lab.root / name).read_text(), 30, lab
        )
    finally:
        context.close()
        session = _session(lab, name)
        if session is not None:
            lab.api(f"/api/sessions/{session['id']}", method="DELETE")
    assert EDIT not in (ROOT / name).read_text(), f"the edit reached the tracked notebooks/{name}"
    assert _git_status() == before, f"saving in the lab changed git status:\n{_git_status()}"


def test_the_first_start_opens_with_the_file_browser_closed(browser, lab: Lab):
    """``make lab``'s URL (the default workspace) opens with the left side bar collapsed, so that a notebook
    gets a 1024x768 projector's whole width; Ctrl+B opens the file browser."""
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    context.set_default_timeout(120_000)
    page = context.new_page()
    try:
        page.goto(f"{lab.base}/lab?token={lab.token}", wait_until="commit", timeout=OPEN_TIMEOUT * 1000)
        # the launcher fills an empty main area once the layout is restored: the side bars are settled then
        page.wait_for_selector(".jp-Launcher", state="visible", timeout=OPEN_TIMEOUT * 1000)
        assert page.locator("#jp-left-stack").is_hidden() and not page.locator("#filebrowser").is_visible()
        page.keyboard.press("Control+b")
        page.wait_for_selector("#filebrowser", state="visible", timeout=30_000)
    finally:
        context.close()
