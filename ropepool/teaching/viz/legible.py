"""The projector rule: no text under 10 pt at the size a learner sees, at 1024x768.

The notebook shows a figure's PNG one pixel per CSS pixel. At the PNG's dpi a font of F pt is
``F * dpi / 72`` px, which a ~100 ppi screen shows as ``F * dpi / 100`` pt; a PNG wider than the
notebook's ~900 px is scaled down to fit. :func:`projector` saves figures at 100 dpi and raises
every text under the floor to it, so what is drawn is what is seen.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.text import Text

MIN_PT = 10.0  # the smallest text a projected figure may show
DISPLAY_PX = 900  # the notebook's width at 1024x768
SCREEN_DPI = 100  # pixels per inch the browser shows; also the dpi figures are saved at


def projector(fig: Figure, min_pt: float = MIN_PT) -> Figure:
    """``fig`` at :data:`SCREEN_DPI`, with every text (tick labels included) at least ``min_pt``
    at its displayed size (larger where the figure is wider than the display and will be scaled)."""
    fig.set_dpi(SCREEN_DPI)
    floor = min_pt * max(1.0, fig.get_figwidth() * SCREEN_DPI / DISPLAY_PX)
    for ax in fig.axes:
        for axis, which in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            ticks = axis.get_major_ticks()
            size = ticks[0].label1.get_fontsize() if ticks else floor
            if size < floor:
                ax.tick_params(axis=which, which="both", labelsize=floor)
    for text in fig.findobj(Text):
        if text.get_fontsize() < floor:
            text.set_fontsize(floor)
    return fig
