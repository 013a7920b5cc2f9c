"""A recorded run as one self-contained HTML page: every step's frame and a slider, nothing fetched, nothing to install.

The page holds step 0's frame and what each later step changed in it (:func:`.painter.changes`: the squares
and request rows that changed, not the whole pool again) as JSON, and a few lines of JavaScript that apply
them in order: the slider, the buttons and the arrow keys show frame ``k`` (going back replays from step 0).
Open it from disk, put it on a projector, send it.
"""

from __future__ import annotations

import json
from html import escape

from .painter import changes
from .render import STYLE

SCRIPT = """
const run = JSON.parse(document.getElementById('rp-frames').textContent);
const slider = document.getElementById('rp-step'), shown = document.getElementById('rp-shown');
const label = document.getElementById('rp-label');
let parts = null, at = 0;
function frame(k) {  // step k's parts: step 0's, then each step's changes in order
  if (parts === null || k < at) {
    parts = run.first.map(p => Array.isArray(p) ? p.slice() : p);
    at = 0;
  }
  for (; at < k; at++) {
    for (const c of run.steps[at]) {
      if ('s' in c) parts[c.i] = c.s;
      else if ('a' in c) parts[c.i] = c.a.slice();
      else for (const [j, html] of c.d) parts[c.i][j] = html;
    }
  }
  return parts.map(p => Array.isArray(p) ? p.join('') : p).join('');
}
function show(k) {
  k = Math.max(0, Math.min(run.steps.length, k));
  slider.value = k;
  shown.innerHTML = frame(k);
  label.textContent = 'step ' + k + ' of ' + run.steps.length;
}
slider.addEventListener('input', () => show(+slider.value));
document.getElementById('rp-back').addEventListener('click', () => show(+slider.value - 1));
document.getElementById('rp-next').addEventListener('click', () => show(+slider.value + 1));
document.addEventListener('keydown', e => {
  if (e.target === slider) return;  // the slider moves itself with the arrow keys
  if (e.key === 'ArrowLeft') show(+slider.value - 1);
  if (e.key === 'ArrowRight') show(+slider.value + 1);
});
show(0);
"""


def page(recording, title: str, *, about: str = "", decode=None) -> str:
    """The page's HTML: ``title``, a line ``about`` the run, whether every step was recorded
    (:attr:`~ropepool.engine.recording.Recording.missed`), the slider over every step of ``recording``."""
    first, steps = changes(recording, decode)
    data = json.dumps({"first": first, "steps": steps}).replace("</", "<\\/")  # no "</script>" inside the script
    last = len(recording)
    missed = recording.missed
    replay = (
        "Every step the engine committed is recorded: the frames replay the run exactly."
        if not missed
        else f"Not an exact replay of the run: the recording missed step(s) {', '.join(map(str, missed[:20]))}"
        f"{' ...' if len(missed) > 20 else ''} (the frame after a gap reads the books in full again)."
    )
    replay_style = "font: 14px system-ui, sans-serif; margin: 4px 0" + (
        "; color: #B00; font-weight: bold" if missed else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body {{ margin: 16px; }} {STYLE}
.rp-controls {{ font: 15px system-ui, sans-serif; display: flex; gap: 10px; align-items: center; padding: 8px 0;
  position: sticky; top: 0; background: #FFF; z-index: 1; flex-wrap: wrap; }}
.rp-controls input[type=range] {{ width: min(420px, 50vw); }}
.rp-controls button {{ font-size: 15px; padding: 2px 12px; }}</style></head>
<body>
<h2 style="font: bold 20px system-ui, sans-serif; margin: 0">{escape(title)}</h2>
<p style="font: 14px system-ui, sans-serif; margin: 4px 0">{escape(about)}</p>
<p id="rp-replay" style="{replay_style}">{escape(replay)}</p>
<div class="rp-controls"><button id="rp-back" aria-label="previous step">&#9664;</button>
<input id="rp-step" type="range" min="0" max="{last}" value="0" aria-label="step">
<button id="rp-next" aria-label="next step">&#9654;</button><span id="rp-label"></span>
<span style="color: #555">(arrow keys: step back and forth)</span></div>
<div id="rp-shown"></div>
<script type="application/json" id="rp-frames">{data}</script>
<script>{SCRIPT}</script>
</body></html>
"""
