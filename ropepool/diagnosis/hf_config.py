"""transformers' RoPE config messages, and the ``KeyError`` of any reader whose layout is not the config's.

Configs changed spelling twice: ``rope_scaling: {type, factor}`` (until 4.42), ``{rope_type, ...}``
(4.43, Llama 3.1's ``llama3``), and transformers 5's ``rope_parameters`` holding ``rope_theta`` too.
A reader and a config from different sides of a change give these messages:

=====================================================================  ==================================
```rope_scaling` must be a dictionary with (with) two fields, `type`    transformers < 4.43 reading a
and `factor`, got {...}``                                              ``rope_type`` config
``Missing required keys in `rope_parameters` for 'rope_type'='llama3'  a config missing a type's fields
: {...}``                                                              (transformers 5; 4.4x: rope_scaling)
``'LlamaConfig' object has no attribute 'rope_theta'``                 code for transformers 4 on 5
``KeyError: 'type'`` / ``KeyError: 'rope_type'`` (in a RoPE reader)     reader older / newer than the config
``Unrecognized keys in `rope_scaling` for 'rope_type'='linear'``       a warning, harmless
```rope_parameters`'s long_factor field must have length 64, got 48``  a longrope list's length, checked
                                                                       against rotary_dim / 2 (Phi3Config)
=====================================================================  ==================================
"""

from __future__ import annotations

import ast
import re

from .base import Diagnosis, Facts, ambiguous
from .text import WINDOW, last_read, line_at, on_line

SOURCE = "transformers' RoPE config validation (modeling_rope_utils.py, configuration_llama.py)"


def _dict(line: str) -> dict | None:
    m = re.search(r"\{[^{}]{0,1500}\}", line)
    if not m:
        return None
    try:
        value = ast.literal_eval(m.group(0))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, (dict, set)) else None


def _two_fields(line: str, f: Facts) -> Diagnosis | None:
    if "rope_scaling" not in line:
        return None
    got = _dict(line) or {}
    kind = got.get("rope_type") if isinstance(got, dict) else None
    why = (
        "this transformers is older than the config: it validates rope_scaling as {type, factor} "
        "(transformers before 4.43), and the config uses the newer layout"
    )
    why += f" (rope_type {kind!r}" + (", Llama 3.1's scaling" if kind == "llama3" else "") + ")." if kind else "."
    return Diagnosis(
        "transformers",
        SOURCE,
        line.strip()[:500],
        f"rope_scaling = {got}" if got else "rope_scaling",
        "library_older_than_config",
        "versions",
        why,
        "Upgrade transformers (pip install -U 'transformers>=4.43'; 4.43 reads rope_type and llama3), "
        "and any library that pins an older one. Do not trim the config to {type, factor}: "
        "llama3's low/high_freq_factor and original_max_position_embeddings change the frequencies.",
    )


def _missing(line: str, f: Facts) -> Diagnosis:
    m = re.search(r"for 'rope_type'='(\w{1,40})'", line)
    kind = m.group(1) if m else "?"
    keys = _dict(line) or set()
    keys = sorted(keys) if isinstance(keys, (set, dict)) else []
    known = {k: f.rope_scaling[k] for k in keys if f.rope_scaling and k in f.rope_scaling}
    values = (" The model's values: " + ", ".join(f"{k} = {v!r}" for k, v in known.items()) + ".") if known else ""
    return Diagnosis(
        "transformers",
        SOURCE,
        line.strip()[:500],
        f"rope_type {kind!r}, missing {keys}",
        "scaling_fields_missing",
        "scaling",
        f"the config's {kind!r} scaling lacks {', '.join(keys)}: the dict was written by hand, "
        "trimmed to fit an older reader, or copied from another model.",
        f"Put {', '.join(keys)} back into rope_scaling / rope_parameters, from the checkpoint's own "
        f"config.json.{values}",
    )


def _no_attribute(line: str, f: Facts) -> Diagnosis:
    m = re.search(r"'(\w{1,60})' object has no attribute '(rope_theta|rope_scaling|partial_rotary_factor)'", line)
    cls, attr = (m.group(1), m.group(2)) if m else ("config", "rope_theta")
    value = f" (here {f.rope_theta:g})" if attr == "rope_theta" and f.rope_theta else ""
    key = "rope_type" if attr == "rope_scaling" else attr
    read = f"getattr(config, 'rope_parameters', {{}}).get('{key}', getattr(config, '{attr}', None))"
    if attr == "rope_theta" and "rope_parameters" not in line:
        case, quantity, why, fix = ambiguous(
            [
                (
                    "transformers5",
                    "code written for transformers 4 reads config.rope_theta, and transformers 5 keeps "
                    "it in config.rope_parameters (sglang #14745, vllm #28542): read " + read + value,
                ),
                (
                    "transformers_too_old",
                    "or a transformers from before LlamaConfig had rope_theta (it came with Code "
                    "Llama, 2023): upgrade transformers",
                ),
            ],
            "python -c 'import transformers; print(transformers.__version__)' (5.x: A; older than 4.33: B)",
        )
        return Diagnosis(
            "transformers", "transformers' configs", line.strip()[:300], f"{cls}.{attr} read", case, quantity, why, fix
        )
    return Diagnosis(
        "transformers",
        "transformers 5's configs (rope_parameters)",
        line.strip()[:300],
        f"{cls}.{attr} read",
        "transformers5_rope_parameters",
        "versions",
        f"code written for transformers 4 reads config.{attr}; transformers 5 keeps it inside "
        "config.rope_parameters (sglang #14745, vllm #28542).",
        f"Read it from both layouts: {read}{value}; or pin transformers<5 until the code is updated.",
    )


def _key_error(text: str, i: int, f: Facts) -> Diagnosis | None:
    key = "type" if text.startswith("KeyError: 'type'", i) else "rope_type"
    context = text[max(0, i - WINDOW) : i + 40]
    if "rope" not in context:
        return None
    low = context.lower()
    family = (
        "vllm"
        if "vllm" in low
        else "text-generation-inference"
        if "text_generation" in low
        else "mlx-lm"
        if "mlx_lm" in low
        else "sglang"
        if "sglang" in low
        else "the reader"
    )
    line = line_at(text, i).strip()
    if key == "type":
        why = (
            "a RoPE reader looks up rope_scaling['type'] in a config that spells it 'rope_type' (the layout of "
            "transformers >= 4.43 and Llama 3.1+): the reader is older than the config."
        )
        fix = (
            f"Upgrade {family} to a release that reads 'rope_type'; if you cannot, add \"type\" with the same "
            'value beside "rope_type" in config.json\'s rope_scaling.'
        )
    else:
        why = (
            "a RoPE reader looks up rope_scaling['rope_type'] in a config that spells it 'type' (the layout "
            "before transformers 4.43): the config is older than the reader, or the reader skips transformers' "
            "conversion of 'type' to 'rope_type'."
        )
        fix = (
            f'Add "rope_type" with the same value beside "type" in config.json\'s rope_scaling (or load the '
            f"config through transformers, which converts it); upgrade {family} if it reads the file itself."
        )
    return Diagnosis(
        "transformers" if family == "the reader" else family,
        "a RoPE config reader (a Python KeyError)"
        if family == "the reader"
        else f"{family}'s RoPE config reader (a Python KeyError)",
        line[:300],
        f"rope_scaling[{key!r}] looked up",
        "layout_skew",
        "versions",
        why,
        fix,
    )


def _longrope_length(line: str, f: Facts) -> Diagnosis | None:
    m = re.search(
        r"`(rope_scaling|rope_parameters)`'s (short|long)_factor field must have length (\d{1,9}), got (\d{1,9})", line
    )
    if not m:
        return None
    key, which, want, got = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
    D, rd = f.head_dim, f.rotary_dim
    read = f"{which}_factor: {got} entries where the check wants {want}"
    if D and rd and rd < D and got == rd // 2 and want == D // 2:
        factor = f"{rd / D:g}"
        case, quantity = "longrope_partial_rotary_not_read", "rotary_dim"
        why = (
            f"{f.name} rotates rotary_dim = {rd} of its {D} dimensions (partial_rotary_factor = {factor}), so its "
            f"{which}_factor has {rd} / 2 = {got} entries, one per rotated pair: the list is right. The check sized "
            f"it by the whole head ({D} / 2 = {want}): partial_rotary_factor never reached it, missing from the "
            f"config (transformers 5: from {key}) or read by a transformers whose Phi3Config predates partial rotary."
        )
        fix = (
            f"Do not pad or cut the factor lists. Put partial_rotary_factor = {factor} in config.json (transformers 5: "
            "inside rope_parameters too), or upgrade transformers (pip install -U transformers: its Phi3Config reads "
            "partial_rotary_factor since Phi-4-mini)."
        )
    elif D and want == (rd or D) // 2 and got != want:
        case, quantity = "longrope_factors_of_another_model", "scaling"
        why = (
            f"{f.name} rotates {rd or D} dimensions: {want} factors, one per rotated pair; the list has {got}, the "
            f"factors of another model (one that rotates {2 * got} dimensions)."
        )
        fix = f"Take long_factor and short_factor from the checkpoint's own config.json ({want} entries each)."
    else:
        options = []
        if got < want:
            options.append(
                (
                    "rotary_dim",
                    f"a partial-rotary model: {got} factors fit one that rotates {2 * got} of {2 * want} dimensions "
                    f"(partial_rotary_factor = {got / want:g}), and the check did not read partial_rotary_factor: "
                    "the list is right, put partial_rotary_factor in the config or upgrade transformers",
                )
            )
        options.append(("scaling", f"or the factors are another model's (one that rotates {2 * got} dimensions)"))
        case, quantity, why, fix = ambiguous(
            options, "partial_rotary_factor and head_dim in config.json against the list's length (or add --model)"
        )
    return Diagnosis("transformers", SOURCE, line.strip()[:300], read, case, quantity, why, fix)


def _unrecognized(line: str, f: Facts) -> Diagnosis | None:
    if "{'type'}" not in line:
        return None
    return Diagnosis(
        "transformers",
        SOURCE,
        line.strip()[:500],
        "a warning, not an error",
        "harmless_warning",
        "scaling",
        "transformers keeps both spellings of the type ('type' and 'rope_type') and warns "
        "that one key is not a field of that type; the scaling is read correctly.",
        "Nothing to fix; to silence it, remove the duplicate 'type' from rope_scaling (keep 'rope_type').",
    )


#: Each message's phrase, and its reader.
_READERS = {
    "must be a dictionary with": on_line(_two_fields),
    "Missing required keys in `rope_": on_line(_missing),
    "has no attribute 'rope_": on_line(_no_attribute),
    "has no attribute 'partial_rotary_factor'": on_line(_no_attribute),
    "KeyError: 'type'": _key_error,
    "KeyError: 'rope_type'": _key_error,
    'KeyError: "rope_type"': _key_error,
    'KeyError "rope_type"': _key_error,
    "Unrecognized keys in `rope_": on_line(_unrecognized),
    "_factor field must have length": on_line(_longrope_length),
}


def diagnose(text: str, f: Facts) -> tuple[int, Diagnosis] | None:
    """The last transformers RoPE-config message in ``text``, diagnosed; with its position."""
    return last_read(text, _READERS, f)
