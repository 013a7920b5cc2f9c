"""The engine's own refusals (``EngineArgumentError``): an argument of ``ropepool.engine``, not the op's.

``Engine(...)``, ``generate(...)`` and ``kv_scales.calibrate(...)`` check their arguments before any
forward pass; each message starts with the argument's name and says what it must be. Read as the op's
``argument_type`` they would get a fix about head counts, so they are read here: the argument, and
the change that makes the refusal go away.
"""

from __future__ import annotations

import re

from .base import Diagnosis, Facts
from .text import line_at

SOURCE = "ropepool.engine's argument checks (engine/arguments.py, generate.py, runner.py, kv_scales.py)"

#: Each engine argument, and the fix for a refusal of it.
FIXES = {
    "kv_dtype": "Pass kv_dtype=None (pools in the activations' dtype) or kv_dtype='fp8' (uint8 e4m3 pools).",
    "kv_scales": "Pass kv_dtype='fp8' with kv_scales, and one (k_scale, v_scale) pair of positive numbers per "
    "layer: ropepool.engine.kv_scales.calibrate(model, prompts) measures them.",
    "headroom": "Pass headroom as a finite number > 0 (2.0: scales twice the largest value seen).",
    "prompts": "Pass prompts as an iterable of prompts, each a non-empty list of int token ids "
    "(tokenizer.encode(text)), not one prompt or a string.",
    "prompt": "Pass the prompt as a non-empty list of int token ids below the model's vocab size.",
    "page_size": "Pass a page_size that divides pool_rows (1, or a power of two such as 16).",
    "pool_rows": "Pass pool_rows as an int >= 1 that fits this machine's memory (the message gives the GiB).",
    "max_new_tokens": "Pass max_new_tokens as an int >= 1, or a list with one count per prompt.",
    "max_step_tokens": "Pass max_step_tokens as an int >= 1 (the tokens one step may compute).",
    "keep_logits": "Pass keep_logits=True or keep_logits=False.",
    "prefix_cache": "Pass prefix_cache=True or False, or a factory allocator -> cache (ropepool.engine.protocols).",
    "allocator": "Pass a class or factory that builds the part (ropepool.engine.protocols says what it must do).",
    "scheduler": "Pass a class or factory that builds the part (ropepool.engine.protocols says what it must do).",
    "stop": "Pass stop as a list of int token ids (or None).",
}

_MESSAGE = re.compile(
    r"(?:EngineArgumentError:\s*)?\b(" + "|".join(FIXES) + r")(\[\d+\])?(?::| must | is empty| scale | needs )"
)


def diagnose(text: str, f: Facts) -> tuple[int, Diagnosis] | None:
    """The last engine refusal in ``text``, read; with its position. Only a line that names an engine
    argument first (``kv_scales[0] must be ...``), or says ``EngineArgumentError``, is one."""
    best = None
    for m in _MESSAGE.finditer(text):
        before = text[text.rfind("\n", 0, m.start(1)) + 1 : m.start(1)].strip()  # its line, up to the name
        if before and not before.endswith(("EngineArgumentError:", "Error:")):
            continue  # the name is inside another message, not the start of an engine refusal
        best = m
    if best is None:
        return None
    name = best.group(1)
    line = line_at(text, best.start()).strip()
    return best.start(), Diagnosis(
        "ropepool",
        SOURCE,
        line[:500],
        f"the engine's argument {name}{best.group(2) or ''}",
        "engine_argument",
        "arguments",
        f"ropepool.engine refused its argument {name} before any forward pass (the op's shapes are not "
        "involved): the message says what the argument must be and what was passed.",
        FIXES[name],
    )
