"""The one runner leaves the caller's model alone: nothing is assigned into it while the engine serves, a
Ctrl-C at any layer leaves it as it was, and two engines on one model in two threads each get the tokens
they get alone. Sliding windows are checked; the head runs at each request's last token only."""

import sys
import threading
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten

from ropepool.engine import Engine, UnsupportedModelError, generate
from ropepool.engine.mlx_lm_loop import greedy
from ropepool.engine.runner import Runner
from ropepool.engine.scheduler import Batch
from ropepool.engine.request import Request
from ropepool.loaders.tiny import build, tiny, ARCHS

sys.path.insert(0, str(Path(__file__).parent))
from test_engine_steps import Patch

PROMPTS = [[1, 5, 9, 3, 7, 2, 8, 8], [2, 4, 6], [1, 5, 9, 3, 7, 11]]
NEW = [6, 5, 4]
NAMES = ["llama-gqa", "phi3", "qwen3", "gemma3", "gpt-oss", "deepseek-v3"]


def tree(model) -> list:
    """Every module of ``model`` by path and identity, and every parameter by path and identity."""
    modules = [(path, id(m), type(m)) for path, m in model.named_modules()]
    return modules + [(path, id(a)) for path, a in tree_flatten(model.parameters())]


def results(out):
    return [(r.tokens, np.array(r.logits)) for r in out]


@pytest.fixture
def busy_switching():
    """Threads take turns every microsecond (Python's default: every 5 ms), so that any moment in which
    the model is not itself is seen."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


@pytest.mark.parametrize("name", NAMES)
def test_a_reader_thread_sees_the_model_s_own_modules_while_the_engine_serves(name, busy_switching):
    """A thread reads every layer's ``self_attn`` as fast as it can while the engine serves: it is always
    the model's own module, and afterwards the model's tree is the same objects as before."""
    model = build(name)
    before, own = tree(model), [layer.self_attn for layer in model.model.layers]
    seen, stop = set(), threading.Event()

    def watch():
        while not stop.is_set():
            seen.update(id(layer.self_attn) for layer in model.model.layers)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for _ in range(3):
            generate(model, PROMPTS, NEW, pool_rows=32, max_step_tokens=4)
    finally:
        stop.set()
        watcher.join()
    assert seen == {id(a) for a in own}
    assert tree(model) == before


@pytest.mark.parametrize("name", ["llama-gqa", "gemma3", "gpt-oss", "deepseek-v3"])
def test_a_ctrl_c_at_any_layer_leaves_the_model_as_it_was(name):
    """A KeyboardInterrupt in each layer's attention in turn: the step is undone, the model is the same
    objects and mlx-lm's own forward gives the same logits; serving on gives the undisturbed tokens."""
    model = build(name)
    before, tokens = tree(model), mx.array([PROMPTS[0]])
    logits = np.array(model(tokens))
    want = results(generate(model, PROMPTS, NEW, pool_rows=32, keep_logits=True))
    engine = Engine(model, pool_rows=32, keep_logits=True)
    reqs = [engine.add_request(p, n) for p, n in zip(PROMPTS, NEW)]
    method = "mla" if name == "deepseek-v3" else "gqa"
    for layer in range(len(model.model.layers)):
        with (
            Patch(engine.runner, method, lambda i, *a, at=layer: i == at, before=True),
            pytest.raises(KeyboardInterrupt),
        ):
            engine.step()
        assert tree(model) == before
        np.testing.assert_array_equal(np.array(model(tokens)), logits)
    while not engine.done:
        engine.step()
    for r, (tokens_, logits_) in zip(reqs, want):
        assert r.tokens == tokens_
        np.testing.assert_array_equal(np.array(mx.stack(r.logits)), logits_)


@pytest.mark.parametrize("name", ["gemma3", "deepseek-v3", "llama-gqa"])
def test_two_engines_on_one_model_in_two_threads_each_get_their_alone_tokens(name, busy_switching):
    model = build(name)
    jobs = [(PROMPTS, NEW), ([[7, 7, 3, 1, 2], [9]], [5, 7])]
    alone = [results(generate(model, p, n, pool_rows=32, max_step_tokens=3)) for p, n in jobs]
    for _ in range(3):
        got, errors = [None, None], []

        def serve(k):
            try:  # each thread makes and steps its own engine (MLX's streams are per thread)
                got[k] = results(generate(model, *jobs[k], pool_rows=32, max_step_tokens=3))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=serve, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for mine, want in zip(got, alone):
            for (t1, l1), (t2, l2) in zip(mine, want):
                assert t1 == t2
                np.testing.assert_allclose(l1, l2, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("module", ["gemma3_text", "gpt_oss"])
@pytest.mark.parametrize("window", [0, -1, 2.5, True, "4"])
def test_a_window_that_is_no_positive_int_is_refused(module, window):
    _, _, fields = ARCHS["gemma3" if module == "gemma3_text" else "gpt-oss"]
    model = tiny(module, **{**fields, "sliding_window": window})
    with pytest.raises(UnsupportedModelError, match=r"sliding_window must be an int >= 1 .*, got"):
        Engine(model, pool_rows=16)


@pytest.mark.parametrize("prefix_cache", [False, True])
def test_a_window_wider_than_the_pool_holds_no_more_rows_than_the_pool(prefix_cache):
    """sliding_window = 2**22 with 128 pool rows: the rings hold at most 128 rows each, and the tokens
    and logits are mlx-lm's (every position is inside such a window)."""
    _, _, fields = ARCHS["gemma3"]
    model = tiny("gemma3_text", **{**fields, "sliding_window": 2**22})
    engine = Engine(model, pool_rows=128, prefix_cache=prefix_cache, keep_logits=True)
    assert all(p.shape[0] <= 128 for layer in engine.runner.pools for p in layer)
    reqs = [engine.add_request(p, n) for p, n in zip(PROMPTS, NEW)]
    while not engine.done:
        engine.step()
    assert all(p.shape[0] <= 128 * len(PROMPTS) for layer in engine.runner.pools for p in layer)
    for r, want in zip(reqs, greedy(model, PROMPTS, NEW)):
        assert r.tokens == want.tokens
        np.testing.assert_allclose(np.array(mx.stack(r.logits)), np.array(want.logits), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["llama-gqa", "gemma3", "deepseek-v3"])
def test_the_head_runs_at_each_request_s_last_token_only(name):
    """A prefill of 9 + 3 tokens: the head is given 2 rows, one per request."""
    runner = Runner(build(name), pool_rows=16)
    rows, head = [], runner.head
    runner.head = lambda h: rows.append(h.shape[0]) or head(h)
    batch = Batch()
    for rid, (prompt, slots) in enumerate(((list(range(1, 10)), range(9)), ([4, 5, 6], range(9, 12)))):
        req = Request(rid, prompt, max_new_tokens=1)
        req.slot_table = list(slots)
        batch.add(req, len(prompt))
    assert runner.run(batch).shape == (2, 160) and rows == [2]
