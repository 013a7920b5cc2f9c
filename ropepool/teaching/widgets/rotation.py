"""Widget: turn the position, base and head_dim knobs and watch every NeoX pair rotate.

``RotationExplorer()`` is an ``ipywidgets.VBox``. Its controls are attributes (``position``,
``base``, ``head_dim``); after each change it keeps the new angles (``angles`` ``[D/2]``), the
pair vectors (``vectors`` ``[D/2, 2]``) and the Figure (``figure``), and shows the figure as a PNG
in ``image``. Tests set a control's ``value`` and read these back.
"""

from __future__ import annotations

from io import BytesIO

import ipywidgets as W
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from ..viz.legible import projector
from matplotlib.ticker import FuncFormatter, NullLocator

from ...reference import inverse_frequencies


def explorer_figure(position: int, rope_base: float, head_dim: int) -> tuple[Figure, np.ndarray, np.ndarray]:
    """The explorer's figure for one setting, with its angles ``[D/2]`` and pair vectors ``[D/2, 2]``.

    Left: every pair ``(x_i, x_{i+D/2})`` of a vector whose pairs all start at (1, 0), turned to
    ``position`` (the LineCollection with ``gid="pairs"``), coloured fast (i = 0, dark) to slow.
    Right: the angle ``theta_i = position * omega_i``, ``omega_i = base**(-2i/D)`` (``gid="angles"``) against one full
    turn, 2 pi: pairs above the line have wrapped around at least once.

    Example
    -------
    >>> fig, angles, vectors = explorer_figure(100, 10000.0, 8)
    >>> angles.round(3).tolist(), vectors.shape
    ([100.0, 10.0, 1.0, 0.1], (4, 2))
    """
    angles = position * inverse_frequencies(head_dim, rope_base)  # [D/2], radians
    vectors = np.stack([np.cos(angles), np.sin(angles)], axis=-1)  # [D/2, 2]
    fig = Figure(figsize=(7.0, 3.0), dpi=80)
    fig.subplots_adjust(left=0.03, right=0.98, bottom=0.16, top=0.82, wspace=0.25)
    ax_c, ax_a = fig.subplots(1, 2, width_ratios=[1, 1.5])
    t = np.linspace(0, 2 * np.pi, 91)
    ax_c.plot(np.cos(t), np.sin(t), color="0.85", lw=1)
    segments = np.stack([np.zeros_like(vectors), vectors], axis=1)  # [D/2, 2 ends, 2 coords]
    lines = LineCollection(segments, cmap="viridis", lw=1.5, gid="pairs")
    lines.set_array(np.arange(len(angles)))
    ax_c.add_collection(lines)
    ax_c.set(
        xlim=(-1.15, 1.15),
        ylim=(-1.15, 1.15),
        aspect="equal",
        xticks=[],
        yticks=[],
        title=f"{len(angles)} pairs at position {position:,}",
    )
    i = np.arange(len(angles))
    ax_a.plot(i, np.maximum(angles, 1e-12), ".-", ms=3, lw=1, gid="angles")
    ax_a.axhline(2 * np.pi, ls="--", color="0.4", lw=1)
    ax_a.set(
        yscale="log",
        ylim=(1e-7, 1e6),
        yticks=10.0 ** np.arange(-6, 7, 2),
        xlabel="pair i",
        ylabel="angle theta_i (radians)",
        title=f"{int((angles >= 2 * np.pi).sum())} pairs wrapped (dashed: 2 pi)",
    )
    ax_a.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0e}"))  # plain text: no mathtext, faster
    ax_a.yaxis.set_minor_locator(NullLocator())
    fig.suptitle(f"base {rope_base:g}, head_dim {head_dim}", fontsize=9)
    return projector(fig), angles, vectors


def png(fig: Figure) -> bytes:
    buf = BytesIO()
    fig.savefig(buf, format="png", pil_kwargs={"compress_level": 1})  # fast zlib: the PNG is shown once
    return buf.getvalue()


#: The position slider's stops: 1-2-5 steps from 0 to 128K, so every order of magnitude gets the
#: same share of the slider (a linear 0..131,072 slider jumps 10 -> 25,879 in a 60 px drag).
POSITION_STOPS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 131_072)
MAX_POSITION = 2**24  # float32 holds every integer position up to here


def nearest_stop(position: int) -> int:
    """The slider stop closest to ``position`` on a log scale (0 for 0)."""
    if position <= 0:
        return 0
    return min(POSITION_STOPS[1:], key=lambda s: abs(np.log(s) - np.log(position)))


class RotationExplorer(W.VBox):
    """Sliders for position, rope_base and head_dim over a live picture of the pairs' angles.

    ``position`` is the exact position (a number box, any value up to 2**24); ``position_slider``
    moves it along :data:`POSITION_STOPS`, one order of magnitude per few stops.
    """

    def __init__(self, position: int = 10, rope_base: float = 10000.0, head_dim: int = 64):
        self.position = W.BoundedIntText(
            value=position, min=0, max=MAX_POSITION, description="position", layout=W.Layout(width="14em")
        )
        self.position_slider = W.SelectionSlider(
            options=[(f"{p:,}", p) for p in POSITION_STOPS],
            value=nearest_stop(position),
            description="",
            continuous_update=False,
            layout=W.Layout(width="360px"),
        )
        self.base = W.FloatLogSlider(
            value=rope_base,
            base=10,
            min=2,
            max=7,
            step=0.1,
            description="rope_base",
            continuous_update=False,
            layout=W.Layout(width="480px"),
        )
        self.head_dim = W.Dropdown(options=[8, 16, 32, 64, 128, 256], value=head_dim, description="head_dim")
        self.image = W.Image(format="png")
        self._syncing = False
        self.position_slider.observe(self._from_slider, names="value")
        for control in (self.position, self.base, self.head_dim):
            control.observe(self._update, names="value")
        super().__init__([W.HBox([self.position, self.position_slider, self.head_dim]), self.base, self.image])
        self._update()

    def _from_slider(self, change) -> None:
        if not self._syncing:
            self.position.value = change["new"]

    def _update(self, _change=None) -> None:
        self._syncing = True  # the slider follows a typed position to its nearest stop, quietly
        try:
            self.position_slider.value = nearest_stop(self.position.value)
        finally:
            self._syncing = False
        self.figure, self.angles, self.vectors = explorer_figure(
            self.position.value, self.base.value, self.head_dim.value
        )
        self.image.value = png(self.figure)
