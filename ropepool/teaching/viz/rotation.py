"""Plots for RoPE's rotation: pairs turning, frequencies, relative positions, pairing, precision.

The rotation is NeoX's (pair ``i`` with ``i + D/2``), defined once in :mod:`ropepool.reference`.
Data helpers (``pair_vectors``, ``scores``, ``rotate_gptj``, ``neox_to_gptj``, ``position_errors``,
``error_bound``) return arrays; plot functions return a :class:`matplotlib.figure.Figure` built
without pyplot, whose lines and images hold the data they show, so tests can read them back.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from .legible import projector

from ..._arrays import to_numpy
from ...reference import inverse_frequencies, rotate, rotate_neox
from ...rope import rope_table
from ...tolerance import EPS, error_bound, pair_norms  # noqa: F401  (re-exported for notebook 03)


DTYPE_COLORS = {"float32": "tab:blue", "bfloat16": "tab:orange", "float16": "tab:green"}


# --- Data --------------------------------------------------------------------------------------


def unit_pairs(head_dim: int) -> np.ndarray:
    """A vector ``[D]`` whose every pair ``(x_i, x_{i+D/2})`` is ``(1, 0)``: each pair starts at angle 0."""
    x = np.zeros(head_dim)
    x[: head_dim // 2] = 1.0
    return x


def pair_vectors(x, positions, rope_base: float) -> np.ndarray:
    """Each NeoX pair of ``x [D]`` rotated to each position: ``[N, D/2, 2]`` (float64 reference)."""
    x = np.asarray(x, np.float64)
    positions = np.asarray(positions)
    half = x.shape[-1] // 2
    rot = rotate_neox(np.broadcast_to(x, (len(positions), 1, x.shape[-1])), positions, rope_base)[:, 0]  # [N, D]
    return np.stack([rot[:, :half], rot[:, half:]], axis=-1)  # [N, D/2, 2]


def scores(q, k, positions, rope_base: float) -> np.ndarray:
    """``S[m, n] = rope(q, m) . rope(k, n)`` for one head vector q and k ``[D]``: ``[N, N]``, float64.

    Example
    -------
    >>> import numpy as np
    >>> S = scores(np.arange(4.0), np.ones(4), np.arange(6), 100.0)
    >>> bool(np.allclose(S[1:, 1:], S[:-1, :-1]))  # only n - m matters
    True"""
    positions = np.asarray(positions)
    n = len(positions)
    q_rot = rotate_neox(np.broadcast_to(np.asarray(q, np.float64), (n, 1, len(q))), positions, rope_base)[:, 0]
    k_rot = rotate_neox(np.broadcast_to(np.asarray(k, np.float64), (n, 1, len(k))), positions, rope_base)[:, 0]
    return q_rot @ k_rot.T  # [N, N]: row m is q's position, column n is k's


def neox_to_gptj(head_dim: int) -> np.ndarray:
    """The permutation ``perm`` with ``x_gptj = x_neox[..., perm]``: ``[0, D/2, 1, D/2+1, ...]``.

    NeoX pairs dimension ``i`` with ``i + D/2``; GPT-J pairs ``2i`` with ``2i + 1``. Interleaving
    the two halves puts each NeoX pair side by side, where GPT-J expects it.

    Example
    -------
    >>> neox_to_gptj(8).tolist()
    [0, 4, 1, 5, 2, 6, 3, 7]
    """
    half = head_dim // 2
    return np.stack([np.arange(half), np.arange(half) + half], axis=-1).reshape(-1)  # [D]


def rotate_gptj(x, positions, rope_base: float) -> np.ndarray:
    """GPT-J's interleaved RoPE of ``x [T, H, D]``: pair ``(2i, 2i+1)`` turns by ``theta_i``; float64
    (the reference's rotation with GPT-J's pairs)."""
    return rotate(x, positions, rope_table(np.shape(x)[-1], rope_base, is_neox=False))  # [T, H, D]


def position_errors(
    positions,
    dtypes=("float32", "bfloat16", "float16"),
    *,
    head_dim: int = 64,
    rope_base: float = 10000.0,
    seed: int = 0,
) -> dict[str, dict[str, np.ndarray]]:
    """Measure ``rope_pool_fused``'s error against the float64 reference at each position, per dtype.

    One token per position, one query head: q ``[N, 1, D]`` rounded to the dtype, rotated by the
    op and by the reference (which starts from the same rounded values, so only the op's own
    error is measured).

    Returns
    -------
    ``{dtype: {"positions": [N], "error": [N] max |q_rot - reference| per token,
    "scale": [N] the token's largest pair norm}}``
    """
    from ...inputs import make_inputs
    from ...op import rope_pool_fused
    from ...shapes import Shapes

    positions = np.asarray(positions, np.int64)
    n = len(positions)
    out = {}
    for dtype in dtypes:
        kw = make_inputs(
            Shapes(n, 1, 1, head_dim, n), dtype, seed=seed, positions=positions, slots=np.arange(n), rope_base=rope_base
        )
        q_rot = rope_pool_fused(**kw)[0]
        q = to_numpy(kw["q"], np.float64)  # [N, 1, D], the dtype's exact values
        ref = rotate_neox(q, positions, rope_base)
        err = np.abs(to_numpy(q_rot, np.float64) - ref).max(axis=(1, 2))  # [N]
        out[dtype] = {"positions": positions, "error": err, "scale": pair_norms(q).max(axis=(1, 2))}
    return out


# --- Plots -------------------------------------------------------------------------------------


def _circle(ax) -> None:
    t = np.linspace(0, 2 * np.pi, 121)
    ax.plot(np.cos(t), np.sin(t), color="0.85", lw=1, gid="circle")
    ax.set_xlim(-1.25, 1.25)
    ax.set_ylim(-1.25, 1.25)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])


def pair_paths(head_dim: int = 8, rope_base: float = 10000.0, positions=range(0, 13), *, pairs=None) -> Figure:
    """Each pair ``(x_i, x_{i+D/2})`` as a 2-D vector turning as the position grows.

    One panel per pair ``i`` (all D/2 by default): the vector starts at (1, 0) at position 0
    and turns by ``omega_i = base**(-2i/D)`` radians per position (its speed; the angle is
    ``theta_i = position * omega_i``); dots mark positions, the arrow
    the last one. Each panel's line with ``gid="path"`` holds the dots' x and y.
    """
    positions = np.asarray(list(positions))
    pairs = list(range(head_dim // 2)) if pairs is None else list(pairs)
    vec = pair_vectors(unit_pairs(head_dim), positions, rope_base)  # [N, D/2, 2]
    inv = inverse_frequencies(head_dim, rope_base)
    fig = Figure(figsize=(2.2 * len(pairs), 2.6), dpi=90, layout="constrained")
    axes = fig.subplots(1, len(pairs), squeeze=False)[0]
    for ax, i in zip(axes, pairs):
        _circle(ax)
        xs, ys = vec[:, i, 0], vec[:, i, 1]
        ax.plot(xs, ys, "o-", ms=3, lw=0.8, color="tab:blue", alpha=0.7, gid="path")
        ax.annotate("", xy=(xs[-1], ys[-1]), xytext=(0, 0), arrowprops=dict(arrowstyle="-|>", color="tab:red", lw=1.5))
        ax.set_title(f"pair ({i}, {i + head_dim // 2})\n{inv[i]:.3g} rad/position", fontsize=8)
    fig.suptitle(
        f"NeoX pairs of a D={head_dim} vector, positions {positions[0]}..{positions[-1]}, base {rope_base:g}",
        fontsize=9,
    )
    return projector(fig)


def frequencies(head_dim: int = 128, bases=(10000.0, 500000.0), *, context: int | None = 8192) -> Figure:
    """The speed omega_i across pairs i (fast to slow) and each pair's wavelength, one line per base.

    Left: ``omega_i = base**(-2i/D)`` in radians per position, log scale. Right: the wavelength
    ``2 pi / omega_i`` in positions; pairs above the dashed ``context`` line never complete one
    turn within the context.
    """
    fig = Figure(figsize=(8, 3), dpi=90, layout="constrained")
    ax_f, ax_w = fig.subplots(1, 2)
    i = np.arange(head_dim // 2)
    for base in bases:
        inv = inverse_frequencies(head_dim, base)
        ax_f.plot(i, inv, label=f"base {base:g}", gid=f"omega {base:g}")
        ax_w.plot(i, 2 * np.pi / inv, label=f"base {base:g}", gid=f"wavelength {base:g}")
    ax_f.set(yscale="log", xlabel="pair i", ylabel="omega_i (rad / position)", title="fast to slow")
    ax_w.set(yscale="log", xlabel="pair i", ylabel="wavelength (positions)", title="positions per full turn")
    if context:
        ax_w.axhline(context, ls="--", color="0.4", lw=1, gid="context")
        ax_w.text(0, context * 1.3, f"context {context:,}", fontsize=8, color="0.3")
    ax_f.legend(fontsize=8)
    fig.suptitle(f"RoPE frequencies, D={head_dim}", fontsize=9)
    return projector(fig)


def relative_scores(score: np.ndarray, positions) -> Figure:
    """The score grid ``S[m, n]`` as a heatmap, and ``S`` against ``n - m`` from several rows m.

    Left: constant along every diagonal (``n - m`` fixed). Right: one line per query position m
    (``gid="row m"``), x = ``n - m``; the lines fall on one curve because only ``n - m`` matters.
    """
    positions = np.asarray(positions)
    fig = Figure(figsize=(8.5, 3.4), dpi=90, layout="constrained")
    ax_h, ax_l = fig.subplots(1, 2, width_ratios=[1, 1.4])
    im = ax_h.imshow(
        score,
        cmap="RdBu_r",
        origin="upper",
        vmin=-np.abs(score).max(),
        vmax=np.abs(score).max(),
        extent=(positions[0] - 0.5, positions[-1] + 0.5, positions[-1] + 0.5, positions[0] - 0.5),
    )
    ax_h.set(xlabel="k position n", ylabel="q position m", title="rope(q, m) . rope(k, n)")
    fig.colorbar(im, ax=ax_h, shrink=0.8)
    n = len(positions)
    # The curves coincide where they overlap (that is the point): each gets its own marker, the
    # earlier ones larger and open, so every one shows through the ones drawn after it.
    rows = np.unique(np.linspace(0, n - 1, 4).astype(int))
    styles = [("o", 10, 3.0), ("s", 7.5, 2.0), ("^", 5.5, 1.2), ("x", 4.0, 0.8)]
    for (marker, size, width), m in zip(styles, rows):
        ax_l.plot(
            positions - positions[m],
            score[m],
            marker=marker,
            ms=size,
            lw=width,
            mfc="none",
            mew=1.2,
            label=f"m = {positions[m]}",
            gid=f"row {m}",
        )
    ax_l.set(xlabel="n - m", ylabel="score", title="only n - m matters")
    ax_l.legend(fontsize=8)
    return projector(fig)


def pairing_diagram(head_dim: int = 8) -> Figure:
    """Which dimensions turn together: NeoX pairs (i, i + D/2) above, GPT-J pairs (2i, 2i+1) below.

    Each pair is an arc with ``gid="neox i"`` or ``gid="gptj i"`` whose end x-values are the
    two paired dimensions.
    """
    half = head_dim // 2
    fig = Figure(figsize=(max(4.0, 0.55 * head_dim + 1.5), 3.0), dpi=90, layout="constrained")
    ax = fig.subplots()
    colors = [f"C{i % 10}" for i in range(half)]
    for row, (y, name, pairs) in enumerate(
        [
            (1.0, "neox", [(i, i + half) for i in range(half)]),
            (0.0, "gptj", [(2 * i, 2 * i + 1) for i in range(half)]),
        ]
    ):
        for d in range(head_dim):
            i = d % half if name == "neox" else d // 2
            ax.add_patch(_box(d, y, colors[i]))
            ax.text(d, y, str(d), ha="center", va="center", fontsize=8)
        sign = 1 if name == "neox" else -1
        for i, (a, b) in enumerate(pairs):
            t = np.linspace(0, np.pi, 30)
            xs = (a + b) / 2 - (b - a) / 2 * np.cos(t)
            height = 0.2 + 0.6 * (i + 1) / half if name == "neox" else 0.3
            ys = y + sign * (0.25 + height * np.sin(t))
            ax.plot(xs, ys, color=colors[i], lw=1.5, gid=f"{name} {i}")
        ax.text(
            -1.0, y, "NeoX\n(i, i+D/2)" if name == "neox" else "GPT-J\n(2i, 2i+1)", ha="right", va="center", fontsize=8
        )
    ax.set_xlim(-3.2, head_dim)
    ax.set_ylim(-0.9, 2.15)  # the tallest NeoX arc reaches y = 2.05: nothing clipped, clear of the title
    ax.axis("off")
    ax.set_title(f"Which dimensions rotate together, D={head_dim} (colour = frequency i)", fontsize=9)
    return projector(fig)


def _box(x, y, color):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.45, y - 0.25), 0.9, 0.5, facecolor=color, alpha=0.35, edgecolor="0.3")


def precision(errors: dict[str, dict[str, np.ndarray]], *, bounds: bool = True) -> Figure:
    """Error against position on log-log axes, one line per dtype (``gid=dtype``), from
    :func:`position_errors`; with ``bounds`` each dtype's :func:`error_bound` dashed
    (``gid="bound dtype"``). Position 0 (error 0) is left off the log axes."""
    fig = Figure(figsize=(6.5, 3.6), dpi=90, layout="constrained")
    ax = fig.subplots()
    # Late positions: every dtype has the same error (the angle's, not the storage's), so the lines
    # meet. float32 is drawn last and smallest, the 16-bit ones larger and open around it.
    styles = {"float32": ("o", 3.5, "-", 5), "bfloat16": ("s", 8, "--", 3), "float16": ("^", 6, ":", 4)}
    for dtype, e in errors.items():
        keep = e["positions"] > 0
        p = e["positions"][keep]
        color = DTYPE_COLORS.get(dtype)
        marker, size, style, z = styles.get(dtype, ("o", 4, "-", 2))
        ax.plot(
            p,
            e["error"][keep],
            marker=marker,
            ms=size,
            ls=style,
            lw=1.5,
            color=color,
            label=dtype,
            gid=dtype,
            mfc=color if dtype == "float32" else "none",
            zorder=z,
        )
        if bounds:
            ax.plot(
                p,
                error_bound(dtype, p, e["scale"][keep]),
                "-",
                lw=1,
                color=color,
                alpha=0.4,
                gid=f"bound {dtype}",
                zorder=1,
            )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="position",
        ylabel="max |op - float64 reference|",
        title="Error grows with position (thin: bound)",
    )
    ax.legend(fontsize=8)
    return projector(fig)
