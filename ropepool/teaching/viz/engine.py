"""Plots of :mod:`ropepool.engine` at work: who holds each pool row, step after step.

Each function reads an :class:`~ropepool.engine.Engine` (or data taken from one) and returns
a :class:`matplotlib.figure.Figure` built without pyplot; images carry a ``gid`` so tests can
read their data back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ...engine import Engine, Status
from .pool import FREE, draw_pool, rows_image
from .legible import projector

_COLORS = ["#dddddd", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
OWNER_CMAP = ListedColormap(_COLORS)  # index 0: free; index 1 + rid: request rid (cycling)


def pool_owners(engine: Engine) -> np.ndarray:
    """``[P]`` int: the request holding each pool row, ``FREE`` (-1) where none does."""
    owners = np.full(engine.allocator.pool_rows, FREE)
    for req in engine.requests:
        if req.status is Status.RUNNING:
            owners[req.slot_table] = req.rid
    return owners


def pool_written(engine: Engine) -> np.ndarray:
    """``[P]`` bool: rows holding k and v of a live request's token (held rows not yet written are False)."""
    written = np.zeros(engine.allocator.pool_rows, bool)
    for req in engine.requests:
        if req.status is Status.RUNNING:
            written[req.slot_table[: req.num_cached]] = True
    return written


def slot_tables(engine: Engine) -> str:
    """One line per request: status, new tokens, and its slot table (written rows first, then ``|``)."""
    lines = []
    for r in engine.requests:
        table = (
            f"{r.slot_table[: r.num_cached]} | {r.slot_table[r.num_cached :]}" if r.status is Status.RUNNING else "-"
        )
        lines.append(
            f"request {r.rid}: {r.status.value:8} {len(r.tokens)}/{r.max_new_tokens} new tokens  "
            f"prompt {len(r.prompt):2}  needs {r.rows_needed:2} rows  slot table {table}"
        )
    return "\n".join(lines)


def _owner_image(owners) -> np.ndarray:
    o = np.asarray(owners)
    return np.where(o == FREE, 0, 1 + o % (len(_COLORS) - 1))


def plot_pool(engine: Engine, *, layer: int = 0, title: str | None = None, dpi: int = 80) -> Figure:
    """The pool after a step: who holds each row (left) beside layer ``layer``'s k_pool (right).

    In the left strip, a row's label is its owner (``r1``); a trailing ``·`` marks a row held
    for a token not yet run. A freed row keeps its old bits in the pool until a new owner's
    token overwrites them.
    """
    owners, written = pool_owners(engine), pool_written(engine)
    P = len(owners)
    fig = Figure(figsize=(7.5, 1.2 + 0.22 * P), dpi=dpi)
    strip, heat = fig.subplots(1, 2, gridspec_kw=dict(width_ratios=[1, 6]))
    im = strip.imshow(
        _owner_image(owners)[:, None],
        cmap=OWNER_CMAP,
        vmin=0,
        vmax=len(_COLORS) - 1,
        aspect="auto",
        interpolation="nearest",
    )
    im.set_gid("owners")
    for row, (o, w) in enumerate(zip(owners, written)):
        if o != FREE:
            strip.text(0, row, f"r{o}" + ("" if w else "·"), ha="center", va="center", fontsize=7)
    strip.set_xticks([])
    strip.set_yticks(range(P) if P <= 32 else [])
    strip.set_ylabel("pool row (slot)")
    strip.set_title("owner", fontsize=9)
    draw_pool(heat, engine.runner.k_pools[layer], title=f"layer {layer} k_pool [P, Hkv*D]", gid="k_pool")
    heat.set_ylabel("")
    fig.suptitle(title or f"after step {engine.steps}: {int((owners != FREE).sum())} of {P} rows held", fontsize=10)
    fig.tight_layout()
    return projector(fig)


def plot_timeline(history, *, cell: float = 0.3, labels: bool = True, dpi: int = 80) -> Figure:
    """Owners over time: ``history`` is a list of :func:`pool_owners` arrays, one per step.

    One image row per step, one column per pool row: a column changing colour is a row freed
    by one request and reused by another. ``cell``: inches per row and column (at least 0.18
    per step); ``labels``: write each owner's number in its cell (for small pools).
    """
    owners = np.asarray(history)  # [steps, P]
    steps, P = owners.shape
    fig = Figure(figsize=(1.5 + cell * P, 1.0 + max(cell, 0.18) * steps), dpi=dpi)
    ax = fig.subplots()
    im = ax.imshow(
        _owner_image(owners), cmap=OWNER_CMAP, vmin=0, vmax=len(_COLORS) - 1, aspect="auto", interpolation="nearest"
    )
    im.set_gid("timeline")
    for s in range(steps if labels else 0):
        for row in range(P):
            if owners[s, row] != FREE:
                ax.text(row, s, str(owners[s, row]), ha="center", va="center", fontsize=7)
    ax.set_xticks(range(P) if P <= 32 else range(0, P, 8))
    ax.set_yticks(range(steps), [f"step {s + 1}" for s in range(steps)], fontsize=7 if cell < 0.3 else None)
    ax.set_xlabel("pool row (slot)")
    ax.set_title("which request holds each row, after each step (grey: free)", fontsize=9)
    fig.tight_layout()
    return projector(fig)


@dataclass(frozen=True)
class PoolSnapshot:
    """The pool after one step: ``owners`` and ``written`` ``[P]``, one layer's ``k_pool`` ``[P, Hkv, D]``."""

    step: int
    owners: np.ndarray
    written: np.ndarray
    k_pool: np.ndarray


def snapshot(engine: Engine, *, layer: int = 0) -> PoolSnapshot:
    """Copy what :func:`plot_pool_steps` draws out of ``engine`` now."""
    return PoolSnapshot(engine.steps, pool_owners(engine), pool_written(engine), np.array(engine.runner.k_pools[layer]))


#: The largest figure the projector rule allows: 1024x768 less the notebook's margins, in inches at 100 dpi.
MAX_WIDTH_IN, MAX_HEIGHT_IN = 9.0, 7.4


def plot_pool_steps(snapshots, *, row_height: float = 0.16, per_row: int = 4, dpi: int = 80) -> Figure:
    """The pool heatmap after each step, ``per_row`` panels to a row, each with its owner strip on the left.

    Held rows not yet written are hatched in the strip. One figure for the whole run: cheaper
    to draw than one :func:`plot_pool` per step. ``row_height``: inches per pool row, lowered where
    the figure would be taller than :data:`MAX_HEIGHT_IN` (a 768-pixel screen).
    """
    n = len(snapshots)
    P = len(snapshots[0].owners)
    cols = min(n, per_row)
    rows = -(-n // cols)
    row_height = min(row_height, (MAX_HEIGHT_IN - 0.9 - 0.55 * rows) / (rows * P))
    vmax = max(max(float(np.abs(s.k_pool).max()) for s in snapshots), 1e-12)
    fig = Figure(figsize=(min(1.0 + 1.9 * cols, MAX_WIDTH_IN), 0.9 + rows * (0.55 + row_height * P)), dpi=dpi)
    axes = np.atleast_1d(fig.subplots(rows, cols, sharey=True, squeeze=False).ravel())
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax, s in zip(axes, snapshots):
        img = rows_image(s.k_pool)  # [P, Hkv*D]
        width = img.shape[1]
        strip = max(width // 6, 2)  # columns of the owner strip
        im = ax.imshow(img, cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto", interpolation="nearest")
        im.set_gid(f"k_pool step {s.step}")
        own = ax.imshow(
            _owner_image(s.owners)[:, None],
            cmap=OWNER_CMAP,
            vmin=0,
            vmax=len(_COLORS) - 1,
            aspect="auto",
            interpolation="nearest",
            extent=(-0.5 - strip, -0.5, P - 0.5, -0.5),
        )
        own.set_gid(f"owners step {s.step}")
        for row in np.flatnonzero((s.owners != FREE) & ~s.written):
            ax.add_patch(
                Rectangle(
                    (-0.5 - strip, row - 0.5), strip, 1, fill=False, hatch="///", lw=0, gid=f"held {s.step} {row}"
                )
            )
        ax.set_xlim(-0.5 - strip, width - 0.5)
        ax.set_ylim(P - 0.5, -0.5)
        ax.set_xticks([])
        ax.set_title(f"step {s.step}", fontsize=10)
    for r in range(rows):
        axes[r * cols].set_ylabel("pool row (slot)")
    fig.suptitle(
        "layer 0 k_pool after each step\nleft strip: owner (colour), held but unwritten (hatched)", fontsize=10
    )
    fig.tight_layout()
    return projector(fig)


def answers_so_far(engine: Engine, decode) -> list[str]:
    """Each request's answer now, as text: ``decode(tokens)``, ``"(waiting)"``, or the text and ``" [done]"``."""
    out = []
    for r in engine.requests:
        if r.status is Status.WAITING:
            out.append("(waiting)")
        else:
            out.append(decode(r.tokens) + (" [done]" if r.status is Status.FINISHED else ""))
    return out


def stream_table(history, *, width: int = 30) -> str:
    """One line per step, one column per request: ``history[s]`` is :func:`answers_so_far` after step s + 1.

    A text longer than ``width`` keeps its end (where it grows), after an ellipsis; newlines show as ``⏎``.
    """

    def cell(text: str) -> str:
        text = text.replace("\n", "⏎")
        return (text if len(text) <= width else "…" + text[-(width - 1) :]).ljust(width)

    n = len(history[0]) if history else 0
    lines = ["step | " + " | ".join(f"request {i}".ljust(width) for i in range(n))]
    lines += [f"{s + 1:4} | " + " | ".join(cell(t) for t in texts) for s, texts in enumerate(history)]
    return "\n".join(lines)


class LiveAnswers:
    """An ``on_step`` callback for :func:`ropepool.engine.generate` that shows the answers as they grow.

    After every step it redraws one output area (a notebook's display handle, or ``print`` where no
    notebook is running): a progress line (step, tokens so far, seconds), then one line per request
    with its answer so far (its last ``width`` characters). ``history`` keeps every step's answers,
    for :func:`stream_table`.
    """

    def __init__(self, decode, *, width: int = 56, total_tokens: int | None = None):
        import time

        self.decode, self.width, self.total = decode, width, total_tokens
        self.history: list[list[str]] = []
        self._clock, self._start = time.perf_counter, time.perf_counter()
        self._handle = None
        try:
            from IPython import get_ipython
            from IPython.display import display

            if get_ipython() is not None:
                self._handle = display(
                    self._text("starting: the first step is every admitted prompt at once"), display_id=True
                )
        except ImportError:  # pragma: no cover - IPython is a dependency of the notebooks
            pass

    class _Plain(str):
        def __repr__(self) -> str:  # a notebook shows the text as it is, not quoted
            return str(self)

    def _text(self, progress: str) -> "LiveAnswers._Plain":
        def cell(text: str) -> str:
            text = text.replace("\n", "⏎")
            return text if len(text) <= self.width else "…" + text[-(self.width - 1) :]

        rows = [f"request {i}: {cell(t)}" for i, t in enumerate(self.history[-1])] if self.history else []
        return self._Plain("\n".join([progress, *rows]))

    def __call__(self, engine: Engine, batch) -> None:
        self.history.append(answers_so_far(engine, self.decode))
        written = sum(len(r.tokens) for r in engine.requests)
        of = f" of at most {self.total}" if self.total else ""
        n = len(batch.tokens)
        progress = (
            f"step {engine.steps}: {n} token{'s' if n != 1 else ''} in this pass; {written}{of} new "
            f"token{'s' if written != 1 else ''}, {self._clock() - self._start:.1f} s"
        )
        if self._handle is not None:
            self._handle.update(self._text(progress))
        else:
            print(self._text(progress))
