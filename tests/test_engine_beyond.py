"""The engine beyond GQA: sliding-window layers on rings of ``window`` rows (peak rows, preemption, an
interrupted step undone), and MLA's latent pool holding ``[c_kv ‖ rope(k_pe)]``."""

import runpy
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from ropepool.engine import Engine
from ropepool.loaders.tiny import ARCHS, build, tiny
from ropepool.tolerance import ENGINE_LOGITS_FLOAT32

sys.path.insert(0, str(Path(__file__).parent))
from test_engine import check_against_mlx_lm
from test_engine_sharing import results
from test_engine_steps import Patch

BENCH = runpy.run_path(str(Path(__file__).parent.parent / "benchmarks" / "sliding_rows.py"))


@pytest.mark.parametrize("name", ["gemma3", "gpt-oss"])
def test_sliding_layers_keep_a_window_of_rows_with_mlx_lm_logits(name):
    """4 x window new tokens per request, chunked prefill, preemptions: every logit is mlx-lm's (its
    RotatingKVCache), and the sliding group never holds more than (window + a page) per running request."""
    model, engine, reqs, running = BENCH["serve"](name)
    W = model.args.sliding_window
    assert engine.stats.preemptions > 0 and running == 4
    assert engine.runner.rings.peak <= (W + BENCH["PAGE"]) * running < engine.stats.peak_rows
    assert engine.runner.rings.rows_in_use == 0  # every ring given back
    check_against_mlx_lm(model, [r.prompt for r in reqs], [len(r.tokens) for r in reqs], results(reqs))


def test_the_bench_prints_each_peak_within_its_bound(capsys):
    rows = BENCH["main"]([])
    out = capsys.readouterr().out
    for row in rows:
        assert row["sliding"] <= row["bound"] and row["diff"] <= ENGINE_LOGITS_FLOAT32["atol"]
        assert f"{row['name']:<10}" in out


def test_an_interrupted_ring_step_is_undone():
    """Every step's first attempt fails after every pool (rings included) was written; the engine undoes it,
    and the run ends with the tokens and logits of an undisturbed one, bit for bit."""

    def run(inject):
        engine = Engine(build("gpt-oss"), pool_rows=24, keep_logits=True, prefix_cache=False, max_step_tokens=5)
        reqs = [engine.add_request(p, 9) for p in ([1, 5, 9, 3, 7, 2, 8, 8], [2, 4], [3])]
        failures = 0
        while not engine.done:
            if inject:
                with Patch(engine.runner, "run", lambda *a: True), pytest.raises(KeyboardInterrupt):
                    engine.step()
                failures += 1
            engine.step()
        return reqs, failures, engine

    want, _, plain = run(False)
    got, failures, _ = run(True)
    assert failures == plain.steps and plain.stats.preemptions > 0
    for r, w in zip(got, want):
        assert r.tokens == w.tokens
        np.testing.assert_array_equal(np.array(mx.stack(r.logits)), np.array(mx.stack(w.logits)))


def gemma3_window(window: int):
    _, module, fields = ARCHS["gemma3"]
    return tiny(module, **{**fields, "sliding_window": window})


def test_rings_of_short_requests_stay_inside_the_pool_rows_promised():
    """64 one-token prompts at window 64 on 128 pool rows: each ring holds its request's positions (1, then
    2), not a whole window, so the rings' pools never pass the 128 rows that every layer's pool was
    promised (and check_pool_memory checked), where whole windows would take 64 x 64 = 4096."""
    model = gemma3_window(64)
    a = model.args
    engine = Engine(model, pool_rows=128, prefix_cache=False)
    promised = 128 * a.num_hidden_layers * 2 * a.num_key_value_heads * a.head_dim * 4  # float32 k and v rows
    reqs = [engine.add_request([1 + i], 2) for i in range(64)]
    running = 0
    while not engine.done:
        running = max(running, len(engine.step().requests))
        assert engine.runner.rings.capacity <= 128, f"{engine.runner.rings.capacity} ring rows"
        assert engine.pool_bytes <= promised
    assert running == 64 and engine.runner.rings.peak == 128  # 64 rings of 2 positions at the decode step
    assert all(len(r.tokens) == 2 for r in reqs) and engine.runner.rings.rows_in_use == 0


def test_pool_bytes_are_what_the_pools_hold_now_rings_included():
    engine = Engine(gemma3_window(8), pool_rows=64, prefix_cache=False)

    def held():
        return sum(np.array(p).nbytes for layer in engine.runner.pools for p in layer)

    first = engine.pool_bytes
    assert first == held()
    for i in range(4):
        engine.add_request(list(range(1, 12)), 4)
    while not engine.done:
        engine.step()
        assert engine.pool_bytes == held()
    assert engine.pool_bytes > first  # the rings grew with the requests
    a = engine.runner.model.args
    kept = Engine(build("gemma3"), pool_rows=64)  # the prefix cache on: no rings, P rows a layer
    assert kept.pool_bytes == 64 * a.num_hidden_layers * 2 * a.num_key_value_heads * a.head_dim * 4


def test_with_the_prefix_cache_sliding_layers_keep_every_row():
    engine = Engine(build("gemma3"), pool_rows=32)
    assert engine.runner.rings is None and engine.runner.pools[0][0].shape[0] == 32


@pytest.mark.parametrize("rope_dim", [0, 3])
def test_a_deepseek_model_with_a_qk_rope_head_dim_of_no_even_size_is_refused_naming_it(rope_dim):
    from ropepool.engine import UnsupportedModelError
    from ropepool.loaders.tiny import ARCHS, tiny

    _, module, fields = ARCHS["deepseek-v3"]
    model = tiny(module, **{**fields, "qk_rope_head_dim": rope_dim})
    with pytest.raises(UnsupportedModelError, match=f"qk_rope_head_dim .* positive even int, got {rope_dim}$"):
        Engine(model, pool_rows=16)


def test_mla_latent_pool_rows_are_c_kv_then_rotated_k_pe():
    """DeepSeek-V3's layer-0 pool rows of a prompt: the first kv_lora_rank values are kv_a_layernorm's
    latent, the rest the rotated k_pe; the pool is one head of kv_lora_rank + qk_rope_head_dim."""
    model = build("deepseek-v3")
    a = model.args
    engine = Engine(model, pool_rows=16)
    prompt = [3, 1, 4, 1, 5]
    req = engine.add_request(prompt, 1)
    while not engine.done:
        engine.step()
    pool = np.array(engine.runner.pools[0][0])
    assert pool.shape == (16, 1, a.kv_lora_rank + a.qk_rope_head_dim)
    layer = model.model.layers[0]
    x = layer.input_layernorm(model.model.embed_tokens(mx.array(prompt)))  # [T, hidden]
    c_kv, k_pe = mx.split(layer.self_attn.kv_a_proj_with_mqa(x), [a.kv_lora_rank], axis=-1)
    rows = pool[req.slot_table[:5], 0]
    np.testing.assert_allclose(rows[:, : a.kv_lora_rank], np.array(layer.self_attn.kv_a_layernorm(c_kv)), atol=1e-6)
    want = layer.self_attn.rope(k_pe[None, None])[0, 0]  # mlx-lm's own rotation of k_pe at 0..4
    np.testing.assert_allclose(rows[:, a.kv_lora_rank :], np.array(want), atol=1e-5)


def test_a_ctrl_c_at_any_line_of_the_rings_loses_no_ring_row():
    """A real SIGINT raised at each line the rings run in turn (their plan and release, where rows are taken
    and given): the step is undone or held, every ring row is free or in exactly one ring, and serving on
    gives the undisturbed tokens."""
    import signal
    import threading

    from ropepool.engine import window

    prompts = ([1, 5, 9, 3, 7, 2, 8, 8], [2, 4], [3])

    def engine():
        e = Engine(build("gpt-oss"), pool_rows=24, keep_logits=True, prefix_cache=False, max_step_tokens=5)
        return e, [e.add_request(p, 6) for p in prompts]

    plain, want = engine()
    while not plain.done:
        plain.step()
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    landed, n = 0, 0
    while True:
        n += 1
        e, reqs = engine()
        e.step()  # every request holds its ring
        seen = [0]

        def trace(frame, event, arg):
            if frame.f_code.co_filename == window.__file__ and event == "line":
                seen[0] += 1
                if seen[0] == n:
                    signal.raise_signal(signal.SIGINT)
            return trace

        sys.settrace(trace)
        try:
            e.step()
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        if seen[0] < n:
            break  # past the rings' last line: every line has had its Ctrl-C
        landed += 1
        rings = e.runner.rings
        held = [r for _, rows in rings.rings.values() for r in rows.tolist()]
        assert sorted(held + rings.free) == list(range(rings.capacity)), f"line {n}"
        try:
            while not e.done:
                e.step()
        except KeyboardInterrupt:  # one held from the end of the interrupted step
            while not e.done:
                e.step()
        for r, w in zip(reqs, want):
            assert r.tokens == w.tokens, f"line {n}"
    assert landed > 20
