"""Plots of caches beyond GQA (notebook 11): memory per model, MLA's latent row, a sliding window's ring
of rows, mrope's sections on the rotation.

Each function returns a :class:`matplotlib.figure.Figure` built without pyplot; artists carry a ``gid``
so tests can read their data back.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ...rope import Rope
from .legible import projector

GIB = 2**30
SECTION_COLORS = ("tab:blue", "tab:orange", "tab:green")  # time, height, width
AXES = ("time", "height", "width")


def memory_bars(rows, *, requests: int = 8, tokens: int = 32768) -> Figure:
    """Horizontal bars of the cache of ``requests`` x ``tokens``, per model: ``rows`` is
    ``[(label, bf16 bytes, fp8 bytes)]``. Bars ``gid="bf16 <label>"`` and ``"fp8 <label>"``, widths in GiB."""
    fig = Figure(figsize=(8.5, 0.55 * len(rows) + 1.6))
    ax = fig.add_subplot()
    y = np.arange(len(rows))
    for i, (label, bf16, fp8) in enumerate(rows):
        ax.barh(
            y[i] - 0.2,
            bf16 / GIB,
            height=0.38,
            color="tab:blue",
            gid=f"bf16 {label}",
            label="bfloat16" if i == 0 else None,
        )
        ax.barh(
            y[i] + 0.2,
            fp8 / GIB,
            height=0.38,
            color="tab:orange",
            gid=f"fp8 {label}",
            label="FP8 (e4m3)" if i == 0 else None,
        )
        ax.text(bf16 / GIB, y[i] - 0.2, f" {bf16 / GIB:.1f}", va="center")
    ax.set_yticks(y, [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"KV cache, GiB ({requests} requests x {tokens} tokens, every layer)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    return projector(fig)


def latent_rows(pool: np.ndarray, slots, kv_lora_rank: int) -> Figure:
    """MLA's latent pool ``[P, 1, R + rope_dim]`` as an image, one row per slot: the c_kv part left of
    the line ``gid="split"`` (x = R), rope(k_pe) right of it; written rows framed (``gid="written <row>"``)."""
    pool = np.asarray(pool, np.float64)[:, 0, :]  # [P, R + rd]
    P, W = pool.shape
    fig = Figure(figsize=(8.5, 0.35 * P + 1.5))
    ax = fig.add_subplot()
    ax.imshow(pool, aspect="auto", cmap="coolwarm", interpolation="nearest", gid="pool")
    ax.axvline(kv_lora_rank - 0.5, color="k", lw=2, gid="split")
    for s in np.asarray(slots).tolist():
        if 0 <= s < P:
            ax.add_patch(Rectangle((-0.5, s - 0.5), W, 1, fill=False, lw=2, ec="k", gid=f"written {s}"))
    ax.set_xticks(
        [kv_lora_rank / 2, kv_lora_rank + (W - kv_lora_rank) / 2],
        [f"c_kv ({kv_lora_rank})", f"rope(k_pe) ({W - kv_lora_rank})"],
    )
    ax.set_ylabel("pool row (slot)")
    ax.set_title("latent_pool [P, 1, kv_lora_rank + rope_dim]: framed rows were written")
    fig.tight_layout()
    return projector(fig)


def ring_slots(tokens: int, window: int, first_row: int = 0) -> np.ndarray:
    """The pool row of each of a request's ``tokens`` positions when a sliding-window layer keeps ``window``
    rows as a ring: position ``p`` reuses the row of ``p - window``, which just left the window."""
    return first_row + np.arange(tokens) % window


def window_rows(slots, window: int) -> Figure:
    """Which pool row each position was written to (dots, ``gid="writes"``: x position, y row), and the
    rows the last token attends to (``gid="window"``: the last ``window`` positions)."""
    slots = np.asarray(slots)
    T = slots.size
    fig = Figure(figsize=(8.5, 3.2))
    ax = fig.add_subplot()
    pos = np.arange(T)
    ax.plot(pos, slots, "o", ms=5, color="0.6", gid="writes")
    live = pos[max(0, T - window) :]
    ax.plot(live, slots[live], "o", ms=7, color="tab:orange", gid="window", label=f"the last {window} positions")
    ax.set_xlabel("position (one token a step)")
    ax.set_ylabel("pool row")
    ax.set_yticks(np.unique(slots))
    ax.set_title(f"a sliding window of {window}: {np.unique(slots).size} rows for {T} tokens")
    ax.legend(loc="upper left")
    fig.tight_layout()
    return projector(fig)


def pair_angles(rope: Rope, positions3) -> np.ndarray:
    """The angle of every pair for every token under mrope: ``positions3[axis(i), t] * inv_freq[i]``,
    float64 ``[T, rotary_dim/2]`` (``positions3`` is ``[3, T]``)."""
    pos = np.asarray(positions3, np.float64)
    return pos[rope.pair_axes()].T * np.asarray(rope.inv_freq)[None, :]


def mrope_sections(rope: Rope, positions3, labels=None) -> Figure:
    """mrope on the rotation picture: one unit circle per token; pair ``i`` is a dot at its angle, coloured by
    the axis (time, height, width) whose position turns it. Dots ``gid="<token> <axis>"`` hold (cos, sin)."""
    theta = pair_angles(rope, positions3)  # [T, rd/2]
    T = theta.shape[0]
    axes_of = rope.pair_axes()
    labels = labels or [f"t={p[0]}, h={p[1]}, w={p[2]}" for p in np.asarray(positions3).T.tolist()]
    fig = Figure(figsize=(3.0 * T, 3.6))
    for t in range(T):
        ax = fig.add_subplot(1, T, t + 1)
        c = np.linspace(0, 2 * np.pi, 200)
        ax.plot(np.cos(c), np.sin(c), color="0.85", lw=1)
        for j, name in enumerate(AXES):
            pick = axes_of == j
            ax.plot(
                np.cos(theta[t, pick]),
                np.sin(theta[t, pick]),
                "o",
                ms=5,
                color=SECTION_COLORS[j],
                gid=f"{t} {name}",
                label=f"{name}: {int(pick.sum())} pairs" if t == 0 else None,
            )
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(labels[t])
    fig.legend(loc="lower center", ncol=3)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return projector(fig)
