"""From a model's config to the op's parameters: Hq, Hkv, D, rope_base and the RoPE variant.

A Hugging Face ``config.json`` does not always say these four plainly, and the mistakes this
project is about (see :mod:`ropepool.validation`) come from reading them the obvious way:

=========================  =================================================================
num_qo_heads  (Hq)         ``num_attention_heads``
num_kv_heads  (Hkv)        ``num_key_value_heads``; absent: MHA, Hkv = Hq; Falcon says
                           ``multi_query: true`` (Hkv = 1) or, with ``new_decoder_architecture``,
                           ``num_kv_heads``
head_dim      (D)          ``head_dim`` where the model sets it (Gemma-2-9B: 256, not
                           3584 / 16 = 224); otherwise ``hidden_size // num_attention_heads``
rope_base                  ``rope_theta``; GPT-NeoX: ``rotary_emb_base``; absent: 10000.0, the
                           transformers default
rotary_dim                 ``int(partial_rotary_factor * D)`` (Phi-2, Phi-4-mini), ``rotary_pct``
                           (GPT-NeoX, Pythia), ``rotary_dim`` (GPT-J, CodeGen)
is_neox                    False for ``model_type`` gptj and codegen (interleaved pairs)
rope_scaling               ``rope_scaling`` (or ``rope_parameters``); Phi-3's top-level
                           ``original_max_position_embeddings`` is moved into it
=========================  =================================================================

transformers 5 saves ``rope_theta``, ``partial_rotary_factor`` (GPT-NeoX's ``rotary_pct`` too)
and the scaling together in ``rope_parameters``; they are read there first, then at the top
level. Gemma-3 keeps one ``rope_parameters`` per layer type (full and sliding attention; before
transformers 5, ``rope_local_base_freq``): one call of the op rotates one way, so
``from_config(config, layer_type=...)`` reads one type, and without it the full-attention
layers' parameters come with a warning naming the others (:attr:`RopeParams.warnings`).

:func:`from_config` refuses what this op cannot compute: multi-head latent attention
(DeepSeek-V2/V3: :mod:`ropepool.mla` is its op), ALiBi, and the scaling type :mod:`ropepool.rope` refuses
(dynamic). mrope (Qwen2-VL) is read as the op computes it: positions ``[3, T]``.
Presets ship the relevant fields of real configs (:func:`preset_names`), each naming the model
and the file its numbers come from.

Example
-------
>>> p = preset("gemma-2-9b")
>>> p.num_qo_heads, p.num_kv_heads, p.group_size, p.head_dim, p.rope_base
(16, 8, 2, 256, 10000.0)
>>> p.shapes(tokens=4, pool_rows=32).kv
(4, 8, 256)
"""

from __future__ import annotations

import difflib
import json
import os
import stat
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ._scalars import finite_float, is_int
from .errors import RopePoolError
from .rope import READS_MAX_POSITION, Rope, rope_table, scaling_type
from .shapes import Shapes

_PRESETS = (
    "llama-3-8b",
    "llama-3-70b",
    "mistral-7b",
    "qwen2.5-7b",
    "gemma-2-9b",
    "phi-3-mini",
    "falcon-7b",
    "llama-3.1-8b",
    "qwen2.5-7b-yarn",
    "phi-3.5-mini",
    "phi-2",
)

#: Presets of the models beyond GQA (:mod:`ropepool.kv_layout`, notebook 11): MHA, MLA (which
#: ``from_config`` refuses: :mod:`ropepool.mla` is its op), sliding windows, mrope. Loaded like the others;
#: not in :func:`preset_names`, the GQA presets the lessons and widgets walk through.
_BEYOND_PRESETS = ("llama-2-7b", "deepseek-v3", "gemma-3-27b", "gpt-oss-20b", "qwen2-vl-7b")

#: model_type values whose RoPE pairs neighbouring dimensions (GPT-J's interleaved convention).
_GPTJ_PAIRS = ("gptj", "codegen")

_VARIANT_DEFAULTS = dict(rotary_dim=None, is_neox=True, rope_scaling=None, max_position_embeddings=None)

#: The largest head_dim and head count read from a config: many times any model's (Gemma-2's D = 256,
#: Llama-3-405B's 128 heads), and small enough that a call of those shapes fits in memory.
MAX_HEAD_DIM = 1024
MAX_HEADS = 1024

#: transformers' default ``rope_theta`` where a config has none.
DEFAULT_ROPE_BASE = 10000.0

# Fields that mark multi-head latent attention (DeepSeek-V2/V3, Kimi-K2, ...).
_MLA_FIELDS = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim")


class ConfigError(ValueError):
    """A config this op cannot serve, or one whose fields disagree.

    Attributes
    ----------
    fields : tuple of str   the config fields the message is about
    """

    def __init__(self, message: str, *, fields: tuple[str, ...] = ()):
        self.fields = tuple(fields)
        super().__init__(message)


@dataclass(frozen=True)
class RopeParams:
    """The op's parameters for one model: ``rope_pool_fused(..., head_dim=, num_qo_heads=, ...)``.

    Attributes
    ----------
    name : str                 the model, e.g. ``meta-llama/Meta-Llama-3-8B``
    num_qo_heads : int         Hq
    num_kv_heads : int         Hkv
    head_dim : int             D
    rope_base : float          the config's ``rope_theta``
    notes : tuple of str       how each value was read where it is not the obvious field
    warnings : tuple of str    where this op's result will differ from the model's
    rotary_dim : int or None   dimensions that rotate (None: the whole head)
    is_neox : bool             NeoX pairs (True) or GPT-J pairs (False)
    rope_scaling : dict or None  the config's rope_scaling (completed where the config keeps fields elsewhere)
    max_position_embeddings : int or None  the config's, kept where rope_scaling may need it
    """

    name: str
    num_qo_heads: int  # Hq
    num_kv_heads: int  # Hkv
    head_dim: int  # D
    rope_base: float
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    rotary_dim: int | None = None
    is_neox: bool = True
    rope_scaling: dict | None = None
    max_position_embeddings: int | None = None

    @property
    def group_size(self) -> int:
        """G = Hq // Hkv, query heads per KV head."""
        return self.num_qo_heads // self.num_kv_heads

    def shapes(self, tokens: int, pool_rows: int) -> Shapes:
        """The :class:`~ropepool.shapes.Shapes` of a call with T = ``tokens`` and P = ``pool_rows``."""
        return Shapes(tokens, self.num_qo_heads, self.num_kv_heads, self.head_dim, pool_rows)

    def op_kwargs(self) -> dict:
        """``head_dim``, ``num_qo_heads``, ``num_kv_heads``, ``rope_base`` and the RoPE keywords that
        differ from their defaults, for ``rope_pool_fused(..., **params.op_kwargs())``."""
        kw = dict(
            head_dim=self.head_dim,
            num_qo_heads=self.num_qo_heads,
            num_kv_heads=self.num_kv_heads,
            rope_base=self.rope_base,
        )
        variant = dict(
            rotary_dim=self.rotary_dim,
            is_neox=self.is_neox,
            rope_scaling=self.rope_scaling,
            max_position_embeddings=self.max_position_embeddings,
        )
        kw.update({k: v for k, v in variant.items() if v != _VARIANT_DEFAULTS[k]})
        return kw

    def rope(self) -> Rope:
        """The model's :class:`~ropepool.rope.Rope`: inverse frequencies, scale, pairing."""
        return rope_table(
            self.head_dim,
            self.rope_base,
            rotary_dim=self.rotary_dim,
            is_neox=self.is_neox,
            rope_scaling=self.rope_scaling,
            max_position_embeddings=self.max_position_embeddings,
        )


def preset_names() -> list[str]:
    """The GQA presets, in a fixed order (the lessons and widgets walk through these)."""
    return list(_PRESETS)


def beyond_preset_names() -> list[str]:
    """The presets beyond GQA (MHA, MLA, sliding windows, mrope), in a fixed order; :func:`load_preset` reads them."""
    return list(_BEYOND_PRESETS)


#: Suffixes of a checkpoint's name that do not change its shapes (qwen2.5-7b-instruct is qwen2.5-7b).
_VARIANT_SUFFIXES = ("-instruct", "-chat", "-base", "-it", "-hf")


def closest_preset(name: str) -> str | None:
    """The preset a mistyped or suffixed name most likely means, or None.

    >>> closest_preset("Qwen2.5-7B-Instruct"), closest_preset("llama-3-8b-chat"), closest_preset("gpt2")
    ('qwen2.5-7b', 'llama-3-8b', None)
    """
    by_lower = {p.lower(): p for p in _PRESETS}
    stem = name.lower().rsplit("/", 1)[-1]
    while stem.endswith(_VARIANT_SUFFIXES):
        stem = stem[: stem.rfind("-")]
    if stem in by_lower:
        return by_lower[stem]
    close = difflib.get_close_matches(stem, by_lower, n=1)
    return by_lower[close[0]] if close else None


def load_preset(name: str) -> dict:
    """The config dict of preset ``name`` (Hugging Face field names, plus ``_source``).

    Raises
    ------
    ConfigError
        ``name`` is not one of :func:`preset_names`.
    """
    if name not in _PRESETS + _BEYOND_PRESETS:
        close = closest_preset(str(name))
        maybe = f" (did you mean {close!r}?)" if close else ""
        raise ConfigError(f"unknown preset {name!r}{maybe}: choose one of {', '.join(_PRESETS + _BEYOND_PRESETS)}")
    text = resources.files("ropepool").joinpath("presets", f"{name}.json").read_text(encoding="utf-8")
    return json.loads(text)


def preset(name: str) -> RopeParams:
    """``from_config(load_preset(name))``."""
    return from_config(load_preset(name))


def load_config(source: str | Path) -> dict:
    """A config dict from a preset name, a ``config.json`` path, or a folder holding one.

    Raises
    ------
    ConfigError
        With a one-line message: no such preset or file, unreadable file, malformed JSON,
        or JSON that is not an object.
    """
    source = str(source)
    path = Path(source)
    by_lower = {name.lower(): name for name in _PRESETS + _BEYOND_PRESETS}
    if source in _PRESETS + _BEYOND_PRESETS or (source.lower() in by_lower and not path.exists()):
        return load_preset(by_lower[source.lower()])
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ConfigError(f"{source}: a folder without a config.json in it")
        path = path / "config.json"
    if not path.exists() and path.is_symlink():
        raise ConfigError(
            f"{printable(source, 1000)}: a symbolic link that leads nowhere (a loop, or to a missing file)"
        )
    if not path.exists():
        close = closest_preset(source)
        if close:
            raise ConfigError(f"{source}: no such file, and not a preset (did you mean {close!r}?)")
        raise ConfigError(f"{source}: no such file, and not a preset ({', '.join(_PRESETS)})")
    text = _read_bounded(path)
    shown = printable(str(path), 1000)
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{shown}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise ConfigError(f"{shown}: JSON nested too deeply to be a model config") from None
    except ValueError as e:  # an integer of more digits than Python converts (4300)
        raise ConfigError(f"{shown}: not a model config: {str(e).split(';')[0]}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{shown}: expected a JSON object (a model config), got a JSON {type(config).__name__}")
    return config


#: A config.json is a few KiB; a file larger than this is not one (and is not read to its end).
MAX_CONFIG_BYTES = 1 << 20


def _read_bounded(path: Path) -> str:
    """The text of ``path`` if it is a regular file of at most :data:`MAX_CONFIG_BYTES`.

    Opened without blocking and checked before reading, so a FIFO, a device (``/dev/zero``)
    or a huge file gives a ConfigError instead of a hang.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise ConfigError(f"{path}: cannot read it ({e.__class__.__name__}: {e})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):  # checked before wrapping: a folder cannot even be wrapped as a file
        os.close(fd)
        raise ConfigError(f"{path}: not a regular file (a folder, a FIFO, a device or a socket): pass a config.json")
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:  # /proc/self/mem and the like: a regular file that cannot be read
        raise ConfigError(f"{path}: cannot read it ({e.__class__.__name__}: {e})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes, not a model config")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: cannot read it ({e.__class__.__name__}: {e})") from None


def printable(text: str, limit: int = 200) -> str:
    r"""``text`` safe to print on one line: control characters (terminal escapes, newlines) and lone
    surrogates written as Python escapes, and at most ``limit`` characters.

    >>> print(printable("ok\x1b]0;owned\x07 \ud800"))
    ok\x1b]0;owned\x07 \ud800
    """
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text[:limit])
    return out + ("..." if len(text) > limit else "")


def _present(config: dict, key: str) -> bool:
    return config.get(key) is not None


def _positive_int(config: dict, key: str, name: str, limit: int = 2**31 - 1) -> int:
    value = config[key]
    if not is_int(value) or value <= 0:
        raise ConfigError(f"{name}: {key} must be a positive integer, got {value!r}", fields=(key,))
    if value > limit:
        shown = f"an integer of {int(value).bit_length()} bits" if value > 2**64 else repr(value)
        raise ConfigError(f"{name}: {key} must be at most {limit}, got {shown}", fields=(key,))
    return int(value)


def _first(config: dict, keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if _present(config, k)), None)


#: Fields of rope_parameters that are not the scaling's: the base and the rotated part.
_NOT_SCALING = ("rope_theta", "partial_rotary_factor", "rotary_pct")


def _rope_summary(rope: dict) -> str:
    kind = scaling_type(rope)
    factor = f" x{rope['factor']!r}" if kind != "default" and "factor" in rope else ""
    return f"rope_theta {rope.get('rope_theta')!r}, {kind!r}{factor}"


def _rope_parameters(config: dict, name: str, layer_type, notes: list, warnings: list) -> tuple[dict, str]:
    """The flat RoPE dict to read and its name in messages: ``rope_parameters`` (transformers 5), or one
    layer type's entry where it holds one per layer type (Gemma-3: full and sliding attention).

    Gemma-3 before transformers 5 kept the sliding layers' base apart (``rope_local_base_freq``); it
    is read as the same two entries. Without ``layer_type`` the full-attention layers' entry is read
    and the others are named in ``warnings``: the op takes one rotation per call, so each layer type
    is its own call (``from_config(config, layer_type=...)``).
    """
    rope = config.get("rope_parameters") or {}
    if not any(isinstance(v, dict) for v in rope.values()) and _present(config, "rope_local_base_freq"):
        full = dict(config.get("rope_scaling") or rope)
        if _present(config, "rope_theta"):
            full["rope_theta"] = config["rope_theta"]
        rope = {
            "full_attention": full,
            "sliding_attention": {"rope_type": "default", "rope_theta": config["rope_local_base_freq"]},
        }
        notes.append("rope_local_base_freq: the sliding-window layers' base (Gemma-3's older layout)")
    declared = config.get("layer_types") if isinstance(config.get("layer_types"), list) else []
    nested = bool(rope) and all(isinstance(v, dict) for v in rope.values())  # as transformers: keys that are
    kinds = [k for k, v in rope.items() if isinstance(v, dict) and (nested or k in declared)]  # layer types
    if not kinds:
        if layer_type is not None:
            notes.append(f"layer_type {layer_type!r}: every layer rotates alike in this config")
        return rope, "rope_parameters"
    if layer_type is None:
        chosen = "full_attention" if "full_attention" in kinds else kinds[0]
    elif layer_type in kinds:
        chosen = layer_type
    else:
        raise ConfigError(
            f"{name}: layer_type {layer_type!r} is not one of rope_parameters' layer types "
            f"({', '.join(map(repr, kinds))})",
            fields=("rope_parameters",),
        )
    notes.append(f"rope_parameters per layer type: {chosen!r} read ({_rope_summary(rope[chosen])})")
    if layer_type is None:
        for other in kinds:
            if other != chosen and rope[other] != rope[chosen]:
                warnings.append(
                    f"{other!r} layers rotate differently ({_rope_summary(rope[other])}): these "
                    f"parameters are {chosen!r}'s; from_config(config, layer_type={other!r}) gives theirs"
                )
    return rope[chosen], f"rope_parameters.{chosen}"


def from_config(config: dict, layer_type: str | None = None) -> RopeParams:
    """Read Hq, Hkv, D and rope_base from a Hugging Face-style config dict.

    Parameters
    ----------
    config : dict
        A model's ``config.json`` as a dict (extra fields are ignored). A multimodal config
        whose attention fields sit under ``text_config`` is read from there.
    layer_type : str or None
        Where ``rope_parameters`` holds one entry per layer type (Gemma-3), the one to read, e.g.
        ``"sliding_attention"``; None: the full-attention layers', with a warning naming the others.

    Returns
    -------
    RopeParams

    Raises
    ------
    ConfigError
        Naming the fields involved, when: a needed field is missing or not a positive integer;
        ``hidden_size`` is not a multiple of ``num_attention_heads`` (and no ``head_dim`` is set);
        the KV heads do not divide the query heads; ``head_dim`` is odd; ``multi_query`` and a
        KV-head count disagree; ``rope_theta`` is not a finite number > 0; the rotated part
        (``partial_rotary_factor``, ``rotary_pct``, ``rotary_dim``) is not an even number of
        dimensions within the head; ``rope_scaling`` is not a dict, names a type the op cannot
        compute (dynamic) or holds a bad value; the model uses multi-head latent attention
        (``kv_lora_rank``, ...) or ALiBi; ``layer_type`` is not one the config has; a size is past
        :data:`MAX_HEAD_DIM` or :data:`MAX_HEADS`.

    Example
    -------
    >>> p = from_config({"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096})
    >>> p.num_kv_heads, p.head_dim, p.rope_base
    (8, 128, 10000.0)
    """
    if not isinstance(config, dict):
        raise ConfigError(f"a config must be a dict, got {type(config).__name__}")
    name = printable(str(config.get("_name_or_path") or config.get("name") or config.get("model_type") or "config"))
    notes: list[str] = []
    warnings: list[str] = []
    if not _first(config, ("num_attention_heads", "n_head")) and isinstance(config.get("text_config"), dict):
        config = config["text_config"]
        notes.append("attention fields read from text_config (a multimodal config)")
    _refuse_other_attention(config, name)
    heads_key, Hq = _query_heads(config, name)
    D = _head_dim(config, name, heads_key, Hq, notes)
    Hkv = _kv_heads(config, name, heads_key, Hq, notes)
    for key in ("rope_scaling", "rope_parameters"):
        if _present(config, key) and not isinstance(config[key], dict):
            raise ConfigError(
                f"{name}: {key} must be a dict (a JSON object) or null, got {config[key]!r}", fields=(key,)
            )
    # transformers 5's rope_parameters first, else the older top-level fields
    rope, rope_key = _rope_parameters(config, name, layer_type, notes, warnings)

    def rope_field(key: str) -> tuple[str, object]:
        """Where ``key`` is set (rope_parameters first, as transformers 5 reads it) and its value."""
        if _present(rope, key):
            return f"{rope_key}.{key}", rope[key]
        return key, config.get(key)

    rotary_dim = _rotary_dim(config, name, D, rope_field, notes)
    is_neox = config.get("model_type") not in _GPTJ_PAIRS
    if not is_neox:
        notes.append(f"model_type {config.get('model_type')!r}: GPT-J pairs (2i, 2i + 1), is_neox=False")
    base_key, base = _rope_base(config, name, rope_field, notes)
    scaling_key, scaling, max_pos, top_level_original = _scaling(config, name, rope, rope_key, notes)
    params = RopeParams(
        name,
        Hq,
        Hkv,
        D,
        float(base),
        tuple(notes),
        tuple(warnings),
        rotary_dim=rotary_dim,
        is_neox=is_neox,
        rope_scaling=scaling or None,
        max_position_embeddings=max_pos,
    )
    _check_table(params, name, base_key, scaling_key, top_level_original)
    return params


def _refuse_other_attention(config: dict, name: str) -> None:
    """MLA (a latent cache: :mod:`ropepool.mla`'s op) and ALiBi (no rotation): refused, saying which."""
    mla = [k for k in _MLA_FIELDS if _present(config, k)]
    if mla:
        got = ", ".join(f"{k}={config[k]!r}" for k in mla)
        raise ConfigError(
            f"{name} uses multi-head latent attention ({got}): its cache holds a compressed latent per "
            "token plus one shared RoPE key, not per-head k and v, and RoPE covers only qk_rope_head_dim "
            "of each head; rope_pool_fused does not fit this model: ropepool.rope_pool_fused_mla does "
            "(ropepool.kv_layout.mla_op_kwargs reads its arguments)",
            fields=tuple(mla),
        )
    if config.get("alibi") is True:
        raise ConfigError(
            f"{name} uses ALiBi (alibi: true), not rotary embeddings: rope_pool_fused does not fit this model",
            fields=("alibi",),
        )


def _query_heads(config: dict, name: str) -> tuple[str, int]:
    """``(key, Hq)``: ``num_attention_heads`` (or GPT-2's ``n_head``)."""
    heads_key = _first(config, ("num_attention_heads", "n_head"))
    if heads_key is None:
        raise ConfigError(f"{name}: num_attention_heads is missing", fields=("num_attention_heads",))
    return heads_key, _positive_int(config, heads_key, name, MAX_HEADS)


def _head_dim(config: dict, name: str, heads_key: str, Hq: int, notes: list) -> int:
    """D: ``head_dim`` where set, else the hidden size over Hq; even and at most :data:`MAX_HEAD_DIM`."""
    hidden_key = _first(config, ("hidden_size", "n_embd", "d_model"))
    hidden = _positive_int(config, hidden_key, name) if hidden_key else None
    if _present(config, "head_dim"):
        D = _positive_int(config, "head_dim", name)
        if hidden is not None and hidden != Hq * D:
            notes.append(
                f"head_dim = {D} is set by the config; {hidden_key} / {heads_key} = {hidden} / {Hq} "
                f"= {hidden / Hq:g} would be wrong (q_proj is {Hq} x {D} = {Hq * D} wide, "
                f"not {hidden})"
            )
    elif hidden is None:
        raise ConfigError(
            f"{name}: neither head_dim nor hidden_size is set, so head_dim is unknown",
            fields=("head_dim", "hidden_size"),
        )
    elif hidden % Hq:
        raise ConfigError(
            f"{name}: {hidden_key} = {hidden} is not a multiple of {heads_key} = {Hq} and the config sets no head_dim",
            fields=(hidden_key, heads_key, "head_dim"),
        )
    else:
        D = hidden // Hq
    fields = ("head_dim",) if _present(config, "head_dim") else (hidden_key, heads_key)
    if D > MAX_HEAD_DIM:
        raise ConfigError(
            f"{name}: head_dim = {D} is past {MAX_HEAD_DIM}, far more than any model's (Gemma-2: 256)", fields=fields
        )
    if D % 2:
        raise ConfigError(
            f"{name}: head_dim = {D} is odd; NeoX RoPE pairs dimension i with i + head_dim/2", fields=fields
        )
    return D


def _kv_heads(config: dict, name: str, heads_key: str, Hq: int, notes: list) -> int:
    """Hkv: Falcon's new_decoder_architecture and multi_query, else ``num_key_value_heads`` (or its other
    names), else Hq (MHA); it must divide Hq."""
    kv_key = _first(config, ("num_key_value_heads", "num_kv_heads", "n_head_kv"))
    if config.get("new_decoder_architecture") is True:
        kv_key = kv_key or "num_kv_heads"
        Hkv = _positive_int(config, kv_key, name, MAX_HEADS) if _present(config, kv_key) else Hq
        notes.append(f"new_decoder_architecture: KV heads from {kv_key} = {Hkv} (multi_query is ignored)")
    elif config.get("multi_query") is True:
        # transformers' Falcon saves num_kv_heads = num_attention_heads by default, and ignores it here.
        saved_default = kv_key == "num_kv_heads" and config[kv_key] == Hq
        if kv_key is not None and config[kv_key] != 1 and not saved_default:
            raise ConfigError(
                f"{name}: multi_query is true (one KV head) but {kv_key} = {config[kv_key]!r}",
                fields=("multi_query", kv_key),
            )
        Hkv = 1
        notes.append(f"multi_query: true: one KV head shared by all {Hq} query heads (MQA)")
        if kv_key is not None and config[kv_key] != 1:
            notes.append(f"{kv_key} = {config[kv_key]!r} is ignored under multi_query, as transformers' Falcon does")
    elif kv_key is not None:
        Hkv = _positive_int(config, kv_key, name, MAX_HEADS)
    else:
        Hkv = Hq
        notes.append(f"num_key_value_heads absent: MHA, one KV head per query head ({Hq})")
    if Hq % Hkv:
        raise ConfigError(
            f"{name}: {kv_key or 'num_key_value_heads'} = {Hkv} does not divide {heads_key} = "
            f"{Hq}; each KV head must serve a whole group of query heads",
            fields=(heads_key, kv_key or "num_key_value_heads"),
        )
    return Hkv


def _rotary_dim(config: dict, name: str, D: int, rope_field, notes: list) -> int | None:
    """The dimensions that rotate (None: all D): ``partial_rotary_factor`` or ``rotary_pct`` of D, or ``rotary_dim``."""
    rotary_dim = None
    for key in ("partial_rotary_factor", "rotary_pct"):
        where, fraction = rope_field(key)
        value = None if fraction is None else finite_float(fraction)
        if fraction is None or value == 1:
            continue
        if value is None or not 0 < value < 1:
            raise ConfigError(f"{name}: {where} must be a number in (0, 1], got {fraction!r}", fields=(where,))
        rotary_dim = int(float(fraction) * D)
        notes.append(
            f"{where} = {fraction}: rotary_dim = int({fraction} * {D}) = {rotary_dim} of {D} dimensions "
            "rotate, the rest pass through"
        )
        break
    given = _positive_int(config, "rotary_dim", name) if _present(config, "rotary_dim") else D
    if given != D:
        rotary_dim = given
        notes.append(f"rotary_dim = {rotary_dim}: only the first {rotary_dim} of {D} dimensions rotate")
    return rotary_dim


def _rope_base(config: dict, name: str, rope_field, notes: list) -> tuple[str, float]:
    """``(key, rope_base)``: ``rope_theta`` (or ``rotary_emb_base``), else transformers' default; finite and > 0."""
    base_key, base = rope_field("rope_theta")
    if base is None and _present(config, "rotary_emb_base"):
        base_key, base = "rotary_emb_base", config["rotary_emb_base"]
    if base is None:
        base_key, base = "rope_theta", DEFAULT_ROPE_BASE
        notes.append(f"rope_theta absent: {DEFAULT_ROPE_BASE}, the transformers default")
    if finite_float(base) is None or base <= 0:
        raise ConfigError(f"{name}: {base_key} must be a finite number > 0, got {base!r}", fields=(base_key,))
    return base_key, base


def _scaling(config: dict, name: str, rope: dict, rope_key: str, notes: list) -> tuple:
    """``(key, scaling, max_position_embeddings, original read from the top level)``: the scaling fields
    (``{}``: none), the context length the scaling reads, and Phi-3's top-level original length."""
    scaling_key = "rope_scaling" if _present(config, "rope_scaling") and rope_key == "rope_parameters" else rope_key
    scaling = config["rope_scaling"] if scaling_key == "rope_scaling" else rope
    scaling = {k: v for k, v in scaling.items() if k not in _NOT_SCALING}
    if scaling_type(scaling) == "default":
        scaling = {}
    max_pos = None
    kind = scaling_type(scaling)
    if scaling and _present(config, "max_position_embeddings"):
        if kind in READS_MAX_POSITION:
            max_pos = _positive_int(config, "max_position_embeddings", name)
        elif is_int(config["max_position_embeddings"]) and 0 < config["max_position_embeddings"] < 2**31:
            max_pos = int(config["max_position_embeddings"])
        else:
            notes.append(
                f"max_position_embeddings {printable(repr(config['max_position_embeddings']), 40)} ignored: "
                f"not a positive integer below 2**31, and {kind!r} scaling does not read it"
            )
    top_level_original = bool(
        scaling
        and "original_max_position_embeddings" not in scaling
        and _present(config, "original_max_position_embeddings")
    )
    if top_level_original:
        scaling["original_max_position_embeddings"] = config["original_max_position_embeddings"]
        notes.append("original_max_position_embeddings read from the config's top level (as Phi-3 keeps it)")
    return scaling_key, scaling, max_pos, top_level_original


def _check_table(params: RopeParams, name: str, base_key: str, scaling_key: str, top_level_original: bool) -> None:
    """Build the RoPE table once: a value the op refuses becomes a ConfigError naming the config's fields."""
    try:
        params.rope()
    except RecursionError:
        raise ConfigError(
            f"{name}: {scaling_key} is nested too deeply to be a RoPE config", fields=(scaling_key,)
        ) from None
    except RopePoolError as err:
        if err.code == "rotary_dim":
            fields = ("rotary_dim", "partial_rotary_factor")
        elif err.code == "rope_base_range":
            fields = (base_key,)
        elif err.details.get("key") == "rope_base":  # yarn at base 1: the base and the scaling together
            fields = (base_key, scaling_key)
        elif top_level_original and err.details.get("key") == "original_max_position_embeddings":
            fields = ("original_max_position_embeddings",)
        else:
            fields = (scaling_key,)
        raise ConfigError(f"{name}: {err.first_line} ({err.hint})", fields=fields) from None
