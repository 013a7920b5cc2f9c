"""SmolLM2-135M-Instruct from its GGUF: config, quantization, tokenizer, the Q/K pairing, a real answer.

Needs the model (``python -m ropepool fetch-model``; ``make test`` fetches it): where it cannot be
fetched, every test here skips with the reason. The model loads once per session; each forward
pass on a CPU takes seconds, so the prompts are short and the answers at most 12 tokens. The engine
serves the GGUF layout (GPT-J pairs) and is checked against mlx-lm's own loop, request by request.
"""

from types import SimpleNamespace

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest

from ropepool.engine import generate, rope_kwargs
from ropepool.engine.fetch import ModelUnavailable
from ropepool.engine.gguf import GGUFError, build_model, config_from_metadata, dequantize_model, head_row_order, rename
from ropepool.engine.mlx_lm_loop import greedy
from ropepool.engine.smollm2 import QUESTIONS, fetch_smollm2, load_smollm2
from ropepool.engine.tiny_models import tiny
from ropepool.engine.tokenizer import GGUFTokenizer, TokenizerError
from ropepool.tolerance import ENGINE_LOGITS_SMOLLM2

# One worker loads the model and runs these (make test: --dist loadgroup), not each worker its own copy.
pytestmark = pytest.mark.xdist_group("smollm2")

FRANCE = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="session")
def smol():
    """Both layouts of the model as loaded by default (sharing the tokenizer), the raw GGUF, and the France prompt's answer."""
    try:
        path = fetch_smollm2()
    except ModelUnavailable as err:
        pytest.skip(str(err))
    gptj, tokenizer, rope = load_smollm2(pairs="gptj")
    weights, metadata = mx.load(str(path), return_metadata=True)
    dequantized = not isinstance(gptj.model.layers[0].self_attn.q_proj, nn.QuantizedLinear)
    neox, rope_neox = build_model(weights, metadata, pairs="neox", dequantize=dequantized)
    prompt = tokenizer.apply_chat_template(FRANCE)
    (answer,) = greedy(gptj, [prompt], 12, stop=tokenizer.eos_token_id)
    return SimpleNamespace(gptj=gptj, neox=neox, tokenizer=tokenizer, rope=rope, rope_neox=rope_neox,
                           weights=weights, metadata=metadata, prompt=prompt, answer=answer)


def test_config_from_the_gguf_metadata(smol):
    config = config_from_metadata(smol.metadata, smol.weights)
    assert (config["num_hidden_layers"], config["num_attention_heads"], config["num_key_value_heads"],
            config["head_dim"], config["hidden_size"]) == (30, 9, 3, 64, 576)
    assert config["rope_theta"] == 100_000.0 and config["tie_word_embeddings"] is True
    p = smol.rope.params
    assert (p.name, p.num_qo_heads, p.num_kv_heads, p.group_size, p.head_dim, p.rope_base) == (
        "HuggingFaceTB/SmolLM2-135M-Instruct", 9, 3, 3, 64, 100_000.0)
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


@pytest.mark.parametrize("text", [
    "What is the capital of France?",
    "Paris, 1889: the tower is 330 m tall.",   # digits split one by one
    "  two spaces,\ttabs\nand newlines\n\n",
    "naïve café — 東京 🙂",                      # multi-byte UTF-8
    "<|im_start|>user\nhi<|im_end|>\n",          # control tokens written as text
])
def test_tokenizer_round_trips(smol, text):
    ids = smol.tokenizer.encode(text)
    assert smol.tokenizer.decode(ids) == text


def test_control_tokens_are_single_ids(smol):
    tok = smol.tokenizer
    assert tok.encode("<|im_start|>") == [tok.bos_token_id] == [1]
    assert tok.encode("<|im_end|>") == [tok.eos_token_id] == [2]


def test_chat_template_is_chatml_with_the_default_system_prompt(smol):
    text = smol.tokenizer.render_chat(FRANCE)
    assert text == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                    "<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                    "<|im_start|>assistant\n")
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


def test_both_layouts_are_one_model(smol):
    """GGUF rows + GPT-J pairs and un-permuted rows + NeoX pairs: the same logits at every position."""
    ids = mx.array([smol.tokenizer.encode("The capital of France is")])  # [1, T]
    a, b = smol.gptj(ids), smol.neox(ids)  # [1, T, vocab]
    np.testing.assert_allclose(np.array(b), np.array(a), rtol=0, atol=1e-3)
    assert smol.tokenizer.decode([int(mx.argmax(a[0, -1]))]) == " Paris"


def test_the_model_answers_paris(smol):
    text = smol.tokenizer.decode(smol.answer.tokens, skip_special_tokens=True)
    assert "Paris" in text, text


def test_the_mismatched_pairing_changes_the_answer(smol):
    """GGUF rows with NeoX pairs: the chat answer's first tokens already differ (short plain prompts may not)."""
    wrong, _ = build_model(smol.weights, smol.metadata, pairs="gptj")
    for layer in wrong.model.layers:
        layer.self_attn.rope = nn.RoPE(64, traditional=False, base=100_000.0)
    (mismatched,) = greedy(wrong, [smol.prompt], 2)
    assert mismatched.tokens != smol.answer.tokens[:2]
    assert "Paris" not in smol.tokenizer.decode(mismatched.tokens)


# --- Served through the engine: GPT-J pairs through rope_pool_fused, three requests, a small pool ---------

NEW = 8  # Romeo's answer is cut there; the other two end at <|im_end|> first
POOL_ROWS = 96  # the requests need 44, 45 and 43 rows: two fit at once, the third waits


@pytest.fixture(scope="module")
def served(smol):
    """The three questions served together by the engine (GGUF rows, GPT-J pairs), and by mlx-lm alone."""
    prompts = [smol.tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in QUESTIONS]
    waited, holders = set(), {}

    def on_step(engine, batch):
        waited.update(r.rid for r in engine.scheduler.waiting)
        for r in batch.admitted:
            for row in r.slot_table:
                holders.setdefault(row, set()).add(r.rid)

    eos = smol.tokenizer.eos_token_id
    results = generate(smol.gptj, prompts, NEW, pool_rows=POOL_ROWS, stop=eos, on_step=on_step)
    # mlx-lm: its RoPE, its cache, one request at a time (France's 12-token answer ends within NEW, at <|im_end|>)
    assert prompts[0] == smol.prompt and len(smol.answer.tokens) <= NEW
    alone = [smol.answer] + greedy(smol.gptj, prompts[1:], NEW, stop=eos)
    return SimpleNamespace(prompts=prompts, results=results, alone=alone, waited=waited, holders=holders)


def test_the_engine_rotates_gptj_pairs(smol):
    """The GGUF layout reaches the op as is_neox=False (mlx-lm's rope_traditional=True)."""
    kwargs = rope_kwargs(smol.gptj)
    assert kwargs["is_neox"] is False and (kwargs["num_kv_heads"], kwargs["head_dim"]) == (3, 64)


def test_the_small_pool_made_a_request_wait_and_reused_rows(served):
    assert sum(len(p) for p in served.prompts) + 3 * (NEW - 1) > POOL_ROWS
    assert served.waited == {2}, served.waited
    assert any(len(rids) > 1 for rids in served.holders.values()), "no row was reused"


def test_every_engine_token_is_the_argmax_of_its_logits(served):
    for i, r in enumerate(served.results):
        assert r.logits.dtype == mx.float32 and r.logits.shape == (len(r.tokens), 49_152), f"request {i}"
        assert r.tokens == mx.argmax(r.logits, axis=-1).tolist(), f"request {i}"


def test_engine_logits_match_mlx_lm_for_each_request_alone(served):
    for i, (r, a) in enumerate(zip(served.results, served.alone)):
        assert r.tokens == a.tokens, f"request {i}: engine {r.tokens} vs mlx-lm {a.tokens}"
        np.testing.assert_allclose(np.array(r.logits), np.array(a.logits), **ENGINE_LOGITS_SMOLLM2,
                                   err_msg=f"request {i}")


def test_engine_answers_are_mlx_lm_text(served, smol):
    decode = lambda tokens: smol.tokenizer.decode(tokens, skip_special_tokens=True)  # noqa: E731
    got = [decode(r.tokens) for r in served.results]
    assert got == [decode(a.tokens) for a in served.alone]
    assert "Paris" in got[0] and "5" in got[1] and "Romeo" in got[2], got
    assert [r.tokens[-1] == smol.tokenizer.eos_token_id for r in served.results] == [True, True, False]


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
    full = model(mx.array([prompt + r.tokens[:-1]]))[0, len(prompt) - 1:]  # [5, vocab]
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
