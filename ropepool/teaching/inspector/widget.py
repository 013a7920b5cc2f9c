"""The recorded run in JupyterLab: a step slider (and play button) over the frames of :mod:`.render`.

Given a second recording of the same requests (``compare_to``: the engine's own parts, say), the viewer
shows both frames of each step, one above the other, says where they first differ
(:func:`ropepool.engine.recording.first_difference`) and opens on that step.
"""

from __future__ import annotations

from html import escape

import ipywidgets as widgets

from ...engine.recording import first_difference
from .painter import frames
from .render import STYLE


class Inspector(widgets.VBox):
    """A viewer of ``recording`` (:mod:`ropepool.engine.recording`): slide to step ``k``, see the books after it.

    ``decode`` (tokens -> text) labels the prefix tree's edges; ``title`` heads the viewer; ``compare_to``
    another recording of the same requests, shown under it, ``labels`` naming the two. ``show(k)`` moves
    the slider from code; ``difference`` is ``(step, what)`` where the two first differ (None: nowhere, or
    nothing to compare).
    """

    def __init__(self, recording, *, decode=None, title: str = "", compare_to=None, labels=("yours", "theirs")):
        self.frames = frames(recording, decode)
        self.other = None if compare_to is None else frames(compare_to, decode)
        self.labels = labels
        self.difference = None if compare_to is None else first_difference(recording, compare_to)
        last = max(len(self.frames), len(self.other or [])) - 1
        start = self.difference[0] if self.difference else 0
        self.slider = widgets.IntSlider(
            start, min=0, max=last, description="step", continuous_update=True, layout=widgets.Layout(width="460px")
        )
        self.play = widgets.Play(start, min=0, max=last, interval=900, description="play")
        widgets.jslink((self.play, "value"), (self.slider, "value"))
        # one screen at 1024x768 under the slider: the frame scrolls inside, the slider stays in view
        self.view = widgets.HTML(layout=widgets.Layout(max_height="600px", overflow="auto"))
        self.slider.observe(lambda change: self._draw(change["new"]), names="value")
        head = f"<b>{escape(title)}</b>" if title else ""
        if compare_to is not None:
            said = (
                f"{escape(labels[0])} and {escape(labels[1])} first differ at {escape(self.difference[1])}"
                if self.difference
                else f"{escape(labels[0])} and {escape(labels[1])} agree at every step"
            )
            head += f'<p class="rp-difference" style="font-size: 15px">{said}</p>'
        super().__init__([widgets.HTML(head), widgets.HBox([self.play, self.slider]), self.view])
        self.add_class("rp-inspector")
        self._draw(start)

    def _frame(self, frames_: list[str], k: int) -> str:
        return frames_[k] if k < len(frames_) else f"<p>(no step {k}: this run ended at step {len(frames_) - 1})</p>"

    def _draw(self, k: int) -> None:
        if self.other is None:
            self.view.value = f"<style>{STYLE}</style>" + self._frame(self.frames, k)
            return
        self.view.value = (
            f"<style>{STYLE}</style><h3 class='rp-label'>{escape(self.labels[0])}</h3>"
            + self._frame(self.frames, k)
            + f"<hr><h3 class='rp-label'>{escape(self.labels[1])}</h3>"
            + self._frame(self.other, k)
        )

    def show(self, k: int) -> None:
        self.slider.value = k
