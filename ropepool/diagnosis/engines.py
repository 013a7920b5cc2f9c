"""Serving engines' messages: vLLM, llama.cpp (GGUF) and TensorRT-LLM.

==========================================================================  ==============================
``Total number of attention heads (28) must be divisible by tensor          vLLM's config check
parallel size (8).``
``rope_scaling should have a 'rope_type' key``                              vLLM's config check
``User-specified max_model_len (131072) is greater than the derived         vLLM's _get_and_verify_max_len
max_model_len (max_position_embeddings=32768 ...``
``check_tensor_dims: tensor 'blk.0.attn_k.weight' has wrong shape;          llama.cpp's model loader
expected  4096,  1024, got  4096,  4096,     1,     1``                     (ggml order: [in, out, ...])
``Parameter transformer.layers.0.attention.qkv.weight has invalid shape     TensorRT-LLM's checkpoint
torch.Size([10240, 5120]) compared with expected shape (6400, 5120)``       loader
==========================================================================  ==============================
"""

from __future__ import annotations

import json
import math
import re

from ..models import preset, preset_names
from .base import Diagnosis, Facts, ambiguous
from .heads import weight_case
from .text import ints, last_read, on_line, shapes
from .pytorch import proj_of


#: vLLM's tensor-parallel check: (Hq, tp).
_VLLM_TP = re.compile(
    r"Total number of attention heads \((\d{1,9})\) must be divisible by tensor parallel size \((\d{1,9})\)"
)
#: vLLM's max_model_len check: (asked, the config's key, its value).
_VLLM_MAX_LEN = re.compile(
    r"User-specified max_model_len \((\d{1,12})\) is greater than the derived max_model_len \((\w{1,60})="
    r"(\d{1,12})(?:\.\d{1,6})?"
)
#: llama.cpp's check_tensor_dims: (tensor name, the metadata's dims, the tensor's), in ggml order.
_LLAMA_CPP = re.compile(r"tensor '([\w.]{1,200})' has wrong shape; expected ([\d,\s]{1,120}), got ([\d,\s]{1,120})")
#: TensorRT-LLM's checkpoint loader: (parameter name, the weights' shape, the engine's).
_TENSORRT = re.compile(
    r"Parameter ([\w.]{1,200}) has invalid shape (.{1,80}?) compared with expected shape (\([\d, ]{1,60}\))"
)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _vllm_tp(line: str, f: Facts) -> Diagnosis | None:
    m = _VLLM_TP.search(line)
    if not m:
        return None
    hq, tp = int(m.group(1)), int(m.group(2))
    ok = _divisors(hq)
    kv = f.num_kv_heads
    note = ""
    if kv:
        good = [t for t in ok if kv % t == 0 or t % kv == 0]
        note = f"; with Hkv = {kv}, these keep whole KV heads per rank (split or replicated): {good}"
    return Diagnosis(
        "vllm",
        "vLLM's ModelConfig (verify_with_parallel_config)",
        m.group(0),
        f"{hq} query heads over tp = {tp}",
        "tp_does_not_divide_heads",
        "tp",
        f"tensor parallelism gives each rank num_attention_heads / tp heads: {hq} / {tp} is not "
        f"whole, so a model with {hq} query heads cannot run at tp = {tp}.",
        f"Pick --tensor-parallel-size from the divisors of {hq}: {ok}{note}; or serve the other GPUs "
        "with pipeline parallelism (--pipeline-parallel-size) or as separate replicas.",
    )


def _vllm_rope_type(line: str, f: Facts) -> Diagnosis:
    case, quantity, why, fix = ambiguous(
        [
            (
                "layout",
                "the config's rope_scaling spells the type 'type' (the layout before transformers 4.43): add "
                '"rope_type" with the same value',
            ),
            (
                "scaling",
                "or rope_scaling reached vLLM as a string or an empty dict (an environment variable or "
                "--hf-overrides given text instead of a JSON object): pass a dict, or nothing",
            ),
        ],
        "type(rope_scaling) and its keys as vLLM receives them (print them, or read the engine args logged at start)",
    )
    return Diagnosis(
        "vllm",
        "vLLM's ModelConfig (rope_scaling validation)",
        line.strip()[:300],
        "rope_scaling without 'rope_type'",
        case,
        quantity,
        why,
        fix,
    )


def scaled_variant(f: Facts):
    """The preset of ``f``'s model's long-context variant (the same heads, a RoPE scaling, a Hugging Face id
    that extends ``f.name``), or None."""
    if f.rope_scaling or "/" not in f.name:
        return None
    for name in preset_names():
        p = preset(name)
        same = (p.num_qo_heads, p.num_kv_heads, p.head_dim) == (f.num_qo_heads, f.num_kv_heads, f.head_dim)
        if p.rope_scaling and same and p.name.lower().startswith(f.name.lower()):
            return p
    return None


def _scaled_to(scaling: dict, positions: int) -> int | None:
    """The positions a scaling reaches from ``positions`` (or its original_max_position_embeddings)."""
    factor = scaling.get("factor")
    if not isinstance(factor, (int, float)):
        return None
    return int(factor * scaling.get("original_max_position_embeddings", positions))


def _vllm_max_len(line: str, f: Facts) -> Diagnosis | None:
    m = _VLLM_MAX_LEN.search(line)
    if not m:
        return None
    asked, key, derived = int(m.group(1)), m.group(2), int(m.group(3))
    end = line.find("config.json)", m.end())
    message = line[m.start() : end + len("config.json)") if 0 <= end < m.end() + 200 else m.end()]
    read = f"max_model_len {asked} asked, the config gives {derived} ({key})"
    source = "vLLM's ModelConfig (_get_and_verify_max_len)"
    kind = (f.rope_scaling or {}).get("rope_type") or (f.rope_scaling or {}).get("type")
    if kind and f.max_position_embeddings == derived:
        why = (
            f"{f.name} already scales RoPE ({kind}, factor {f.rope_scaling.get('factor')}) to {derived} positions, "
            f"the context it was tuned for; {asked} is past it."
        )
        fix = (
            f"Serve with --max-model-len {derived} (or less). Past it no scaling of this config was trained: a larger "
            "factor (--hf-overrides) or VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 runs, with quality unmeasured."
        )
        return Diagnosis("vllm", source, message, read, "context_beyond_scaling", "scaling", why, fix)
    variant = scaled_variant(f)
    if variant is not None and (_scaled_to(variant.rope_scaling, derived) or 0) >= asked:
        scaling = dict(variant.rope_scaling)
        said = (
            f"ropepool's preset of {f.name}'s long-context variant ({variant.name}) scales RoPE with "
            f"{json.dumps(scaling)}, reaching {_scaled_to(scaling, derived)} positions"
        )
    else:
        factor = float(math.ceil(asked / derived * 100) / 100)
        scaling = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": derived}
        said = f"YaRN by {asked} / {derived} = {factor:g} reaches {asked} positions (Qwen's and DeepSeek's recipe)"
    why = (
        f"the config gives {derived} positions ({key}) and no RoPE scaling reaches vLLM: positions past {derived} "
        f"were never trained, and vLLM refuses max_model_len = {asked}."
    )
    overrides = json.dumps({"rope_scaling": scaling})
    fix = (
        f"Scale RoPE: {said}: --hf-overrides '{overrides}' (transformers 5 configs: rope_parameters); or serve "
        f"--max-model-len {derived}. VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 only silences the check: positions past "
        f"{derived} without a scaling give garbage."
    )
    return Diagnosis("vllm", source, message, read, "context_beyond_positions", "scaling", why, fix)


def _llama_cpp(line: str, f: Facts) -> Diagnosis | None:
    m = _LLAMA_CPP.search(line)
    if not m:
        return None
    name, want, have = m.group(1), ints(m.group(2)), ints(m.group(3))
    read = f"{name}: the GGUF metadata asks [{', '.join(map(str, want))}], the tensor is [{', '.join(map(str, have))}]"
    source = "llama.cpp's model loader (llama-model-loader.cpp, check_tensor_dims)"
    proj = proj_of(name)
    if proj is None or len(want) < 2 or len(have) < 2:
        return Diagnosis(
            "llama.cpp",
            source,
            m.group(0),
            read,
            "not_attention",
            "vocab",
            f"{name} is not an attention projection: its size disagrees with the metadata (for "
            "token_embd/output: the vocabulary size, a tokenizer from another model or an added token).",
            "Re-convert with the tokenizer of these weights (tokenizer.ggml.tokens must have as many "
            "entries as the embedding rows).",
        )
    case, quantity, why, fix = weight_case(
        proj, have[1], want[1], f, cols=want[0], where="the GGUF's metadata (llama.attention.head_count_kv, key_length)"
    )
    if case == "config_without_kv_heads":
        fix = (
            "Update llama.cpp (or koboldcpp): a loader without GQA support assumes head_count_kv = head_count; "
            "with a current one, re-convert so the GGUF carries llama.attention.head_count_kv."
        )
    return Diagnosis("llama.cpp", source, m.group(0), read, case, quantity, why, fix)


def _tensorrt(line: str, f: Facts) -> Diagnosis | None:
    m = _TENSORRT.search(line)
    if not m:
        return None
    name = m.group(1)
    found = shapes(m.group(2)) + shapes(m.group(3))
    proj = proj_of(name)
    if proj is None or len(found) < 2:
        return None
    have, want = found[0], found[1]
    case, quantity, why, fix = weight_case(
        proj, have[0], want[0], f, cols=have[-1], where="TensorRT-LLM's converted config"
    )
    return Diagnosis(
        "tensorrt-llm",
        "TensorRT-LLM's checkpoint loader (models/modeling_utils.py)",
        m.group(0),
        f"{name}: the weights {have}, the engine's config {want}",
        case,
        quantity,
        why,
        fix,
    )


#: Each message's phrase, and its reader.
_READERS = {
    "must be divisible by tensor parallel size": on_line(_vllm_tp),
    "rope_scaling should have a 'rope_type' key": on_line(_vllm_rope_type),
    "has wrong shape; expected": on_line(_llama_cpp),
    "compared with expected shape": on_line(_tensorrt),
    "is greater than the derived max_model_len": on_line(_vllm_max_len),
}


def diagnose(text: str, f: Facts) -> tuple[int, Diagnosis] | None:
    """The last vLLM, llama.cpp or TensorRT-LLM message in ``text``, diagnosed; with its position."""
    return last_read(text, _READERS, f)
