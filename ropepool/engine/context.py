"""What every layer of one step reads, built once from the step's :class:`~.scheduler.Batch`.

:class:`StepContext` is nano-vllm's per-step context: the op's step half (positions and slots
checked, the write planned: :func:`ropepool.op.plan_step`, nano-vllm's ``slot_mapping``), the pool
rows of each request's context, the causal mask, and where each token's query and output sit.
:func:`window_mask` is a sliding layer's mask over the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from ..op import StepPlan, plan_step
from .scheduler import Batch


@dataclass
class StepContext:
    """What every layer of one step reads, built once from the Batch (nano-vllm's per-step context).

    R requests; request r has n_r new tokens at positions c_r .. c_r + n_r - 1 (c_r = its
    ``num_cached``) and attends over its first L_r = c_r + n_r slot-table rows. N = max n_r,
    L = max L_r. Query i of request r sees context row j when ``j <= c_r + min(i, n_r - 1)``: the
    new tokens causally, every cached row; padded queries (``i >= n_r``) repeat the last real one.

    Attributes
    ----------
    positions : int32 mx.array ``[T]``, slots : int32 NumPy ``[T]``  the op's inputs, request after request
    plan : StepPlan or None           the op's step half, made once (None: no pool size given)
    rows : int32 ``[R, L]``           pool rows of each request's context, padded with its first row
    mask : bool ``[R, 1, N, L]`` or None   True where query i may see row j; None: everywhere
    queries : int32 ``[R, N]`` or None     the flat token of request r's query i; None when N = 1
                                           (token r is request r's one query)
    outputs : int32 ``[T]`` or None   where flat token t's output is among the ``[R * N]``; None when N = 1
    last : int32 ``[R]``              each request's last new token in ``[T]``
    """

    positions: mx.array
    slots: np.ndarray
    plan: StepPlan | None
    rows: mx.array
    mask: mx.array | None
    queries: mx.array | None
    outputs: mx.array | None
    last: mx.array

    @classmethod
    def of(cls, batch: Batch, pool_rows: int | None = None) -> StepContext:
        """The context of ``batch``; with ``pool_rows`` (P of the pools), the op's plan too (checks the values)."""
        n = np.array(batch.lengths)  # [R]
        cached = np.array([r.num_cached for r in batch.requests])  # [R]
        R, N, L = len(n), int(n.max()), int((cached + n).max())
        rows = np.empty((R, L), np.int32)
        for r, (req, length) in enumerate(zip(batch.requests, cached + n)):
            rows[r, :length] = req.slot_table[:length]
            rows[r, length:] = req.slot_table[0]  # any row the request holds; masked out
        i = np.minimum(np.arange(N)[None, :], n[:, None] - 1)  # [R, N], padded queries repeat the last
        mask = np.arange(L)[None, None, :] <= (cached[:, None] + i)[:, :, None]  # [R, N, L]
        start = np.cumsum(n) - n  # [R], each request's first token in [T]
        flat = np.concatenate([r * N + np.arange(k) for r, k in enumerate(n)])  # [T]
        positions, slots = mx.array(batch.positions, mx.int32), np.array(batch.slots, np.int32)
        return cls(
            positions=positions,
            slots=slots,  # on the host: the plan reads them there, and no device array is read back
            plan=None if pool_rows is None else plan_step(positions, slots, pool_rows),
            rows=mx.array(rows),
            mask=None if mask.all() else mx.array(mask[:, None]),
            queries=None if N == 1 else mx.array((start[:, None] + i).astype(np.int32)),
            outputs=None if N == 1 else mx.array(flat.astype(np.int32)),
            last=mx.array((start + n - 1).astype(np.int32)),
        )


def window_mask(batch: Batch, window: int) -> mx.array:
    """bool ``[R, 1, N, L]``: query i of request r sees context row j when ``j <= c_r + i`` and
    ``j > c_r + i - window`` (mlx-lm's sliding mask: the last ``window`` positions, itself included)."""
    n = np.array(batch.lengths)  # [R]
    cached = np.array([r.num_cached for r in batch.requests])  # [R]
    N, L = int(n.max()), int((cached + n).max())
    i = np.minimum(np.arange(N)[None, :], n[:, None] - 1)  # [R, N]
    at = (cached[:, None] + i)[:, :, None]  # [R, N, 1], each query's position
    j = np.arange(L)[None, None, :]
    return mx.array(((j <= at) & (j > at - window))[:, None])
