"""The presets beyond GQA and their cache layouts: each preset names its source, each layout's numbers
follow from its config's fields (the arithmetic written out per row, not read back from the code)."""

import json

import pytest

from ropepool.kv_layout import CacheLayout, layout_from_config, mla_op_kwargs
from ropepool.models import ConfigError, beyond_preset_names, from_config, load_preset, preset_names

# preset, repo, kind, layers, pools, row shape, sliding layers, window, sinks
LAYOUTS = [
    ("llama-2-7b", "meta-llama/Llama-2-7b-hf", "MHA", 32, 2, (32, 128), 0, None, False),
    ("deepseek-v3", "deepseek-ai/DeepSeek-V3", "MLA", 61, 1, (1, 512 + 64), 0, None, False),
    ("gemma-3-27b", "google/gemma-3-27b-it", "GQA", 62, 2, (16, 128), 62 - 62 // 6, 1024, False),  # 5 of 6 slide
    ("gpt-oss-20b", "openai/gpt-oss-20b", "GQA", 24, 2, (8, 64), 12, 128, True),  # every other layer
    ("qwen2-vl-7b", "Qwen/Qwen2-VL-7B-Instruct", "GQA", 28, 2, (4, 128), 0, None, False),  # use_sliding_window off
]


@pytest.mark.parametrize(
    "name, repo, kind, layers, pools, row, sliding, window, sinks", LAYOUTS, ids=[r[0] for r in LAYOUTS]
)
def test_each_preset_names_its_source_and_gives_its_layout(
    name, repo, kind, layers, pools, row, sliding, window, sinks
):
    config = load_preset(name)
    assert config["_name_or_path"] == repo
    assert config["_source"] == f"https://huggingface.co/{repo}/blob/main/config.json"
    lay = layout_from_config(config)
    assert (lay.kind, lay.num_layers, len(lay.pools), lay.row_shape) == (kind, layers, pools, row)
    assert (lay.sliding_layers, lay.window, lay.sinks) == (sliding, window, sinks)
    elems = pools * row[0] * row[1]
    assert lay.bytes_per_token("bfloat16") == layers * elems * 2 and lay.bytes_per_token("fp8") == layers * elems
    rows_32k = (layers - sliding) * 32768 + sliding * min(32768, window or 32768)
    assert lay.cache_bytes(8, 32768, "bfloat16") == 8 * elems * 2 * rows_32k


def test_the_gqa_presets_and_mqa_read_too():
    """Llama-3-8B (GQA) and Falcon-7B (MQA) come from the GQA presets the lessons already use."""
    assert layout_from_config(load_preset("llama-3-8b")).row_shape == (8, 128)
    falcon = layout_from_config(load_preset("falcon-7b"))
    assert (falcon.kind, falcon.row_shape) == ("MQA", (1, 64))
    assert not set(beyond_preset_names()) & set(preset_names())


def test_mla_is_refused_by_from_config_and_read_for_its_own_op():
    config = load_preset("deepseek-v3")
    with pytest.raises(ConfigError, match="rope_pool_fused_mla does"):
        from_config(config)
    kw = mla_op_kwargs(config)
    assert (kw["num_qo_heads"], kw["kv_lora_rank"], kw["rope_dim"], kw["is_neox"]) == (128, 512, 64, False)
    assert kw["rope_scaling"]["type"] == "yarn" and kw["max_position_embeddings"] == 163840


def test_a_window_longer_than_the_context_keeps_every_token():
    lay = CacheLayout("t", "GQA", 4, ("k_pool", "v_pool"), (1, 2), sliding_layers=2, window=8)
    assert lay.rows_per_layer(5) == (5, 5) and lay.rows_per_layer(20) == (20, 8)
    assert lay.cache_bytes(1, 20, "float32") == 2 * 2 * 4 * (2 * 20 + 2 * 8)


def test_presets_are_valid_json_with_a_comment():
    for name in beyond_preset_names():
        config = load_preset(name)
        assert config["_comment"] and json.dumps(config)


@pytest.mark.parametrize("field,value", [("qk_rope_head_dim", 0), ("qk_rope_head_dim", None), ("kv_lora_rank", 0)])
def test_an_mla_size_that_is_no_positive_int_is_named(field, value):
    """DeepSeek-V3 with qk_rope_head_dim 0 had a latent row without its RoPE part (or said 'got None')."""
    from ropepool.models import ConfigError, load_preset

    config = {**load_preset("deepseek-v3"), field: value}
    with pytest.raises(ConfigError, match=rf"{field} must be a positive int, got {value!r}"):
        layout_from_config(config)
