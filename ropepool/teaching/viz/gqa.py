"""Plots for grouped-query attention: what the op does, and which query heads share a KV head.

Shapes follow :mod:`ropepool.shapes` (T, Hq, Hkv, G, D, P). Each function returns a
``matplotlib.figure.Figure`` built without pyplot, so nothing is displayed twice and
pytest can read the drawn data back: artists carry a ``gid`` such as ``"k_pool:5"``.
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection, PatchCollection
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from .legible import projector

#: Colours: a written pool row, an untouched one, the rotation, plain tensors.
WRITTEN, UNTOUCHED, ROTATE, TENSOR = "#f4a261", "#e9ecef", "#2a9d8f", "#a8dadc"


def kv_head_of(num_qo_heads: int, num_kv_heads: int) -> np.ndarray:
    """The KV head each query head reads, ``[Hq]``: query head ``h`` uses KV head ``h // G``.

    Raises
    ------
    ValueError
        If a head count is not positive or ``num_qo_heads`` is not a multiple of ``num_kv_heads``.

    Example
    -------
    >>> kv_head_of(8, 2).tolist()
    [0, 0, 0, 0, 1, 1, 1, 1]
    """
    if num_qo_heads < 1 or num_kv_heads < 1:
        raise ValueError(f"head counts must be positive, got num_qo_heads={num_qo_heads}, num_kv_heads={num_kv_heads}")
    if num_qo_heads % num_kv_heads:
        raise ValueError(
            f"num_qo_heads={num_qo_heads} is not a multiple of num_kv_heads={num_kv_heads}: "
            "the group size G = Hq / Hkv must be a whole number"
        )
    group = num_qo_heads // num_kv_heads  # G
    return np.arange(num_qo_heads) // group  # [Hq]


def head_groups(num_qo_heads: int, num_kv_heads: int, *, width: float = 8.0) -> Figure:
    """Query heads (top) linked to the KV head they share (bottom), one colour per group.

    Query head ``h`` sits at x = h + 0.5; KV head ``j`` is centred under its group, at
    x = (j + 0.5) * G. The links are one ``LineCollection`` (gid ``"links"``) with one
    segment per query head, from ``(h + 0.5, 1)`` down to its KV head at y = 0.

    Example
    -------
    >>> fig = head_groups(32, 8)
    >>> len(next(c for c in fig.axes[0].collections if c.get_gid() == "links").get_segments())
    32
    """
    kv_of = kv_head_of(num_qo_heads, num_kv_heads)  # [Hq]
    G = num_qo_heads // num_kv_heads
    colours = _group_colours(num_kv_heads)  # [Hkv, 4]

    fig = Figure(figsize=(width, 2.3))
    ax = fig.add_axes((0.14, 0.02, 0.85, 0.84))
    q_x = np.arange(num_qo_heads) + 0.5  # [Hq]
    kv_x = (np.arange(num_kv_heads) + 0.5) * G  # [Hkv]
    box = 0.8
    kv_w = max(box, G - 0.2)

    q_boxes = [Rectangle((x - box / 2, 1.0), box, 0.5) for x in q_x]
    kv_boxes = [Rectangle((x - kv_w / 2, -0.5), kv_w, 0.5) for x in kv_x]
    ax.add_collection(PatchCollection(q_boxes, facecolors=colours[kv_of], edgecolors="white", gid="q_heads"))
    ax.add_collection(PatchCollection(kv_boxes, facecolors=colours, edgecolors="white", gid="kv_heads"))
    links = np.stack([np.stack([q_x, np.ones_like(q_x)], -1), np.stack([kv_x[kv_of], np.zeros_like(q_x)], -1)], 1)
    ax.add_collection(LineCollection(links, colors=colours[kv_of], linewidths=1.0, gid="links"))  # [Hq, 2, 2]

    # Labels at 10 pt (the projector rule), every step-th head: the smallest power of two whose spacing
    # holds the longest label with half its width to spare, so neighbours never touch.
    head_pt = width * 0.85 * 72 / num_qo_heads  # one query head's width, in points

    def step(label: str, spacing_pt: float) -> int:
        need = 1.5 * 0.6 * 10 * len(label) / spacing_pt  # label width (0.6 em a character) over the spacing
        return next(s for s in (1, 2, 4, 8, 16, 32, 64, 128) if s >= need)

    q_step = step(f"q{num_qo_heads - 1}", head_pt)
    for h, x in enumerate(q_x):
        if h % q_step == 0:
            ax.text(x, 1.25, f"q{h}", ha="center", va="center", fontsize=10)
    kv_step = step(f"kv{num_kv_heads - 1}", head_pt * G)
    for j, x in enumerate(kv_x):
        if j % kv_step == 0:
            ax.text(x, -0.25, f"kv{j}", ha="center", va="center", fontsize=10)
    ax.text(-0.01, 1.25, "query heads", transform=ax.get_yaxis_transform(), ha="right", va="center")
    ax.text(-0.01, -0.25, "KV heads", transform=ax.get_yaxis_transform(), ha="right", va="center")

    kind = "MQA" if num_kv_heads == 1 else "GQA"
    if G == 1:
        title = f"MHA: Hq = Hkv = {num_qo_heads}: each query head has its own KV head (G = 1)"
    else:
        title = (
            f"{kind}: Hq = {num_qo_heads} query heads share Hkv = {num_kv_heads} "
            f"KV head{'s' if num_kv_heads > 1 else ''}, G = {G} query heads per KV head"
        )
    fig.text(0.5, 0.97, title, ha="center", va="top", fontsize=10, gid="title")
    ax.set_xlim(0, num_qo_heads)
    ax.set_ylim(-0.6, 1.6)
    ax.axis("off")
    return projector(fig)


def _group_colours(n: int) -> np.ndarray:
    """``n`` RGBA colours, neighbours distinct: ``[n, 4]``."""
    from matplotlib import colormaps

    cmap = colormaps["tab10"] if n <= 10 else colormaps["hsv"]
    if n <= 10:
        return cmap(np.arange(n))
    return cmap(np.linspace(0, 1, n, endpoint=False))


def op_overview(slots=(5, 1, 6), pool_rows: int = 8) -> Figure:
    """The op in one picture: q, k, v -> rotate q and k -> scatter k_rot and v into pool rows.

    Token ``t`` goes to pool row ``slots[t]``; a slot < 0 writes nothing. Pool rows are
    rectangles with gids ``"k_pool:<row>"`` and ``"v_pool:<row>"``, coloured ``WRITTEN`` if a
    token writes them and ``UNTOUCHED`` otherwise; the arrows into the pools have gids
    ``"write:k:<t>"`` and ``"write:v:<t>"``.

    Example
    -------
    >>> fig = op_overview(slots=(2, -1), pool_rows=4)
    >>> sorted(a.get_gid() for a in fig.axes[0].patches if (a.get_gid() or "").startswith("write:k"))
    ['write:k:0']
    """
    slots = [int(s) for s in slots]
    T = len(slots)
    if any(s >= pool_rows for s in slots):
        raise ValueError(f"slots must be below pool_rows={pool_rows}, got {slots}")
    fig = Figure(figsize=(9.0, 4.8), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(0, 10.2)
    ax.set_ylim(-0.4, 8.6)
    ax.axis("off")

    def tensor(x, y, name, shape, colour=TENSOR, h=0.9):
        ax.add_patch(
            FancyBboxPatch((x, y), 1.8, h, boxstyle="round,pad=0.05", fc=colour, ec="#264653", gid=f"tensor:{name}")
        )
        ax.text(x + 0.9, y + h / 2 + 0.15, name, ha="center", va="center", fontsize=10, weight="bold")
        ax.text(x + 0.9, y + h / 2 - 0.2, shape, ha="center", va="center", fontsize=8)

    def arrow(a, b, gid=None, **kw):
        ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=10, lw=1.0, color="#264653", gid=gid, **kw))

    # Inputs, left column.
    tensor(0.1, 6.8, "q", "[T, Hq, D]")
    tensor(0.1, 5.2, "k", "[T, Hkv, D]")
    tensor(0.1, 1.0, "v", "[T, Hkv, D]")
    tensor(0.1, 3.5, "positions", "[T] int32", colour=UNTOUCHED, h=0.8)
    tensor(0.1, 2.25, "slots", "[T] int32", colour=UNTOUCHED, h=0.8)
    # The rotation.
    ax.add_patch(
        FancyBboxPatch(
            (2.7, 5.0), 1.6, 2.9, boxstyle="round,pad=0.05", fc=ROTATE, ec="#264653", alpha=0.85, gid="rotate"
        )
    )
    ax.text(3.5, 6.65, "rotate", ha="center", va="center", color="white", fontsize=11, weight="bold")
    ax.text(3.5, 6.15, "NeoX RoPE\npairs\n(i, i+D/2)", ha="center", va="top", color="white", fontsize=10)
    arrow((1.95, 7.25), (2.7, 7.25))
    arrow((1.95, 5.65), (2.7, 5.65))
    arrow((1.95, 3.9), (3.5, 4.95), connectionstyle="arc3,rad=-0.2")
    # Outputs of the rotation, one cell per token for k_rot and v.
    tensor(4.9, 6.8, "q_rot", "[T, Hq, D]")
    ax.text(5.8, 6.45, "returned", ha="center", fontsize=10, style="italic")
    arrow((4.35, 7.25), (4.9, 7.25))
    cell = 0.55
    k_cells = [(4.9 + 0.35, 5.5 - (t + 1) * cell) for t in range(T)]
    v_cells = [(4.9 + 0.35, 2.0 - (t + 1) * cell) for t in range(T)]
    for t, ((kx, ky), (vx, vy)) in enumerate(zip(k_cells, v_cells)):
        ax.add_patch(Rectangle((kx, ky), 1.1, cell * 0.9, fc=ROTATE, alpha=0.6, ec="#264653", gid=f"k_rot:{t}"))
        ax.text(kx + 0.55, ky + cell * 0.45, f"k_rot[{t}]", ha="center", va="center", fontsize=7)
        ax.add_patch(Rectangle((vx, vy), 1.1, cell * 0.9, fc=TENSOR, ec="#264653", gid=f"v_in:{t}"))
        ax.text(vx + 0.55, vy + cell * 0.45, f"v[{t}]", ha="center", va="center", fontsize=7)
    arrow((4.35, 5.5), (5.2, 5.5 - cell / 2))
    arrow((1.95, 1.45), (5.2, v_cells[0][1] + cell * 0.45))
    ax.text(5.8, 5.6, "k_rot [T, Hkv, D]", ha="center", fontsize=8)
    ax.text(5.8, 2.1, "v, not rotated", ha="center", fontsize=8)
    arrow((1.95, 2.65), (7.55, 3.9), linestyle="--", connectionstyle="arc3,rad=0.12")
    ax.text(7.6, 3.2, "pick the rows", ha="right", va="center", fontsize=10, style="italic")

    # The pools: P rows each, rows named by slots[t] are written.
    written = {s for s in slots if s >= 0}
    row_h = 0.42
    pools = {"k": (8.2, 4.6), "v": (8.2, 0.0)}
    for name, (px, py) in pools.items():
        ax.text(
            px + 0.6, py + pool_rows * row_h + 0.2, f"{name}_pool [P, Hkv, D]", ha="center", fontsize=8, weight="bold"
        )
        for r in range(pool_rows):
            y = py + (pool_rows - 1 - r) * row_h
            ax.add_patch(
                Rectangle(
                    (px, y),
                    1.2,
                    row_h * 0.9,
                    fc=WRITTEN if r in written else UNTOUCHED,
                    ec="#adb5bd",
                    gid=f"{name}_pool:{r}",
                )
            )
            ax.text(px + 1.3, y + row_h * 0.45, f"row {r}", va="center", fontsize=6)
        src = k_cells if name == "k" else v_cells
        for t, s in enumerate(slots):
            if s < 0:
                continue
            sx, sy = src[t]
            ty = py + (pool_rows - 1 - s) * row_h + row_h * 0.45
            arrow((sx + 1.12, sy + cell * 0.45), (px - 0.02, ty), gid=f"write:{name}:{t}")
    ax.set_title(
        "rope_pool_fused: rotate q and k, then write k_rot and v into the pool rows named by slots\n"
        f"slots = {slots}: token t writes row slots[t]"
        + ("; a slot of -1 writes nothing" if any(s < 0 for s in slots) else "")
        + "; every other row keeps its bits",
        fontsize=10,
    )
    return projector(fig)
