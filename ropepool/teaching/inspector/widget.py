"""The recorded run in JupyterLab: a step slider (and play button) over the frames of :mod:`.render`."""

from __future__ import annotations

import ipywidgets as widgets

from .render import STYLE, frames


class Inspector(widgets.VBox):
    """A viewer of ``recording`` (:mod:`ropepool.engine.recording`): slide to step ``k``, see the books after it.

    ``decode`` (tokens -> text) labels the prefix tree's edges; ``title`` heads the viewer. ``show(k)`` moves
    the slider from code.
    """

    def __init__(self, recording, *, decode=None, title: str = ""):
        self.frames = frames(recording, decode)
        last = len(self.frames) - 1
        self.slider = widgets.IntSlider(
            0, min=0, max=last, description="step", continuous_update=True, layout=widgets.Layout(width="460px")
        )
        self.play = widgets.Play(0, min=0, max=last, interval=900, description="play")
        widgets.jslink((self.play, "value"), (self.slider, "value"))
        self.view = widgets.HTML()
        self.slider.observe(lambda change: self._draw(change["new"]), names="value")
        heading = widgets.HTML(f"<b>{title}</b>") if title else widgets.HTML()
        super().__init__([heading, widgets.HBox([self.play, self.slider]), self.view])
        self.add_class("rp-inspector")
        self._draw(0)

    def _draw(self, k: int) -> None:
        self.view.value = f"<style>{STYLE}</style>" + self.frames[k]

    def show(self, k: int) -> None:
        self.slider.value = k
