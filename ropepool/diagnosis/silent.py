"""Checklists for the failures that print nothing: ``python -m ropepool explain --silent SYMPTOM``.

Each check is one line of code against the suite's functions, run after :data:`SETUP` (small
example values), with what it shows; ``holds`` is what the line gives on a correct setup (the tests
run every line). Replace the example values with your model's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    what: str  # what to look at, and what the answer means
    code: str  # one line: an expression
    holds: str  # an expression of ``r`` (the line's value) true on the example


@dataclass(frozen=True)
class Checklist:
    symptom: str
    title: str
    likely: str
    checks: tuple[Check, ...]


#: The imports and example values every check line runs after.
SETUP = (
    "import numpy as np, mlx.core as mx; from ropepool.rope import rope_table; "
    "from ropepool.reference import rotate; "
    "from ropepool.loaders.gguf import head_row_order; from ropepool.models import preset, from_config; "
    "from ropepool.fp8 import decode_table, encode; D, base = 8, 10000.0; "
    "x = np.random.default_rng(0).standard_normal((3, 1, D)); pos = np.arange(3); "
    "codes = np.array([0x38, 0x40, 0x30]); yours = decode_table()[codes] * 2"
)

CHECKLISTS = {
    "garbled-gguf": Checklist(
        "garbled-gguf",
        "Garbled text after loading GGUF weights",
        "the pair convention: GGUF stores llama-family q/k rows for GPT-J pairs (2i, 2i+1); a NeoX rotation "
        "(i, i + D/2) of those rows scrambles every position but 0.",
        (
            Check(
                "NeoX pairs (i, i + D/2) against GPT-J pairs (2i, 2i+1): which one your rotation uses",
                "rope_table(D, base).pairs()[1].tolist(), rope_table(D, base, is_neox=False).pairs()[1].tolist()",
                "r == ([1, 5], [2, 3])",
            ),
            Check(
                "the two agree at position 0 and differ after it: a reply whose first token is right and the rest "
                "garbled is this mistake, not the tokenizer",
                "np.abs(rotate(x, pos, rope_table(D, base)) - rotate(x, pos, rope_table(D, base, is_neox=False)))"
                ".max(axis=(1, 2))",
                "r[0] == 0 and r[1:].min() > 0",
            ),
            Check(
                "the row order that takes GGUF rows to Hugging Face rows (loaders.gguf.halves_from_pairs applies it "
                "to q_proj and k_proj; then rotate with is_neox=True)",
                "head_row_order(1, D).tolist()",
                "r == [0, 2, 4, 6, 1, 3, 5, 7]",
            ),
            Check(
                "permuting the rows and switching the convention are the same fix: both rotations agree",
                "np.allclose(rotate(x[..., head_row_order(1, D)], pos, rope_table(D, base)), "
                "rotate(x, pos, rope_table(D, base, is_neox=False))[..., head_row_order(1, D)])",
                "r",
            ),
        ),
    ),
    "long-context": Checklist(
        "long-context",
        "Quality drops on long prompts only",
        "the RoPE base over the wrong width (partial RoPE: rotary_dim, not head_dim), the scaling not read "
        "(rope_scaling, or transformers 5's rope_parameters), or rope_theta left at its 10000 default.",
        (
            Check(
                "partial RoPE (Phi-2: 32 of 80 dimensions): inv_freq[1] is base**(-2/rotary_dim), not "
                "base**(-2/head_dim)",
                "rope_table(80, 10000.0, rotary_dim=32).inv_freq[1]",
                "abs(r - 10000.0 ** (-2 / 32)) < 1e-12 and abs(r - 10000.0 ** (-2 / 80)) > 1e-3",
            ),
            Check(
                "what the loader reads from the config (for yours: from_config(load_config('config.json')))",
                "preset('phi-2').rotary_dim, preset('qwen2.5-7b-yarn').rope().rope_type",
                "r == (32, 'yarn')",
            ),
            Check(
                "transformers 5 keeps rope_theta inside rope_parameters: a reader of the top level alone gets 10000",
                "from_config({'num_attention_heads': 32, 'num_key_value_heads': 8, 'hidden_size': 4096, "
                "'rope_parameters': {'rope_type': 'default', 'rope_theta': 500000.0}}).rope_base",
                "r == 500000.0",
            ),
            Check(
                "scaling stretches the slow pairs: the longest wavelength grows (compare it with your context)",
                "preset('qwen2.5-7b-yarn').rope().wavelengths().max() / preset('qwen2.5-7b').rope().wavelengths().max()",
                "r > 1.5",
            ),
        ),
    ),
    "fp8-2x": Checklist(
        "fp8-2x",
        "FP8 cache values off by exactly 2x (or 0.5x)",
        "e4m3fn bytes read as e4m3fnuz or the reverse: the same bits, exponent bias 7 (fn: vLLM, SGLang, "
        "FlashInfer, this suite) against 8 (fnuz: AMD MI300), so every value is off by exactly 2.",
        (
            Check(
                "e4m3fn's 0x38 is 1.0 (bias 7); e4m3fnuz reads the same byte as 0.5",
                "float(decode_table()[0x38])",
                "r == 1.0",
            ),
            Check(
                "encode a known value and read it back with your reader: 1.0 must give 0x38 and come back 1.0",
                "int(encode(mx.array([1.0]))[0])",
                "r == 0x38",
            ),
            Check(
                "the ratio of your values to the suite's decode of the same bytes: exactly one number, 2.0 or 0.5, "
                "is the format; any other factor is a scale (k_scale, v_scale) applied twice or not at all",
                "np.unique(yours / decode_table()[codes]).tolist()",
                "r == [2.0]",
            ),
            Check(
                "the special codes differ as well: fn's 0x7F is NaN and 0x80 is -0.0; in fnuz 0x80 is NaN",
                "bool(np.isnan(decode_table()[0x7F])), float(decode_table()[0x80])",
                "r == (True, 0.0)",
            ),
        ),
    ),
}

ALIASES = {"gguf": "garbled-gguf", "garbled": "garbled-gguf", "long": "long-context", "fp8": "fp8-2x"}


def checklist(symptom: str) -> Checklist | None:
    """The checklist of ``symptom`` (a name of :data:`CHECKLISTS` or an alias), or None."""
    key = symptom.strip().lower()
    return CHECKLISTS.get(ALIASES.get(key, key))
