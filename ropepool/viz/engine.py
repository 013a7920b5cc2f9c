"""Plots of :mod:`ropepool.engine` at work: who holds each pool row, step after step.

Each function reads an :class:`~ropepool.engine.Engine` (or data taken from one) and returns
a :class:`matplotlib.figure.Figure` built without pyplot; images carry a ``gid`` so tests can
read their data back.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from ..engine import Engine, Status
from .pool import FREE, draw_pool

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
            written[req.slot_table[:req.num_cached]] = True
    return written


def slot_tables(engine: Engine) -> str:
    """One line per request: status, new tokens, and its slot table (written rows first, then ``|``)."""
    lines = []
    for r in engine.requests:
        table = f"{r.slot_table[:r.num_cached]} | {r.slot_table[r.num_cached:]}" if r.status is Status.RUNNING else "-"
        lines.append(f"request {r.rid}: {r.status.value:8} {len(r.tokens)}/{r.max_new_tokens} new tokens  "
                     f"prompt {len(r.prompt):2}  needs {r.rows_needed:2} rows  slot table {table}")
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
    im = strip.imshow(_owner_image(owners)[:, None], cmap=OWNER_CMAP, vmin=0, vmax=len(_COLORS) - 1,
                      aspect="auto", interpolation="nearest")
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
    return fig


def plot_timeline(history, *, dpi: int = 80) -> Figure:
    """Owners over time: ``history`` is a list of :func:`pool_owners` arrays, one per step.

    One image row per step, one column per pool row: a column changing colour is a row freed
    by one request and reused by another.
    """
    owners = np.asarray(history)  # [steps, P]
    steps, P = owners.shape
    fig = Figure(figsize=(1.5 + 0.3 * P, 1.0 + 0.3 * steps), dpi=dpi)
    ax = fig.subplots()
    im = ax.imshow(_owner_image(owners), cmap=OWNER_CMAP, vmin=0, vmax=len(_COLORS) - 1, aspect="auto",
                   interpolation="nearest")
    im.set_gid("timeline")
    for s in range(steps):
        for row in range(P):
            if owners[s, row] != FREE:
                ax.text(row, s, str(owners[s, row]), ha="center", va="center", fontsize=7)
    ax.set_xticks(range(P))
    ax.set_yticks(range(steps), [f"step {s + 1}" for s in range(steps)])
    ax.set_xlabel("pool row (slot)")
    ax.set_title("which request holds each row, after each step (grey: free)", fontsize=9)
    fig.tight_layout()
    return fig
