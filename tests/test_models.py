"""From config to the op's parameters: the presets' values, each config variant, each refusal."""

import json

import pytest

from ropepool import Shapes
from ropepool.models import (
    ConfigError,
    RopeParams,
    from_config,
    load_config,
    load_preset,
    preset,
    preset_names,
)

# name, Hugging Face repo, Hq, Hkv, D, rope_base: the numbers of each model's config.json.
PRESETS = [
    ("llama-3-8b", "meta-llama/Meta-Llama-3-8B", 32, 8, 128, 500000.0),  # GQA, G = 4
    ("llama-3-70b", "meta-llama/Meta-Llama-3-70B", 64, 8, 128, 500000.0),  # GQA, G = 8
    ("mistral-7b", "mistralai/Mistral-7B-v0.1", 32, 8, 128, 10000.0),  # v0.1: rope_theta 1e4
    ("qwen2.5-7b", "Qwen/Qwen2.5-7B", 28, 4, 128, 1000000.0),  # G = 7; 3584 / 28 = 128
    ("gemma-2-9b", "google/gemma-2-9b", 16, 8, 256, 10000.0),  # head_dim 256 != 3584 / 16
    ("phi-3-mini", "microsoft/Phi-3-mini-4k-instruct", 32, 32, 96, 10000.0),  # MHA, D = 96
    ("falcon-7b", "tiiuae/falcon-7b", 71, 1, 64, 10000.0),  # MQA by multi_query; no rope_theta
    ("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 32, 8, 128, 500000.0),  # llama3 scaling, factor 8
    ("qwen2.5-7b-yarn", "Qwen/Qwen2.5-7B-Instruct", 28, 4, 128, 1000000.0),  # YaRN, factor 4
    ("phi-3.5-mini", "microsoft/Phi-3.5-mini-instruct", 32, 32, 96, 10000.0),  # longrope, 128k
    ("phi-2", "microsoft/phi-2", 32, 32, 80, 10000.0),  # partial rotary: 32 of 80
]

LLAMA = {"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "rope_theta": 500000.0}


def test_preset_names_in_order():
    assert preset_names() == [row[0] for row in PRESETS]


@pytest.mark.parametrize("name, repo, Hq, Hkv, D, base", PRESETS, ids=[r[0] for r in PRESETS])
def test_preset_values(name, repo, Hq, Hkv, D, base):
    p = preset(name)
    assert isinstance(p, RopeParams)
    assert (p.name, p.num_qo_heads, p.num_kv_heads, p.head_dim, p.rope_base) == (repo, Hq, Hkv, D, base)
    assert p.group_size == Hq // Hkv
    assert p.warnings == ()
    config = load_preset(name)
    assert config["_name_or_path"] == repo
    assert config["_source"] == f"https://huggingface.co/{repo}/blob/main/config.json"
    assert p == from_config(config) == from_config(load_config(name))


def test_preset_shapes():
    s = preset("qwen2.5-7b").shapes(tokens=5, pool_rows=40)
    assert s == Shapes(5, 28, 4, 128, 40)
    assert (s.q, s.kv, s.pool) == ((5, 28, 128), (5, 4, 128), (40, 4, 128))


def test_load_preset_returns_a_fresh_dict():
    load_preset("llama-3-8b")["num_key_value_heads"] = 32
    assert preset("llama-3-8b").num_kv_heads == 8


def test_unknown_preset_lists_the_names():
    with pytest.raises(ConfigError, match=r"unknown preset 'llama3-8b' \(did you mean 'llama-3-8b'\?\)") as e:
        load_preset("llama3-8b")
    for name in preset_names():
        assert name in str(e.value)


# name, config, (Hq, Hkv, D, rope_base), a phrase the notes must hold (None: no notes)
VARIANTS = [
    ("gqa-plain", LLAMA, (32, 8, 128, 500000.0), None),
    ("mha-kv-absent", {"num_attention_heads": 12, "hidden_size": 768, "rope_theta": 1e4},
     (12, 12, 64, 1e4), "num_key_value_heads absent: MHA"),
    ("explicit-head-dim", {"num_attention_heads": 16, "num_key_value_heads": 8, "hidden_size": 3584,
                           "head_dim": 256}, (16, 8, 256, 1e4), "3584 / 16 = 224 would be wrong"),
    ("explicit-head-dim-agrees", dict(LLAMA, head_dim=128), (32, 8, 128, 500000.0), None),
    ("head-dim-null", dict(LLAMA, head_dim=None), (32, 8, 128, 500000.0), None),
    ("falcon-multi-query", {"num_attention_heads": 71, "hidden_size": 4544, "multi_query": True},
     (71, 1, 64, 1e4), "multi_query: true"),
    ("falcon-multi-query-saved-default", {"num_attention_heads": 71, "num_kv_heads": 71, "hidden_size": 4544,
                                          "multi_query": True}, (71, 1, 64, 1e4), "num_kv_heads = 71 is ignored"),
    ("falcon-40b-new-decoder", {"num_attention_heads": 128, "num_kv_heads": 8, "hidden_size": 8192,
                                "multi_query": True, "new_decoder_architecture": True},
     (128, 8, 64, 1e4), "new_decoder_architecture"),
    ("falcon-num-kv-heads", {"num_attention_heads": 32, "num_kv_heads": 4, "hidden_size": 4096},
     (32, 4, 128, 1e4), "rope_theta absent"),
    ("rope-theta-absent", {"num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512},
     (8, 2, 64, 10000.0), "rope_theta absent: 10000.0"),
    ("rope-parameters-v5", {"num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512,
                            "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
     (8, 2, 64, 1e6), None),
    ("multimodal-text-config", {"model_type": "llava", "text_config": LLAMA}, (32, 8, 128, 500000.0),
     "text_config"),
    ("partial-rotary-one", dict(LLAMA, partial_rotary_factor=1.0), (32, 8, 128, 500000.0), None),
]


@pytest.mark.parametrize("name, config, expected, note", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_variant(name, config, expected, note):
    p = from_config(config)
    assert (p.num_qo_heads, p.num_kv_heads, p.head_dim, p.rope_base) == expected
    assert isinstance(p.rope_base, float)
    if note is None:
        assert p.notes == ()
    else:
        assert any(note in n for n in p.notes), p.notes


# name, rope_scaling, what the op is then told (beyond head counts and base)
SCALINGS = [
    ("llama-3.1", {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "llama3"),
    ("linear-old-key", {"type": "linear", "factor": 2.0}, "linear"),
    ("yarn", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, "yarn"),
    ("su-is-longrope", {"type": "su", "original_max_position_embeddings": 4096, "short_factor": [1.0] * 64,
                        "long_factor": [2.0] * 64}, "longrope"),
]


@pytest.mark.parametrize("name,scaling,rope_type", SCALINGS, ids=[s[0] for s in SCALINGS])
def test_rope_scaling_goes_to_the_op(name, scaling, rope_type):
    p = from_config(dict(LLAMA, rope_scaling=scaling, max_position_embeddings=131072))
    assert (p.num_kv_heads, p.head_dim, p.rope_base) == (8, 128, 500000.0)
    assert p.warnings == ()
    kw = p.op_kwargs()
    assert kw["rope_scaling"] == scaling and kw["max_position_embeddings"] == 131072
    assert "rotary_dim" not in kw and "is_neox" not in kw  # only what differs from the defaults
    assert p.rope().rope_type == rope_type


# name, config, rotary_dim, is_neox
VARIANTS = [
    ("phi-2-partial", {"model_type": "phi", "num_attention_heads": 32, "hidden_size": 2560,
                       "partial_rotary_factor": 0.4}, 32, True),
    ("gpt-neox-rotary-pct", {"model_type": "gpt_neox", "num_attention_heads": 64, "hidden_size": 6144,
                             "rotary_pct": 0.25, "rotary_emb_base": 10000}, 24, True),
    ("gpt-j-6b", {"model_type": "gptj", "n_head": 16, "n_embd": 4096, "rotary_dim": 64}, 64, False),
    ("codegen", {"model_type": "codegen", "n_head": 16, "n_embd": 1024, "rotary_dim": 32}, 32, False),
]


@pytest.mark.parametrize("name,config,rotary_dim,is_neox", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_partial_rotary_and_gptj_pairs_go_to_the_op(name, config, rotary_dim, is_neox):
    p = from_config(config)
    kw = p.op_kwargs()
    assert kw["rotary_dim"] == rotary_dim and p.rope().rotary_dim == rotary_dim
    assert kw.get("is_neox", True) is is_neox and p.rope().is_neox is is_neox


@pytest.mark.parametrize("scaling,phrase", [
    ({"rope_type": "dynamic", "factor": 2.0}, "cannot be computed by this op"),
    ({"rope_type": "mrope", "mrope_section": [16, 24, 24]}, "cannot be computed by this op"),
    ({"rope_type": "brand-new"}, "unknown rope_scaling type"),
    ({"rope_type": "linear"}, "needs a factor > 0"),
], ids=["dynamic", "mrope", "unknown", "no-factor"])
def test_scaling_the_op_cannot_compute_is_refused(scaling, phrase):
    with pytest.raises(ConfigError) as e:
        from_config(dict(LLAMA, rope_scaling=scaling))
    assert phrase in str(e.value) and e.value.fields == ("rope_scaling",)


def test_phi3_top_level_original_max_position_embeddings_moves_into_rope_scaling():
    p = preset("phi-3.5-mini")
    assert p.rope_scaling["original_max_position_embeddings"] == 4096
    assert p.max_position_embeddings == 131072 and p.rope().rope_type == "longrope"


@pytest.mark.parametrize("scaling", [None, {}, {"rope_type": "default"}], ids=["null", "empty", "default"])
def test_plain_rope_scaling_gives_no_warning(scaling):
    assert from_config(dict(LLAMA, rope_scaling=scaling)).warnings == ()


# name, config, fields the error names, phrase of the message
REFUSED = [
    ("deepseek-v2-lite-mla", {"_name_or_path": "deepseek-ai/DeepSeek-V2-Lite", "num_attention_heads": 16,
                              "num_key_value_heads": 16, "hidden_size": 2048, "kv_lora_rank": 512,
                              "q_lora_rank": None, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128},
     ("kv_lora_rank", "qk_rope_head_dim"), "deepseek-ai/DeepSeek-V2-Lite uses multi-head latent attention"),
    ("alibi", {"num_attention_heads": 71, "hidden_size": 4544, "alibi": True}, ("alibi",), "ALiBi"),
    ("hidden-not-divisible", {"num_attention_heads": 30, "hidden_size": 4096}, ("hidden_size",
     "num_attention_heads", "head_dim"), "hidden_size = 4096 is not a multiple of num_attention_heads = 30"),
    ("kv-not-dividing", dict(LLAMA, num_key_value_heads=6), ("num_attention_heads", "num_key_value_heads"),
     "num_key_value_heads = 6 does not divide num_attention_heads = 32"),
    ("kv-above-q", dict(LLAMA, num_key_value_heads=64), ("num_attention_heads", "num_key_value_heads"),
     "does not divide"),
    ("head-dim-odd", dict(LLAMA, head_dim=65), ("head_dim",), "head_dim = 65 is odd"),
    ("head-dim-odd-computed", {"num_attention_heads": 4, "hidden_size": 36}, ("hidden_size",
     "num_attention_heads"), "head_dim = 9 is odd"),
    ("multi-query-disagrees", {"num_attention_heads": 71, "hidden_size": 4544, "multi_query": True,
                               "num_kv_heads": 8}, ("multi_query", "num_kv_heads"),
     "multi_query is true (one KV head) but num_kv_heads = 8"),
    ("heads-missing", {"hidden_size": 4096}, ("num_attention_heads",), "num_attention_heads is missing"),
    ("no-head-dim-source", {"num_attention_heads": 8}, ("head_dim", "hidden_size"), "head_dim is unknown"),
    ("heads-zero", dict(LLAMA, num_attention_heads=0), ("num_attention_heads",),
     "num_attention_heads must be a positive integer, got 0"),
    ("kv-heads-string", dict(LLAMA, num_key_value_heads="8"), ("num_key_value_heads",), "got '8'"),
    ("kv-heads-bool", dict(LLAMA, num_key_value_heads=True), ("num_key_value_heads",), "got True"),
    ("rope-theta-negative", dict(LLAMA, rope_theta=-1.0), ("rope_theta",), "finite number > 0, got -1.0"),
    ("rope-theta-string", dict(LLAMA, rope_theta="5e5"), ("rope_theta",), "got '5e5'"),
    ("partial-rotary-bad", dict(LLAMA, partial_rotary_factor=1.5), ("partial_rotary_factor",),
     "must be a number in (0, 1]"),
]


@pytest.mark.parametrize("name, config, fields, phrase", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused(name, config, fields, phrase):
    with pytest.raises(ConfigError) as e:
        from_config(config)
    assert isinstance(e.value, ValueError)
    assert e.value.fields == fields
    assert phrase in str(e.value)
    assert "\n" not in str(e.value)


def test_not_a_dict():
    with pytest.raises(ConfigError, match="a config must be a dict, got list"):
        from_config([])


def test_params_are_frozen():
    p = preset("llama-3-8b")
    with pytest.raises(AttributeError):
        p.num_kv_heads = 32


def test_op_kwargs_feed_the_op():
    from ropepool import make_inputs, rope_pool_fused

    p = preset("falcon-7b")
    kw = make_inputs(p.shapes(tokens=3, pool_rows=5), rope_base=p.rope_base)
    assert {k: kw[k] for k in p.op_kwargs()} == p.op_kwargs()
    q_rot, k_rot, k_pool, _ = rope_pool_fused(**kw)
    assert (q_rot.shape, k_rot.shape, k_pool.shape) == ((3, 71, 64), (3, 1, 64), (5, 1, 64))


# name, file content, phrase of the one-line error
BAD_FILES = [
    ("malformed", '{"num_attention_heads": 32,,}', "malformed JSON at line 1 column 28"),
    ("truncated", '{"num_attention_heads": 32', "malformed JSON"),
    ("not-an-object", "[1, 2]", "expected a JSON object (a model config), got a JSON list"),
    ("not-utf8", b"\xff\xfe\x00{", "cannot read it"),
]


@pytest.mark.parametrize("name, content, phrase", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_load_config_bad_file(tmp_path, name, content, phrase):
    path = tmp_path / "config.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert phrase in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)


def test_load_config_missing_path(tmp_path):
    with pytest.raises(ConfigError, match="no such file, and not a preset"):
        load_config(tmp_path / "nope.json")


def test_load_config_file_and_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    assert load_config(tmp_path / "config.json") == load_config(tmp_path) == LLAMA
