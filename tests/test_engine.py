"""ropepool.engine against mlx-lm: the same models, served together, give mlx-lm's logits."""

from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import make_prompt_cache

import ropepool
from ropepool.engine import Allocator, Engine, PoolTooSmallError, Status, UnsupportedModelError, generate, rope_kwargs
from ropepool.engine.mlx_lm_loop import greedy
from ropepool.engine.tiny_models import ARCHS, build, tiny
from ropepool.tolerance import ENGINE_LOGITS_FLOAT32

# Lengths 1 to 9, a request needing exactly the whole pool (9 + 4 - 1 = 12), and 12 rows for
# 4 + 7 + 12 + 5 = 28 needed: requests wait, and rows are reused.
PROMPTS = [[1, 5, 9, 3], [2, 4], [8, 7, 6, 5, 4, 3, 2, 1, 0], [100]]
NEW = [1, 6, 4, 5]
POOL_ROWS = 12


def mlx_lm_logits(model, prompt, tokens):
    """float32 ``[len(tokens), vocab]``: the sequence run alone through mlx-lm with its own KV cache."""
    cache = make_prompt_cache(model)
    out = [model(mx.array(prompt)[None], cache=cache)[0, -1]]
    for t in tokens[:-1]:
        out.append(model(mx.array([[t]]), cache=cache)[0, -1])
    return np.array(mx.stack(out).astype(mx.float32))


def backends():
    return [name for name, status in ropepool.available_backends().items() if status.available]


def check_against_mlx_lm(model, prompts, new, results):
    for i, (prompt, n, r) in enumerate(zip(prompts, new, results)):
        got = np.array(r.logits)
        assert r.logits.dtype == mx.float32 and got.shape == (n, model.args.vocab_size), f"request {i}"
        assert r.tokens == got.argmax(-1).tolist(), f"request {i}: a token is not the argmax of its logits"
        np.testing.assert_allclose(got, mlx_lm_logits(model, prompt, r.tokens), **ENGINE_LOGITS_FLOAT32,
                                   err_msg=f"request {i}")


@pytest.mark.parametrize("name", ARCHS)
def test_every_new_token_has_mlx_lm_logits(name):
    """Every architecture and RoPE (scaled, partial, GPT-J pairs) of the tiny models, against mlx-lm."""
    model = build(name)
    results = generate(model, PROMPTS, NEW, pool_rows=POOL_ROWS)
    check_against_mlx_lm(model, PROMPTS, NEW, results)


@pytest.mark.parametrize("name", ["llama-gqa", "qwen2-mqa", "phi3"])
def test_same_results_on_every_backend(name):
    model = build(name)
    if len(backends()) < 2:
        pytest.skip(f"only {backends()} runs here")
    runs = {b: generate(model, PROMPTS, NEW, pool_rows=POOL_ROWS, backend=b) for b in backends()}
    first, *rest = runs.values()
    for other in rest:
        for a, b in zip(first, other):
            assert a.tokens == b.tokens
            np.testing.assert_allclose(np.array(a.logits), np.array(b.logits), **ENGINE_LOGITS_FLOAT32)


def test_phi3_reads_original_max_position_embeddings_from_the_top_level():
    """Phi-3 keeps ``original_max_position_embeddings`` beside ``rope_scaling``, not in it."""
    model = build("phi3.5-longrope")
    assert "original_max_position_embeddings" not in model.args.rope_scaling
    assert rope_kwargs(model)["rope_scaling"]["original_max_position_embeddings"] == 4096


# --- The pool: waiting, reuse, no row held twice ---------------------------------------------

def test_rows_are_never_shared_and_are_reused():
    model = tiny("llama", num_attention_heads=4, num_key_value_heads=2)
    holders = {}  # row -> every request that has held it
    admitted_at = {}
    seen_waiting = set()

    def on_step(engine, batch):
        live = [r for r in engine.requests if r.status is Status.RUNNING]
        held = [row for r in live for row in r.slot_table]
        assert len(held) == len(set(held)), f"step {engine.steps}: a row is held by two live requests"
        assert sorted(held + list(engine.allocator.free_rows)) == list(range(POOL_ROWS)), "rows lost or duplicated"
        seen_waiting.update(r.rid for r in engine.scheduler.waiting)
        for r in batch.admitted:
            admitted_at[r.rid] = engine.steps
            for row in r.slot_table:
                holders.setdefault(row, []).append(r.rid)

    generate(model, PROMPTS, NEW, pool_rows=POOL_ROWS, on_step=on_step)
    assert seen_waiting, "no request ever waited for rows"
    assert set(admitted_at) == {0, 1, 2, 3}
    reused = {row: rids for row, rids in holders.items() if len(rids) > 1}
    assert reused, "no row was reused"


def test_a_request_waits_until_rows_are_freed():
    engine = Engine(tiny("llama", num_attention_heads=4, num_key_value_heads=2), pool_rows=6)
    a = engine.add_request([1, 2, 3], 2)  # 4 rows
    b = engine.add_request([4, 5], 3)  # 4 rows: waits for a
    first = engine.step()
    assert first.admitted == [a] and b.status is Status.WAITING
    freed = list(a.slot_table)
    engine.step()  # a's second token: a finishes and frees its rows
    assert a.status is Status.FINISHED and b.status is Status.WAITING
    engine.step()
    assert b.status is Status.RUNNING and set(b.slot_table) & set(freed)


def test_a_stop_token_ends_a_request_there():
    """With ``stop``, each request's tokens are those without it, cut just after the stop token's first use."""
    model = tiny("llama", num_attention_heads=4, num_key_value_heads=2)
    full = generate(model, PROMPTS, NEW, pool_rows=POOL_ROWS)
    stop = full[1].tokens[2]  # request 1 writes it as its third token (or earlier): it ends there
    cut = generate(model, PROMPTS, NEW, pool_rows=POOL_ROWS, stop=stop)
    for i, (f, c) in enumerate(zip(full, cut)):
        n = f.tokens.index(stop) + 1 if stop in f.tokens else len(f.tokens)
        assert c.tokens == f.tokens[:n] and c.logits.shape == (n, 160), f"request {i}"
        np.testing.assert_allclose(np.array(c.logits), np.array(f.logits[:n]), **ENGINE_LOGITS_FLOAT32)
    assert len(cut[1].tokens) <= 3 < NEW[1]
    want = [g.tokens for g in greedy(model, PROMPTS, NEW, stop=stop)]  # mlx-lm's loop, the same rule
    assert [c.tokens for c in cut] == want


def test_a_stopped_request_frees_its_rows_at_once():
    model = tiny("llama", num_attention_heads=4, num_key_value_heads=2)
    (first,) = generate(model, [[1, 2, 3]], 1, pool_rows=3)
    engine = Engine(model, pool_rows=6, stop=first.tokens[0])
    a = engine.add_request([1, 2, 3], 3)  # holds 5 rows, could write 3 tokens ...
    b = engine.add_request([4, 5], 2)  # ... so b (3 rows) waits
    engine.step()  # a chooses the stop token at once: finished, its 5 rows back in the same step
    assert a.status is Status.FINISHED and a.tokens == first.tokens and engine.allocator.num_free == 6
    engine.step()
    assert b.status is Status.RUNNING and set(b.slot_table) & set(a.slot_table)  # a's rows, reused


# 12 rows: A (6 rows) and B (3) are admitted at step 0, B finishes at step 1, and step 2 runs
# A's decode token and admits C (6): a step with a running and an admitted request.
STEP_PROMPTS = [[1, 2, 3], [4, 5], [6, 7, 8, 9]]
STEP_NEW = [4, 2, 3]


def engine_state(engine):
    """Everything a step may change, as plain values."""
    reqs = [(r.rid, r.status, list(r.slot_table), r.num_cached, list(r.tokens), len(r.logits))
            for r in engine.requests]
    queues = [[r.rid for r in q] for q in (engine.scheduler.waiting, engine.scheduler.running)]
    return reqs, queues, list(engine.allocator.free_rows), engine.steps


@pytest.mark.parametrize("layer, error", [(0, KeyboardInterrupt), (1, RuntimeError), ("after", KeyboardInterrupt)],
                         ids=["interrupt in layer 0", "error in layer 1", "interrupt after every pool is written"])
def test_a_failed_step_loses_nothing(monkeypatch, layer, error):
    """A step whose forward pass raises leaves the engine as it was; stepping on gives the same outputs."""
    model = tiny("llama", num_attention_heads=4, num_key_value_heads=2)
    want = generate(model, STEP_PROMPTS, STEP_NEW, pool_rows=12)
    engine = Engine(model, pool_rows=12)
    a, b, c = (engine.add_request(p, n) for p, n in zip(STEP_PROMPTS, STEP_NEW))
    engine.step()
    engine.step()
    assert (a.status, b.status, c.status) == (Status.RUNNING, Status.FINISHED, Status.WAITING)
    before = engine_state(engine)

    attention = engine.runner.attention
    raised = error("injected")

    def failing(i, *args):
        if i == layer:  # layer 1: layer 0 has already written this step's rows into its pools
            raise raised
        out = attention(i, *args)
        if layer == "after" and i == len(model.layers) - 1:
            mx.eval(out, engine.runner.k_pools, engine.runner.v_pools)  # this step's rows, in every pool
            raise raised
        return out

    monkeypatch.setattr(engine.runner, "attention", failing)
    with pytest.raises(error) as info:
        engine.step()
    assert info.value is raised
    monkeypatch.undo()
    assert engine_state(engine) == before  # c waits again, its rows back at the head of the free list

    while not engine.done:
        engine.step()
    for r, w in zip(engine.requests, want):
        assert r.tokens == w.tokens
        np.testing.assert_array_equal(np.array(mx.stack(r.logits)), np.array(w.logits))
    assert engine.allocator.num_free == 12


@pytest.mark.parametrize("bad, code", [("out of range", "slot_out_of_range"), ("duplicate", "duplicate_slot")])
def test_a_bad_slot_is_refused_before_any_pool_is_written(bad, code):
    engine = Engine(tiny("llama", num_attention_heads=4, num_key_value_heads=2), pool_rows=12)
    a, b, _ = (engine.add_request(p, n) for p, n in zip(STEP_PROMPTS, STEP_NEW))
    engine.step()
    assert (a.num_cached, b.num_cached) == (3, 2)  # next step, a writes a.slot_table[3], b b.slot_table[2]
    if bad == "out of range":
        a.slot_table[3] = 12
    else:
        b.slot_table[2] = a.slot_table[3]
    pools = [np.array(p) for p in engine.runner.k_pools + engine.runner.v_pools]
    before = engine_state(engine)
    with pytest.raises(ropepool.RopePoolError) as info:
        engine.step()
    assert info.value.code == code
    for p, q in zip(pools, engine.runner.k_pools + engine.runner.v_pools):
        np.testing.assert_array_equal(p, np.array(q))
    assert engine_state(engine) == before


def test_allocator_free_list():
    a = Allocator(4)
    assert a.allocate(3) == [0, 1, 2] and a.num_free == 1
    a.free([1])
    assert a.allocate(2) == [3, 1]
    with pytest.raises(ValueError, match="1 rows asked for, 0 free"):
        a.allocate(1)
    a.free([0])
    with pytest.raises(ValueError, match="row 0 is not held"):
        a.free([0])


@pytest.mark.parametrize("rows, message", [
    ([0, 0], "row 0 given twice"),
    ([1, 4], "row 4 is not held"),
    ([0, 2], "row 2 is not held"),  # held rows first, then a free one
    ([1, -1], "row -1 is not held"),
], ids=["duplicate", "out of range", "free row", "negative"])
def test_a_refused_free_changes_nothing(rows, message):
    a = Allocator(4)
    a.allocate(2)  # rows 0 and 1 held, 2 and 3 free
    before = (list(a.free_rows), list(a._is_free))
    with pytest.raises(ValueError, match=message):
        a.free(rows)
    assert (list(a.free_rows), list(a._is_free)) == before
    a.free([1, 0])  # both still held
    assert a.num_free == 4


# --- Errors --------------------------------------------------------------------------------

def test_unsupported_model_is_refused():
    model = tiny("gemma", num_attention_heads=4, num_key_value_heads=1, head_dim=16)
    message = r"serves mlx-lm models of llama, qwen2, phi3 .* from mlx_lm\.models\.gemma"
    with pytest.raises(UnsupportedModelError, match=message):
        generate(model, [[1, 2]], 2, pool_rows=8)


def test_a_request_that_can_never_fit_fails_before_anything_runs():
    model = tiny("llama", num_attention_heads=4, num_key_value_heads=2)
    steps = []
    with pytest.raises(PoolTooSmallError, match=r"request 1 needs 13 pool rows .* but pool_rows = 12"):
        generate(model, [[1, 2], list(range(10))], [2, 4], pool_rows=12, on_step=lambda e, b: steps.append(b))
    assert steps == []


def test_dynamic_scaling_is_refused_before_anything_runs():
    model = tiny("llama", num_attention_heads=4, num_key_value_heads=2,
                 rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    with pytest.raises(UnsupportedModelError, match=r"llama model: .*'dynamic' cannot be computed by this op"):
        generate(model, [[1, 2]], 2, pool_rows=8)


BAD_CALLS = [
    ("empty prompt", dict(prompts=[[1], []]), "prompt 1 is empty"),
    ("token outside vocab", dict(prompts=[[1, 160]]), r"token id 160 outside \[0, 160\)"),
    ("no new tokens", dict(max_new_tokens=0), "max_new_tokens of prompt 0 must be an int >= 1, got 0"),
    ("counts mismatch", dict(max_new_tokens=[1, 2, 3]), "3 counts for 1 prompts"),
    ("pool_rows zero", dict(pool_rows=0), "pool_rows must be a positive int, got 0"),
    ("stop outside vocab", dict(stop=160), r"stop must be None or a token id in \[0, 160\)"),
]


@pytest.mark.parametrize("name, change, message", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_bad_call_is_refused(name, change, message):
    call = dict(prompts=[[1, 2]], max_new_tokens=2, pool_rows=8) | change
    with pytest.raises(ValueError, match=message):
        generate(tiny("llama", num_attention_heads=4, num_key_value_heads=2), call.pop("prompts"),
                 call.pop("max_new_tokens"), **call)


def test_unknown_backend_is_refused_before_anything_runs():
    with pytest.raises(ropepool.RopePoolError, match="unknown_backend|backend"):
        generate(tiny("llama", num_attention_heads=4, num_key_value_heads=2), [[1]], 1, pool_rows=4,
                 backend="tpu")


def test_the_logits_benchmark_prints_a_row_per_model(capsys):
    import runpy

    script = runpy.run_path(str(Path(__file__).parent.parent / "benchmarks" / "engine_logits.py"))
    script["main"]([])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [r.split("  ")[1].strip() for r in rows] == [label for label, _, _ in ARCHS.values()]
    for row in rows:  # every difference printed is within the tests' bound
        assert all(float(d) <= ENGINE_LOGITS_FLOAT32["atol"] for d in row.split()[-len(backends()):])
