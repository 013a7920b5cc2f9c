"""Plots for the fused kernel: which thread writes which element, trig counts, fused vs unfused.

The kernel (``ropepool/kernels/rope_rows.inc``) runs one thread per (token t, head h, pair i),
q's Hq heads first, then k's Hkv heads. :func:`thread_map` mirrors its index arithmetic
(:data:`MAPPING_LINES` are the kernel's own lines, and a test checks they are still there).
Each function returns a ``matplotlib.figure.Figure`` built without pyplot; artists carry a
``gid`` (``"q_rot"``, ``"k_rot"``, ``"shared"``, ...) so pytest can read the drawn data back.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from .legible import projector

from ...kernels import source

#: The lines of ``rope_rows.inc`` that map a thread id to (pair, token, head); mirrored below.
MAPPING_LINES = (
    "const rp_uint i = gid % HALF;",
    "const rp_uint row = gid / HALF;  // flat (t, h)",
    "const rp_uint t = row / H;",
    "const rp_uint h = row % H;",
)


def thread_map(tokens: int, num_qo_heads: int, num_kv_heads: int, head_dim: int) -> dict[str, np.ndarray]:
    """For every thread id ``gid`` of the grid: its ``token``, ``head`` (0..Hq+Hkv-1) and ``pair`` i.

    ``head < Hq`` is q's head ``head``; otherwise k's head ``head - Hq``. Each thread writes
    elements ``i`` and ``i + D/2`` of that head's row of q_rot or k_rot.

    Example
    -------
    >>> m = thread_map(1, 2, 1, 4)  # grid of 1 * (2 + 1) * 2 = 6 threads
    >>> m["head"].tolist(), m["pair"].tolist()
    ([0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, 1])
    """
    half = head_dim // 2  # HALF
    H = num_qo_heads + num_kv_heads  # q's heads, then k's
    gid = np.arange(source.grid_size(tokens, num_qo_heads, num_kv_heads, head_dim))
    i = gid % half
    row = gid // half  # flat (t, h)
    return {"gid": gid, "token": row // H, "head": row % H, "pair": i}


def writers(tokens: int, num_qo_heads: int, num_kv_heads: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The thread id that writes each element: ``q_rot`` ``[T, Hq, D]`` and ``k_rot`` ``[T, Hkv, D]``.

    An element no thread writes would hold -1.
    """
    m = thread_map(tokens, num_qo_heads, num_kv_heads, head_dim)
    half = head_dim // 2
    q_w = np.full((tokens, num_qo_heads, head_dim), -1)  # [T, Hq, D]
    k_w = np.full((tokens, num_kv_heads, head_dim), -1)  # [T, Hkv, D]
    is_q = m["head"] < num_qo_heads
    for out, sel, head in ((q_w, is_q, m["head"]), (k_w, ~is_q, m["head"] - num_qo_heads)):
        t, h, i, g = m["token"][sel], head[sel], m["pair"][sel], m["gid"][sel]
        out[t, h, i] = g
        out[t, h, i + half] = g
    return q_w, k_w


def thread_grid(
    tokens: int = 2, num_qo_heads: int = 4, num_kv_heads: int = 2, head_dim: int = 8, *, annotate: bool | None = None
) -> Figure:
    """q_rot and k_rot, one cell per element, coloured (and numbered) by the thread that writes it.

    Rows are (token, head), columns the D dimensions; a dashed line splits each row into the
    halves NeoX pairs. The images (gids ``"q_rot"``, ``"k_rot"``) hold :func:`writers`'
    arrays reshaped to ``[T*H, D]``.

    Example
    -------
    >>> fig = thread_grid(2, 4, 2, 8)
    >>> [a.get_gid() for a in fig.axes[0].images + fig.axes[1].images]
    ['q_rot', 'k_rot']
    """
    q_w, k_w = writers(tokens, num_qo_heads, num_kv_heads, head_dim)
    grid = source.grid_size(tokens, num_qo_heads, num_kv_heads, head_dim)
    if annotate is None:
        annotate = grid <= 256
    rows = tokens * (num_qo_heads + num_kv_heads)
    fig = Figure(figsize=(min(1.0 + 0.42 * head_dim, 9.0), 1.2 + 0.3 * rows), dpi=90)
    axes = fig.subplots(2, 1, gridspec_kw={"height_ratios": [num_qo_heads, num_kv_heads]})
    for ax, name, w, H in ((axes[0], "q_rot", q_w, num_qo_heads), (axes[1], "k_rot", k_w, num_kv_heads)):
        img = w.reshape(tokens * H, head_dim)  # [T*H, D]
        ax.imshow(img, cmap="viridis", vmin=0, vmax=max(grid - 1, 1), aspect="auto", gid=name)
        if annotate:
            for (r, d), g in np.ndenumerate(img):
                colour = "white" if g < 0.6 * grid else "black"
                ax.text(d, r, str(g), ha="center", va="center", fontsize=7, color=colour)
        for t in range(1, tokens):
            ax.axhline(t * H - 0.5, color="white", lw=2.5)
        ax.axvline(head_dim / 2 - 0.5, color="white", lw=1.2, ls="--")
        ax.set_yticks(range(tokens * H), [f"t{r // H} h{r % H}" for r in range(tokens * H)], fontsize=7)
        ax.set_xticks(range(head_dim), [str(d) for d in range(head_dim)], fontsize=7)
        ax.set_ylabel(f"{name}\n[T, {'Hq' if name == 'q_rot' else 'Hkv'}, D]", fontsize=8)
    axes[1].set_xlabel("dimension d  (thread of pair i writes d = i and d = i + D/2)", fontsize=8)
    fig.suptitle(
        f"Which thread writes which element (T={tokens}, Hq={num_qo_heads}, Hkv={num_kv_heads}, "
        f"D={head_dim})\ngrid = T·(Hq+Hkv)·D/2 = {grid} threads",
        fontsize=9,
    )
    fig.tight_layout()
    return projector(fig)


def trig_counts(num_qo_heads: int, num_kv_heads: int, head_dim: int, rotary_dim: int | None = None) -> dict[str, int]:
    """cos/sin evaluations per token: ``shared`` (one per rotated pair, RD/2) and ``per_thread``
    ((Hq+Hkv)·RD/2: the kernel's threads with ``i < RD/2``, the only ones that rotate).

    The angle ``positions[t] * inv_freq[i]`` depends on the token and the pair, not on the
    head, so one (cos, sin) per pair serves every head of q and k. ``rotary_dim`` (RD, default D):
    under partial rotation (Phi-2: 32 of 80) the threads of the pass-through pairs copy and
    compute no trig.

    >>> trig_counts(32, 32, 80, rotary_dim=32)   # Phi-2
    {'shared': 16, 'per_thread': 1024}
    """
    RD = head_dim if rotary_dim is None else rotary_dim
    return {"shared": RD // 2, "per_thread": source.grid_size(1, num_qo_heads, num_kv_heads, RD)}


def trig_count_bars(models: dict[str, tuple]) -> Figure:
    """Horizontal bars, per model, of cos/sin evaluations per token: shared by all heads vs once per thread.

    ``models`` maps a label to ``(Hq, Hkv, D)`` or ``(Hq, Hkv, D, rotary_dim)``. Each bar (a Rectangle)
    has gid ``"shared"`` or ``"per_thread"``; the count axis is logarithmic; each bar is labelled with
    its count at its end, and the legend sits above the bars.
    """
    names = list(models)
    counts = [trig_counts(*models[n]) for n in names]
    y = np.arange(len(names))
    fig = Figure(figsize=(7.6, 1.3 + 0.42 * len(names)), dpi=100)
    ax = fig.add_subplot()
    for offset, key, label, colour in (
        (-0.2, "shared", "shared by all heads: RD/2", "#2a9d8f"),
        (0.2, "per_thread", "once per thread: (Hq+Hkv)·RD/2", "#e76f51"),
    ):
        bars = ax.barh(y + offset, [c[key] for c in counts], height=0.4, label=label, color=colour)
        for bar in bars:
            bar.set_gid(key)
        ax.bar_label(bars, [f" {c[key]:,}" for c in counts], fontsize=10)
    ax.set_xscale("log")
    ax.set_yticks(y, names, fontsize=10)
    ax.invert_yaxis()
    ax.set_xlabel("cos/sin evaluations per token (log)")
    ax.set_xlim(1, 8 * max(c["per_thread"] for c in counts))
    ax.legend(fontsize=10, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    fig.tight_layout()
    return projector(fig)


def timing_bars(rows, *, title: str = "") -> Figure:
    """Median time per call of each method, grouped by token count (log scale).

    ``rows`` are :class:`ropepool.cli.bench.Timing` records (``method``, ``tokens``, ``median_ms``,
    ``ratio``, ``ratio_range``), e.g. from :func:`ropepool.cli.bench.compare` at several T. Each bar
    (a Rectangle) has the method as gid and is labelled with its ratio to ropepool's median, and
    a whisker spans the same ratio's lowest and highest round (ropepool's median times each), where
    the rows carry a spread: the whiskers' LineCollection has gid ``"<method> spread"``.
    """
    rows = list(rows)
    methods = list(dict.fromkeys(r.method for r in rows))
    tokens = sorted({r.tokens for r in rows})
    by = {(r.method, r.tokens): r for r in rows}
    width = 0.8 / max(1, len(methods))
    fig = Figure(figsize=(7.5, 3.4), dpi=90)
    ax = fig.add_subplot()
    for j, m in enumerate(methods):
        xs = [i + (j - (len(methods) - 1) / 2) * width for i, T in enumerate(tokens) if (m, T) in by]
        got = [by[m, T] for T in tokens if (m, T) in by]
        bars = ax.bar(xs, [r.median_ms for r in got], width, label=m)
        for bar in bars:
            bar.set_gid(m)
        ax.bar_label(bars, [f"{r.ratio:.2g}x" if r.ratio == r.ratio else "" for r in got], fontsize=7, padding=2)
        spread = [(x, r) for x, r in zip(xs, got) if r.method != "ropepool" and _has_spread(r)]
        if spread:  # the whisker: ropepool's median times the lowest and highest round ratio
            # at least 0: the median ratio lies within the rounds' ratios, up to the last bit of a float
            low = [max(0.0, r.median_ms - r.ratio_range[0] * r.median_ms / r.ratio) for _, r in spread]
            high = [max(0.0, r.ratio_range[1] * r.median_ms / r.ratio - r.median_ms) for _, r in spread]
            whiskers = ax.errorbar(
                [x for x, _ in spread],
                [r.median_ms for _, r in spread],
                yerr=[low, high],
                fmt="none",
                ecolor="black",
                elinewidth=0.8,
                capsize=2,
            )
            whiskers.lines[2][0].set_gid(f"{m} spread")
    ax.set_xticks(range(len(tokens)), [f"T = {T}" for T in tokens])
    ax.set_yscale("log")
    ax.set_ylabel("median ms per call (log)")
    ax.set_title(title or "Time per call; labels: ratio to ropepool", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    top = max((r.median_ms for r in rows), default=1.0)
    ax.set_ylim(top=top * 20)
    fig.tight_layout()
    return projector(fig)


def _has_spread(row) -> bool:
    lo, hi = getattr(row, "ratio_range", (float("nan"),) * 2)
    return lo == lo and hi == hi and row.ratio == row.ratio and row.ratio > 0


class CodeBlock:
    """Source code shown syntax-highlighted in a box of at most ``max_lines`` lines that scrolls
    (Jupyter renders ``_repr_html_``); ``str()`` is the plain source."""

    def __init__(self, code: str, language: str = "cpp", max_lines: int = 24):
        self.code, self.language, self.max_lines = code, language, max_lines

    def __str__(self) -> str:
        return self.code

    def _repr_html_(self) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name

        body = highlight(self.code, get_lexer_by_name(self.language), HtmlFormatter(noclasses=True, nowrap=True))
        return (
            f'<div class="ropepool-code" style="max-height:{1.35 * self.max_lines:.1f}em;overflow:auto;'
            'border:1px solid #ddd;border-radius:4px;padding:0.3em 0.6em">'
            f'<pre style="margin:0;line-height:1.35;white-space:pre">{body}</pre></div>'
        )
