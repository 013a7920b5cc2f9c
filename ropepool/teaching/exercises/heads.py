"""Exercise 1: Hq, Hkv and D from a model's config (GQA, MQA, MHA)."""

from __future__ import annotations

from typing import Callable

from ... import models
from ..feedback import ExerciseFailed, Verdict, guarded


#: An MHA config without ``num_key_value_heads`` (as early Llama and GPT-NeoX configs are).
MHA_CONFIG = {
    "_name_or_path": "an MHA config without num_key_value_heads",
    "model_type": "llama",
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "rope_theta": 10000.0,
}

_HEAD_KEYS = ("num_qo_heads", "num_kv_heads", "head_dim")


def exercise_1_configs() -> dict[str, dict]:
    """The configs check 1 reads: the seven presets of plain-RoPE models, then one MHA config without
    ``num_key_value_heads``."""
    configs = {name: models.load_preset(name) for name in models.preset_names()[:7]}
    configs["mha-no-kv-field"] = dict(MHA_CONFIG)
    return configs


def _as_heads(name: str, got) -> dict:
    if got is None:
        raise ExerciseFailed(1, "returned_none", f"on {name} your function returned None: did it forget `return`?")
    if isinstance(got, (tuple, list)) and len(got) == 3:
        got = dict(zip(_HEAD_KEYS, got))
    if not isinstance(got, dict):
        raise ExerciseFailed(
            1,
            "wrong_type",
            f"on {name} your function returned a {type(got).__name__}; return "
            "a dict with keys num_qo_heads, num_kv_heads, head_dim (or a tuple in that order).",
        )
    missing = [k for k in _HEAD_KEYS if k not in got]
    if missing:
        raise ExerciseFailed(
            1, "missing_key", f"on {name} your dict has no {', '.join(missing)}; it needs {', '.join(_HEAD_KEYS)}."
        )
    for key in _HEAD_KEYS:
        value = got[key]
        if isinstance(value, float) and value.is_integer():
            raise ExerciseFailed(
                1,
                "float_not_int",
                f"on {name}, {key} = {value!r} is a float: the op wants an "
                "int. Divide with // (hidden_size // num_attention_heads), not /.",
            )
    return got


def _heads_mistake(name: str, config: dict, got: dict, want: models.RopeParams) -> tuple[str, str] | None:
    """(problem, message) for the first wrong field on one config, or None if all three are right."""
    Hq = config.get("num_attention_heads")
    if got["num_qo_heads"] != want.num_qo_heads:
        return "num_qo_heads", (
            f"on {name}, num_qo_heads = {got['num_qo_heads']!r} but the model has "
            f"{want.num_qo_heads} query heads: read config['num_attention_heads']."
        )
    if got["num_kv_heads"] != want.num_kv_heads:
        g = got["num_kv_heads"]
        if config.get("multi_query") is True:
            return "multi_query", (
                f"on {name}, num_kv_heads = {g!r}, but the config says multi_query: true: "
                f"one KV head shared by all {want.num_qo_heads} query heads (MQA), so 1."
            )
        if g == Hq and "num_key_value_heads" in config:
            return "kv_from_attention_heads", (
                f"on {name}, num_kv_heads = {g} is num_attention_heads, the query heads. That is the classic "
                f"GQA bug: k has config['num_key_value_heads'] = {config['num_key_value_heads']} heads."
            )
        if "num_key_value_heads" not in config:
            return "kv_default", (
                f"on {name} (no num_key_value_heads), num_kv_heads = {g!r}: without the "
                f"field the model is MHA, one KV head per query head, so {want.num_kv_heads}."
            )
        return "num_kv_heads", (
            f"on {name}, num_kv_heads = {g!r}; the model has {want.num_kv_heads} KV heads "
            "(config['num_key_value_heads'])."
        )
    if got["head_dim"] != want.head_dim:
        g, hidden = got["head_dim"], config.get("hidden_size")
        if "head_dim" in config and hidden and g == hidden // Hq:
            return "head_dim_explicit", (
                f"on {name}, head_dim = {g} = hidden_size // num_attention_heads, but this config sets "
                f"head_dim = {config['head_dim']} explicitly (q_proj is {Hq} x {config['head_dim']} wide): "
                "use config['head_dim'] where it is set."
            )
        if hidden and want.num_kv_heads and g == hidden // want.num_kv_heads:
            return "head_dim_kv", (
                f"on {name}, head_dim = {g} = hidden_size // num_key_value_heads: divide "
                "by num_attention_heads, the query heads, instead."
            )
        return "head_dim", f"on {name}, head_dim = {g!r}; the model's is {want.head_dim}."
    return None


def check_1(heads: Callable[[dict], dict]) -> Verdict:
    """Check ``heads(config) -> {"num_qo_heads", "num_kv_heads", "head_dim"}`` on eight configs.

    The expected values come from :func:`ropepool.models.from_config`. The message names the
    first config and field that is wrong and the likely cause; the other failing configs follow.
    """
    configs = exercise_1_configs()
    failures = []
    for name, config in configs.items():

        def explain(e: Exception, config=config) -> str:
            if not isinstance(e, KeyError):
                return ""
            fields = ", ".join(k for k in config if not k.startswith("_"))
            return (
                f". This config has no such field (it has: {fields}); a missing field has a meaning "
                "(no num_key_value_heads: MHA; multi_query: one KV head): read it with config.get(...)."
            )

        try:
            got = _as_heads(
                name, guarded(1, heads, dict(config), what=f"your function, on {name}'s config,", explain=explain)
            )
        except ExerciseFailed as err:
            if err.problem == "not_implemented":
                raise
            failures.append((err.problem, str(err).split(": ", 1)[1]))
            continue
        found = _heads_mistake(name, config, got, models.from_config(config))
        if found:
            failures.append(found)
    if failures:
        problem, message = failures[0]
        right = len(configs) - len(failures)
        later = f"; {len(failures) - 1} more wrong after this one" if len(failures) > 1 else ""
        more = f" ({right} of {len(configs)} configs right{later}.)"
        raise ExerciseFailed(1, problem, message + more)
    return Verdict(
        1,
        True,
        f"right on all {len(configs)} configs: GQA (Llama, Mistral, Qwen, Gemma's explicit "
        "head_dim), MHA with and without num_key_value_heads, and Falcon's multi_query.",
    )


def solution_1(config: dict) -> dict:
    """Hq, Hkv and D of a Hugging Face config."""
    Hq = config["num_attention_heads"]
    if config.get("multi_query"):
        Hkv = 1  # Falcon: one KV head for all query heads (MQA)
    else:
        Hkv = config.get("num_key_value_heads", Hq)  # absent: MHA
    D = config.get("head_dim") or config["hidden_size"] // Hq  # Gemma sets head_dim itself
    return {"num_qo_heads": Hq, "num_kv_heads": Hkv, "head_dim": D}
