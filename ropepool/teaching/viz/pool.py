"""Plots of the KV pool ``[P, Hkv, D]``: slots, writes, occupancy over time, and pages.

A pool row holds one token's ``[Hkv, D]``; a heatmap lays row r out as one image row of
``Hkv * D`` columns, head after head. Each function returns a :class:`matplotlib.figure.Figure`
built without pyplot; images and lines carry a ``gid`` so tests can find and read their data.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from .legible import projector

from ..._arrays import to_numpy

FREE = -1  # owner of a row no request holds


def rows_image(pool) -> np.ndarray:
    """``pool [P, Hkv, D]`` as a float64 image ``[P, Hkv * D]``: one row per slot, heads side by side."""
    a = to_numpy(pool, np.float64)
    return a.reshape(a.shape[0], -1)  # [P, Hkv*D]


def written_rows(slots, pool_rows: int) -> np.ndarray:
    """The sorted rows a call with these ``slots [T]`` writes (slots in ``[0, P)``).

    Example
    -------
    >>> written_rows([7, -1, 2, 12], pool_rows=12).tolist()
    [2, 7]"""
    s = to_numpy(slots, np.int64)
    return np.unique(s[(s >= 0) & (s < pool_rows)])


def draw_pool(ax, pool, *, highlight=(), title: str = "", vmax: float | None = None, gid: str = "pool"):
    """Draw one pool heatmap on ``ax``; outline the rows in ``highlight``. Returns the image."""
    img = rows_image(pool)
    P, width = img.shape
    heads, head_dim = np.shape(pool)[1], np.shape(pool)[2]
    vmax = vmax or max(float(np.abs(img).max()), 1e-12)
    im = ax.imshow(img, cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto", interpolation="nearest")
    im.set_gid(gid)
    for h in range(1, heads):
        ax.axvline(h * head_dim - 0.5, color="k", lw=1)
    for r in highlight:
        ax.add_patch(
            Rectangle((-0.5, r - 0.5), width, 1, fill=False, edgecolor="gold", lw=2.2, gid=f"written {int(r)}")
        )
    ax.set_yticks(range(P) if P <= 32 else np.linspace(0, P - 1, 9).astype(int))
    ax.set_xticks([h * head_dim + head_dim / 2 - 0.5 for h in range(heads)], [f"head {h}" for h in range(heads)])
    ax.set_ylabel("pool row (slot)")
    ax.set_title(title, fontsize=9)
    return im


def before_after(
    before, after, slots, *, name: str = "k_pool", dpi: int = 90, vmax: float | None = None, compact: bool = False
) -> Figure:
    """The pool before and after one call, side by side; the rows the call wrote outlined.

    Images ``gid="before"`` and ``gid="after"`` hold ``rows_image`` of each pool; the outlines
    have ``gid="written r"``. Both share one colour scale (``vmax``, by default the largest
    magnitude). ``compact`` (for widgets) skips the colour bar and the layout engine: faster.
    """
    P = np.shape(before)[0]
    rows = written_rows(slots, P)
    if vmax is None:
        vmax = max(float(np.abs(rows_image(before)).max()), float(np.abs(rows_image(after)).max()), 1e-12)
    fig = Figure(figsize=(7.5, 0.2 * P + 1.4), dpi=dpi, layout=None if compact else "constrained")
    ax_b, ax_a = fig.subplots(1, 2, sharey=True)
    draw_pool(ax_b, before, title=f"{name} before", vmax=vmax, gid="before")
    im = draw_pool(
        ax_a, after, highlight=rows, title=f"{name} after: rows {rows.tolist()} written", vmax=vmax, gid="after"
    )
    ax_a.set_ylabel("")
    if compact:
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.1, top=0.9, wspace=0.06)
    else:
        fig.colorbar(im, ax=[ax_b, ax_a], shrink=0.8)
    return projector(fig)


def slot_map(slots, pool_rows: int, positions=None) -> Figure:
    """Tokens on the left, pool rows on the right, an arrow from token t to row ``slots[t]``.

    Arrows have ``gid="token t"`` and end at y = the row; a token with slot -1 (or any slot
    outside the pool) ends in a cross marked "writes nothing" (``gid="skip t"``).
    """
    slots = to_numpy(slots, np.int64)
    T = len(slots)
    positions = np.arange(T) if positions is None else to_numpy(positions, np.int64)
    fig = Figure(figsize=(5.0, 0.3 * max(T, pool_rows) + 1.0), dpi=90, layout="constrained")
    ax = fig.subplots()
    ys_tok = np.linspace(0, pool_rows - 1, T) if T > 1 else np.array([(pool_rows - 1) / 2])
    written = written_rows(slots, pool_rows)
    for r in range(pool_rows):
        color = "#ffe08a" if r in written else "#eeeeee"
        ax.add_patch(Rectangle((2.6, r - 0.4), 1.2, 0.8, facecolor=color, edgecolor="0.5"))
        ax.text(3.2, r, f"row {r}", ha="center", va="center", fontsize=8)
    for t, (s, y) in enumerate(zip(slots, ys_tok)):
        ax.add_patch(Rectangle((-0.6, y - 0.4), 1.2, 0.8, facecolor="#cfe3ff", edgecolor="0.5"))
        ax.text(0, y, f"token {t}\npos {positions[t]}", ha="center", va="center", fontsize=7)
        if 0 <= s < pool_rows:
            ax.annotate("", xy=(2.55, s), xytext=(0.65, y), arrowprops=dict(arrowstyle="-|>", color="tab:blue", lw=1.2))
            ax.plot([0.65, 2.55], [y, s], alpha=0, gid=f"token {t}")  # invisible: the arrow's data for tests
        else:
            ax.plot([0.65, 1.6], [y, y], color="tab:red", lw=1.2)
            ax.plot([1.6], [y], "x", color="tab:red", ms=9, mew=2, gid=f"skip {t}")
            ax.text(1.7, y + 0.35, f"slot {s}: writes nothing", fontsize=7, color="tab:red")
    ax.set_xlim(-0.8, 4.0)
    ax.set_ylim(pool_rows - 0.4 + 0.2, -0.8)
    ax.axis("off")
    ax.set_title(f"slots = {slots.tolist()}", fontsize=9)
    return projector(fig)


def _owner_cmap(n_owners: int) -> ListedColormap:
    colors = ["#f2f2f2"] + [f"C{i % 10}" for i in range(max(n_owners, 1))]
    return ListedColormap(colors)


def occupancy(owners, step_labels=None, owner_names=None) -> Figure:
    """Which request holds each pool row after each step: ``owners [steps, P]``, -1 for free.

    The image (``gid="owners"``) has one column per step and one row per pool row; free rows
    are light grey, each request its own colour.
    """
    owners = np.asarray(owners)  # [steps, P]
    steps, P = owners.shape
    n = int(owners.max()) + 1 if owners.size else 0
    names = owner_names or [f"request {i}" for i in range(n)]
    fig = Figure(figsize=(1.0 + 0.7 * steps + 1.6, 0.2 * P + 1.4), dpi=90, layout="constrained")
    ax = fig.subplots()
    im = ax.imshow(owners.T + 1, cmap=_owner_cmap(n), vmin=-0.5, vmax=n + 0.5, aspect="auto", interpolation="nearest")
    im.set_gid("owners")
    ax.set_xticks(range(steps), step_labels or [f"step {s}" for s in range(steps)], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(P) if P <= 32 else np.linspace(0, P - 1, 9).astype(int))
    ax.set_ylabel("pool row (slot)")
    handles = [Rectangle((0, 0), 1, 1, color=_owner_cmap(n)(i + 1)) for i in range(n)]
    handles.append(Rectangle((0, 0), 1, 1, color="#f2f2f2", ec="0.6"))
    fig.legend(handles, [*names[:n], "free"], loc="outside right upper", fontsize=8)
    ax.set_title("who holds each row", fontsize=9)
    return projector(fig)


def pages(owners, page_size: int, page_tables: dict[str, list[int]] | None = None) -> Figure:
    """The pool's rows folded into pages ``[P / page_size, page_size]``, coloured by owner.

    ``owners [P]`` (-1 free). The image (``gid="pages"``) has one row per page; each cell is one
    slot ``page * page_size + offset``, labelled with that slot. ``page_tables`` (request name ->
    list of pages) is drawn as a table beside it.
    """
    owners = np.asarray(owners)
    P = len(owners)
    num_pages = P // page_size
    grid = owners[: num_pages * page_size].reshape(num_pages, page_size)  # [pages, page_size]
    n = int(owners.max()) + 1 if owners.size else 0
    fig = Figure(figsize=(0.55 * page_size + 4.2, 0.4 * num_pages + 1.2), dpi=90, layout="constrained")
    ax, ax_t = fig.subplots(1, 2, width_ratios=[page_size, 3.5])
    im = ax.imshow(grid + 1, cmap=_owner_cmap(n), vmin=-0.5, vmax=n + 0.5, aspect="auto")
    im.set_gid("pages")
    for p in range(num_pages):
        for o in range(page_size):
            ax.text(o, p, str(p * page_size + o), ha="center", va="center", fontsize=7)
    ax.set_xticks(range(page_size))
    ax.set_yticks(range(num_pages))
    ax.set(xlabel="offset in page", ylabel="page")
    ax.set_title(f"page_size {page_size}: slot = page * {page_size} + offset", fontsize=9)
    ax_t.axis("off")
    if page_tables:
        cells = [[name, str(list(tab))] for name, tab in page_tables.items()]
        table = ax_t.table(cellText=cells, colLabels=["request", "page table"], loc="center", cellLoc="left")
        table.set_gid("page_table")
        table.auto_set_font_size(False)
        table.set_fontsize(8)
        table.scale(1, 1.3)
    return projector(fig)


def slots_vs_append(lengths: dict[str, int], reserve: int, pool_owners, batch_slots: dict[str, list[int]]) -> Figure:
    """Why the op takes slots: one contiguous cache per request (append) against one shared pool (slots).

    Left: each request's own cache of ``reserve`` rows, the ``lengths[name]`` rows it uses coloured,
    the rest reserved and unused (hatched; gid ``"reserved <name>"``). Right: one pool, ``pool_owners``
    (the index into ``lengths`` of each row's request, ``FREE`` where none), every row used; the text
    under it lists the slots one call of the op writes, tokens of several requests at once
    (``batch_slots``: request -> its rows in that call).
    """
    names = list(lengths)
    owners = np.asarray(pool_owners)
    P = len(owners)
    cmap = _owner_cmap(len(names))
    fig = Figure(figsize=(8.6, 3.6), dpi=100, layout="constrained")
    ax_a, ax_s = fig.subplots(1, 2, width_ratios=[1.25, 1])
    for y, name in enumerate(names):
        used = lengths[name]
        colour = cmap(1 + y)
        ax_a.add_patch(Rectangle((0, y - 0.35), used, 0.7, color=colour, gid=f"used {name}"))
        ax_a.add_patch(
            Rectangle((used, y - 0.35), reserve - used, 0.7, fill=False, hatch="///", ec="0.6", gid=f"reserved {name}")
        )
        ax_a.text(reserve + 0.3, y, f"{used} of {reserve}", va="center", fontsize=10)
    ax_a.set(xlim=(0, reserve + 3.5), ylim=(len(names) - 0.5, -0.5), xlabel="rows of the request's own cache")
    ax_a.set_yticks(range(len(names)), [f"request {n}" for n in names])
    ax_a.set_title(f"append: a cache per request\n{len(names) * reserve} rows reserved", fontsize=11)
    image = np.where(owners == FREE, 0, owners + 1)[None, :]  # [1, P]
    ax_s.imshow(
        image,
        cmap=cmap,
        vmin=0,
        vmax=len(names),
        aspect="auto",
        extent=(-0.5, P - 0.5, 0.5, -0.5),
        interpolation="nearest",
        gid="pool",
    )
    for r in range(P):
        if owners[r] != FREE:
            ax_s.text(r, 0, names[owners[r]], ha="center", va="center", fontsize=10, color="white")
    call = ", ".join(f"{n}: {s}" for n, s in batch_slots.items())
    ax_s.set(yticks=[], xlabel=f"pool row (slot)\none call of the op writes {call}")
    ax_s.set_xticks(range(0, P, max(1, P // 6)))
    ax_s.set_title(f"slots: one pool for all\n{P} rows, every one used", fontsize=11)
    return projector(fig)
