"""Plots for notebook 08, a real model: the Q/K row permutation of GGUF files, and what it does to logits.

The pairing itself (NeoX ``(i, i + D/2)`` against GPT-J ``(2i, 2i+1)``) is drawn by
:func:`ropepool.teaching.viz.rotation.pairing_diagram`; the permutation is
:func:`ropepool.loaders.gguf.head_row_order` (why it exists: :mod:`ropepool.loaders.gguf`).
Plot functions return a :class:`matplotlib.figure.Figure` built without pyplot, whose artists
carry a ``gid`` and hold the data they show, so tests can read them back.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..._arrays import to_numpy
from ...loaders.gguf import head_row_order
from .legible import projector


def row_permutation(head_dim: int = 8) -> Figure:
    """One head's Q (or K) rows: GGUF order on the left, Hugging Face order on the right.

    A line (``gid="row r"``) joins GGUF row ``order[r]`` to Hugging Face row ``r``; its colour is
    the RoPE frequency ``i`` the row belongs to. Adjacent GGUF rows (a GPT-J pair) land D/2
    apart (a NeoX pair).
    """
    half = head_dim // 2
    order = head_row_order(1, head_dim)  # [D]: hf[r] = gguf[order[r]]
    fig = Figure(figsize=(4.2, max(3.0, 0.28 * head_dim + 1.0)), dpi=90, layout="constrained")
    ax = fig.subplots()
    for r, g in enumerate(order):
        color = f"C{(r % half) % 10}"
        ax.plot([0, 1], [g, r], color=color, lw=1.5, gid=f"row {r}")
        ax.text(-0.04, g, f"{g}", ha="right", va="center", fontsize=7, color=color)
        ax.text(1.04, r, f"{r}", ha="left", va="center", fontsize=7, color=color)
    ax.set_xlim(-0.35, 1.35)
    ax.set_ylim(head_dim - 0.5, -1.5)
    ax.set_xticks(
        [0, 1], ["GGUF rows\n(pairs adjacent: GPT-J)", "Hugging Face rows\n(pairs D/2 apart: NeoX)"], fontsize=8
    )
    ax.set_yticks([])
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"One head's Q/K rows, D={head_dim} (colour = frequency i)", fontsize=9)
    return projector(fig)


def logit_agreement(
    reference,
    same,
    mismatched,
    *,
    labels=("GGUF rows, GPT-J pairs", "un-permuted rows, NeoX pairs", "GGUF rows, NeoX pairs"),
) -> Figure:
    """Two scatter panels of the next-token logits ``[vocab]`` of three runs of one model.

    Left: ``same`` against ``reference`` (the two layouts of one model: on the diagonal);
    right: ``mismatched`` against ``reference`` (the wrong pairing: off it). The scatters carry
    ``gid="same"`` and ``gid="mismatched"``; each panel's title gives the largest difference.
    """
    ref = to_numpy(reference, np.float64).reshape(-1)
    fig = Figure(figsize=(8.0, 3.8), dpi=90, layout="constrained")
    axes = fig.subplots(1, 2, sharex=True, sharey=True)
    lo, hi = float(ref.min()), float(ref.max())
    for ax, gid, other, label in zip(axes, ("same", "mismatched"), (same, mismatched), labels[1:]):
        y = to_numpy(other, np.float64).reshape(-1)
        lo, hi = min(lo, float(y.min())), max(hi, float(y.max()))
        ax.scatter(ref, y, s=2, alpha=0.3, gid=gid, color="tab:blue" if gid == "same" else "tab:red")
        ax.set_xlabel(f"logit, {labels[0]}", fontsize=8)
        ax.set_ylabel(f"logit, {label}", fontsize=8)
        ax.set_title(f"{label}\nlargest |difference| {np.abs(y - ref).max():.2g}", fontsize=9)
    for ax in axes:
        ax.plot([lo, hi], [lo, hi], color="0.5", lw=0.8, ls="--", gid="diagonal")
    return projector(fig)


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes one token holds in the KV pools of all layers: layers x (k and v) x Hkv x D x bytes.

    Example
    -------
    >>> kv_bytes_per_token(30, 3, 64, 2)   # SmolLM2-135M, float16
    23040
    """
    return num_layers * 2 * num_kv_heads * head_dim * dtype_bytes


def kv_memory(
    bytes_per_token: dict[str, int], contexts=(512, 1024, 2048, 4096), *, weights_bytes: int | None = None
) -> Figure:
    """KV pool bytes of one request against its context length, one line per label (``gid`` = label).

    ``weights_bytes`` draws the model file's size as a horizontal line (``gid="weights"``).
    """
    fig = Figure(figsize=(5.5, 3.4), dpi=90, layout="constrained")
    ax = fig.subplots()
    ctx = np.asarray(contexts)
    for label, per_token in bytes_per_token.items():
        ax.plot(ctx, ctx * per_token / 1e6, marker="o", gid=label, label=label)
    if weights_bytes is not None:
        ax.axhline(weights_bytes / 1e6, color="0.4", ls="--", gid="weights", label="the model's weights (GGUF)")
    ax.set_xlabel("tokens of context (one request)")
    ax.set_ylabel("KV pool, MB (all layers)")
    ax.set_xticks(ctx)
    ax.legend(fontsize=8)
    ax.set_title("KV memory grows with every token; the weights do not", fontsize=9)
    return projector(fig)
