"""Plots of how models scale and slice RoPE (notebook 03b): wavelengths, scaling rules, pairings.

Every curve is computed by :func:`ropepool.rope.rope_table`, the function the op uses; nothing
here computes a frequency of its own.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...rope import Rope, plain, rope_table
from .legible import projector

FONT = 12


def scaling_rules(head_dim: int, rope_base: float, factor: float, original: int) -> dict[str, Rope]:
    """The rotation of one head under each way of stretching its context ``factor`` times.

    "NTK" is the static NTK-aware rule (a larger base, ``base * factor**(D / (D - 2))``) that
    ``dynamic`` scaling applies at run time; the others are the config types.
    """
    ntk_base = rope_base * factor ** (head_dim / (head_dim - 2))
    return {
        "plain": plain(head_dim, rope_base),
        "linear": rope_table(head_dim, rope_base, rope_scaling={"rope_type": "linear", "factor": factor}),
        "NTK (larger base)": plain(head_dim, ntk_base),
        "llama3": rope_table(
            head_dim,
            rope_base,
            rope_scaling={
                "rope_type": "llama3",
                "factor": factor,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": original,
            },
        ),
        "yarn": rope_table(
            head_dim,
            rope_base,
            rope_scaling={"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": original},
        ),
    }


def wavelength_plot(rules: dict[str, Rope], original: int, factor: float, ax=None) -> Figure:
    """Wavelength (positions per full turn) of every pair, one line per rule, log scale; the
    training context and the stretched one as horizontal lines."""
    fig, ax = _axes(ax, (9, 4.6))
    markers = "os^dv"
    for (name, rope), marker in zip(rules.items(), markers):
        ax.plot(
            rope.wavelengths(),
            marker=marker,
            markevery=8,
            ms=6,
            lw=2 if name == "plain" else 1.5,
            label=name,
            color="black" if name == "plain" else None,
        )
    ax.axhline(original, color="tab:gray", ls="--", lw=1)
    ax.axhline(original * factor, color="tab:gray", ls=":", lw=1)
    ax.text(0, original * 1.15, f"training context {original:,}", fontsize=FONT, color="tab:gray")
    ax.text(
        0,
        original * factor * 1.15,
        f"stretched x{factor:g}: {int(original * factor):,}",
        fontsize=FONT,
        color="tab:gray",
    )
    ax.set_yscale("log")
    return _finish(fig, ax, "Which pairs each rule slows down", "wavelength (positions)")


def slowdown_plot(rules: dict[str, Rope], ax=None) -> Figure:
    """How many times slower each pair turns than under plain RoPE (plain inv_freq / scaled)."""
    fig, ax = _axes(ax, (9, 4))
    base = np.asarray(rules["plain"].inv_freq)
    for name, rope in rules.items():
        if name != "plain":
            ax.plot(base / np.asarray(rope.inv_freq), lw=2, label=name)
    return _finish(fig, ax, "Linear slows every pair; llama3 and YaRN only the slow ones", "slowdown (x)")


def pairing_plot(head_dim: int = 16, rotary_dim: int = 8) -> Figure:
    """Which dimensions of one head turn together: NeoX halves, GPT-J neighbours, and a partial
    rotation whose last dimensions pass through."""
    fig, axes = plt.subplots(3, 1, figsize=(9, 4.8))
    rows = [
        ("NeoX (Llama, Qwen)", rope_table(head_dim, 1e4)),
        ("GPT-J (GPT-J, GGUF Llama)", rope_table(head_dim, 1e4, is_neox=False)),
        (f"partial: {rotary_dim} of {head_dim} (Phi-2)", rope_table(head_dim, 1e4, rotary_dim=rotary_dim)),
    ]
    colors = [c for i, c in enumerate(plt.get_cmap("tab10").colors) if i != 7]  # no grey: grey means "passes through"
    for ax, (title, rope) in zip(axes, rows):
        for d in range(head_dim):
            ax.add_patch(plt.Rectangle((d, 0), 0.9, 0.9, color="0.85"))
        for i, (a, b) in enumerate(rope.pairs()):
            for d in (a, b):
                ax.add_patch(plt.Rectangle((d, 0), 0.9, 0.9, color=colors[i % len(colors)]))
                ax.text(d + 0.45, 0.45, str(i), ha="center", va="center", fontsize=FONT - 1, color="white")
        ax.set_xlim(0, head_dim)
        ax.set_ylim(0, 1)
        ax.set_yticks([])
        ax.set_xticks(range(0, head_dim, 2))
        ax.tick_params(labelsize=FONT - 1)
        ax.set_title(title + "  (number: pair index; grey: passes through)", fontsize=FONT - 1, loc="left")
    fig.tight_layout()
    return projector(fig)


def mistake_plot(positions, errors_plain, errors_fixed) -> Figure:
    """The largest error of q_rot against mlx-lm at each position: plain RoPE on a llama3 config
    against the fixed call.

    A log axis cannot show 0: an error that is exactly 0 is drawn as a hollow marker on a dashed
    floor line labelled "exactly 0" (a tenth of the smallest non-zero error), for both lines alike;
    the lines join only the non-zero errors. Lines have gid "plain" and "fixed", the floor markers
    "plain zero" and "fixed zero".
    """
    fig, ax = _axes(None, (9, 3.8))
    x = np.asarray(positions)
    ys = {"plain": np.asarray(errors_plain, float), "fixed": np.asarray(errors_fixed, float)}
    nonzero = np.concatenate([y[y > 0] for y in ys.values()])
    floor = float(nonzero.min()) / 10 if nonzero.size else 1e-12
    styles = {
        "plain": ("o", "tab:red", "plain RoPE (rope_scaling ignored)"),
        "fixed": ("s", "tab:green", "rope_scaling passed"),
    }
    for key, y in ys.items():
        marker, colour, label = styles[key]
        nz = y > 0
        ax.plot(x[nz], y[nz], marker=marker, ls="-", lw=2, label=label, color=colour, gid=key)
        if (~nz).any():
            ax.plot(
                x[~nz],
                np.full(int((~nz).sum()), floor),
                marker=marker,
                ls="none",
                ms=9,
                mfc="none",
                mew=2,
                color=colour,
                gid=f"{key} zero",
                clip_on=False,
            )
    if any((y <= 0).any() for y in ys.values()):
        ax.axhline(floor, color="0.5", ls="--", lw=1)
        ax.annotate(
            "exactly 0 (hollow markers)",
            (1, floor),
            xycoords=("axes fraction", "data"),
            xytext=(-4, 4),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize=FONT,
            color="0.3",
        )
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(-0.6, float(x.max()) * 1.6 if x.size and x.max() > 0 else 1)  # positions are >= 0
    ax.set_yscale("log")
    ax.set_ylim(bottom=floor / 2)
    ax.set_xlabel("position", fontsize=FONT)
    ax.set_ylabel("max |ours - mlx-lm|", fontsize=FONT)
    ax.set_title("Llama-3.1: the cost of ignoring rope_scaling", fontsize=FONT + 1)
    ax.tick_params(labelsize=FONT)
    ax.legend(fontsize=FONT, loc="upper left")
    fig.tight_layout()
    return projector(fig)


def _finish(fig, ax, title: str, ylabel: str) -> Figure:
    """Per-pair axes: labels, title and the legend beside the plot, at the projector's sizes."""
    ax.set_xlabel("pair i (fast to slow)", fontsize=FONT)
    ax.set_ylabel(ylabel, fontsize=FONT)
    ax.set_title(title, fontsize=FONT + 1)
    ax.tick_params(labelsize=FONT)
    ax.legend(fontsize=FONT, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return projector(fig)


def _axes(ax, size):
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=size)
    return fig, ax
