"""``deterministic=True``: a request's logits are the same bits whatever else the engine serves.

The batch-invariant kernel against its NumPy statement (same order, same bits), its invariance to the
rows beside a row and to the thread count; then a property test over every architecture the engine serves
(tiny models from config dicts, float32 and 4-bit weights, FP8 pools): random prompts beside the target,
before or after it, chunk sizes, a cached prefix, page sizes and OpenBLAS thread counts, against the target
served alone; the same greedy tokens as mlx-lm's own forward; SmolLM2 alone, beside, chunked and at two
thread counts, where the default engine's logits do move.
"""

from functools import lru_cache

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ropepool.engine import Engine, EngineArgumentError, generate
from ropepool.engine.deterministic import DeterminismUnavailable, check_available, invariant_view
from ropepool.engine.mlx_lm_loop import greedy
from ropepool.kernels import invariant
from ropepool.kernels.invariant import rowdot, rowdot_reference
from ropepool.loaders.tiny import build
from ropepool.teaching.determinism import Setting, served
from tests.helpers import bits

ARCHS = ["llama-gqa", "qwen2-mqa", "phi3", "qwen3", "gemma3", "gpt-oss", "deepseek-v3"]
TARGET = (1, 5, 9, 3, 7, 2, 8, 8, 4, 6, 1, 2, 3)
NEW = 3
TOKENS = st.integers(0, 159)


@pytest.fixture(autouse=True, scope="module")
def _kernel():
    reason = invariant.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


@lru_cache(maxsize=None)
def model_of(name: str, weights: str = "float32"):
    model = build(name)
    if weights == "4-bit":
        nn.quantize(
            model, 32, 4, class_predicate=lambda _, m: hasattr(m, "to_quantized") and m.weight.shape[-1] % 32 == 0
        )
    mx.eval(model.parameters())
    return model


@lru_cache(maxsize=None)
def alone(name: str, weights: str, kv_dtype) -> np.ndarray:
    return served(model_of(name, weights), TARGET, NEW, Setting(engine=dict(kv_dtype=kv_dtype)), deterministic=True)


# (a [B, M, K], w [E, N, K], index): K below, at and past the 8 lanes, a tail, M = 1, MQA-like index
SHAPES = [((1, 1, 1), (1, 1, 1), None), ((2, 5, 19), (3, 7, 19), [2, 0]), ((1, 3, 8), (1, 9, 8), None),
          ((4, 2, 64), (2, 13, 64), [0, 0, 1, 1]), ((1, 6, 577), (1, 5, 577), None)]  # fmt: skip


@pytest.mark.parametrize("a_shape, w_shape, index", SHAPES)
def test_rowdot_sums_in_the_stated_order(a_shape, w_shape, index):
    rng = np.random.default_rng(1)
    a, w = rng.standard_normal(a_shape).astype(np.float32), rng.standard_normal(w_shape).astype(np.float32)
    got = np.array(rowdot(mx.array(a), mx.array(w), index))
    np.testing.assert_array_equal(bits(got), bits(rowdot_reference(a, w, index)))


def test_the_portable_build_sums_in_the_stated_order_without_fused_adds():
    rng = np.random.default_rng(2)
    a, w = rng.standard_normal((1, 5, 37)).astype(np.float32), rng.standard_normal((1, 6, 37)).astype(np.float32)
    got = np.array(rowdot(mx.array(a), mx.array(w), portable=True))
    np.testing.assert_array_equal(bits(got), bits(rowdot_reference(a, w, fma=False)))
    if invariant.fused():  # the two rules are two different sums, each fixed
        assert np.any(bits(got) != bits(rowdot_reference(a, w, fma=True)))


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 40), at=st.integers(0, 39), k=st.integers(1, 80), threads=st.integers(1, 4))
def test_a_rows_sum_does_not_depend_on_the_rows_beside_it(m, at, k, threads):
    rng = np.random.default_rng(k)
    x = rng.standard_normal((41, k)).astype(np.float32)
    w = mx.array(rng.standard_normal((1, 37, k)).astype(np.float32))
    one = np.array(rowdot(mx.array(x[None, 40:41]), w, n_threads=1))[0, 0]
    rows = np.concatenate([x[:m], x[40:41]])  # the row last of m + 1
    many = np.array(rowdot(mx.array(rows[None]), w, n_threads=threads))[0, -1]
    np.testing.assert_array_equal(bits(one), bits(many))


def test_rowdot_refuses_what_does_not_fit():
    a, w = mx.zeros((2, 3, 4)), mx.zeros((3, 5, 4))
    with pytest.raises(ValueError, match=r"index values must lie in \[0, 3\)"):
        rowdot(a, w, [0, 3])
    with pytest.raises(ValueError, match="one K"):
        rowdot(a, mx.zeros((3, 5, 6)))
    with pytest.raises(ValueError, match="without an index w needs 1 or B = 2 entries, got 3"):
        rowdot(a, w)


SETTINGS = st.builds(
    lambda before, after, warm, chunk, page, threads, cache: Setting(
        before=tuple(map(tuple, before)),
        after=tuple(map(tuple, after)),
        warm=TARGET[:warm] if warm and cache else None,
        threads=threads,
        engine=dict(max_step_tokens=chunk, page_size=page, prefix_cache=cache),
    ),
    before=st.lists(st.lists(TOKENS, min_size=1, max_size=12), max_size=2),
    after=st.lists(st.lists(TOKENS, min_size=1, max_size=12), max_size=2),
    warm=st.integers(0, len(TARGET)),
    chunk=st.sampled_from([1, 3, 5, 256]),
    page=st.sampled_from([1, 16]),
    threads=st.sampled_from([1, 2]),
    cache=st.booleans(),
)


@settings(max_examples=14, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(ARCHS),
    weights=st.sampled_from(["float32", "4-bit"]),
    kv_dtype=st.sampled_from([None, "fp8"]),
    setting=SETTINGS,
)
def test_the_same_bits_whatever_else_is_served(name, weights, kv_dtype, setting):
    setting = Setting(
        setting.before, setting.after, setting.warm, setting.threads, {**setting.engine, "kv_dtype": kv_dtype}
    )
    got = served(model_of(name, weights), TARGET, NEW, setting, deterministic=True)
    np.testing.assert_array_equal(
        bits(got), bits(alone(name, weights, kv_dtype)), err_msg=f"{name} {weights} {setting}"
    )


def test_the_default_engine_moves_the_bits_the_property_test_holds_still():
    """Without ``deterministic`` the same target beside other prompts comes out other bits (or the property
    test above would hold for nothing)."""
    model = model_of("llama-gqa")
    beside = Setting(before=((3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13), (7, 7)))
    default = served(model, TARGET, NEW, beside)
    assert np.sum(default != served(model, TARGET, NEW)) > 0


@pytest.mark.parametrize("weights", ["float32", "4-bit"])
@pytest.mark.parametrize("name", ARCHS)
def test_the_same_tokens_as_mlx_lm(name, weights):
    model = model_of(name, weights)
    prompts = [list(TARGET), [2, 4], [100, 3, 7, 9, 11]]
    ours = generate(model, prompts, 5, pool_rows=64, max_step_tokens=4, deterministic=True)
    theirs = greedy(model, prompts, 5)
    for o, t in zip(ours, theirs):
        assert o.tokens == t.tokens
        np.testing.assert_allclose(np.array(o.logits), np.array(t.logits), rtol=1e-5, atol=2e-5)


def test_the_model_is_not_changed():
    model = model_of("qwen3")
    layer = model.model.layers[0]
    view = invariant_view(layer)
    assert view is not layer and type(layer.self_attn.q_proj) is nn.Linear and type(layer.mlp.up_proj) is nn.Linear
    assert type(view.self_attn.q_proj).__name__ == "InvariantLinear"
    Engine(model, pool_rows=8, deterministic=True)
    assert type(model.model.layers[0].self_attn.q_proj) is nn.Linear


def test_deterministic_must_be_a_bool():
    with pytest.raises(EngineArgumentError, match="deterministic must be True or False, got 'yes'"):
        Engine(model_of("llama-gqa"), pool_rows=8, deterministic="yes")


def test_without_a_compiler_deterministic_is_refused_with_the_reason(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with pytest.raises(DeterminismUnavailable, match="needs the batch-invariant matmul, and no C.. compiler"):
        check_available()


def test_off_the_cpu_deterministic_is_refused_with_the_reason(monkeypatch):
    monkeypatch.setattr(mx, "default_device", lambda: mx.Device(mx.gpu))
    with pytest.raises(DeterminismUnavailable, match="kept on the CPU only, and MLX's default device is Device.gpu"):
        check_available()


def test_smollm2_the_same_bits_alone_beside_chunked_and_at_two_thread_counts():
    from ropepool.loaders.fetch import ModelUnavailable
    from ropepool.loaders.smollm2 import QUESTIONS, load_smollm2

    try:
        model, tokenizer, _ = load_smollm2(pairs="gptj")
    except ModelUnavailable as err:
        pytest.skip(str(err))
    target, *others = (tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in QUESTIONS)
    beside = Setting(before=(tuple(others[0]),), after=(tuple(others[1]),), threads=2, engine=dict(max_step_tokens=16))
    base = served(model, target, 2, deterministic=True)
    np.testing.assert_array_equal(bits(served(model, target, 2, beside, deterministic=True)), bits(base))
    assert np.sum(served(model, target, 2, beside) != served(model, target, 2)) > 0  # the default's do move
    assert greedy(model, [target], 2)[0].tokens == list(np.argmax(base, axis=-1))
