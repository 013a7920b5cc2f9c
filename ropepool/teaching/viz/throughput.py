"""Plots of why continuous batching pays: tokens per second against requests at once, and the
memory of one shared pool against one contiguous cache per request. Built without pyplot; lines
and bars carry a ``gid`` (the method or the label) so tests can read their data back."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..throughput import PoolMemory, Throughput, reserve_ratio
from .legible import projector


def plot_throughput(t: Throughput, *, title: str | None = None) -> Figure:
    """Tokens per second (median) against the number of requests served at once, one line per method."""
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.subplots()
    for method, values in t.tokens_per_s.items():
        ax.plot(t.requests, values, marker="o", gid=method, label=method)
    ax.set_xscale("log", base=2)
    ax.set_xticks(t.requests, [str(n) for n in t.requests])
    ax.minorticks_off()
    ax.set_ylim(bottom=0)
    ax.set_xlabel("requests served at once")
    ax.set_ylabel("new tokens per second")
    ax.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    ax.grid(alpha=0.3)
    ax.set_title(title or f"{t.new} new tokens per request, prefill included", fontsize=11)
    return projector(fig)


def plot_pool_memory(m: PoolMemory, *, reserve_label: str) -> Figure:
    """Two bars: the shared pool and ``m.requests`` contiguous caches, one per request."""
    fig = Figure(figsize=(6.4, 2.6), layout="constrained")
    ax = fig.subplots()
    labels = [
        f"one shared pool\n{m.pool_rows} rows",
        f"{m.requests} caches of {m.reserved_per_request}\ntokens ({reserve_label})",
    ]
    values = np.array([m.pool_bytes, m.contiguous_bytes]) / 1e6
    bars = ax.barh(labels, values, color=["#1f77b4", "#bbbbbb"])
    for bar, gid in zip(bars, ("pool", "contiguous")):
        bar.set_gid(gid)
    for y, v in enumerate(values):
        ax.text(v, y, f" {v:.3g} MB" if v >= 1 else f" {v * 1000:.3g} kB", va="center", fontsize=10)
    ax.set_xlim(0, values.max() * 1.3)
    ax.invert_yaxis()
    ax.set_xlabel("KV memory, MB (all layers, k and v)")
    ax.set_title(f"the same tokens: {m.contiguous_bytes / max(m.pool_bytes, 1):.1f}x less in one pool", fontsize=11)
    return projector(fig)


def plot_reserve_ratio(points: dict[str, tuple[float, float]], *, step: int = 256, max_len: int = 4096) -> Figure:
    """Contiguous caches' reserved bytes over a shared pool's, against tokens per request (every request
    live, no reuse: the request count cancels), for a cache growing by ``step`` and a static cache of
    ``max_len``; ``points`` marks measured cases, ``label -> (tokens per request held in the pool, ratio)``."""
    lengths = np.unique(np.geomspace(1, max_len, 400).astype(int))
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    ax.plot(
        lengths,
        [reserve_ratio([n], step=step) for n in lengths],
        label=f"cache growing by {step} (mlx-lm)",
        gid="growing",
    )
    ax.plot(
        lengths,
        [reserve_ratio([n], max_len=max_len) for n in lengths],
        "--",
        label=f"static cache of {max_len} tokens",
        gid="static",
    )
    for label, (x, y) in points.items():
        ax.plot([x], [y], "o", ms=8, gid=f"point:{label}")
        ax.annotate(f"{label}: {y:.0f}x", (x, y), xytext=(6, 4), textcoords="offset points")
    ax.axhline(1, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tokens each request holds in the pool")
    ax.set_ylabel("reserved / pool bytes")
    ax.set_title("caches per request against one pool: ratio = reserve(L) / L")
    ax.legend(loc="upper right")
    return projector(fig)
