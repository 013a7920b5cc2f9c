"""Plots of where a prompt's bits go (notebook 15): the gap per layer, and how keys are split for a sum.

:func:`key_splits` is the rule each panel draws: which partial sum key j joins when L keys are split
into a fixed *count* of parts (what a split-KV attention tuned for the batch does) or into parts of a
fixed *size* (what a batch-invariant one does; ``ropepool.engine.deterministic`` uses lanes of 8).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

FONT = 12


def key_splits(L: int, how: str, n: int) -> np.ndarray:
    """The part each of ``L`` keys is summed in: ``how="count"``, ``n`` parts of ``ceil(L / n)`` keys;
    ``how="size"``, parts of ``n`` keys (key j in part ``j // n``), however long L is. ``[L]`` ints.

    Raises
    ------
    ValueError
        ``how`` is neither "count" nor "size", or ``n`` < 1.
    """
    if how not in ("count", "size") or n < 1:
        raise ValueError(f"key_splits: how must be 'count' or 'size' and n >= 1, got how={how!r}, n={n}")
    size = -(-L // n) if how == "count" else n
    return np.arange(L) // max(size, 1)


def part_of(L: int, how: str, n: int, key: int) -> tuple[int, ...]:
    """The keys summed in one part with ``key`` (itself included) under :func:`key_splits`' rule."""
    groups = key_splits(L, how, n)
    return tuple(int(j) for j in np.flatnonzero(groups == groups[key]))


def split_plot(lengths=(12, 20), parts: int = 4, size: int = 8, key: int = 5) -> Figure:
    """For each length L (rows) and each rule (columns: a fixed count of ``parts``, a fixed ``size``), the
    keys 0..L-1 coloured by the part they are summed in; ``key`` outlined, its part named."""
    fig, axes = plt.subplots(len(lengths), 2, figsize=(11, 1.2 + 1.1 * len(lengths)), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for row, L in enumerate(lengths):
        for col, (how, n, title) in enumerate((("count", parts, f"{parts} parts"), ("size", size, f"parts of {size}"))):
            ax, groups = axes[row][col], key_splits(L, how, n)
            for j, g in enumerate(groups):
                edge = dict(edgecolor="black", linewidth=2.5) if j == key else dict(edgecolor="white", linewidth=1)
                ax.add_patch(plt.Rectangle((j, 0), 1, 1, facecolor=cmap(g % 10), **edge))
                ax.text(j + 0.5, 0.5, str(j), ha="center", va="center", fontsize=9)
            ax.set_xlim(0, max(lengths))
            ax.set_ylim(0, 1)
            ax.set_yticks([])
            ax.set_xticks([])
            part = part_of(L, how, n, key)
            ax.set_title(f"L = {L}, {title}: key {key} summed with keys {part[0]}-{part[-1]}", fontsize=FONT - 1)
    fig.suptitle("Which partial sum a key joins: a fixed count moves with L, a fixed size does not", fontsize=FONT)
    fig.tight_layout()
    return fig


def gap_plot(gaps: dict[str, np.ndarray], floor: float = 1e-9) -> Figure:
    """``max |h - h_alone|`` after the embedding, each layer and the logits, one line per setting, log scale;
    exact zeros drawn at ``floor`` (marked on the axis)."""
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for name, g in gaps.items():
        ax.plot(np.maximum(np.asarray(g, float), floor), marker="o", ms=4, label=name)
    n = len(next(iter(gaps.values())))
    ax.set_xticks(range(n), ["embed", *[str(i) for i in range(n - 2)], "logits"], fontsize=9)
    ax.set_yscale("log")
    ax.axhline(floor, color="grey", lw=0.8, ls=":")
    ax.text(0, floor * 1.5, "exactly 0", color="grey", fontsize=9)
    ax.set_xlabel("after layer", fontsize=FONT)
    ax.set_ylabel("max |beside - alone|", fontsize=FONT)
    ax.set_title("The same prompt's hidden states, served beside others against alone", fontsize=FONT)
    ax.legend(fontsize=9)
    fig.tight_layout()
    return fig
