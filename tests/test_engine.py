"""ropepool.engine against mlx-lm: the same models, served together, give mlx-lm's logits."""

from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import make_prompt_cache

import ropepool
from ropepool.engine import (
    Allocator,
    Engine,
    EngineArgumentError,
    PoolTooSmallError,
    Status,
    UnsupportedModelError,
    generate,
    rope_kwargs,
)
from ropepool.engine.mlx_lm_loop import greedy
from ropepool.loaders.tiny import ARCHS, build, tiny
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
        np.testing.assert_allclose(
            got, mlx_lm_logits(model, prompt, r.tokens), **ENGINE_LOGITS_FLOAT32, err_msg=f"request {i}"
        )


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


def test_rows_are_never_shared_and_are_reused_without_the_cache():
    model = tiny("llama", num_attention_heads=4, num_key_value_heads=2)
    holders = {}  # row -> every request that has held it
    seen_waiting = set()

    def on_step(engine, batch):
        live = [r for r in engine.requests if r.status is Status.RUNNING]
        held = [row for r in live for row in r.slot_table]
        assert len(held) == len(set(held)), f"step {engine.steps}: a row is held by two live requests"
        assert sorted(held + list(engine.allocator.free_pages)) == list(range(POOL_ROWS)), "rows lost or duplicated"
        seen_waiting.update(r.rid for r in engine.scheduler.waiting)
        for r in live:
            for row in r.slot_table:
                holders.setdefault(row, set()).add(r.rid)

    results = generate(model, PROMPTS, NEW, pool_rows=POOL_ROWS, on_step=on_step, prefix_cache=False)
    check_against_mlx_lm(model, PROMPTS, NEW, results)
    assert seen_waiting, "no request ever waited for rows"
    assert any(len(rids) > 1 for rids in holders.values()), "no row was reused"


def test_a_request_waits_until_rows_are_freed():
    engine = Engine(tiny("llama", num_attention_heads=4, num_key_value_heads=2), pool_rows=7, prefix_cache=False)
    a = engine.add_request([1, 2, 3, 4, 5], 2)  # 5 prompt rows, then 1 decode row
    b = engine.add_request([6, 7, 8], 3)  # 3 prompt rows: waits while a holds 5 and then 6 of the 7
    first = engine.step()
    assert first.admitted == [a] and b.status is Status.WAITING and len(a.slot_table) == 5
    freed = list(a.slot_table)
    second = engine.step()  # a's decode row (the sixth), a's second token: a finishes and frees its rows
    assert second.finished == [a] and b.status is Status.WAITING
    engine.step()
    assert b.status is Status.RUNNING and set(b.slot_table) & set(freed)


def test_a_waiting_request_that_fits_is_not_held_back_by_one_that_does_not():
    engine = Engine(tiny("llama", num_attention_heads=4, num_key_value_heads=2), pool_rows=10, prefix_cache=False)
    a = engine.add_request([1, 2, 3, 4, 5, 6], 3)  # 6 rows, then 2 more
    b = engine.add_request(list(range(8)), 2)  # 8 prompt rows: does not fit beside a
    c = engine.add_request([9, 9], 2)  # 2 rows: fits, behind b
    first = engine.step()
    assert first.admitted == [a, c] and b.status is Status.WAITING
    while not engine.done:
        engine.step()
    assert all(len(r.tokens) == r.max_new_tokens for r in (a, b, c))


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
    engine = Engine(model, pool_rows=6, stop=first.tokens[0], prefix_cache=False)
    a = engine.add_request([1, 2, 3], 3)  # 3 prompt rows, could write 3 tokens ...
    b = engine.add_request([4, 5, 6, 7], 2)  # ... so b (4 prompt rows) waits
    engine.step()  # a chooses the stop token at once: finished, its 3 rows back in the same step
    assert a.status is Status.FINISHED and a.tokens == first.tokens and engine.allocator.num_free == 6
    engine.step()
    assert b.status is Status.RUNNING and set(b.slot_table) & set(a.slot_table)  # a's rows, reused


def test_allocator_pages_and_references():
    a = Allocator(8, page_size=2)
    assert a.allocate(3) == [0, 1, 2] and a.num_free == 1 and a.rows([2, 0]) == [4, 5, 0, 1]
    a.retain([1])
    assert a.release([0, 1]) == [0] and a.release([1]) == [1]  # page 1 was held twice
    assert a.allocate(2) == [1, 0]  # page size > 1: freed pages to the front, last freed first (SGLang's order)
    with pytest.raises(ValueError, match="2 pages asked for, 1 free"):
        a.allocate(2)
    a.release([0])
    with pytest.raises(ValueError, match="page 0 is not held"):
        a.retain([0])


@pytest.mark.parametrize(
    "pages, message",
    [
        ([0, 0], "page 0 given 2 times, held 1"),
        ([1, 4], "page 4 is not held"),
        ([0, 2], "page 2 is not held"),  # held pages first, then a free one
        ([1, -1], "page -1 is not held"),
    ],
    ids=["twice", "out of range", "free page", "negative"],
)
def test_a_refused_release_changes_nothing(pages, message):
    a = Allocator(4)
    a.allocate(2)  # pages 0 and 1 held, 2 and 3 free
    before = (list(a.free_pages), list(a.refs))
    with pytest.raises(ValueError, match=message):
        a.release(pages)
    assert (list(a.free_pages), list(a.refs)) == before
    a.release([1, 0])  # both still held
    assert a.num_free == 4


@pytest.mark.parametrize(
    "rows, size, message",
    [
        (10, 4, "page_size 4 must divide pool_rows 10"),
        (8, 0, r"page_size must be an int in \[1, 8\], got 0"),
        (8, 2.0, "page_size must be an int, got float 2.0"),
    ],
    ids=["not a divisor", "zero", "float"],
)
def test_a_bad_page_size_is_refused(rows, size, message):
    with pytest.raises(EngineArgumentError, match=message):
        Allocator(rows, page_size=size)


# --- Errors --------------------------------------------------------------------------------


def test_unsupported_model_is_refused():
    model = tiny("gemma", num_attention_heads=4, num_key_value_heads=1, head_dim=16)
    message = r"serves mlx-lm models of llama, qwen2, phi3, qwen3, deepseek_v3, gemma3_text, gpt_oss .* from mlx_lm\.models\.gemma"
    with pytest.raises(UnsupportedModelError, match=message):
        generate(model, [[1, 2]], 2, pool_rows=8)


def test_a_request_that_can_never_fit_fails_before_anything_runs():
    model = tiny("llama", num_attention_heads=4, num_key_value_heads=2)
    steps = []
    with pytest.raises(PoolTooSmallError, match=r"request 1 needs 13 pool rows .* but pool_rows = 12"):
        generate(model, [[1, 2], list(range(10))], [2, 4], pool_rows=12, on_step=lambda e, b: steps.append(b))
    assert steps == []


def test_dynamic_scaling_is_refused_before_anything_runs():
    model = tiny(
        "llama", num_attention_heads=4, num_key_value_heads=2, rope_scaling={"rope_type": "dynamic", "factor": 2.0}
    )
    with pytest.raises(UnsupportedModelError, match=r"llama model: .*'dynamic' cannot be computed by this op"):
        generate(model, [[1, 2]], 2, pool_rows=8)


BAD_CALLS = [
    ("empty prompt", dict(prompts=[[1], []]), "prompt 1 is empty"),
    ("token outside vocab", dict(prompts=[[1, 160]]), r"token id 160 outside \[0, 160\)"),
    ("no new tokens", dict(max_new_tokens=0), "max_new_tokens of prompt 0 must be an int >= 1, got 0"),
    ("counts mismatch", dict(max_new_tokens=[1, 2, 3]), "3 counts for 1 prompts"),
    ("pool_rows zero", dict(pool_rows=0), r"pool_rows must be an int in \[1, 2147483647\], got 0"),
    ("stop outside vocab", dict(stop=160), r"stop must be an int in \[0, 159\], got 160"),
]


@pytest.mark.parametrize("name, change, message", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_bad_call_is_refused(name, change, message):
    call = dict(prompts=[[1, 2]], max_new_tokens=2, pool_rows=8) | change
    with pytest.raises(ValueError, match=message):
        generate(
            tiny("llama", num_attention_heads=4, num_key_value_heads=2),
            call.pop("prompts"),
            call.pop("max_new_tokens"),
            **call,
        )


def test_unknown_backend_is_refused_before_anything_runs():
    with pytest.raises(ropepool.RopePoolError, match="unknown_backend|backend"):
        generate(tiny("llama", num_attention_heads=4, num_key_value_heads=2), [[1]], 1, pool_rows=4, backend="tpu")


def test_the_logits_benchmark_prints_a_row_per_model(capsys):
    import runpy

    script = runpy.run_path(str(Path(__file__).parent.parent / "benchmarks" / "engine_logits.py"))
    script["main"]([])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [r.split("  ")[1].strip() for r in rows] == [label for label, _, _ in ARCHS.values()]
    for row in rows:  # every difference printed is within the tests' bound
        assert all(float(d) <= ENGINE_LOGITS_FLOAT32["atol"] for d in row.split()[-len(backends()) :])
