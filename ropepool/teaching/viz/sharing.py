"""Plots of the engine's prefix cache: the radix tree, slot tables that point at the same rows, pages.

Each function reads data taken from an :class:`~ropepool.engine.Engine` (its cache, its requests,
its stats) and returns a :class:`matplotlib.figure.Figure` built without pyplot; artists carry a
``gid`` so tests can read their data back.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from ...engine.radix import RadixCache
from .legible import projector

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
    """``[(node, depth, y, parent_index)]``, parents first: leaves one per line, a parent at its children's mean."""
    out, leaf = [], [0]

    def visit(node, depth, parent):
        i = len(out)
        out.append([node, depth, 0.0, parent])
        kids = list(node.children.values())
        ys = [visit(child, depth + 1, i) for child in kids]
        if ys:
            out[i][2] = sum(ys) / len(ys)
        else:
            out[i][2] = float(leaf[0])
            leaf[0] += 1
        return out[i][2]

    visit(cache.root, 0, -1)
    return [tuple(x) for x in out]


def tree_text(cache: RadixCache, decode=None, *, width: int = 48) -> str:
    """The tree as indented lines: each node's token count, pool rows, and its text (``decode(ids)``)."""
    lines = []
    for node, depth, _, _ in tree_layout(cache)[1:]:
        ids = _tokens(node)
        rows = cache.allocator.rows(node.pages)
        text = decode(ids) if decode else " ".join(map(str, ids))
        text = text.replace("\n", "⏎")
        text = text if len(text) <= width else text[:width - 1] + "…"
        lines.append(f"{'  ' * (depth - 1)}{len(ids):4} tokens, rows {row_runs(rows)}: {text!r}")
    return "\n".join(lines) if lines else "(empty)"


def plot_radix_tree(cache: RadixCache, decode=None, *, width: int = 28) -> Figure:
    """The prefix cache as a tree: one box per node with its tokens (``decode(ids)``, cut to ``width``),
    their count and their pool rows; a box is orange while a running request holds its rows, blue
    when only the cache does (evictable)."""
    layout = tree_layout(cache)
    refs = cache.allocator.refs
    depth = max((d for _, d, _, _ in layout), default=0)
    leaves = max(1, sum(1 for n, _, _, _ in layout if not n.children))
    fig = Figure(figsize=(2.2 + 3.0 * depth, 1.0 + 0.55 * leaves))
    ax = fig.subplots()
    for i, (node, d, y, parent) in enumerate(layout):
        if parent >= 0:
            _, pd, py, _ = layout[parent]
            ax.plot([pd, d], [py, y], color="#999999", lw=1, zorder=1, gid=f"edge {parent} {i}")
        if node is cache.root:
            ax.text(d, y, "root", ha="center", va="center", fontsize=8, gid="root",
                    bbox=dict(boxstyle="round", fc="white", ec="#666666"))
            continue
        ids = _tokens(node)
        rows = cache.allocator.rows(node.pages)
        text = (decode(ids) if decode else " ".join(map(str, ids))).replace("\n", "⏎")
        text = text if len(text) <= width else text[:width - 1] + "…"
        held = any(refs[p] > 1 for p in node.pages)
        ax.text(d, y, f"{text}\n{len(ids)} tokens, rows {row_runs(rows)}", ha="center", va="center",
                fontsize=7, gid=f"node {i}", bbox=dict(boxstyle="round", fc=SHARED if held else PRIVATE, ec="#666666"))
    ax.set_xlim(-0.5, depth + 0.6)
    ax.set_ylim(leaves - 0.4, -0.6)
    ax.axis("off")
    ax.set_title("the prefix cache: a radix tree over token ids (orange: held by a running request, "
                 "blue: only cached)", fontsize=9)
    fig.tight_layout()
    return projector(fig)


def slot_table_image(tables) -> np.ndarray:
    """``[R, L]`` int: each request's slot table (row ids), padded with -1 to the longest."""
    L = max((len(t) for t in tables), default=0)
    out = np.full((len(tables), L), -1)
    for i, t in enumerate(tables):
        out[i, :len(t)] = t
    return out


def shared_mask(tables) -> np.ndarray:
    """``[R, L]`` bool: where a slot table's row also appears in another request's table."""
    image = slot_table_image(tables)
    mask = np.zeros(image.shape, bool)
    for i, t in enumerate(tables):
        others = {row for j, u in enumerate(tables) if j != i for row in u}
        mask[i, :len(t)] = [row in others for row in t]
    return mask


def plot_slot_tables(tables, labels=None, *, cell: float = 0.09) -> Figure:
    """Slot tables side by side, one band per request, one cell per position: orange where the pool row is
    also in another request's table (the same rows, read by both), blue where it is the request's own."""
    image, mask = slot_table_image(tables), shared_mask(tables)
    R, L = image.shape
    fig = Figure(figsize=(1.8 + cell * L, 0.9 + 0.5 * R))
    ax = fig.subplots()
    colours = np.where(image < 0, 0, np.where(mask, 2, 1))
    im = ax.imshow(colours, cmap=ListedColormap(["#ffffff", PRIVATE, SHARED]), vmin=0, vmax=2, aspect="auto",
                   interpolation="nearest")
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
    for bars, gid in ((ax.bar(x - 0.2, used, 0.4, label="peak rows in use", color=PRIVATE), "used"),
                      (ax.bar(x + 0.2, wasted, 0.4, label="peak rows wasted (unused page tails)", color=SHARED),
                       "wasted")):
        for bar in bars:
            bar.set_gid(gid)
    ax.set_xticks(x, [f"page_size {s}" for s in page_sizes])
    ax.set_ylabel("pool rows")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return projector(fig)
