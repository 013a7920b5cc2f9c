"""From config to the op's parameters: the presets' values, each config variant, each refusal."""

import os
import math
import json

import numpy as np
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
    (
        "mha-kv-absent",
        {"num_attention_heads": 12, "hidden_size": 768, "rope_theta": 1e4},
        (12, 12, 64, 1e4),
        "num_key_value_heads absent: MHA",
    ),
    (
        "explicit-head-dim",
        {"num_attention_heads": 16, "num_key_value_heads": 8, "hidden_size": 3584, "head_dim": 256},
        (16, 8, 256, 1e4),
        "3584 / 16 = 224 would be wrong",
    ),
    ("explicit-head-dim-agrees", dict(LLAMA, head_dim=128), (32, 8, 128, 500000.0), None),
    ("head-dim-null", dict(LLAMA, head_dim=None), (32, 8, 128, 500000.0), None),
    (
        "falcon-multi-query",
        {"num_attention_heads": 71, "hidden_size": 4544, "multi_query": True},
        (71, 1, 64, 1e4),
        "multi_query: true",
    ),
    (
        "falcon-multi-query-saved-default",
        {"num_attention_heads": 71, "num_kv_heads": 71, "hidden_size": 4544, "multi_query": True},
        (71, 1, 64, 1e4),
        "num_kv_heads = 71 is ignored",
    ),
    (
        "falcon-40b-new-decoder",
        {
            "num_attention_heads": 128,
            "num_kv_heads": 8,
            "hidden_size": 8192,
            "multi_query": True,
            "new_decoder_architecture": True,
        },
        (128, 8, 64, 1e4),
        "new_decoder_architecture",
    ),
    (
        "falcon-num-kv-heads",
        {"num_attention_heads": 32, "num_kv_heads": 4, "hidden_size": 4096},
        (32, 4, 128, 1e4),
        "rope_theta absent",
    ),
    (
        "rope-theta-absent",
        {"num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512},
        (8, 2, 64, 10000.0),
        "rope_theta absent: 10000.0",
    ),
    (
        "rope-parameters-v5",
        {
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "hidden_size": 512,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
        },
        (8, 2, 64, 1e6),
        None,
    ),
    ("multimodal-text-config", {"model_type": "llava", "text_config": LLAMA}, (32, 8, 128, 500000.0), "text_config"),
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
    (
        "llama-3.1",
        {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
        "llama3",
    ),
    ("linear-old-key", {"type": "linear", "factor": 2.0}, "linear"),
    ("yarn", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, "yarn"),
    (
        "su-is-longrope",
        {"type": "su", "original_max_position_embeddings": 4096, "short_factor": [1.0] * 64, "long_factor": [2.0] * 64},
        "longrope",
    ),
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
    (
        "phi-2-partial",
        {"model_type": "phi", "num_attention_heads": 32, "hidden_size": 2560, "partial_rotary_factor": 0.4},
        32,
        True,
    ),
    (
        "gpt-neox-rotary-pct",
        {
            "model_type": "gpt_neox",
            "num_attention_heads": 64,
            "hidden_size": 6144,
            "rotary_pct": 0.25,
            "rotary_emb_base": 10000,
        },
        24,
        True,
    ),
    ("gpt-j-6b", {"model_type": "gptj", "n_head": 16, "n_embd": 4096, "rotary_dim": 64}, 64, False),
    ("codegen", {"model_type": "codegen", "n_head": 16, "n_embd": 1024, "rotary_dim": 32}, 32, False),
]


@pytest.mark.parametrize("name,config,rotary_dim,is_neox", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_partial_rotary_and_gptj_pairs_go_to_the_op(name, config, rotary_dim, is_neox):
    p = from_config(config)
    kw = p.op_kwargs()
    assert kw["rotary_dim"] == rotary_dim and p.rope().rotary_dim == rotary_dim
    assert kw.get("is_neox", True) is is_neox and p.rope().is_neox is is_neox


@pytest.mark.parametrize(
    "scaling,phrase",
    [
        ({"rope_type": "dynamic", "factor": 2.0}, "cannot be computed by this op"),
        ({"rope_type": "mrope", "mrope_section": [16, 24]}, "needs mrope_section three ints"),
        ({"rope_type": "brand-new"}, "unknown rope_scaling type"),
        ({"rope_type": "linear"}, "needs a factor > 0"),
    ],
    ids=["dynamic", "mrope-bad-section", "unknown", "no-factor"],
)
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
    (
        "deepseek-v2-lite-mla",
        {
            "_name_or_path": "deepseek-ai/DeepSeek-V2-Lite",
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "hidden_size": 2048,
            "kv_lora_rank": 512,
            "q_lora_rank": None,
            "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128,
        },
        ("kv_lora_rank", "qk_rope_head_dim"),
        "deepseek-ai/DeepSeek-V2-Lite uses multi-head latent attention",
    ),
    ("alibi", {"num_attention_heads": 71, "hidden_size": 4544, "alibi": True}, ("alibi",), "ALiBi"),
    (
        "hidden-not-divisible",
        {"num_attention_heads": 30, "hidden_size": 4096},
        ("hidden_size", "num_attention_heads", "head_dim"),
        "hidden_size = 4096 is not a multiple of num_attention_heads = 30",
    ),
    (
        "kv-not-dividing",
        dict(LLAMA, num_key_value_heads=6),
        ("num_attention_heads", "num_key_value_heads"),
        "num_key_value_heads = 6 does not divide num_attention_heads = 32",
    ),
    (
        "kv-above-q",
        dict(LLAMA, num_key_value_heads=64),
        ("num_attention_heads", "num_key_value_heads"),
        "does not divide",
    ),
    ("head-dim-odd", dict(LLAMA, head_dim=65), ("head_dim",), "head_dim = 65 is odd"),
    (
        "head-dim-odd-computed",
        {"num_attention_heads": 4, "hidden_size": 36},
        ("hidden_size", "num_attention_heads"),
        "head_dim = 9 is odd",
    ),
    (
        "multi-query-disagrees",
        {"num_attention_heads": 71, "hidden_size": 4544, "multi_query": True, "num_kv_heads": 8},
        ("multi_query", "num_kv_heads"),
        "multi_query is true (one KV head) but num_kv_heads = 8",
    ),
    ("heads-missing", {"hidden_size": 4096}, ("num_attention_heads",), "num_attention_heads is missing"),
    ("no-head-dim-source", {"num_attention_heads": 8}, ("head_dim", "hidden_size"), "head_dim is unknown"),
    (
        "heads-zero",
        dict(LLAMA, num_attention_heads=0),
        ("num_attention_heads",),
        "num_attention_heads must be a positive integer, got 0",
    ),
    ("kv-heads-string", dict(LLAMA, num_key_value_heads="8"), ("num_key_value_heads",), "got '8'"),
    ("kv-heads-bool", dict(LLAMA, num_key_value_heads=True), ("num_key_value_heads",), "got True"),
    ("rope-theta-negative", dict(LLAMA, rope_theta=-1.0), ("rope_theta",), "finite number > 0, got -1.0"),
    ("rope-theta-string", dict(LLAMA, rope_theta="5e5"), ("rope_theta",), "got '5e5'"),
    (
        "partial-rotary-bad",
        dict(LLAMA, partial_rotary_factor=1.5),
        ("partial_rotary_factor",),
        "must be a number in (0, 1]",
    ),
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


# --- transformers 5's rope_parameters --------------------------------------------------------------
# Each config is the model's config.json fields as transformers 5.24's config class saves them
# (``<Class>(**fields).to_dict()``): rope_theta and the rotated fraction move into rope_parameters.
PYTHIA_160M_V5 = {  # EleutherAI/pythia-160m (GPTNeoXConfig: rotary_pct 0.25, rotary_emb_base 10000)
    "_name_or_path": "EleutherAI/pythia-160m",
    "model_type": "gpt_neox",
    "hidden_size": 768,
    "num_attention_heads": 12,
    "max_position_embeddings": 2048,
    "rope_parameters": {"rope_theta": 10000, "partial_rotary_factor": 0.25, "rope_type": "default"},
}
PHI2_V5 = {  # microsoft/phi-2 (PhiConfig), the phi-2 preset's fields
    "_name_or_path": "microsoft/phi-2",
    "model_type": "phi",
    "hidden_size": 2560,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 2048,
    "rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": 0.4, "rope_type": "default"},
}
STABLELM_3B_V5 = {  # stabilityai/stablelm-3b-4e1t (StableLmConfig: partial_rotary_factor 0.25)
    "_name_or_path": "stabilityai/stablelm-3b-4e1t",
    "model_type": "stablelm",
    "hidden_size": 2560,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 4096,
    "rope_parameters": {"rope_theta": 10000, "partial_rotary_factor": 0.25, "rope_type": "default"},
}


def _older_layout(config: dict) -> dict:
    """The same config as transformers 4 saved it: the fields at the top level (GPT-NeoX: rotary_pct)."""
    old = {k: v for k, v in config.items() if k != "rope_parameters"}
    rope = config["rope_parameters"]
    old["rope_theta"] = rope["rope_theta"]
    old["rotary_pct" if config["model_type"] == "gpt_neox" else "partial_rotary_factor"] = rope["partial_rotary_factor"]
    return old


# name, config, D, rotary_dim
PARTIAL_ROTARY_V5 = [
    ("pythia-160m", PYTHIA_160M_V5, 64, 16),
    ("phi-2", PHI2_V5, 80, 32),
    ("stablelm-3b-4e1t", STABLELM_3B_V5, 80, 20),
]


@pytest.mark.parametrize("name, config, D, rotary_dim", PARTIAL_ROTARY_V5, ids=[r[0] for r in PARTIAL_ROTARY_V5])
def test_transformers_5_partial_rotary_is_read_from_rope_parameters(name, config, D, rotary_dim):
    p = from_config(config)
    assert (p.head_dim, p.rotary_dim, p.rope_base) == (D, rotary_dim, 10000.0)
    assert p.rope() == from_config(_older_layout(config)).rope()
    assert any("rope_parameters.partial_rotary_factor" in n for n in p.notes), p.notes
    assert p.warnings == ()


# google/gemma-3-4b-it's text_config (head_dim 256, rope_theta 1e6 with linear x8 on the full-attention
# layers, rope_local_base_freq 1e4 on the sliding ones), as transformers 5.24's Gemma3TextConfig saves it.
GEMMA3_4B_V5 = {
    "_name_or_path": "google/gemma-3-4b-it",
    "model_type": "gemma3_text",
    "hidden_size": 2560,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131072,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5 + ["sliding_attention"] * 4,
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    },
}
# The same model as transformers 4 saved it.
GEMMA3_4B_V4 = {
    **{k: v for k, v in GEMMA3_4B_V5.items() if k != "rope_parameters"},
    "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
}


@pytest.mark.parametrize("config", [GEMMA3_4B_V5, GEMMA3_4B_V4], ids=["transformers 5", "transformers 4"])
def test_gemma3_per_layer_type_rope_is_served_per_type_not_collapsed(config):
    full = from_config(config)
    assert (full.rope_base, full.rope_scaling) == (1000000.0, {"rope_type": "linear", "factor": 8.0})
    (warning,) = full.warnings
    assert "'sliding_attention' layers rotate differently (rope_theta 10000.0, 'default')" in warning
    assert "layer_type='sliding_attention'" in warning
    sliding = from_config(config, layer_type="sliding_attention")
    assert (sliding.rope_base, sliding.rope_scaling, sliding.warnings) == (10000.0, None, ())
    assert from_config(config, layer_type="full_attention").rope() == full.rope()
    with pytest.raises(ConfigError, match="layer_type 'local' is not one of rope_parameters' layer types"):
        from_config(config, layer_type="local")


def test_check_prints_the_per_layer_type_warning(tmp_path, capsys):
    from ropepool.cli import main

    (tmp_path / "config.json").write_text(json.dumps(GEMMA3_4B_V5))
    assert main(["check", str(tmp_path), "--tokens", "1", "--pool", "2"]) == 0
    assert "WARNING: 'sliding_attention' layers rotate differently" in capsys.readouterr().out


# --- YaRN as transformers computes it --------------------------------------------------------------


def transformers_yarn(rope: dict, head_dim: int, max_position_embeddings: int) -> tuple[np.ndarray, float]:
    """transformers 5.24's ``_compute_yarn_parameters`` (``modeling_rope_utils.py``), transcribed line
    for line into float64 NumPy (it runs on torch, which the tests do not install): inv_freq
    ``[D/2]`` and the cos/sin scale."""
    base, factor = rope["rope_theta"], rope["factor"]
    dim = int(head_dim * rope.get("partial_rotary_factor", 1.0))
    original = rope.get("original_max_position_embeddings", max_position_embeddings)
    attention_factor, mscale, mscale_all_dim = (rope.get(k) for k in ("attention_factor", "mscale", "mscale_all_dim"))

    def get_mscale(scale, mscale=1):
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
        else:
            attention_factor = get_mscale(factor)
    beta_fast, beta_slow = rope.get("beta_fast") or 32, rope.get("beta_slow") or 1

    def find_correction_dim(num_rotations):
        return (dim * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = find_correction_dim(beta_fast), find_correction_dim(beta_slow)
    if rope.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    pos_freqs = base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    extrapolation = 1 - ramp
    inv_freq = 1.0 / (factor * pos_freqs) * (1 - extrapolation) + 1.0 / pos_freqs * extrapolation
    return inv_freq, attention_factor


# openai/gpt-oss-20b's RoPE as transformers 5.24's GptOssConfig saves it (its defaults are that model's).
GPT_OSS_20B = {
    "_name_or_path": "openai/gpt-oss-20b",
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "head_dim": 64,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rope_parameters": {
        "rope_type": "yarn",
        "factor": 32.0,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "truncate": False,
        "original_max_position_embeddings": 4096,
        "rope_theta": 150000.0,
    },
}


def _with_rope(config: dict, **changes) -> dict:
    return {**config, "rope_parameters": {**config["rope_parameters"], **changes}}


YARN_CONFIGS = [
    ("gpt-oss-20b, truncate false", GPT_OSS_20B),
    ("gpt-oss-20b's numbers, truncate true", _with_rope(GPT_OSS_20B, truncate=True)),
    ("Qwen2.5-7B-Instruct's yarn (preset)", load_preset("qwen2.5-7b-yarn")),
    # hand-written: no shipped config found with mscale alone; transformers then ignores mscale
    ("mscale without mscale_all_dim", _with_rope(GPT_OSS_20B, mscale=0.707)),
    ("mscale and mscale_all_dim (DeepSeek-V3's 1.0 and 1.0)", _with_rope(GPT_OSS_20B, mscale=1.0, mscale_all_dim=1.0)),
    ("mscale 1.0 and mscale_all_dim 0.5", _with_rope(GPT_OSS_20B, mscale=1.0, mscale_all_dim=0.5)),
]


@pytest.mark.parametrize("name, config", YARN_CONFIGS, ids=[r[0] for r in YARN_CONFIGS])
def test_yarn_matches_transformers(name, config):
    p = from_config(config)
    rope = dict(config.get("rope_parameters") or config["rope_scaling"])
    rope.setdefault("rope_theta", config.get("rope_theta"))
    inv_freq, scale = transformers_yarn(rope, p.head_dim, config["max_position_embeddings"])
    np.testing.assert_allclose(p.rope().inv_freq, inv_freq, rtol=1e-13, atol=0)
    assert p.rope().scale == pytest.approx(scale, rel=1e-15)


def test_yarn_truncate_false_changes_the_table():
    """GPT-OSS's ramp ends between pairs: rounding them out moves some frequencies by over 70%."""
    exact, rounded = (
        np.array(from_config(c).rope().inv_freq) for c in (GPT_OSS_20B, _with_rope(GPT_OSS_20B, truncate=True))
    )
    assert np.abs(rounded / exact - 1).max() > 0.7


@pytest.mark.parametrize("truncate", ["false", 0, [False]])
def test_yarn_truncate_not_a_bool_is_refused(truncate):
    with pytest.raises(ConfigError, match="needs truncate true or false"):
        from_config(_with_rope(GPT_OSS_20B, truncate=truncate))


# --- scaling that would turn a pair faster than one radian per position -------------------------------
# name, config changes, fields, phrase
TOO_FAST = [
    ("rope_theta 0.5", dict(rope_theta=0.5), ("rope_theta",), "rope_base=0.5: from 1 to 1.9"),
    (
        "linear factor 0.5",
        dict(rope_scaling={"rope_type": "linear", "factor": 0.5}),
        ("rope_scaling",),
        "needs factor giving inverse frequencies float32 holds and at most 1 radian per position, got 0.5",
    ),
    (
        "linear factor 1e-40: the factor is at fault, not rope_theta",
        dict(rope_scaling={"rope_type": "linear", "factor": 1e-40}),
        ("rope_scaling",),
        "needs factor giving",
    ),
    (
        "linear factor 1e300: the factor is at fault, not rope_theta",
        dict(rope_scaling={"rope_type": "linear", "factor": 1e300}),
        ("rope_scaling",),
        "needs factor giving",
    ),
    (
        "longrope long factors 0.5",
        dict(
            max_position_embeddings=131072,
            original_max_position_embeddings=4096,
            rope_scaling={"rope_type": "longrope", "short_factor": [1.0] * 64, "long_factor": [0.5] * 64},
        ),
        ("rope_scaling",),
        "'longrope' needs long_factor giving",
    ),
    (
        "rope_parameters rope_theta 0.5",
        dict(rope_theta=None, rope_parameters={"rope_theta": 0.5}),
        ("rope_parameters.rope_theta",),
        "rope_base=0.5",
    ),
]


@pytest.mark.parametrize("name, change, fields, phrase", TOO_FAST, ids=[r[0] for r in TOO_FAST])
def test_inverse_frequencies_above_one_are_refused_naming_the_field(name, change, fields, phrase):
    with pytest.raises(ConfigError) as e:
        from_config({**LLAMA, **change})
    assert e.value.fields == fields and phrase in str(e.value), str(e.value)


@pytest.mark.parametrize("rope_type", [0, False, ""], ids=repr)
@pytest.mark.parametrize("key", ["rope_type", "type"])
def test_a_falsy_rope_type_is_not_the_default(key, rope_type):
    with pytest.raises(ConfigError, match=f"unknown rope_scaling type {rope_type!r}"):
        from_config({**LLAMA, "rope_scaling": {key: rope_type, "factor": 8.0}})


def _deep(depth: int) -> dict:
    top = inner = {}
    for _ in range(depth):
        inner["a"] = inner = {}
    return top


@pytest.mark.parametrize("key", ["rope_scaling", "rope_parameters"])
def test_a_deeply_nested_rope_dict_is_one_config_error(key):
    with pytest.raises(ConfigError, match=f"{key} is nested too deeply"):
        from_config({**LLAMA, key: {"rope_type": "linear", "factor": 2.0, "extra": _deep(100_000)}})


def test_a_dict_valued_field_of_a_flat_rope_parameters_is_not_a_layer_type():
    """Only keys the config lists in layer_types (or a rope_parameters of nothing but dicts) are layer types."""
    p = from_config(
        {**LLAMA, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6, "meta": {"note": "x"}}}
    )
    assert (p.rope_base, p.rope_scaling["factor"], p.warnings) == (1e6, 2.0, ())


@pytest.mark.parametrize("case", ["config.json a folder", "a symlink loop", "/proc/self/mem"])
def test_a_config_path_that_cannot_be_read_is_one_line(tmp_path, case):
    """Each gives a ConfigError naming the path (a traceback or "no such file" before)."""
    from ropepool.models import ConfigError, load_config

    if case == "config.json a folder":
        (tmp_path / "config.json").mkdir()
        source, want = tmp_path, "not a regular file"
    elif case == "a symlink loop":
        (tmp_path / "a").symlink_to(tmp_path / "b")
        (tmp_path / "b").symlink_to(tmp_path / "a")
        source, want = tmp_path / "a", "a symbolic link that leads nowhere"
    else:
        if not os.path.exists("/proc/self/mem"):
            pytest.skip("no /proc here")
        source, want = "/proc/self/mem", "cannot read it"
    with pytest.raises(ConfigError, match=want):
        load_config(source)
