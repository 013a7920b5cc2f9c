"""SmolLM2-135M-Instruct from its GGUF: config, quantization, tokenizer, the Q/K pairing.

Needs the model (``python -m ropepool fetch-model``; ``make test`` fetches it): where it cannot be
fetched, every test here skips with the reason. The model loads once per session and runs no
forward pass here: notebook 08, which nbmake runs, answers with it (both layouts give the same
logits, the wrong pairing changes the answer, the engine serves three questions through a small
pool and matches mlx-lm's own loop request by request). The loader's errors and ``greedy`` are
checked on a tiny random model.
"""

from types import SimpleNamespace

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest

from ropepool.engine import rope_kwargs
from ropepool.loaders.fetch import ModelUnavailable
from ropepool.loaders.gguf import GGUFError, build_model, config_from_metadata, dequantize_model, head_row_order, rename
from ropepool.engine.mlx_lm_loop import greedy
from ropepool.loaders.smollm2 import fetch_smollm2, load_smollm2
from ropepool.loaders.tiny import tiny
from ropepool.loaders.tokenizer import GGUFTokenizer, TokenizerError


FRANCE = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="session")
def smol():
    """Both layouts of the model (sharing the tokenizer), the raw GGUF, and the France prompt."""
    try:
        path = fetch_smollm2()
    except ModelUnavailable as err:
        pytest.skip(str(err))
    gptj, tokenizer, rope = load_smollm2(pairs="gptj")
    weights, metadata = mx.load(str(path), return_metadata=True)
    dequantized = not isinstance(gptj.model.layers[0].self_attn.q_proj, nn.QuantizedLinear)
    neox, rope_neox = build_model(weights, metadata, pairs="neox", dequantize=dequantized)
    return SimpleNamespace(
        gptj=gptj,
        neox=neox,
        tokenizer=tokenizer,
        rope=rope,
        rope_neox=rope_neox,
        weights=weights,
        metadata=metadata,
        prompt=tokenizer.apply_chat_template(FRANCE),
    )


def test_config_from_the_gguf_metadata(smol):
    config = config_from_metadata(smol.metadata, smol.weights)
    assert (
        config["num_hidden_layers"],
        config["num_attention_heads"],
        config["num_key_value_heads"],
        config["head_dim"],
        config["hidden_size"],
    ) == (30, 9, 3, 64, 576)
    assert config["rope_theta"] == 100_000.0 and config["tie_word_embeddings"] is True
    p = smol.rope.params
    assert (p.name, p.num_qo_heads, p.num_kv_heads, p.group_size, p.head_dim, p.rope_base) == (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        9,
        3,
        3,
        64,
        100_000.0,
    )
    assert smol.rope.traditional and not smol.rope_neox.traditional
    assert smol.gptj.args.rope_traditional and not smol.neox.args.rope_traditional


def test_quantized_as_shipped(smol):
    shipped, _ = build_model(smol.weights, smol.metadata, pairs="gptj")
    attn = shipped.model.layers[0].self_attn
    assert isinstance(attn.q_proj, nn.QuantizedLinear) and (attn.q_proj.bits, attn.q_proj.group_size) == (4, 32)
    embed = shipped.model.embed_tokens
    assert isinstance(embed, nn.QuantizedEmbedding) and (embed.bits, embed.group_size) == (8, 32)


def test_float32_by_default_on_the_cpu(smol):
    if mx.default_device().type != mx.DeviceType.cpu:
        pytest.skip("on a GPU the model loads quantized, as shipped")
    q_proj, embed = smol.gptj.model.layers[0].self_attn.q_proj, smol.gptj.model.embed_tokens
    assert type(q_proj) is nn.Linear and q_proj.weight.dtype == mx.float32
    assert type(embed) is nn.Embedding and embed.weight.dtype == mx.float32


@pytest.mark.parametrize(
    "text",
    [
        "What is the capital of France?",
        "Paris, 1889: the tower is 330 m tall.",  # digits split one by one
        "  two spaces,\ttabs\nand newlines\n\n",
        "naïve café — 東京 🙂",  # multi-byte UTF-8
        "<|im_start|>user\nhi<|im_end|>\n",  # control tokens written as text
    ],
)
def test_tokenizer_round_trips(smol, text):
    ids = smol.tokenizer.encode(text)
    assert smol.tokenizer.decode(ids) == text


def test_control_tokens_are_single_ids(smol):
    tok = smol.tokenizer
    assert tok.encode("<|im_start|>") == [tok.bos_token_id] == [1]
    assert tok.encode("<|im_end|>") == [tok.eos_token_id] == [2]


def test_chat_template_is_chatml_with_the_default_system_prompt(smol):
    text = smol.tokenizer.render_chat(FRANCE)
    assert text == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
        "<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert smol.prompt == smol.tokenizer.encode(text)


def test_unpermuting_moves_quantized_rows_exactly(smol):
    """Row r of the NeoX-layout q_proj is GGUF row order[r], bit for bit (weights, scales and biases)."""
    gptj, _ = build_model(smol.weights, smol.metadata, pairs="gptj")  # quantized, as shipped
    neox, _ = build_model(smol.weights, smol.metadata, pairs="neox")
    for proj, heads in (("q_proj", 9), ("k_proj", 3)):
        a = getattr(gptj.model.layers[7].self_attn, proj)
        b = getattr(neox.model.layers[7].self_attn, proj)
        order = head_row_order(heads, 64)
        for name in ("weight", "scales", "biases"):
            assert np.array_equal(np.array(getattr(b, name)), np.array(getattr(a, name))[order]), (proj, name)


def test_the_engine_rotates_gptj_pairs(smol):
    """The GGUF layout reaches the op as is_neox=False (mlx-lm's rope_traditional=True)."""
    kwargs = rope_kwargs(smol.gptj)
    assert kwargs["is_neox"] is False and (kwargs["num_kv_heads"], kwargs["head_dim"]) == (3, 64)


def test_greedy_checks_its_arguments():
    with pytest.raises(ValueError, match="max_new_tokens: expected an int or 2 ints"):
        greedy(None, [[1], [2]], [3])
    with pytest.raises(ValueError, match=r"prompts\[1\] is empty"):
        greedy(None, [[1], []], 3)


# --- Without the model: the loader's errors and the dequantize path on a tiny random Llama -------------


def test_a_non_llama_gguf_is_refused():
    with pytest.raises(GGUFError, match="general.architecture is 'qwen2', expected 'llama'"):
        config_from_metadata({"general.architecture": "qwen2"}, {})


def test_rope_scaling_is_refused():
    meta = {"general.architecture": "llama", "llama.rope.scaling.type": "yarn"}
    with pytest.raises(GGUFError, match="llama.rope.scaling.type is 'yarn': not handled"):
        config_from_metadata(meta, {})


def test_an_unknown_tensor_is_refused_not_dropped():
    with pytest.raises(GGUFError, match="unknown GGUF tensor 'blk.0.attn_qkv.weight'"):
        rename({"blk.0.attn_qkv.weight": mx.zeros((2, 2))})


def test_pairs_must_be_gptj_or_neox():
    with pytest.raises(GGUFError, match="pairs must be 'gptj' or 'neox', got 'halves'"):
        build_model({}, {}, pairs="halves")


def test_only_byte_level_bpe_tokenizers_are_built():
    with pytest.raises(TokenizerError, match="tokenizer.ggml.model is 'llama': only 'gpt2'"):
        GGUFTokenizer({"tokenizer.ggml.model": "llama"})


def tiny_llama():
    return tiny("llama", num_attention_heads=4, num_key_value_heads=2, vocab_size=100)


def test_greedy_keeps_the_logits_each_token_was_chosen_from():
    model, prompt = tiny_llama(), [1, 5, 7, 9]
    (r,) = greedy(model, [prompt], 5)
    assert r.logits.shape == (5, 100) and r.logits.dtype == mx.float32
    assert r.tokens == mx.argmax(r.logits, axis=-1).tolist()
    # the same sequence in one pass, without a cache: row i predicts new token i
    full = model(mx.array([prompt + r.tokens[:-1]]))[0, len(prompt) - 1 :]  # [5, vocab]
    np.testing.assert_allclose(np.array(r.logits), np.array(full), rtol=0, atol=1e-4)


def test_greedy_stops_after_the_stop_token():
    model, prompt = tiny_llama(), [1, 5, 7, 9]
    (full,) = greedy(model, [prompt], 5)
    first = full.tokens.index(full.tokens[1])  # where that token first appears (random weights repeat)
    (cut,) = greedy(model, [prompt], 5, stop=full.tokens[1])
    assert cut.tokens == full.tokens[: first + 1] and cut.logits.shape == (first + 1, 100)


def test_dequantize_model_matches_the_quantized_layers():
    model = tiny_llama()
    nn.quantize(model, group_size=32, bits=4)
    ids = mx.array([[1, 5, 7, 9]])
    before = model(ids)  # [1, T, vocab]
    dequantize_model(model, mx.float32)
    assert isinstance(model.model.layers[1].mlp.up_proj, nn.Linear)
    assert isinstance(model.model.embed_tokens, nn.Embedding)
    np.testing.assert_allclose(np.array(model(ids)), np.array(before), rtol=0, atol=1e-4)


def test_smollm2_as_shipped_is_served_token_for_token_as_mlx_lm_serves_it():
    """Its Q4_1/Q8_0 layers kept (``dequantize=False``): the engine's tokens are mlx-lm's, each logit within
    ENGINE_LOGITS_SMOLLM2, a chat question and a plain prompt of another length served together."""
    from ropepool.engine import generate
    from ropepool.tolerance import ENGINE_LOGITS_SMOLLM2

    try:
        model, tokenizer, _ = load_smollm2(dequantize=False)
    except ModelUnavailable as err:
        pytest.skip(str(err))
    assert isinstance(model.model.layers[0].self_attn.q_proj, nn.QuantizedLinear)
    prompts = [
        tokenizer.apply_chat_template(FRANCE),
        tokenizer.encode("2 + 3 ="),
    ]
    served = generate(model, prompts, 5, pool_rows=96)
    for got, want in zip(served, greedy(model, prompts, 5)):
        assert got.tokens == want.tokens
        np.testing.assert_allclose(np.array(got.logits), np.array(want.logits), **ENGINE_LOGITS_SMOLLM2)
