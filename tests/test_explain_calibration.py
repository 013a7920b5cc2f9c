"""explain's calibration and the roles its core reads: a reading is *the* reading only where the framework is
known and the numbers are the model's sizes; other domains' words and numbers no size of the model give
"probably not mine"; counts that must exceed others, 0 heads a rank, a fused qkv split as MHA, torch.cat on
the wrong axis, transformers 5's MISMATCH rows. Messages worded here, numbers chosen here."""

from ropepool.cli.explain import explain, facts_of
from ropepool.diagnosis import diagnose

#: A GQA config without head_dim: Hq 16, Hkv 2, D = 1024 / 16 = 64.
SMALL = {"hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 2, "vocab_size": 32000}


def flat(text):
    return " ".join(text.split())


def test_a_convolution_message_whose_numbers_are_no_size_of_the_model_is_probably_not_mine():
    text = "RuntimeError: Given groups=1, weight of size [16, 1, 5, 5], expected input[2, 3, 28, 28] to have 1 channels, but got 3 channels instead"
    for f in (facts_of("mistral-7b"), facts_of(None)):
        d = diagnose(text, f)
        assert d.case == "likely_not_mine" and "convolution" in d.why and "probably not a head" in d.why


def test_numbers_none_of_the_models_sizes_from_an_unknown_framework_are_probably_not_mine():
    d = diagnose("ValueError: operands could not be combined: 13 vs 29", facts_of("llama-3-8b"))
    assert d.case == "likely_not_mine" and "none of meta-llama/Meta-Llama-3-8B's sizes" in d.why


def test_a_decimal_is_read_whole_and_a_factor_below_one_is_its_inverse():
    d = diagnose("ValueError: the rope factor must be >= 1 but is 0.5", facts_of(None))
    assert d.quantity == "scaling" and "1 / 0.5 = 2" in d.why and "5 " not in d.read
    cfg = dict(SMALL, rope_scaling={"rope_type": "yarn", "factor": 0.5, "original_max_position_embeddings": 2048})
    out = flat(explain("ValueError: the rope factor must be >= 1 but is 0.5", facts_of(cfg)))
    assert out.startswith("config rope_scaling factor = 0.5 is below 1") and "2048 x 2 = 4096" in out


def test_a_tp_size_that_must_exceed_the_kv_heads_is_read_with_the_condition_the_message_gives():
    text = (
        "AssertionError: tp size 2 must be larger than the number of kv heads 4 when context parallel attention is on"
    )
    d = diagnose(text, facts_of(None))
    assert d.case == "ambiguous" and d.quantity == "tp" and "4 // 2 = 2 distinct KV heads" in d.why
    assert "context parallel attention is on" in d.why and "raise tp above 4" in d.fix


def test_a_view_with_zero_heads_is_a_per_rank_count_with_tp_past_the_kv_heads():
    d = diagnose("RuntimeError: shape '[2, 5, 0, 64]' is invalid for input of size 640", facts_of(SMALL))
    assert d.case == "tp_over_kv_heads" and "2 // tp = 0" in d.why and "1 head of 64" in d.why
    assert "max(1, num_key_value_heads // tp)" in d.fix and "view(..., 1, 64)" in d.fix


def test_a_fused_qkv_split_in_three_equal_parts_is_an_mha_split_of_a_gqa_row():
    d = diagnose("RuntimeError: shape '[1, 3, 3, 16, 64]' is invalid for input of size 3840", facts_of(SMALL))
    assert d.case == "qkv_split_as_mha" and "(16 + 2 x 2) x 64" in d.why and "[1024, 1152]" in d.fix
    bare = diagnose("ValueError: [reshape] Cannot reshape array of size 3840 into shape (1,3,3,16,64).", facts_of(None))
    assert bare.case == "ambiguous" and "qkv_split_as_mha" in bare.quantity and "num_key_value_heads is 2" in bare.why


def test_a_cat_whose_other_axis_differs_names_the_sequence_axis():
    text = "RuntimeError: Sizes of tensors must match except in dimension 1. Expected size 12 but got size 3 for tensor number 1 in the list."
    d = diagnose(text, facts_of("llama-3-8b"))
    assert d.family == "pytorch" and d.quantity == "sequence" and "dim=2" in d.why and "12 cached" in d.why


def test_transformers_load_report_mismatch_rows_are_read_as_shape_pairs():
    text = (
        "model.layers.3.self_attn.k_proj.weight | MISMATCH | Reinit due to size mismatch - ckpt: "
        "torch.Size([512, 4096]) vs model:torch.Size([4096, 4096])\nRuntimeError: see the report above"
    )
    d = diagnose(text, facts_of({"hidden_size": 4096, "num_attention_heads": 32}))
    assert d.case == "config_without_kv_heads" and "512" in d.why and "8 times fewer" in d.why


def test_an_index_without_numbers_lists_a_block_table_and_a_head_count_lists_layout_and_tp():
    assert "block" in diagnose("IndexError: index out of range in self", facts_of(None)).quantity.split("/")
    d = diagnose("RuntimeError: the kv heads of k must divide the heads of q", facts_of("llama-3-8b"))
    assert d.case == "ambiguous" and {"layout", "tp"} <= set(d.quantity.split("/"))
    assert "these divide, G = 4: the tensors passed are not the model's heads" in d.why


def test_numbers_with_no_relation_of_heads_are_never_one_reading():
    bare = diagnose(
        "The size of tensor a (224) must match the size of tensor b (9) at non-singleton dimension 3", facts_of(None)
    )
    assert bare.case == "ambiguous" and bare.quantity == "tokens/not_mine" and "not a head, RoPE" in bare.why
    view = diagnose("RuntimeError: shape '[1, 5, 20, 128]' is invalid for input of size 1920", facts_of("llama-3-8b"))
    assert view.case == "ambiguous" and {"foreign", "tokens"} <= set(view.quantity.split("/"))


def test_numbers_none_of_the_models_sizes_but_named_by_their_words_are_read_by_the_words():
    d = diagnose("ValueError: position 9000 must be less than max_position_embeddings 8192", facts_of("llama-3-8b"))
    assert d.case == "ambiguous" and d.quantity == "positions"


def test_digits_inside_a_name_or_a_path_are_never_read_as_sizes():
    """A path or a model's name (``/srv/qwen-2-72b-chat/``) and a dtype (``bfloat16``, ``int8``) name things:
    their digits are no sizes, so a message whose only digits stand there is not read from numbers."""
    f = facts_of("llama-3-8b")
    path = diagnose("ValueError: a model id must be in the form 'org/name', not '/srv/qwen-2-72b-chat/'", f)
    assert path is None or "72" not in (path.read or ""), path
    dtypes = diagnose("ValueError: cache blocks must be float32 or bfloat16, got int8 for layer_4", f)
    assert dtypes is not None and dtypes.read.startswith("no numbers"), dtypes
    shapes = diagnose("FooError: a bfloat16 k of shape (7, 32, 128) met a pool of shape (64, 8, 128)", f)
    assert shapes is not None and "16" not in shapes.read.replace("128", ""), shapes
