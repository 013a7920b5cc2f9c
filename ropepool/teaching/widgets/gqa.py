"""The GQA explorer: pick a model or set Hq, Hkv, D, T and P; the shape table and head diagram follow.

Also the HTML tables the GQA notebooks show (:func:`table_html`, :func:`shapes_html`,
:func:`presets_html`). Shapes follow :mod:`ropepool.shapes`.

The explorer's shape table is an ``ipywidgets.HTML`` whose value holds
``<table class="ropepool-shapes">`` with one row per argument (q, k, v, positions, slots,
k_pool, v_pool) and the concrete shapes as Python tuples, e.g. ``(16, 8, 128)``; its model
picker is a ``Dropdown`` with ``description="Model"`` over the preset names plus ``"custom"``.
The browser test relies on both.
"""

from __future__ import annotations

import html
from io import BytesIO

import ipywidgets as W
from matplotlib.figure import Figure

from ... import models
from ..catalog import CATALOG
from ...shapes import Shapes
from ..viz.gqa import head_groups
from ..viz.legible import SCREEN_DPI, projector

CUSTOM = "custom"
#: Resolution of the diagram PNG: small enough that one update stays well under 200 ms.
DPI = SCREEN_DPI  # the projector rule is checked at the dpi the PNG is saved at


#: Inline cell style: JupyterLab right-aligns table cells, which makes messages and shapes hard to read.
CELL_STYLE = "text-align:left;padding:2px 10px"


def table_html(header, rows, css_class: str) -> str:
    """An HTML ``<table class=css_class>`` of ``rows`` (any values, shown with ``str``), escaped, left-aligned."""
    head = "".join(f'<th style="{CELL_STYLE}">{html.escape(str(h))}</th>' for h in header)
    body = "".join(
        "<tr>" + "".join(f'<td style="{CELL_STYLE}">{html.escape(str(c))}</td>' for c in row) + "</tr>" for row in rows
    )
    return f'<table class="{css_class}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def shapes_html(shapes: Shapes, dtype: str = "bfloat16") -> str:
    """The shape table of one call: argument, symbolic shape, concrete shape, dtype.

    Example
    -------
    >>> ">(16, 8, 128)</td>" in shapes_html(Shapes(16, 32, 8, 128, 4096))
    True
    """
    rows = [
        (name, symbolic, concrete, "int32" if name in ("positions", "slots") else dtype)
        for name, symbolic, concrete in shapes.table()
    ]
    return table_html(("argument", "shape", "here", "dtype"), rows, "ropepool-shapes")


def presets_html(names=None, tokens: int = 16, pool_rows: int = 4096, dtype: str = "bfloat16") -> str:
    """One row per model preset: Hq, Hkv, G, D, q and k shapes, KV-cache bytes per token and layer."""
    rows = []
    for name in names or models.preset_names():
        p = models.preset(name)
        s = p.shapes(tokens, pool_rows)
        per_token = s.pool_bytes(dtype) // pool_rows
        kind = "MHA" if p.group_size == 1 else "MQA" if p.num_kv_heads == 1 else "GQA"
        rows.append((name, p.num_qo_heads, p.num_kv_heads, p.group_size, p.head_dim, kind, s.q, s.kv, f"{per_token:,}"))
    header = ("model", "Hq", "Hkv", "G", "D", "kind", f"q (T={tokens})", "k, v", f"KV bytes/token/layer ({dtype})")
    return table_html(header, rows, "ropepool-presets")


#: Head counts the Hq and Hkv sliders stop at: every count up to 8, then the ones models use
#: (a 1..128 slider moves 2-3 heads per pixel). 5 and 7 stay in: an uneven group is worth seeing.
HEAD_COUNTS = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 71, 80, 96, 112, 128)
#: Head dims the D slider stops at.
HEAD_DIMS = (2, 4, 8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 256, 512)


def head_count_stops() -> list[int]:
    """:data:`HEAD_COUNTS` and every preset's Hq and Hkv, sorted."""
    presets = [models.preset(n) for n in models.preset_names()]
    return sorted(set(HEAD_COUNTS) | {p.num_qo_heads for p in presets} | {p.num_kv_heads for p in presets})


def head_dim_stops() -> list[int]:
    """:data:`HEAD_DIMS` and every preset's D, sorted."""
    return sorted(set(HEAD_DIMS) | {models.preset(n).head_dim for n in models.preset_names()})


def _png(fig: Figure) -> bytes:
    buf = BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _message_figure(text: str) -> Figure:
    fig = Figure(figsize=(8.0, 2.3))
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, color="#9d0208", fontsize=10)
    return projector(fig)


class GQAExplorer(W.VBox):
    """Pick a model or set heads, head_dim, tokens and pool rows; the table and diagram follow.

    Attributes
    ----------
    model : Dropdown            ``description="Model"``, the presets plus ``"custom"``
    num_qo_heads, num_kv_heads, head_dim : SelectionSlider   over head_count_stops() / head_dim_stops()
    tokens : IntSlider
    pool_rows : BoundedIntText
    table : HTML                ``<table class="ropepool-shapes">``
    diagram : Image             PNG of :func:`ropepool.teaching.viz.gqa.head_groups`
    status : HTML               the model's notes, or why the sizes are not a valid call
    shapes : Shapes             the sizes shown now
    figure : Figure             the diagram shown now
    problem : str or None       the catalog code the op would raise for these sizes

    Setting a slider away from the chosen model's value switches the picker to ``"custom"``.

    Example
    -------
    >>> w = GQAExplorer()
    >>> w.model.value = "gemma-2-9b"
    >>> w.shapes.kv
    (16, 8, 256)
    """

    def __init__(self, model: str = "llama-3-8b", tokens: int = 16, pool_rows: int = 4096, dtype: str = "bfloat16"):
        self.dtype = dtype
        self._pngs: dict[tuple[int, int], tuple[Figure, bytes]] = {}
        self._syncing = False
        slider = dict(continuous_update=False, style={"description_width": "11em"}, layout=W.Layout(width="30em"))
        self.model = W.Dropdown(description="Model", options=models.preset_names() + [CUSTOM], value=model)
        heads, dims = head_count_stops(), head_dim_stops()
        self.num_qo_heads = W.SelectionSlider(description="Hq (num_qo_heads)", options=heads, value=32, **slider)
        self.num_kv_heads = W.SelectionSlider(description="Hkv (num_kv_heads)", options=heads, value=8, **slider)
        self.head_dim = W.SelectionSlider(description="D (head_dim)", options=dims, value=128, **slider)
        self.tokens = W.IntSlider(description="T (tokens)", min=1, max=256, value=tokens, **slider)
        self.pool_rows = W.BoundedIntText(
            description="P (pool rows)",
            min=1,
            max=2**24,
            value=pool_rows,
            style={"description_width": "11em"},
            layout=W.Layout(width="22em"),
        )
        self.table = W.HTML()
        self.status = W.HTML()
        self.diagram = W.Image(format="png", layout=W.Layout(max_width="100%"))
        self.shapes: Shapes | None = None
        self.figure: Figure | None = None
        self.problem: str | None = None

        self._set_from_model(model)
        self.model.observe(self._on_model, names="value")
        for control in (self.num_qo_heads, self.num_kv_heads, self.head_dim, self.tokens, self.pool_rows):
            control.observe(self._on_size, names="value")
        controls = W.VBox(
            [self.model, self.num_qo_heads, self.num_kv_heads, self.head_dim, self.tokens, self.pool_rows]
        )
        super().__init__([W.HBox([controls, self.table]), self.status, self.diagram])
        self.update()

    # --- events -------------------------------------------------------------------------------
    def _set_from_model(self, name: str) -> None:
        if name == CUSTOM:
            return
        p = models.preset(name)
        self._syncing = True
        try:
            self.num_qo_heads.value, self.num_kv_heads.value, self.head_dim.value = (
                p.num_qo_heads,
                p.num_kv_heads,
                p.head_dim,
            )
        finally:
            self._syncing = False

    def _on_model(self, change) -> None:
        self._set_from_model(change["new"])
        self.update()

    def _on_size(self, change) -> None:
        if self._syncing:
            return
        if self.model.value != CUSTOM:
            p = models.preset(self.model.value)
            if (self.num_qo_heads.value, self.num_kv_heads.value, self.head_dim.value) != (
                p.num_qo_heads,
                p.num_kv_heads,
                p.head_dim,
            ):
                self._syncing = True
                try:
                    self.model.value = CUSTOM
                finally:
                    self._syncing = False
        self.update()

    # --- rendering ------------------------------------------------------------------------------
    def update(self) -> None:
        """Recompute the shapes, the table, the status line and (if the heads changed) the diagram."""
        Hq, Hkv, D = self.num_qo_heads.value, self.num_kv_heads.value, self.head_dim.value
        self.shapes = Shapes(self.tokens.value, Hq, Hkv, D, self.pool_rows.value)
        self.table.value = shapes_html(self.shapes, self.dtype)
        self.problem = "group_size" if Hq % Hkv else None
        if self.problem:
            msg = CATALOG["group_size"].message.format(got=f"num_qo_heads={Hq}, num_kv_heads={Hkv}")
            self.status.value = (
                f"<b>Not a valid call</b>: the op raises <code>group_size</code>: "
                f"<code>{html.escape(msg)}</code>. {html.escape(CATALOG['group_size'].meaning)}"
            )
            self.figure = _message_figure(
                f"{Hkv} KV heads cannot share {Hq} query heads evenly:\nG = {Hq} / {Hkv} is not a whole number"
            )
            self.diagram.value = _png(self.figure)
            return
        s = self.shapes
        lines = [
            f"G = {Hq} // {Hkv} = {s.group_size} query heads per KV head; "
            f"k_pool + v_pool hold {s.pool_bytes(self.dtype):,} bytes ({self.dtype}) per layer."
        ]
        if self.model.value != CUSTOM:
            p = models.preset(self.model.value)
            lines.append(f"{html.escape(p.name)}, rope_base = {p.rope_base:,.0f}.")
            lines += [html.escape(n) for n in p.notes]
        self.status.value = "<br>".join(lines)
        key = (Hq, Hkv)
        if key not in self._pngs:
            fig = head_groups(Hq, Hkv)
            self._pngs[key] = (fig, _png(fig))
        self.figure, png = self._pngs[key]
        if self.diagram.value != png:
            self.diagram.value = png
