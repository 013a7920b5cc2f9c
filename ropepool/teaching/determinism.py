"""Where a prompt's bits go when the batch around it changes (notebook 15), measured on the real engine.

:func:`served` serves one target prompt in a *setting* (alone, beside other prompts, chunked, after its
prefix was cached, at a page size, at an OpenBLAS thread count) and returns its logits; :func:`layer_gaps`
runs one prefill step and returns, layer by layer, how far the target's hidden states moved from where
they are when it is served alone; :func:`row_changes` shows the cause at its root: a row of OpenBLAS's
``x @ w.T`` is not the same bits when the matrix has another number of rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mlx.core as mx
import numpy as np

from .. import blas_threads
from ..engine import Engine


@dataclass(frozen=True)
class Setting:
    """How the target is served: ``before`` and ``after`` it, other prompts in the same engine; ``warm``, a
    prompt served to the end first (its rows stay in the radix cache); ``threads``, OpenBLAS's count;
    ``engine``, further :class:`~ropepool.engine.Engine` arguments (``max_step_tokens``, ``page_size``, ...)."""

    before: tuple = ()
    after: tuple = ()
    warm: tuple | None = None
    threads: int = 1
    engine: dict = field(default_factory=dict)


def served(model, target, new: int, setting: Setting = Setting(), *, deterministic: bool = False) -> np.ndarray:
    """The target's float32 logits ``[new, vocab]``, each new token greedy, served in ``setting``."""
    with blas_threads.pinned(setting.threads):
        engine = Engine(model, pool_rows=512, keep_logits=True, deterministic=deterministic, **setting.engine)
        if setting.warm is not None:
            engine.add_request(list(setting.warm), 1)
            while not engine.done:
                engine.step()
        for p in setting.before:
            engine.add_request(list(p), new)
        req = engine.add_request(list(target), new)
        for p in setting.after:
            engine.add_request(list(p), new)
        while not engine.done:
            engine.step()
    return np.array(mx.stack(req.logits))


def layer_gaps(model, target, others, *, deterministic: bool = False, threads: int = 1) -> np.ndarray:
    """``max |h_beside - h_alone|`` over the target's prompt tokens after the embedding and after each layer,
    then of the logits at its last token: ``[layers + 2]``. "Beside": one prefill step of ``others`` then
    the target; "alone": the target's own step."""

    def hidden(prompts):
        engine = Engine(model, pool_rows=1024, max_step_tokens=4096, deterministic=deterministic)
        for p in prompts:
            engine.add_request(list(p), 1)
        kept, runner = [], engine.runner
        views = runner.layers

        def recorder(layer):
            def run(h, mask, step):
                out = layer(h, mask, step)
                kept.append(out[0, -len(target) :])  # the target is the step's last request
                return out

            return run

        runner.layers = [recorder(layer) for layer in views]
        embed = runner.inner.embed_tokens(mx.array(list(target)))
        with blas_threads.pinned(threads):
            engine.step()
        final = runner.head(runner.inner.norm(kept[-1][-1:]))
        return [embed, *kept, final.astype(mx.float32)]

    alone, beside = hidden([target]), hidden([*others, target])
    return np.array([float(mx.max(mx.abs(a.astype(mx.float32) - b.astype(mx.float32)))) for a, b in zip(alone, beside)])


def row_changes(K: int, N: int, rows=(1, 2, 4, 16, 64, 256), seed: int = 0, threads: int = 1) -> dict[int, int]:
    """How many of the N values of row 0 of MLX's ``x @ w.T`` (OpenBLAS on the CPU) differ from row 0 of the
    same product with ``max(rows)`` rows, for each row count M in ``rows``."""
    rng = np.random.default_rng(seed)
    x = mx.array(rng.standard_normal((max(rows), K)).astype(np.float32))
    w = mx.array(rng.standard_normal((N, K)).astype(np.float32))
    with blas_threads.pinned(threads):
        full = np.array(x @ w.T)[0]
        return {m: int(np.sum(np.array(x[:m] @ w.T)[0] != full)) for m in rows}
