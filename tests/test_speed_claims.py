"""Every speed ratio a notebook claims holds in five consecutive runs of its measuring function.

Minutes, and sensitive to the machine's load by nature, so outside the timed suite: these run only with
``python -m pytest -m claims tests/test_speed_claims.py``. Each test repeats the notebook's own call and
checks the same range the notebook's cell asserts.
"""

import mlx.core as mx
import pytest

import ropepool
from ropepool.teaching import fusion_cost as fc
from ropepool.teaching import throughput as tp

pytestmark = pytest.mark.claims
RUNS = 5


@pytest.mark.skipif(ropepool.best_backend() != "cpu", reason="the time ranges are claimed for the 'cpu' backend")
def test_why_fuse_notebooks_04_and_10():
    for run in range(RUNS):
        (plain_step, plain), (full_step, full) = fc.why_fuse().values()
        assert plain.evaluations == {fc.FUSED: 1, fc.UNFUSED: 4} and full.evaluations == {fc.FUSED: 1, fc.UNFUSED: 7}
        moved = {m: sum(fc.traffic(full_step)[m]) for m in (fc.FUSED, fc.UNFUSED)}
        assert moved[fc.UNFUSED] > 2 * moved[fc.FUSED]
        assert plain.ratio > 1, f"run {run}: RoPE + write, one token: {plain.ratio:.2f}x"
        assert full.ratio > 1, f"run {run}: QK-norm + RoPE + FP8, 8 tokens: {full.ratio:.2f}x"
        step = fc.decode_step(T=1, fused_extras=False)  # notebook 04's own race
        assert fc.measure(step, rounds=30, calls=10).ratio > 1, f"run {run}: notebook 04's race"


def test_throughput_notebook_07():
    from mlx_lm.models import llama

    config = dict(
        model_type="llama",
        hidden_size=64,
        num_hidden_layers=2,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        rms_norm_eps=1e-5,
        vocab_size=128,
        rope_theta=500000.0,
    )
    mx.random.seed(0)
    model = llama.Model(llama.ModelArgs(**config))
    many = [[(7 * i + 3 * j) % 128 for j in range(6)] for i in range(8)]
    for run in range(RUNS):
        speed = tp.measure(
            model, many, new=16, methods=(tp.ENGINE, tp.MLX_BATCH, tp.MLX_ALONE), repeats=5, progress=None
        )
        gain, lead = speed.ratio_range(tp.ENGINE, 8), speed.ratio_range(tp.ENGINE, 8, tp.MLX_ALONE, 8)
        vs_batch = speed.ratio_range(tp.ENGINE, 8, tp.MLX_BATCH, 8)
        assert gain[0] > 2 and lead[0] > 2, f"run {run}: {gain}, {lead}"
        assert 1 / 3 < vs_batch[0] < 3, f"run {run}: {vs_batch}"


def test_throughput_notebook_08():
    from ropepool.loaders.fetch import ModelUnavailable
    from ropepool.loaders.smollm2 import load_smollm2

    try:
        model, tokenizer, _ = load_smollm2(pairs="gptj")
    except ModelUnavailable as err:
        pytest.skip(str(err))
    plain = ["Paris is", "Two plus", "Romeo and", "Jupiter is", "Water boils", "The moon", "A week", "The sky"]
    for run in range(RUNS):
        speed = tp.measure(
            model, [tokenizer.encode(t) for t in plain], new=4, counts=(1, 2, 8), repeats=2, progress=None
        )
        vs = speed.ratio_range(tp.ENGINE, 8, tp.MLX_BATCH, 8)
        assert 1 / 3 < vs[0] < 3, f"run {run}: {vs}"
