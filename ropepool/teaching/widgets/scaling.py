"""Widget: pick a context-stretch factor and a training context, watch each rule's wavelengths move.

``ScalingExplorer()`` is an ``ipywidgets.VBox``. Its controls are attributes (``factor``,
``original``); after each change it keeps the rules (``rules``: name -> :class:`~ropepool.rope.Rope`)
and the Figure (``figure``), shown as a PNG in ``image``. Tests set a control's ``value`` and read
these back.
"""

from __future__ import annotations

import ipywidgets as W
from matplotlib.figure import Figure

from ..viz.scaling import scaling_rules, wavelength_plot
from .rotation import png

FACTORS = (1.5, 2, 4, 8, 16, 32)
CONTEXTS = (2048, 4096, 8192, 32768)


class ScalingExplorer(W.VBox):
    """Sliders for the stretch factor and the training context over the wavelength plot."""

    def __init__(self, head_dim: int = 128, rope_base: float = 500000.0, factor: float = 8, original: int = 8192):
        self.head_dim, self.rope_base = head_dim, rope_base
        self.factor = W.SelectionSlider(
            options=FACTORS, value=factor, description="factor", continuous_update=False, layout=W.Layout(width="420px")
        )
        self.original = W.SelectionSlider(
            options=CONTEXTS,
            value=original,
            description="trained on",
            continuous_update=False,
            layout=W.Layout(width="420px"),
        )
        self.image = W.Image(format="png")
        for control in (self.factor, self.original):
            control.observe(self._update, names="value")
        super().__init__([W.HBox([self.factor, self.original]), self.image])
        self._update()

    def _update(self, _change=None) -> None:
        self.rules = scaling_rules(self.head_dim, self.rope_base, self.factor.value, self.original.value)
        fig = Figure(figsize=(9, 4.6), dpi=100)
        wavelength_plot(self.rules, self.original.value, self.factor.value, ax=fig.subplots())
        self.figure = fig
        self.image.value = png(fig)
