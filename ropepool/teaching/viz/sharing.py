"""Plots of the engine's prefix cache: the radix tree, slot tables that point at the same rows, pages.

Each function reads data taken from an :class:`~ropepool.engine.Engine` (its cache, its requests,
its stats) and returns a :class:`matplotlib.figure.Figure` built without pyplot; artists carry a
``gid`` so tests can read their data back.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ...engine.radix import RadixCache
from .legible import DISPLAY_PX, MIN_PT, SCREEN_DPI, projector

SHARED, PRIVATE = "#ff7f0e", "#9ecae1"


def _tokens(node) -> list[int]:
    return [t for page in node.key for t in page]


def row_runs(rows) -> str:
    """Rows as runs of consecutive numbers: ``[0, 1, 2, 7]`` -> ``"0-2, 7"``."""
    runs: list[list[int]] = []
    for r in rows:
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def tree_layout(cache: RadixCache):
    """``[(node, depth, start, stop, top, bottom)]``, parents before children, the root first.

    ``start``/``stop``: the token positions the node's edge spans; ``top``/``bottom``: the range of
    leaves below it, one line per leaf (an icicle chart of the tree).
    """
    out, leaf = [], [0]

    def visit(node, depth, start):
        i = len(out)
        stop = start + len(_tokens(node))
        out.append([node, depth, start, stop, leaf[0], 0])
        for child in node.children.values():
            visit(child, depth + 1, stop)
        if not node.children:
            leaf[0] += 1
        out[i][5] = leaf[0]

    visit(cache.root, 0, 0)
    return [tuple(x) for x in out]


def tree_text(cache: RadixCache, decode=None, *, width: int = 48) -> str:
    """The tree as indented lines: each node's token count, pool rows, and its text (``decode(ids)``)."""
    lines = []
    for node, depth, *_ in tree_layout(cache)[1:]:
        ids = _tokens(node)
        rows = cache.allocator.rows(node.pages)
        text = decode(ids) if decode else " ".join(map(str, ids))
        text = text.replace("\n", "⏎")
        text = text if len(text) <= width else text[: width - 1] + "…"
        lines.append(f"{'  ' * (depth - 1)}{_tokens_rows(len(ids), row_runs(rows), 4)}: {text!r}")
    return "\n".join(lines) if lines else "(empty)"


def _tokens_rows(n: int, rows: str, pad: int = 0) -> str:
    """ "1 token, row 16" / "10 tokens, rows 3-12" (the count right-aligned in ``pad`` characters)."""
    return f"{n:{pad}} token{'s' if n != 1 else ''}, row{'s' if n != 1 else ''} {rows}"


def plot_radix_tree(cache: RadixCache, decode=None) -> Figure:
    """The prefix cache as an icicle chart: one bar per node, spanning its tokens' positions (x) and the
    leaves below it (y), so a prefix shared by many sequences is a tall bar. A bar is orange while a
    running request holds its rows, blue when only the cache does (evictable); long enough bars say
    their text (``decode(ids)``) and rows."""
    layout = tree_layout(cache)[1:]
    refs = cache.allocator.refs
    leaves = max(1, max((b for *_, b in layout), default=1))
    width = max((stop for _, _, _, stop, _, _ in layout), default=1)
    fig = Figure(figsize=(11, 1.2 + 0.42 * leaves))
    ax = fig.subplots()
    char_pt = 0.6 * MIN_PT * 11 * SCREEN_DPI / DISPLAY_PX  # a character's width once projector() scales the text
    x_pt = 11 * 72 * 0.85 / (2 * width)  # points per token position (the axes span 2 * width positions)
    for i, (node, depth, start, stop, top, bottom) in enumerate(layout):
        held = any(refs[p] > 1 for p in node.pages)
        ax.add_patch(
            Rectangle(
                (start, top),
                stop - start,
                bottom - top,
                facecolor=SHARED if held else PRIVATE,
                edgecolor="white",
                lw=1.5,
                gid=f"node {i}",
            )
        )
        ids = _tokens(node)
        text = (decode(ids) if decode else " ".join(map(str, ids))).replace("\n", "⏎")
        where = _tokens_rows(len(ids), row_runs(cache.allocator.rows(node.pages)))
        label = f"{text} ({where})"
        if not node.children:  # a leaf: its label to the right of its bar
            label = label if len(label) <= 50 else text[: 50 - len(label) + len(text) - 1] + "…" + label[len(text) :]
            ax.text(
                stop + 0.01 * width, (top + bottom) / 2, label, ha="left", va="center", fontsize=7, gid=f"label {i}"
            )
        elif (chars := int((stop - start) * x_pt / char_pt) - 1) >= 12:  # inside its bar, cut to what fits
            label = f"{where}: {text}"
            label = label if len(label) <= chars else label[: chars - 1] + "…"
            ax.text(start + 0.3, (top + bottom) / 2, label, ha="left", va="center", fontsize=7, gid=f"label {i}")
        else:  # a narrow shared node (a token or two where the branches part): its label runs up the bar
            chars = int((bottom - top) * 0.42 * 72 / (0.92 * char_pt))  # the bar's height in characters
            rows = row_runs(cache.allocator.rows(node.pages))
            label = next(
                (f for f in (f"{text!r}, row{'s' if len(ids) != 1 else ''} {rows}", repr(text)) if len(f) <= chars),
                repr(text)[: max(chars - 1, 1)] + "…",
            )
            ax.text(
                (start + stop) / 2,
                (top + bottom) / 2,
                label,
                ha="center",
                va="center",
                rotation=90,
                fontsize=7,
                gid=f"label {i}",
            )
    ax.set_xlim(0, width * 2)  # room for the leaves' labels
    ax.set_ylim(leaves, 0)
    ax.set_yticks([])
    ax.set_xlabel("token position")
    ax.set_xticks([t for t in ax.get_xticks() if 0 <= t <= width])
    ax.set_title(
        "the prefix cache: a bar per radix-tree node, over the positions of its tokens\n"
        "(orange: a running request holds its rows; blue: only the cache does)",
        fontsize=9,
    )
    fig.tight_layout()
    return projector(fig)


def slot_table_image(tables) -> np.ndarray:
    """``[R, L]`` int: each request's slot table (row ids), padded with -1 to the longest."""
    L = max((len(t) for t in tables), default=0)
    out = np.full((len(tables), L), -1)
    for i, t in enumerate(tables):
        out[i, : len(t)] = t
    return out


def shared_mask(tables) -> np.ndarray:
    """``[R, L]`` bool: where a slot table's row also appears in another request's table."""
    image = slot_table_image(tables)
    mask = np.zeros(image.shape, bool)
    for i, t in enumerate(tables):
        others = {row for j, u in enumerate(tables) if j != i for row in u}
        mask[i, : len(t)] = [row in others for row in t]
    return mask


def plot_slot_tables(tables, labels=None, *, cell: float = 0.09) -> Figure:
    """Slot tables side by side, one band per request, one cell per position: orange where the pool row is
    also in another request's table (the same rows, read by both), blue where it is the request's own."""
    image, mask = slot_table_image(tables), shared_mask(tables)
    R, L = image.shape
    fig = Figure(figsize=(1.8 + cell * L, 0.9 + 0.5 * R))
    ax = fig.subplots()
    colours = np.where(image < 0, 0, np.where(mask, 2, 1))
    im = ax.imshow(
        colours,
        cmap=ListedColormap(["#ffffff", PRIVATE, SHARED]),
        vmin=0,
        vmax=2,
        aspect="auto",
        interpolation="nearest",
    )
    im.set_gid("slot tables")
    for i in range(R):
        starts = [0] + [p for p in range(1, L) if colours[i, p] != colours[i, p - 1]]
        for s in starts:
            if image[i, s] >= 0:
                ax.text(s, i, str(image[i, s]), ha="left", va="center", fontsize=7)
    ax.set_yticks(range(R), labels or [f"request {i}" for i in range(R)])
    ax.set_xlabel("position in the sequence (the number: the pool row where a run of cells starts)")
    ax.set_title("slot tables: orange positions point at the same pool rows", fontsize=9)
    fig.tight_layout()
    return projector(fig)


def plot_page_waste(page_sizes, wasted, used) -> Figure:
    """Bars per page size: the most rows held at once (``used``) and, of them, the most wasted in partly
    filled pages (``wasted``)."""
    fig = Figure(figsize=(5.5, 3.0))
    ax = fig.subplots()
    x = np.arange(len(page_sizes))
    for bars, gid in (
        (ax.bar(x - 0.2, used, 0.4, label="peak rows in use", color=PRIVATE), "used"),
        (ax.bar(x + 0.2, wasted, 0.4, label="peak rows wasted (unused page tails)", color=SHARED), "wasted"),
    ):
        for bar in bars:
            bar.set_gid(gid)
    ax.set_xticks(x, [f"page_size {s}" for s in page_sizes])
    ax.set_ylabel("pool rows")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return projector(fig)
