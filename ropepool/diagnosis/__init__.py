"""Why a RoPE, GQA or KV-cache error happened: the numbers of its message, and which mistake they point to.

One recogniser per family of messages, each reading its numbers out of the text (linear time:
:mod:`.text`), and shared reasoning over heads, head_dim, tokens, rotary_dim and tp (:mod:`.heads`):

==================  ==============================================================================
:mod:`.op`          the op's own: SGLang's messages (verbatim) and ropepool's; also the op's hint
:mod:`.pytorch`     PyTorch: ``view``, broadcasting, ``expand``, ``einsum``, indexing (and NumPy's),
                    ``load_state_dict`` (what transformers prints)
:mod:`.hf_config`   transformers' RoPE config checks (longrope lists' length too); a reader's ``KeyError``
:mod:`.apple_mlx`   MLX (reshape, broadcast, SDPA, rope, strict weight load) and mlx-lm (weights, RoPE config)
:mod:`.engines`     vLLM (tp, rope_type, max_model_len), llama.cpp (GGUF tensors), TensorRT-LLM (weights)
:mod:`.engine_args` ropepool.engine's own argument refusals (``EngineArgumentError``)
:mod:`.silent`      checklists for failures with no message (GGUF pairs, long context, FP8 2x)
==================  ==============================================================================

:func:`diagnose` runs them all and keeps the message printed last (a traceback's final line). A message
none of them reads goes to :mod:`.unknown`: read from its numbers by the same core (:mod:`.sizes`), from
the words it names (heads, RoPE, positions, the KV cache), or said foreign (a tokenizer, the CUDA
driver, the network).

Example
-------
>>> d = diagnose("RuntimeError: shape '[1, 7, 32, 128]' is invalid for input of size 7168",
...              Facts(num_qo_heads=32, num_kv_heads=8, head_dim=128))
>>> d.case, d.quantity
('kv_viewed_with_hq', 'heads')
"""

from __future__ import annotations

from . import apple_mlx, engine_args, engines, hf_config, op, pytorch, unknown
from .base import Case, Diagnosis, Facts
from .op import K_CASES, SHAPE_CODES, ReadError, case_of, k_shape_case, read_error
from .silent import CHECKLISTS, SETUP, checklist
from .text import Unreadable, clean, read_shape

__all__ = [
    "Case",
    "Diagnosis",
    "Facts",
    "K_CASES",
    "SHAPE_CODES",
    "ReadError",
    "case_of",
    "k_shape_case",
    "read_error",
    "read_shape",
    "diagnose",
    "FAMILIES",
    "CHECKLISTS",
    "SETUP",
    "checklist",
    "Unreadable",
]

#: The families read, in words (the README and ``--help`` list them).
FAMILIES = (
    "SGLang",
    "ropepool",
    "PyTorch (view, broadcasting, expand, einsum, indexing, load_state_dict)",
    "NumPy indexing",
    "transformers",
    "MLX",
    "mlx-lm",
    "vLLM",
    "llama.cpp",
    "TensorRT-LLM",
    "ropepool.engine's argument checks",
)

#: The phrases the families' readers look for.
_PHRASES = tuple(phrase for family in (pytorch, hf_config, apple_mlx, engines) for phrase in family._READERS)
_RECOGNISERS = (pytorch.diagnose, hf_config.diagnose, apple_mlx.diagnose, engines.diagnose, engine_args.diagnose)


def diagnose(text: str, facts: Facts | None = None, others_of=None) -> Diagnosis | None:
    """The diagnosis of the last message any family recognises in ``text``, for the model of ``facts``.

    ``others_of(heads, head_dim)`` may name other models with that head count (for a foreign k).
    None if neither a family nor the reading of numbers and words (:mod:`.unknown`) reads the text. Raises :class:`Unreadable` (one line) for numbers no tensor has.
    Time: linear in ``len(text)``.
    """
    f = facts or Facts()
    text = clean(text)
    found = []
    read = op.read_error(text)
    if read is not None:
        found.append((text.rfind(read.line), op.diagnose(text, f, others_of)))
    for recognise in _RECOGNISERS:
        hit = recognise(text, f)
        if hit is not None:
            found.append(hit)
    if not found:  # a family's message it chose not to read (an MLP weight's mismatch) stays unread
        return None if any(phrase in text for phrase in _PHRASES) else unknown.diagnose(text, f)
    return max(found, key=lambda hit: hit[0])[1]
