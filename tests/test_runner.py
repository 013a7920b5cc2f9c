"""The runner's contract with the scheduler: a Batch of requests, each with n new tokens at positions
num_cached .. num_cached + n - 1, attending over ``slot_table[:num_cached + n]``.

A prefill chunk after a cached prefix, beside a decode token and a whole prompt, in one step, gives
mlx-lm's logits for the same sequences run whole without a cache.
"""

import mlx.core as mx
import numpy as np
import pytest

from ropepool.engine.request import Request
from ropepool.engine.context import StepContext
from ropepool.engine.runner import Runner
from ropepool.engine.scheduler import Batch
from ropepool.loaders.tiny import build
from ropepool.tolerance import ENGINE_LOGITS_FLOAT32

A = [3, 14, 15, 92, 65, 35, 89, 79, 32]  # served in two chunks: 5 tokens, then 4 after them
B = [2, 71, 82]  # whole prompt in step 1, one decode token in step 2
C = [11, 12, 13, 14, 15, 16]  # arrives in step 2, whole prompt
SLOTS = {"a": [10, 3, 7, 20, 21, 22, 0, 1, 30], "b": [5, 6, 11, 12], "c": [13, 2, 4, 8, 9, 14]}  # scattered rows


def last_logits(model, sequence):
    """mlx-lm's float32 logits after ``sequence``, run whole without a cache."""
    return np.array(model(mx.array([sequence]))[0, -1].astype(mx.float32))


def request(rid, prompt, slots):
    req = Request(rid, prompt, max_new_tokens=4)
    req.slot_table = list(slots)
    return req


@pytest.mark.parametrize("name", ["llama-gqa", "qwen2-mqa", "phi3", "gemma3", "gpt-oss", "deepseek-v3"])
@pytest.mark.parametrize("backend", ["mlx", "auto"])
def test_a_chunk_after_a_cached_prefix_beside_decode_and_prefill(name, backend):
    model = build(name)
    runner = Runner(model, pool_rows=32, backend=backend)
    a, b, c = request(0, A, SLOTS["a"]), request(1, B, SLOTS["b"]), request(2, C, SLOTS["c"])

    first = Batch()
    first.add(a, 5)  # A's first chunk
    first.add(b, len(B))
    logits = np.array(runner.run(first))
    np.testing.assert_allclose(logits[0], last_logits(model, A[:5]), **ENGINE_LOGITS_FLOAT32)
    np.testing.assert_allclose(logits[1], last_logits(model, B), **ENGINE_LOGITS_FLOAT32)
    a.num_cached, b.num_cached = 5, 3
    nxt = int(logits[1].argmax())
    b.tokens.append(nxt)

    second = Batch()
    second.add(b, 1)  # decode: 1 token at position 3
    second.add(a, 4)  # the rest of A's prompt at positions 5..8, over its 5 cached rows
    second.add(c, len(C))
    logits = np.array(runner.run(second))
    np.testing.assert_allclose(logits[0], last_logits(model, B + [nxt]), **ENGINE_LOGITS_FLOAT32)
    np.testing.assert_allclose(logits[1], last_logits(model, A), **ENGINE_LOGITS_FLOAT32)
    np.testing.assert_allclose(logits[2], last_logits(model, C), **ENGINE_LOGITS_FLOAT32)


def test_the_step_context_is_built_once_per_step():
    """Rows, mask and the query/output maps of a mixed step, read back."""
    a, b = request(0, A, SLOTS["a"]), request(1, B, SLOTS["b"])
    a.num_cached, b.num_cached = 5, 3
    b.tokens.append(7)
    batch = Batch()
    batch.add(b, 1)
    batch.add(a, 2)
    ctx = StepContext.of(batch)
    assert ctx.positions.tolist() == [3, 5, 6] and ctx.slots.tolist() == [12, 22, 0]
    assert ctx.rows.tolist() == [[5, 6, 11, 12, 5, 5, 5], SLOTS["a"][:7]]  # b padded with its first row
    assert ctx.queries.tolist() == [[0, 0], [1, 2]]  # b's one query repeated as padding
    assert ctx.outputs.tolist() == [0, 2, 3] and ctx.last.tolist() == [0, 2]
    mask = np.array(ctx.mask)[:, 0]  # [R, N, L]
    assert mask[0].tolist() == [[True] * 4 + [False] * 3] * 2
    assert mask[1].tolist() == [[True] * 6 + [False], [True] * 7]


def test_decode_steps_need_no_maps():
    a, b = request(0, A, SLOTS["a"]), request(1, B, SLOTS["b"])
    a.num_cached, b.num_cached = 8, 3
    a.tokens.append(1)
    b.tokens.append(2)
    batch = Batch()
    batch.add(a, 1)
    batch.add(b, 1)
    ctx = StepContext.of(batch)
    assert ctx.queries is None and ctx.outputs is None
    assert np.array(ctx.mask)[:, 0, 0].tolist() == [[True] * 9, [True] * 4 + [False] * 5]


def test_auto_keeps_the_step_one_graph():
    """'auto' never gives the engine the host-side cpu kernel (an evaluation in every layer); asked for, it gets it."""
    import ropepool

    model = build("llama-gqa")
    assert Runner(model, pool_rows=8).backend != "cpu"
    if ropepool.available_backends()["cpu"].available:
        assert Runner(model, pool_rows=8, backend="cpu").backend == "cpu"
