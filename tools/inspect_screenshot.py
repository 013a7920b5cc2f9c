"""docs/engine.md's picture of ``python -m ropepool inspect``: the preemption scenario on SmolLM2, at its preemption.

    .venv/bin/python tools/inspect_screenshot.py docs/inspect.png

Writes the page to a temporary folder, opens it in Debian's Chromium (``/usr/bin/chromium``, through
Playwright; no browser is downloaded) at 1024x768, steps to the first preemption and saves the view.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from ropepool.teaching.inspector.page import page
from ropepool.teaching.inspector.scenarios import run


def main(out: str) -> None:
    done = run("preemption", "smollm2", progress=sys.stderr)
    step = next(d.step for d in done.recording.decisions if d.preempted)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.html"
        path.write_text(page(done.recording, done.title, about=done.about, decode=done.decode), encoding="utf-8")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            view = browser.new_page(viewport={"width": 1024, "height": 768})
            view.goto(path.as_uri())
            view.locator("#rp-step").fill(str(step))
            view.screenshot(path=out)
            browser.close()
    print(f"{out}: step {step} of {len(done.recording)}")


if __name__ == "__main__":
    main(sys.argv[1])
