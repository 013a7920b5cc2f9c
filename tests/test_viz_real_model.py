"""ropepool.teaching.viz.real_model: the data behind notebook 08's plots, read back from the figures."""

import numpy as np
import pytest

from ropepool.loaders.gguf import head_row_order
from ropepool.teaching.viz import real_model as V


def test_row_permutation_joins_gguf_row_to_hf_row():
    fig = V.row_permutation(head_dim=8)
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.lines}
    assert len(lines) == 8
    for r, g in enumerate([0, 2, 4, 6, 1, 3, 5, 7]):
        assert list(lines[f"row {r}"].get_ydata()) == [g, r]
    # GGUF rows 2i and 2i+1 (a GPT-J pair) land on rows i and i + D/2 (a NeoX pair), same colour
    assert lines["row 1"].get_color() == lines["row 5"].get_color()


@pytest.mark.parametrize("heads, head_dim", [(1, 2), (3, 64), (9, 64)])  # D = 2; SmolLM2's K and Q
def test_head_row_order_is_a_permutation_within_each_head(heads, head_dim):
    order = head_row_order(heads, head_dim)
    assert sorted(order.tolist()) == list(range(heads * head_dim))
    assert np.array_equal(order.reshape(heads, head_dim) // head_dim, np.arange(heads)[:, None].repeat(head_dim, 1))


def test_logit_agreement_plots_the_three_runs():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal(50)
    fig = V.logit_agreement(ref, ref + 1e-6, ref[::-1])
    scat = {c.get_gid(): c for ax in fig.axes for c in ax.collections}
    np.testing.assert_allclose(scat["same"].get_offsets(), np.stack([ref, ref + 1e-6], axis=1))
    np.testing.assert_allclose(scat["mismatched"].get_offsets(), np.stack([ref, ref[::-1]], axis=1))
    assert "largest |difference| 1e-06" in fig.axes[0].get_title()
    assert f"{np.abs(ref[::-1] - ref).max():.2g}" in fig.axes[1].get_title()


def test_kv_bytes_per_token_smollm2_and_llama3_8b():
    assert V.kv_bytes_per_token(30, 3, 64, 2) == 23_040  # SmolLM2-135M, float16
    assert V.kv_bytes_per_token(32, 8, 128, 2) == 131_072  # Llama-3-8B, float16: 128 KiB


def test_kv_memory_lines_grow_with_context():
    fig = V.kv_memory({"float16": 23_040, "float32": 46_080}, contexts=(1024, 4096), weights_bytes=98_362_432)
    lines = {ln.get_gid(): ln for ax in fig.axes for ln in ax.lines}
    np.testing.assert_allclose(lines["float16"].get_ydata(), [1024 * 23_040 / 1e6, 4096 * 23_040 / 1e6])
    np.testing.assert_allclose(lines["weights"].get_ydata(), [98.362432, 98.362432])
