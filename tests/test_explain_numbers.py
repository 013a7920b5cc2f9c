"""explain reads a message from its numbers and the model's sizes, worded and numbered apart from any blind
set: a repeat factor, a projection's numbers that are MHA's signature, MLA's two parts of a head, heads
of another model where the tokens agree, a table built for the unscaled positions, a log's error headers."""

from ropepool.cli.explain import facts_of, log_report
from ropepool.diagnosis import diagnose

BROADCAST = "RuntimeError: The size of tensor a ({}) must match the size of tensor b ({}) at non-singleton dimension {}"


def test_k_repeated_by_another_group_size_is_read_as_a_repeat_factor():
    d = diagnose(BROADCAST.format(64, 128, 1), facts_of("llama-3-70b"))
    assert "repeat_factor" in d.quantity.split("/") and "n_rep = 16 where it is Hq / Hkv = 8" in d.why, d


def test_sizes_of_two_axes_are_never_called_no_size_of_the_model():
    d = diagnose(BROADCAST.format(7, 128, 1), facts_of("llama-3-8b"))
    assert "neither is a size" not in d.why and "128 (D (head_dim))" in d.why, d


def test_without_a_model_a_head_count_pair_is_read_both_ways():
    d = diagnose(BROADCAST.format(8, 64, 1), facts_of(None))
    assert "repeat_kv missing (G = 8)" in d.why and "already repeated to 64 heads where 8 are taken" in d.why, d


def test_a_fused_qkv_built_as_mha_is_read_from_its_own_numbers():
    text = "ValueError: Expected shape (12288, 4096) but received shape (6144, 4096) for parameter model.layers.3.self_attn.qkv_proj.weight"
    d = diagnose(text, facts_of(None))
    assert d.case == "config_without_kv_heads" and "6144 = 4096 + 2 x 1024" in d.why and "G = 4" in d.why, d


def test_a_square_k_proj_against_fewer_rows_lists_mha_first():
    text = "check_tensor_dims: tensor 'blk.3.attn_v.weight' has wrong shape; expected  5120,  5120, got  5120,  1024,     1,     1"
    d = diagnose(text, facts_of(None))
    assert d.case == "ambiguous" and d.quantity.startswith("config_without_kv_heads/"), d


def test_weights_of_another_width_are_another_model_never_a_tensor_parallel_share():
    text = (
        "RuntimeError: Error(s) in loading state_dict for Attn:\n\tsize mismatch for v_proj.weight: copying a param "
        "with shape torch.Size([1024, 4096]) from checkpoint, the shape in current model is torch.Size([256, 1536])."
    )
    d = diagnose(text, facts_of(None))
    assert d.case == "weights_of_another_model" and "4096 inputs" in d.why and "MHA" not in d.why, d


def test_mla_s_two_parts_of_a_head_are_named():
    config = {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
    }
    text = "RuntimeError: einsum(): subscript r has size 128 for operand 1 which does not broadcast with previously seen size 64"
    d = diagnose(text, facts_of(config))
    assert "mla_split" in d.quantity.split("/") and "split(q, [64, 128]) where it is [128, 64]" in d.why, d


def test_heads_of_another_model_where_the_tokens_agree_are_not_a_layout():
    d = diagnose(
        "ValueError: [broadcast_shapes] Shapes (1,8,5,128) and (1,4,5,128) cannot be broadcast.", facts_of("llama-3-8b")
    )
    assert "heads_of_another_model" in d.quantity.split("/") and "layout" not in d.quantity.split("/"), d


def test_a_rope_table_of_the_unscaled_positions_is_named():
    d = diagnose("IndexError: index 8200 is out of bounds for dimension 0 with size 8192", facts_of("llama-3.1-8b"))
    assert d.case == "positions_unscaled_table" and "131072" in d.fix, d


def test_a_log_record_heading_a_traceback_is_not_an_error_of_its_own_and_a_versioned_folder_names_the_model():
    lines = [
        "12:00:01 INFO loading /srv/weights/Mistral-7B-Instruct-v0.2/model.safetensors\n",
        "12:00:02 ERROR request 7 failed while writing the KV cache\n",
        "Traceback (most recent call last):\n",
        '  File "serve.py", line 9, in write\n',
        "IndexError: index 4100 is out of bounds for dimension 0 with size 4096\n",
    ]
    report, n = log_report(lines)
    assert n == 1 and "line 5" in report and "line 2" not in report, report
    assert report.startswith("model     mistral-7b (named on line 1"), report


def test_a_view_with_fewer_heads_than_the_tensor_holds_reads_q_viewed_with_the_kv_heads():
    d = diagnose("RuntimeError: shape '[1, 6, 4, 128]' is invalid for input of size 12288", facts_of(None))
    assert "q was viewed with the KV head count" in d.why and "4 heads of 512: head_dim is 512" in d.why, d
    assert "if 16 is num_key_value_heads" not in d.why


EXPAND = (
    "RuntimeError: The expanded size of the tensor (32) must match the existing size (8) at non-singleton dimension "
    "1.  Target sizes: [1, 32, 6, 128].  Tensor sizes: {}"
)


def test_k_written_into_a_cache_of_the_query_heads_is_named_and_an_expand_of_k_is_one_reading_of_three():
    write = diagnose(EXPAND.format("[8, 6, 128]"), facts_of("llama-3-8b"))
    assert write.case == "cache_with_query_heads" and "[B, 8, max_len, 128]" in write.fix, write
    both = diagnose(EXPAND.format("[1, 8, 6, 128]"), facts_of("llama-3-8b"))
    assert both.case == "ambiguous" and {"cache_with_query_heads", "missing_repeat_kv"} <= set(both.quantity.split("/"))


SPLIT = (
    "RuntimeError: split_with_sizes expects split_sizes to sum exactly to {} (input tensor's size at dimension -1), "
    "but got split_sizes={}"
)


def test_a_split_is_read_against_the_models_own_splits():
    fused = diagnose(SPLIT.format(6144, "[4096, 4096, 4096]"), facts_of("llama-3-8b"))
    assert fused.case == "split_heads" and "part 1 is 4096" in fused.why and "where it is 1024" in fused.why, fused
    mla = diagnose(
        SPLIT.format(192, "[128, 128]"),
        facts_of(
            {
                "model_type": "deepseek_v3",
                "hidden_size": 7168,
                "num_attention_heads": 128,
                "kv_lora_rank": 512,
                "qk_nope_head_dim": 128,
                "qk_rope_head_dim": 64,
            }
        ),
    )
    assert mla.case == "mla_split" and "where it is 64" in mla.why, mla
    bare = diagnose(SPLIT.format(576, "[512, 128]"), facts_of(None))
    assert "the others kept, part 1 would be 64" in bare.why, bare


def test_a_rank_s_k_viewed_with_eight_heads_is_either_count_at_tp_8():
    d = diagnose("RuntimeError: shape '[1, 3, 8, 128]' is invalid for input of size 384", facts_of("llama-3-70b", tp=8))
    assert d.case == "ambiguous" and {"tp_shard_full_count", "kv_viewed_with_hq"} <= set(d.quantity.split("/")), d


def test_weights_that_are_the_config_s_own_against_a_model_built_otherwise():
    config = {"model_type": "qwen2", "hidden_size": 1536, "num_attention_heads": 12, "num_key_value_heads": 2}
    text = (
        "RuntimeError: Error(s) in loading state_dict for Qwen2ForCausalLM:\n\tsize mismatch for model.layers.0.self_"
        "attn.k_proj.weight: copying a param with shape torch.Size([256, 1536]) from checkpoint, the shape in current "
        "model is torch.Size([4096, 1536])."
    )
    d = diagnose(text, facts_of(config))
    assert d.case == "model_not_from_config" and "4096 = 32 x 128" in d.why and "should be 2" in d.fix, d


def test_batch_times_heads_in_one_axis_is_read_as_repeat_kv_missing():
    d = diagnose(
        "RuntimeError: Expected size for first two dimensions of batch2 tensor to be: [64, 128] but got: [16, 128].",
        facts_of("llama-3-8b"),
    )
    assert "missing_repeat_kv" in d.quantity.split("/") and "64 = 2 x Hq 32 against 16 = 2 x Hkv 8" in d.why, d


def test_a_kv_cache_that_does_not_fit_is_told_in_the_model_s_bytes_a_token():
    text = (
        "ValueError: 8.0 GiB KV cache is needed, which is larger than the available KV cache memory (2.00 GiB). "
        "See https://docs.example.org/memory for more details."
    )
    d = diagnose(text, facts_of("llama-3-8b"))
    assert d.case == "kv_memory" and "128 KiB a token over all its layers" in d.why and "about 16384 tokens" in d.why, d
    mla = diagnose(text, facts_of("deepseek-v3"))  # the layout's latent, not k and v
    assert mla.case == "kv_memory" and "one latent of 512 + 64" in mla.why and "about 30559 tokens" in mla.why, mla
    assert diagnose(text, facts_of(None)).case != "not_mine"  # a link to docs is no network error


def test_a_loss_s_batch_sizes_are_not_explain_s_to_read():
    d = diagnose("ValueError: Expected input batch_size (32) to match target batch_size (28).", facts_of("llama-3-8b"))
    assert d.case == "not_mine" and "labels" in d.fix, d


def test_k_and_v_split_over_more_ranks_than_kv_heads_are_named():
    d = diagnose("RuntimeError: shape '[1, 5, 1, 128]' is invalid for input of size 320", facts_of("qwen2.5-7b", tp=8))
    assert d.case == "tp_below_one_kv_head" and "half a KV head" in d.why and "2 ranks share each" in d.why, d


def test_a_fused_qkv_cut_in_three_equal_parts_is_named():
    d = diagnose("RuntimeError: shape '[1, 5, 28, 128]' is invalid for input of size 7680", facts_of("qwen2.5-7b"))
    assert d.case == "qkv_chunked" and "split([3584, 512, 512]" in d.fix, d


def test_a_head_count_that_is_no_head_count_of_the_model_is_read_as_tokens():
    text = "ValueError: [scaled_dot_product_attention] n_heads must be a multiple of n_kv_heads, found n_heads 5 for n_kv_heads 4."
    d = diagnose(text, facts_of("qwen2.5-7b"))
    assert "probably q's tokens" in d.why, d


def test_a_cache_of_another_head_dim_is_one_reading_of_a_cat():
    text = "RuntimeError: Sizes of tensors must match except in dimension 2. Expected size 64 but got size 128 for tensor number 1 in the list."
    d = diagnose(text, facts_of("llama-3-8b"))
    assert "head_dim_of_another_model" in d.quantity.split("/"), d


def test_a_rolling_window_cache_written_past_its_rows_is_one_reading():
    d = diagnose("IndexError: index 4100 is out of bounds for dimension 2 with size 4096", facts_of("mistral-7b"))
    assert "window_not_rolled" in d.quantity.split("/") and "p % 4096" in d.why, d
