"""explain's one reading of numbers (ropepool/diagnosis/sizes.py): two sizes named by the model's vocabulary
of sizes, the mistake from their roles and the axis; the config's own numbers checked first."""

from ropepool.cli.explain import explain, facts_of
from ropepool.diagnosis import diagnose

BROADCAST = "The size of tensor a ({}) must match the size of tensor b ({}) at non-singleton dimension {}"
#: A config whose 6 KV heads do not divide its 32 query heads, and no head_dim (D = 4096 / 32).
SIX_KV = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 6, "vocab_size": 32000}


def unconfirmed(d, reading):
    """A message of a framework explain has no reader for: its one reading stated as unconfirmed, never as the verdict."""
    return d.case == "ambiguous" and f"unconfirmed (a message explain has no reader for): {reading}:" in d.why


def flat(text):
    return " ".join(text.split())


def test_the_head_against_its_half_on_the_last_axis_is_read_as_d_against_d_over_two():
    d = diagnose(BROADCAST.format(128, 64, 3), facts_of("llama-3-8b"))
    assert d.case == "ambiguous" and "half_head_dim" in d.quantity
    assert "D/2" in d.why and "torch.cat((freqs, freqs), dim=-1)" in d.why


def test_query_heads_against_a_number_no_size_of_the_model_is_a_layout_or_two_lengths():
    d = diagnose(BROADCAST.format(32, 7, 1), facts_of("llama-3-8b"))
    assert d.case == "ambiguous" and d.quantity == "layout/tokens"
    assert "[B, T, H, D]" in d.why and "transpose(1, 2)" in d.why and "32 (Hq" in d.why


def test_kv_heads_that_do_not_divide_are_said_by_the_config_and_read_in_the_message():
    f = facts_of(SIX_KV)
    assert f.head_dim == 128  # hidden_size / Hq, where the config has no head_dim
    out = flat(explain(BROADCAST.format(32, 30, 1), f))
    assert out.startswith("config num_key_value_heads = 6 does not divide num_attention_heads = 32")
    assert "D = 128" in out and "kv_heads_do_not_divide" in out and "6 x (32 // 6) = 30" in out


def test_a_tp_size_that_splits_neither_head_count_is_one_config_line():
    out = flat(explain(BROADCAST.format(17, 16, 2), facts_of("llama-3-8b", tp=3)))
    assert "config tp = 3 splits neither the 32 query heads nor the 8 KV heads" in out
    assert flat(explain(BROADCAST.format(17, 16, 2), facts_of("llama-3-8b", tp=4))).startswith("family")


def test_a_rotary_width_past_the_head_and_a_head_dim_apart_from_hidden_size():
    cfg = {"hidden_size": 2048, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 128, "rotary_dim": 192}
    out = flat(explain(BROADCAST.format(17, 16, 2), facts_of(cfg)))
    assert "rotary_dim = 192 is past head_dim = 128" in out
    assert "head_dim = 128 differs from hidden_size / num_attention_heads = 2048 / 8 = 256" in out


# Messages of frameworks explain has no reader for (their wording made up here, their numbers a model's):
# read from their numbers by the same core, from the words they name, or said foreign.


def test_a_reshape_of_an_unknown_framework_is_read_from_its_numbers():
    d = diagnose("ValueError: cannot reshape array of size 7168 into shape (1,7,32,128)", facts_of("llama-3-8b"))
    assert d.family == "unknown" and "read from its numbers" in d.source and unconfirmed(d, "kv_viewed_with_hq")


def test_a_count_that_must_divide_another_is_read_by_the_words_before_each_number():
    d = diagnose("AssertionError: num_heads (32) must be divisible by num_kv_heads (6)", facts_of(None))
    assert unconfirmed(d, "kv_heads_do_not_divide") and "32 / 6 is not whole" in d.why
    tp = diagnose("AssertionError: heads (28) not divisible by tensor parallel size (8)", facts_of(None))
    assert unconfirmed(tp, "tp_does_not_divide_heads")


def test_two_shapes_whose_middle_axes_are_swapped_are_a_layout_and_what_is_left():
    text = "RuntimeError: attention kernel: q has shape (1, 32, 7, 128) but k has shape (1, 7, 8, 128)"
    d = diagnose(text, facts_of("llama-3-8b"))
    assert unconfirmed(d, "layout") and "transpose(1, 2)" in d.why and "repeat_kv" in d.why


def test_a_message_without_numbers_naming_rope_gets_the_candidates_and_a_foreign_one_is_said_not_mine():
    d = diagnose("RuntimeError: rotary kernel failed: unsupported rotary layout", facts_of("llama-3-8b"))
    assert d.family == "unknown" and d.case == "ambiguous" and "rotary_dim" in d.quantity
    foreign = diagnose("OSError: Can't load tokenizer for 'org/model'. tokenizer.json not found", facts_of(None))
    assert foreign.case == "not_mine" and "tokenizer" in foreign.why
    assert diagnose("ValueError: learning rate must be positive", facts_of(None)) is None


def test_the_command_exits_1_on_a_foreign_message_and_says_why(capsys):
    from ropepool.__main__ import main

    rc = main(["explain", "requests.exceptions.ConnectionError: Max retries exceeded with url: /api/models"])
    out = capsys.readouterr().out
    assert rc == 1 and "not_mine" in out and "the network" in out


def test_mlx_older_strict_load_wording_without_a_count_is_read():
    names = "model.layers.0.self_attn.rotary_emb.inv_freq model.layers.1.self_attn.rotary_emb.inv_freq"
    d = diagnose(f"ValueError: Received parameters not in model: {names}.", facts_of("llama-3-8b"))
    assert d.family == "mlx" and d.case == "rope_buffers_in_weights" and d.read.startswith("2 names")


# Without a model, a reading from the relation of two numbers alone is never the one answer.


def test_without_a_model_two_numbers_are_never_a_single_verdict_nor_named_as_the_models():
    d = diagnose("ValueError: [broadcast_shapes] Shapes (1,28) and (1,4) cannot be broadcast.", facts_of(None))
    assert d.case == "ambiguous" and "heads" in d.quantity.split("/") and "tokens" in d.quantity
    assert "model's sizes" not in d.why
    partial = diagnose(BROADCAST.format(80, 32, 3), facts_of(None))
    assert partial.case == "ambiguous" and "rotary_dim = 32" in partial.why
    odd = diagnose(BROADCAST.format(17, 16, 3), facts_of(None))  # no head is 17 wide: lengths, or not attention's
    assert odd.case == "ambiguous" and odd.quantity == "tokens/not_mine"


def test_a_message_whose_shapes_follow_on_the_next_lines_is_read_with_them():
    text = "ValueError: Shapes of the inputs disagree:\n  q: (1, 6, 32, 128)\n  k: (1, 6, 8, 128)\n  v: (1, 6, 8, 128)"
    d = diagnose(text, facts_of("llama-3-8b"))
    assert d.family == "unknown" and unconfirmed(d, "missing_repeat_kv")


def test_a_config_without_a_kv_head_count_says_mha_is_built_and_positional_is_no_position():
    cfg = {"hidden_size": 3584, "num_attention_heads": 28, "model_type": "qwen2"}
    text = "TypeError: ModelArgs.__init__() missing 1 required positional argument: 'num_key_value_heads'"
    out = flat(explain(text, facts_of(cfg)))
    assert out.startswith("config num_key_value_heads is absent: read as MHA, Hkv = Hq = 28")
    assert "positions" not in out.split(" case ", 1)[1].split(" fix ", 1)[0]


def test_an_index_at_a_tables_length_lists_the_position_reading():
    d = diagnose("IndexError: index 8192 is out of bounds for dimension 0 with size 8192", facts_of("llama-3-8b"))
    assert d.case == "ambiguous" and "positions" in d.quantity and "cos/sin cache" in d.why


def test_the_config_is_checked_even_where_the_message_is_not_read(tmp_path, capsys):
    import json

    from ropepool.__main__ import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(SIX_KV))
    rc = main(["explain", "ValueError: learning rate must be positive", "--config", str(path)])
    out, err = capsys.readouterr()
    assert rc == 1 and "num_key_value_heads = 6 does not divide" in out and "no message explain reads" in err


def test_a_message_naming_a_missing_config_field_says_what_the_config_then_builds():
    text = "TypeError: ModelArgs.__init__() missing 1 required positional argument: 'num_key_value_heads'"
    d = diagnose(text, facts_of("qwen2.5-7b"))
    assert d.case == "config_field_missing" and "built as MHA" in d.why and "Qwen/Qwen2.5-7B's: 4" in d.fix


def test_weights_whose_input_is_not_the_models_hidden_size_are_read_from_their_own_numbers():
    text = (
        "size mismatch for model.layers.0.self_attn.k_proj.weight: copying a param with shape torch.Size([2048, 2048])"
        " from checkpoint, the shape in current model is torch.Size([512, 2048])."
    )
    d = diagnose(text, facts_of("llama-3-8b"))
    assert (
        "not meta-llama/Meta-Llama-3-8B's hidden_size 4096" in d.why and "2048 rows where the config says 512" in d.why
    )


def test_a_shape_reshaped_into_another_is_read_as_its_size_into_the_second():
    text = "TypeError: cannot reshape array of shape (7, 1024) (size 7168) into shape (7, 32, 128) (size 28672)"
    d = diagnose(text, facts_of("llama-3-8b"))
    assert (
        d.family == "unknown"
        and unconfirmed(d, "kv_viewed_with_hq")
        and d.read == "7168 values into [7, 32, 128]: 1024 per row"
    )


def test_the_explain_pages_message_of_a_framework_without_a_reader_reads_as_shown():
    import re
    import shlex
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "explain.md").read_text()
    block = re.search(r"```\n\$ (python -m ropepool explain \"TypeError: cannot reshape[^\n]*)\n(.*?)```", page, re.S)
    argv = shlex.split(block.group(1))[3:]
    out = flat(explain(argv[1], facts_of(argv[argv.index("--model") + 1])))
    shown = [flat(part) for part in re.split(r"\n\.\.\.\n|\n(?=\w)", block.group(2)) if part.strip()]
    assert all(part in out for part in shown if part != "..."), (shown, out)


def test_what_the_message_says_the_tensors_were_in_picks_the_reading_of_hq_against_hkv():
    write = "RuntimeError: shape mismatch: value tensor of shape [7, 32, 128] cannot be broadcast to indexing result of shape [7, 8, 128]"
    assert unconfirmed(diagnose(write, facts_of("llama-3-8b")), "repeated_kv_written")
    unsaid = diagnose("ValueError: got (7, 32, 128) and (7, 8, 128)", facts_of("llama-3-8b"))
    assert unsaid.case == "ambiguous" and unsaid.quantity == "missing_repeat_kv/repeated_kv_written"


def test_a_product_of_matrices_printed_as_rows_x_columns_is_read_by_its_inner_sizes():
    d = diagnose(
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (7x4096 and 1024x4096)", facts_of("llama-3-8b")
    )
    assert unconfirmed(d, "kv_width") and "Hkv x D = 1024" in d.why


def test_out_of_memory_is_read_as_bytes_against_memory_with_the_kv_bytes_a_token():
    text = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB"
    )
    d = diagnose(text, facts_of("llama-3-8b"))
    assert d.quantity == "kv_bytes" and "4096 bytes a token and layer" in d.why and "max_model_len" in d.fix


def test_kv_heads_over_a_tp_size_named_tp_size_is_a_tp_split():
    d = diagnose("AssertionError: num_kv_heads (8) should be divisible by tp_size (3)", facts_of(None))
    assert unconfirmed(d, "tp_does_not_divide_heads") and "8 / 3 KV heads" in d.why


LOAD = (
    "RuntimeError: Error(s) in loading state_dict for LlamaAttention:\n\tsize mismatch for {p}_proj.weight: copying "
    "a param with shape torch.Size([{have}, 4096]) from checkpoint, the shape in current model is torch.Size([{want}, 4096])."
)


def test_a_whole_checkpoint_loaded_into_one_tensor_parallel_rank_is_read_as_unsplit():
    d = diagnose(LOAD.format(p="v", have=1024, want=128), facts_of("llama-3-8b", tp=16))
    assert d.case == "tp_unsplit_checkpoint" and "8 x 128 = 1024 rows" in d.why, d
    assert "each rank holds a copy of one" in d.why and "weight.chunk(16, dim=0)" in d.fix, d


def test_one_ranks_shard_loaded_into_the_whole_model_is_read_as_a_shard():
    d = diagnose(LOAD.format(p="q", have=512, want=4096), facts_of("llama-3-8b", tp=8))
    assert d.case == "tp_shard_in_whole_model" and "4 heads x 128 = 512" in d.why, d


def test_a_shard_without_tp_given_is_one_reading_of_two():
    with_model = diagnose(LOAD.format(p="q", have=512, want=4096), facts_of("llama-3-8b"))
    bare = diagnose(LOAD.format(p="k", have=1024, want=256), facts_of(None))
    for d in (with_model, bare):
        assert d.case == "ambiguous" and {"weights_of_another_model"} < set(d.quantity.split("/")), d
    assert "tp = 8" in with_model.why and "tp = 4" in bare.why
