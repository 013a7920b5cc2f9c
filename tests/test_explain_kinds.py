"""Eight kinds of message ``explain`` reads for real models' numbers: each answer checked against what
the numbers themselves say (the fix's shapes broadcast, the scaling reaches the length asked, the rows
add up), not against the code's own wording alone."""

import json
import re

import numpy as np
import pytest

from explain_corpus import PHI3_MEDIUM  # Phi-3-medium's config.json fields
from ropepool.cli.explain import diagnosis_of, explain, facts_of, log_report
from ropepool.models import preset


def said(d) -> str:
    return " ".join(f"{d.why} {d.fix}".split())


# --- (a) einsum without repeat_kv -------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["llama-3-8b", "qwen2.5-7b", "llama-3-70b", "gemma-2-9b"])
def test_an_einsum_of_q_heads_against_kv_heads_is_repeat_kv_missing(model):
    p = preset(model)
    text = (
        f"RuntimeError: einsum(): subscript h has size {p.num_kv_heads} for operand 1 which does not broadcast "
        f"with previously seen size {p.num_qo_heads}"
    )
    d = diagnosis_of(text, model)
    G = p.num_qo_heads // p.num_kv_heads
    assert d.case == "missing_repeat_kv" and f"repeat_kv(k, {G})" in d.fix
    # the fix's grouped einsum contracts: q viewed as [B, Hkv, G, T, D] against k [B, Hkv, T, D]
    q = np.zeros((1, p.num_kv_heads, G, 3, 4))
    k = np.zeros((1, p.num_kv_heads, 3, 4))
    assert np.einsum("bhgqd,bhkd->bhgqk", q, k).shape == (1, p.num_kv_heads, G, 3, 3)
    assert "bhgqd,bhkd->bhgqk" in d.fix


def test_the_older_einsum_message_is_read_from_its_remapped_shapes():
    text = (
        "RuntimeError: einsum(): operands do not broadcast with remapped shapes [original->remapped]: "
        "[1, 32, 7, 128]->[1, 32, 7, 1, 128] [1, 8, 7, 128]->[1, 8, 1, 7, 128]"
    )
    assert diagnosis_of(text, "mistral-7b").case == "missing_repeat_kv"


# --- (b) vLLM's max_model_len above the config's positions --------------------------------------------------------


def _vllm(asked, derived):
    return (
        f"ValueError: User-specified max_model_len ({asked}) is greater than the derived max_model_len "
        f"(max_position_embeddings={derived} or model_max_length=None in model's config.json). This may lead to "
        "incorrect model outputs or CUDA errors. To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
    )


def _overrides(fix: str) -> dict:
    m = re.search(r"--hf-overrides '(\{.*?\}\})'", fix)
    assert m, fix
    return json.loads(m.group(1))["rope_scaling"]


@pytest.mark.parametrize(
    "model, asked, derived", [("qwen2.5-7b", 131072, 32768), ("llama-3-8b", 32768, 8192), (None, 100000, 32768)]
)
def test_a_max_model_len_above_the_positions_gets_a_scaling_that_reaches_it(model, asked, derived):
    d = diagnosis_of(_vllm(asked, derived), model)
    assert d.family == "vllm" and d.case == "context_beyond_positions"
    scaling = _overrides(d.fix)
    reach = scaling["factor"] * scaling.get("original_max_position_embeddings", derived)
    assert asked <= reach < 1.1 * asked + derived  # reaches the length, without scaling far past it
    assert (scaling.get("rope_type") or scaling.get("type")) == "yarn"
    assert f"--max-model-len {derived}" in d.fix


def test_qwen_gets_its_presets_long_context_scaling():
    d = diagnosis_of(_vllm(131072, 32768), "qwen2.5-7b")
    assert _overrides(d.fix) == preset("qwen2.5-7b-yarn").rope_scaling


def test_a_model_that_already_scales_is_told_its_tuned_length():
    d = diagnosis_of(_vllm(262144, 131072), "llama-3.1-8b")
    assert d.case == "context_beyond_scaling" and "--max-model-len 131072" in d.fix and "llama3" in d.why


# --- (c) MLX's strict load refusing RoPE buffers --------------------------------------------------------------------


def test_mlx_strict_load_of_inv_freq_is_rope_buffers_and_the_fix_drops_exactly_them():
    names = [f"model.layers.{i}.self_attn.rotary_emb.inv_freq" for i in sorted(range(32), key=str)]
    text = "ValueError: Received 32 parameters not in model: \n" + ",\n".join(names) + "."
    d = diagnosis_of(text, "llama-3-8b")
    assert d.case == "rope_buffers_in_weights" and "500000" in d.why and "64 entries" in d.why
    keep = re.search(r"if '([\w.]+)' not in k", d.fix).group(1)
    weights = {n: 0 for n in names} | {"model.layers.0.self_attn.k_proj.weight": 0}
    assert [k for k in weights if keep not in k] == ["model.layers.0.self_attn.k_proj.weight"]


def test_a_strict_load_without_rope_buffers_is_not_read_as_one():
    text = "ValueError: Received 1 parameters not in model: \nmodel.vision_tower.patch_embed.weight."
    assert diagnosis_of(text, "llama-3-8b") is None


def test_a_log_reads_the_strict_load_with_the_names_on_the_lines_after_it():
    names = [f"model.layers.{i}.self_attn.rotary_emb.inv_freq" for i in sorted(range(32), key=str)]
    log = [
        "2026-12-05 10:00:01 INFO     Loading mistralai/Mistral-7B-v0.1 from ./weights\n",
        "Traceback (most recent call last):\n",
        '  File "/srv/app/load.py", line 41, in load\n',
        "    model.load_weights(list(weights.items()))\n",
        '  File "/srv/venv/lib/python3.11/site-packages/mlx/nn/layers/base.py", line 185, in load_weights\n',
        "    raise ValueError(\n",
        "ValueError: Received 32 parameters not in model: \n",  # mlx prints the names one a line after it
        *[name + ",\n" for name in names[:-1]],
        names[-1] + ".\n",
        "2026-12-05 10:00:02 INFO     Shutting down\n",
    ]
    text, count = log_report(log)
    said = " ".join(text.split())
    assert count == 1 and "line 7" in text and "rope_buffers_in_weights" in said
    assert f"{len(names)} names the model lacks, {len(names)} of those shown RoPE buffers" in said  # every line read
    assert f"rope_theta = {preset('mistral-7b').rope_base:g}" in said  # the model named on line 1


# --- (d) transformers' longrope list length on a partial-rotary model -----------------------------------------


def test_a_longrope_list_of_rotary_dim_over_two_is_right_on_a_partial_rotary_model():
    numbers = dict(num_qo_heads=24, num_kv_heads=8, head_dim=128, rotary_dim=96)  # Phi-4-mini
    d = diagnosis_of("ValueError: `rope_parameters`'s short_factor field must have length 64, got 48", None, **numbers)
    assert d.case == "longrope_partial_rotary_not_read" and "the list is right" in d.why
    assert "partial_rotary_factor = 0.75" in d.fix and 0.75 * 128 / 2 == 48


def test_a_longrope_list_of_the_wrong_length_on_a_whole_head_model_is_another_models():
    d = diagnosis_of("`rope_scaling`'s long_factor field must have length 48, got 64", "phi-3.5-mini")
    assert d.case == "longrope_factors_of_another_model" and "(48 entries each)" in d.fix


# --- (e) repeat_kv's expand with the counts swapped -------------------------------------------------------------


@pytest.mark.parametrize("model, T", [("llama-3-8b", 7), ("qwen2.5-7b", 5), ("gemma-2-9b", 6), (None, 7)])
def test_repeat_kv_with_the_counts_swapped_and_the_fix_expands(model, T):
    p = preset(model or "llama-3-8b")
    kv, G, D = p.num_kv_heads, p.num_qo_heads // p.num_kv_heads, p.head_dim
    text = (
        f"RuntimeError: The expanded size of the tensor ({G}) must match the existing size ({kv}) at non-singleton "
        f"dimension 1.  Target sizes: [1, {G}, {kv}, {T}, {D}].  Tensor sizes: [1, {kv}, 1, {T}, {D}]"
    )
    d = diagnosis_of(text, model)
    assert d.case == "repeat_kv_swapped"
    args = [int(x) for x in re.search(r"expand\(B, (\d+), (\d+), T, (\d+)\)", d.fix).groups()]
    tensor = np.zeros((1, kv, 1, T, D))
    with pytest.raises(ValueError):
        np.broadcast_to(tensor, (1, G, kv, T, D))  # what the failing line asked: numpy refuses it too
    assert np.broadcast_to(tensor, (1, *args[:2], T, args[2])).reshape(1, -1, T, D).shape[1] == p.num_qo_heads


def test_a_copy_of_repeated_k_into_a_cache_slice_is_the_cache_write():
    text = (
        "RuntimeError: The expanded size of the tensor (8) must match the existing size (32) at non-singleton "
        "dimension 1.  Target sizes: [1, 8, 7, 128].  Tensor sizes: [32, 7, 128]"
    )
    d = diagnosis_of(text, "llama-3-8b")
    assert d.case == "repeated_kv_written" and "[B, 8, T, 128]" in d.fix


# --- (f) an index past the end of a pool --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "IndexError: index 4096 is out of bounds for dimension 0 with size 4096",
        "IndexError: index_copy_(): index 8191 is out of bounds for dimension 0 with size 4096",
        "IndexError: index 2048 is out of bounds for axis 0 with size 2048",
    ],
)
def test_an_index_past_a_pool_names_both_causes_and_what_to_print(text):
    d = diagnosis_of(text, "llama-3-8b")
    assert d.ambiguous and "(A) pool_size" in d.why and "(B) slots" in d.why
    assert "slots.max()" in d.fix and "k_pool.shape[0]" in d.fix


def test_a_query_head_on_the_kv_head_axis():
    d = diagnosis_of("IndexError: index 8 is out of bounds for dimension 1 with size 8", "llama-3-8b")
    assert d.case == "query_head_as_kv_head" and "h // 4" in d.fix
    assert max(h // 4 for h in range(32)) < 8  # the fix's index stays inside the 8 KV heads


# --- (g) a fused qkv_proj built as MHA, with the model's real config -------------------------------------------


def test_phi3_medium_qkv_proj_built_as_mha_names_the_missing_kv_heads_not_head_dim():
    text = (
        "size mismatch for model.layers.0.self_attn.qkv_proj.weight: copying a param with shape "
        "torch.Size([7680, 5120]) from checkpoint, the shape in current model is torch.Size([15360, 5120])."
    )
    f = facts_of(PHI3_MEDIUM)
    d = diagnosis_of(text, f)
    assert d.case == "config_without_kv_heads" and d.quantity == "heads"
    assert "num_key_value_heads = 10" in d.fix and "head_dim = 128 is right" in d.why
    assert (40 + 2 * 10) * 128 == 7680 and 3 * 40 * 128 == 15360  # the rows, from the config's numbers
    assert f.head_dim == 128  # the model line's head_dim, which the answer must not contradict
    assert "model" in explain(text, f)


# --- (h) an MLX 4-D broadcast of Hq against Hkv heads -------------------------------------------------------------


def test_an_mlx_4d_broadcast_of_q_heads_against_k_heads_names_both_mistakes():
    d = diagnosis_of(
        "ValueError: [broadcast_shapes] Shapes (1,32,7,128) and (1,8,7,128) cannot be broadcast.", "llama-3-8b"
    )
    assert d.ambiguous and "missing_repeat_kv" in d.why and "repeated_kv_written" in d.why
    assert "before the cache write" in d.why and "print(q.shape, k.shape, cache.keys.shape)" in d.fix


def test_an_mlx_matmul_broadcast_stays_repeat_kv_missing():
    d = diagnosis_of("ValueError: [broadcast_shapes] Shapes (1,32) and (1,8) cannot be broadcast.", "llama-3-8b")
    assert d.case == "missing_repeat_kv"


def test_a_serving_log_explains_the_new_kinds_once_each_in_order():
    log = [
        "2026-12-05 10:00:01 INFO Starting server, model=Qwen/Qwen2.5-7B\n",
        "(APIServer pid=53)   Value error, User-specified max_model_len (131072) is greater than the derived "
        "max_model_len (max_position_embeddings=32768 or model_max_length=None in model's config.json).\n",
        "2026-12-05 10:02:00 INFO retrying\n",
        "RuntimeError: einsum(): subscript h has size 4 for operand 1 which does not broadcast with previously seen "
        "size 28\n",
        "RuntimeError: einsum(): subscript h has size 4 for operand 1 which does not broadcast with previously seen "
        "size 28\n",
    ]
    text, count = log_report(log)
    assert count == 2 and "named on line 1" in text
    assert text.index("line 2") < text.index("context_beyond_positions") < text.index("line 4")
    assert "missing_repeat_kv" in text and "repeat_kv(k, 7)" in " ".join(text.split())


# --- (i) an embedding read past the end of its table ----------------------------------------------------------------


def test_an_embedding_index_out_of_range_names_the_token_id_and_the_position_and_what_to_print():
    d = diagnosis_of("IndexError: index out of range in self", "llama-3.1-8b")
    assert d.family == "pytorch" and d.ambiguous and "(A) token_id" in d.why and "(B) position" in d.why
    assert "vocab_size" in d.why and f"{preset('llama-3.1-8b').max_position_embeddings}" in d.why
    assert "input_ids.max()" in d.fix and "position_ids.max()" in d.fix
    text, count = log_report(["2026-12-05 10:00:01 INFO step 17\n", "IndexError: index out of range in self\n"])
    assert count == 1 and "line 2" in text
