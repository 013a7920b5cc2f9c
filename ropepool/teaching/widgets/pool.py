"""Widget: type slots, pick the first position, and watch the pool heatmap change (or the error).

``PoolPlayground()`` is an ``ipywidgets.VBox`` over a small pool (P = 12 rows, Hkv = 2, D = 8).
Controls are attributes: ``slots`` (Text, comma-separated; one token per entry, -1 to skip),
``start`` (IntSlider, the first token's position) and ``check_values`` (Checkbox). After each
change it keeps ``k_pool`` (the pool after the call, NumPy, or None on an error), ``error``
(the :class:`~ropepool.RopePoolError`, or None), ``written`` (rows written) and ``figure``.
"""

from __future__ import annotations

import html
from io import BytesIO

import ipywidgets as W
import numpy as np

from ...errors import RopePoolError
from ...inputs import make_inputs
from ...op import rope_pool_fused
from ...shapes import Shapes
from ..viz.pool import before_after, written_rows


def parse_slots(text: str) -> np.ndarray:
    """``"3, 7, -1"`` -> int32 ``[3, 7, -1]``; raises ValueError on anything but integers.

    Example
    -------
    >>> parse_slots("3, 7, -1").tolist()
    [3, 7, -1]"""
    parts = [p for p in text.replace(",", " ").split() if p]
    return np.array([int(p) for p in parts], dtype=np.int32)


class PoolPlayground(W.VBox):
    """A 12-row pool you write into by typing slots; validation errors show instead of the plot."""

    def __init__(
        self,
        slots: str = "7, 2, -1, 4",
        start: int = 0,
        *,
        pool_rows: int = 12,
        num_kv_heads: int = 2,
        head_dim: int = 8,
        seed: int = 0,
    ):
        self.pool_rows, self.num_kv_heads, self.head_dim, self.seed = pool_rows, num_kv_heads, head_dim, seed
        self.pool_before = np.zeros((pool_rows, num_kv_heads, head_dim), np.float32)  # [P, Hkv, D], a fresh cache
        self.slots = W.Text(
            value=slots,
            description="slots",
            continuous_update=False,
            placeholder="e.g. 7, 2, -1, 4",
            layout=W.Layout(width="360px"),
        )
        self.start = W.IntSlider(value=start, min=0, max=1000, description="first pos", continuous_update=False)
        self.check_values = W.Checkbox(value=True, description="check_values (validate slots)")
        self.status = W.HTML()
        self.image = W.Image(format="png")
        for control in (self.slots, self.start, self.check_values):
            control.observe(self._update, names="value")
        super().__init__([W.HBox([self.slots, self.start]), self.check_values, self.status, self.image])
        self._update()

    def call_kwargs(self, slots: np.ndarray) -> dict:
        """The ``rope_pool_fused`` keyword arguments for these slots (one token per slot)."""
        T = len(slots)
        shapes = Shapes(T, self.num_kv_heads, self.num_kv_heads, self.head_dim, self.pool_rows)
        kw = make_inputs(
            shapes,
            "float32",
            kind="numpy",
            seed=self.seed,
            positions=np.arange(self.start.value, self.start.value + T),
            slots=slots,
        )
        kw.update(k_pool=self.pool_before.copy(), v_pool=self.pool_before.copy(), check_values=self.check_values.value)
        return kw

    def _update(self, _change=None) -> None:
        self.error, self.k_pool, self.written, self.figure = None, None, np.array([], np.int64), None
        try:
            slots = parse_slots(self.slots.value)
        except ValueError:
            self.status.value = "<b style='color:#b00'>slots must be integers separated by commas</b>"
            self._hide_image()
            return
        try:
            _, _, k_pool, _ = rope_pool_fused(**self.call_kwargs(slots))
        except RopePoolError as err:
            self.error = err
            first, _, rest = str(err).partition("\n")
            self.status.value = (
                f"<b style='color:#b00'>RopePoolError [{err.code}]: {html.escape(first)}</b>"
                f"<br><small>{html.escape(rest.strip())}</small>"
            )
            self._hide_image()
            return
        self.k_pool = k_pool
        self.written = written_rows(slots, self.pool_rows)
        skipped = int(((slots < 0) | (slots >= self.pool_rows)).sum())
        self.status.value = f"{len(slots)} tokens, wrote rows {self.written.tolist()}" + (
            f"; {skipped} token(s) wrote nothing" if skipped else ""
        )
        self.figure = before_after(self.pool_before, k_pool, slots, vmax=3.0, compact=True)
        buf = BytesIO()
        self.figure.savefig(buf, format="png", pil_kwargs={"compress_level": 1})  # fast zlib: the PNG is shown once
        self.image.value = buf.getvalue()
        self.image.layout.display = None

    def _hide_image(self) -> None:
        """No picture on an error: an empty PNG would show the browser's broken-image icon."""
        self.image.layout.display = "none"
        self.image.value = b""
