"""Plots for notebook 10 (what engines fuse today): QK-norm against logit growth, the e4m3 grid, a pool
row before and after FP8, and pool memory against logit error.

Each artist that carries data has a gid, so tests read the numbers back from the figure.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ... import fp8
from .legible import projector


def e4m3_grid() -> Figure:
    """The 127 non-negative finite e4m3 values (codes 0x00-0x7E) on a log axis, one row per exponent,
    and the gap to the next value: 8 values per binade, so the relative step stays about 1/8."""
    values = fp8.decode_table()[:0x7F].astype(np.float64)  # increasing
    fig = Figure(figsize=(9, 4.2))
    ax, gap = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    exps = np.arange(0x7F) >> 3
    positive = values > 0
    ax.scatter(values[positive], exps[positive], s=14, c=exps[positive], cmap="viridis", gid="e4m3_values")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("value (log2 axis)")
    ax.set_ylabel("exponent field E")
    ax.set_title("e4m3: 8 values per exponent")
    ax.annotate("448 = 0x7E, the largest", (448, 15), xytext=(2.0**-4, 13.2), arrowprops={"arrowstyle": "->"})
    ax.annotate("subnormals, steps of 2**-9", (2.0**-9, 0), xytext=(2.0**-8, 3), arrowprops={"arrowstyle": "->"})
    steps = np.diff(values)  # [126]
    rel = steps[1:] / values[1:-1]
    gap.plot(values[1:-1], rel, ".", gid="relative_step")
    gap.set_xscale("log", base=2)
    gap.set_xlabel("value")
    gap.set_ylabel("gap to next / value")
    gap.set_title("relative step")
    fig.tight_layout()
    return projector(fig)


def fp8_row(row, codes, scale: float = 1.0, *, label: str = "k_pool row") -> Figure:
    """One pool row ``[Hkv, D]`` before (its float values) and after FP8 (its codes decoded times
    ``scale``), and the difference, element by element."""
    row = np.asarray(row, np.float64).reshape(-1)
    back = fp8.decode_table()[np.asarray(codes, np.uint8).reshape(-1)].astype(np.float64) * scale
    fig = Figure(figsize=(9, 4.6))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    x = np.arange(row.size)
    top.plot(x, row, "-", lw=1, label="float", gid="before")
    top.plot(x, back, ".", ms=4, label="e4m3 codes, decoded", gid="after")
    top.set_ylabel("value")
    top.set_title(f"{label}: {row.size} values, {row.size * 4} bytes in float32, {row.size} bytes in e4m3")
    top.legend(loc="upper right")
    bottom.plot(x, back - row, ".", ms=4, gid="error")
    bottom.set_xlabel("element of the row (heads side by side)")
    bottom.set_ylabel("after - before")
    fig.tight_layout()
    return projector(fig)


def memory_vs_error(points) -> Figure:
    """Pool bytes against the largest logit difference from float32 pools, one labelled point per
    ``(label, bytes, error)``."""
    labels, nbytes, errors = zip(*points)
    fig = Figure(figsize=(7, 4.2))
    ax = fig.subplots()
    ax.scatter(np.asarray(nbytes) / 2**20, errors, s=40, gid="points")
    for label, b, e in points:
        ax.annotate(label, (b / 2**20, e), xytext=(6, 6), textcoords="offset points")
    ax.set_xlabel("KV pool memory (MiB)")
    ax.set_ylabel("max |logit - float32 pools' logit|")
    ax.set_title("memory against logit error")
    ax.margins(0.25)
    fig.tight_layout()
    return projector(fig)


def logit_growth(scales, plain, normed) -> Figure:
    """The largest attention logit ``q.k / sqrt(D)`` as q and k grow by ``scales``: without QK-norm it
    grows with the square of the scale, with it it stays put."""
    fig = Figure(figsize=(7, 4.2))
    ax = fig.subplots()
    ax.plot(scales, plain, "o-", label="RoPE only", gid="plain")
    ax.plot(scales, normed, "s-", label="QK-norm, then RoPE", gid="normed")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("scale of q and k (weights growing in training)")
    ax.set_ylabel("largest |attention logit|")
    ax.set_title("attention logit growth")
    ax.legend()
    fig.tight_layout()
    return projector(fig)
