"""``explain`` on framework messages generated here, for every preset: the same mistakes made with MLX
and mlx's ``load_weights``, whose messages (mlx 0.32) are the ones engineers paste; and configs in
transformers 4 and 5 layouts given with ``--config``."""

import json

import mlx.core as mx
import mlx.nn as nn
import pytest

from ropepool.__main__ import main
from ropepool.cli.explain import diagnosis_of
from ropepool.models import load_preset, preset, preset_names

GQA = [n for n in preset_names() if preset(n).group_size > 1]


def mlx_error(call) -> str:
    with pytest.raises(ValueError) as e:
        call()
    return f"ValueError: {e.value}"


@pytest.mark.parametrize("name", GQA)
def test_k_reshaped_with_the_query_heads(name):
    p = preset(name)
    k = mx.zeros((1, 5, p.num_kv_heads * p.head_dim))  # k_proj's output [B, T, Hkv * D]
    d = diagnosis_of(mlx_error(lambda: k.reshape(1, 5, p.num_qo_heads, p.head_dim)), name)
    assert d.case == "kv_viewed_with_hq" and f"k.view(B, T, {p.num_kv_heads}, {p.head_dim})" in d.fix


@pytest.mark.parametrize("name", [n for n in GQA if preset(n).num_kv_heads > 1])
def test_attention_without_repeat_kv(name):
    """(MQA's one KV head broadcasts: Falcon-7B's q @ k works without repeat_kv and raises nothing.)"""
    p = preset(name)
    q, k = mx.zeros((1, p.num_qo_heads, 5, p.head_dim)), mx.zeros((1, p.num_kv_heads, p.head_dim, 5))
    d = diagnosis_of(mlx_error(lambda: q @ k), name)
    assert d.case == "missing_repeat_kv" and f"repeat_kv(k, {p.group_size})" in d.fix


@pytest.mark.parametrize("name", GQA)
def test_weights_for_a_config_without_num_key_value_heads(name):
    """A config.json without num_key_value_heads builds k_proj [Hq * D, hidden]; GQA weights are [Hkv * D, hidden]."""
    p = preset(name)
    hidden = load_preset(name)["hidden_size"]
    layer = nn.Linear(hidden, p.num_qo_heads * p.head_dim, bias=False)
    text = mlx_error(lambda: layer.load_weights([("weight", mx.zeros((p.num_kv_heads * p.head_dim, hidden)))]))
    text = text.replace("parameter weight", "parameter model.layers.0.self_attn.k_proj.weight")
    d = diagnosis_of(text, name)
    if p.num_qo_heads * p.head_dim == hidden:
        assert d.case == "config_without_kv_heads" and f"num_key_value_heads = {p.num_kv_heads}" in d.fix
    else:  # Gemma-2: q is not hidden_size wide, so the MHA guess is not the only reading
        assert d.case in ("config_without_kv_heads", "weights_of_another_model")


@pytest.mark.parametrize("name", preset_names())
def test_mlx_rope_of_the_wrong_width(name):
    p = preset(name)
    rd = p.rotary_dim or p.head_dim
    x = mx.zeros((1, p.num_kv_heads, 5, p.head_dim))
    d = diagnosis_of(
        mlx_error(lambda: mx.fast.rope(x, p.head_dim + 2, traditional=False, base=1e4, scale=1.0, offset=0)), name
    )
    assert d.case == "rotary_dim" and f"dims = {rd}" in d.fix


LAYOUTS = {  # Llama-3-8B's fields, as transformers 4 and 5 save them
    "transformers 4": {
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "rope_theta": 500000.0,
    },
    "transformers 5": {
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
    },
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_config_folder_in_either_layout(tmp_path, capsys, layout):
    (tmp_path / "config.json").write_text(json.dumps(LAYOUTS[layout]))
    rc = main(
        ["explain", "AttributeError: 'LlamaConfig' object has no attribute 'rope_theta'", "--config", str(tmp_path)]
    )
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0 and "Hq = 32, Hkv = 8, D = 128" in out and "rope_theta = 500000" in out and "(here 500000)" in out
    rc = main(
        [
            "explain",
            "RuntimeError: shape '[1, 7, 32, 128]' is invalid for input of size 7168",
            "--config",
            str(tmp_path / "config.json"),
            "--num-kv-heads",
            "8",
        ]
    )
    assert rc == 0 and "kv_viewed_with_hq" in capsys.readouterr().out


# Held out of the corpus: messages of the same families whose numbers allow more than one reading, and
# messages of other causes. Right or honestly ambiguous; never a single fix for the wrong mistake.
HELD_OUT = [
    (
        "head counts on the tokens axis",
        "llama-3-8b",
        "The size of tensor a (32) must match the size of tensor b (8) at non-singleton dimension 2",
        {"ambiguous"},
    ),
    (
        "two sequence lengths",
        "llama-3-8b",
        "The size of tensor a (17) must match the size of tensor b (16) at non-singleton dimension 2",
        {"foreign"},
    ),
    (
        "a view with the wrong batch",
        "llama-3-8b",
        "ValueError: [reshape] Cannot reshape array of size 10 into shape (1,7,32,128).",
        {"tokens"},
    ),
    (
        "no model: a head count viewed",
        None,
        "shape '[2, 16, 32, 128]' is invalid for input of size 32768",
        {"ambiguous"},
    ),
    (
        "no model: SDPA head counts",
        None,
        "[scaled_dot_product_attention] n_heads must be a multiple of n_kv_heads, found n_heads 32 for n_kv_heads 6.",
        {"ambiguous"},
    ),
    (
        "no model: rope dims",
        None,
        "[rope] dims must not exceed the input's last dimension (64) but got 128.",
        {"ambiguous"},
    ),
    (
        "an MLP weight",
        "qwen2.5-7b",
        "size mismatch for model.layers.0.mlp.up_proj.weight: copying a param with "
        "shape torch.Size([512, 10]) from checkpoint, the shape in current model is "
        "torch.Size([3584, 10]).",
        None,
    ),
    (
        "vocabulary, not attention",
        None,
        "llama_model_load: error loading model: check_tensor_dims: tensor "
        "'token_embd.weight' has wrong shape; expected  4096, 128256, got  4096, "
        "128258,     1,     1",
        {"not_attention"},
    ),
    ("a KeyError of another dict", None, "KeyError: 'type'", None),
    ("the op's value check", "llama-3-8b", "rope_base must be a finite number > 0, got nan", {"catalog"}),
]


@pytest.mark.parametrize("what, model, text, cases", HELD_OUT, ids=[h[0] for h in HELD_OUT])
def test_held_out_messages_are_right_or_honestly_ambiguous(what, model, text, cases):
    d = diagnosis_of(text, model)
    if cases is None:
        assert d is None, f"{what}: read as {d.case}"
    else:
        assert d is not None and d.case in cases, f"{what}: {d and d.case}: {d and d.why}"


# "X must be Y, got Z" is the op's argument_type only where X is one of the op's arguments: other
# libraries' checks of that form are not read as the op's (no fix about head counts for them), and the
# engine's own refusals, raised here by real calls, are read as the engine's argument.
NOT_THE_OPS = [
    "`rope_scaling`'s factor field must be a float > 1, got 8",
    "`rope_scaling`'s type field must be one of ['linear', 'dynamic'], got llama3",
    "num_attention_heads must be divisible by tensor_model_parallel_size, got 12 and 8",
]


@pytest.mark.parametrize("text", NOT_THE_OPS)
def test_other_libraries_must_be_messages_are_not_the_ops_argument_type(text):
    d = diagnosis_of(text, "llama-3-8b")
    assert d is None or d.code != "argument_type", (d.case, d.fix)


def _engine_refusal(call) -> str:
    from ropepool.engine import EngineArgumentError

    with pytest.raises(EngineArgumentError) as e:
        call()
    return f"ropepool.engine.errors.EngineArgumentError: {e.value}"


def test_the_engines_refusals_are_read_as_its_arguments():
    from ropepool.engine import Engine
    from ropepool.engine.kv_scales import calibrate
    from ropepool.loaders.tiny import tiny

    m = tiny("llama", num_attention_heads=4, num_key_value_heads=2)
    cases = {
        "kv_dtype": lambda: Engine(m, pool_rows=8, kv_dtype="int8"),
        "kv_scales": lambda: Engine(m, pool_rows=8, kv_dtype="fp8", kv_scales=[(1.0, -1.0)] * 2),
        "headroom": lambda: calibrate(m, [[1, 2, 3]], headroom=0),
        "prompts": lambda: calibrate(m, 5),
    }
    for name, call in cases.items():
        text = _engine_refusal(call)
        d = diagnosis_of(text, "llama-3-8b")
        assert d is not None and d.case == "engine_argument", (name, text, d and d.case)
        assert d.read.startswith(f"the engine's argument {name}") and name in d.fix, (name, d.read, d.fix)
        assert main(["explain", text]) == 0


def test_the_op_argument_list_is_the_ops_signatures():
    import inspect

    from ropepool.diagnosis.op import OP_ARGUMENTS
    from ropepool.mla import rope_pool_fused_mla
    from ropepool.op import rope_pool_fused

    names = set(inspect.signature(rope_pool_fused).parameters) | set(inspect.signature(rope_pool_fused_mla).parameters)
    assert OP_ARGUMENTS == names


def test_a_three_axis_view_is_the_attention_output_merged_not_heads_split():
    """Gemma-2-9B: Hq x head_dim = 16 x 256 = 4096, hidden_size 3584; attn_output.view(B, T, hidden_size)."""
    text = "RuntimeError: shape '[1, 7, 3584]' is invalid for input of size 28672"
    d = diagnosis_of(text, "gemma-2-9b")
    assert d.case == "attn_output_width" and "[B, T, 4096]" in d.fix, (d.case, d.fix)
    alone = diagnosis_of(text, None)
    assert alone.case == "ambiguous" and "attn_output_width" in alone.quantity


def test_a_tensor_parallel_shard_of_q_viewed_with_the_full_count_is_named():
    """Llama-3-8B under tp = 2: this rank's q holds 16 x 128 per token, viewed with all 32 heads."""
    d = diagnosis_of("RuntimeError: shape '[1, 7, 32, 128]' is invalid for input of size 14336", "llama-3-8b")
    assert d.case == "ambiguous" and "tp_shard_full_count" in d.quantity and "tp = 2" in d.why


def test_mlx_reshape_of_the_attention_output_is_read_as_pytorch_view_is():
    out = mx.zeros((1, 7, 16 * 256))  # Gemma-2-9B's attention output: Hq x head_dim per token
    d = diagnosis_of(mlx_error(lambda: out.reshape(1, 7, 3584)), "gemma-2-9b")
    assert d.case == "attn_output_width" and "[B, T, 4096]" in d.fix, (d.case, d.fix)


def test_partial_rope_with_the_head_counts_given_but_no_rotary_dim_is_offered():
    """vllm-ascend #6581's text, with the model's head counts and head_dim given but not its rotary_dim."""
    from ropepool.diagnosis import Facts, diagnose

    text = (
        "RuntimeError: The expanded size of the tensor (128) must match the existing size (64) at "
        "non-singleton dimension 3.  Target sizes: [1, 32, 7, 128].  Tensor sizes: [1, 1, 7, 64]"
    )
    d = diagnose(text, Facts(num_qo_heads=32, num_kv_heads=4, head_dim=128))
    assert d.case == "ambiguous" and "rotary_dim" in d.quantity and "partial RoPE" in d.why
