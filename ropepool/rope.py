"""A model's RoPE settings turned into what every layer reads: a :class:`Rope`.

Models rotate differently. Three settings choose *which* dimensions turn together:

================  ===============================================================================
rotary_dim        only the first ``rotary_dim`` dimensions of each head turn (Phi-2: 32 of 80,
                  GPT-NeoX and Pythia: 25%); the rest pass through bit for bit
is_neox=True      NeoX pairs ``(i, i + rotary_dim/2)`` (Llama, Mistral, Qwen, Phi-3, Gemma)
is_neox=False     GPT-J pairs ``(2i, 2i + 1)`` (GPT-J, CodeGen, and any GGUF Llama: llama.cpp's
                  converter permutes the Q and K rows so that interleaved pairs fit them)
================  ===============================================================================

and ``rope_scaling`` (the config's own dict) chooses *how fast* each pair turns, for models
trained or extended past their original context. Pair ``i`` turns by
``theta = position * inv_freq[i]`` and the rotated pair is multiplied by ``scale``:

==========  ====================================================================================
default     ``inv_freq[i] = base**(-2i/rotary_dim)``, scale 1
linear      ``inv_freq / factor`` (positions interpolated)
llama3      low frequencies (wavelength above ``original/low_freq_factor``) divided by factor,
            high ones (below ``original/high_freq_factor``) kept, a smooth blend between
yarn        NTK-by-parts: a linear ramp over pair index between interpolation and extrapolation,
            set by ``beta_fast``/``beta_slow`` (its ends rounded out to whole pairs unless
            ``truncate: false``, as GPT-OSS sets); scale ``0.1 ln(factor) + 1`` (or
            ``attention_factor``; or, given both, the mscale/mscale_all_dim ratio)
longrope    ``inv_freq / long_factor[i]`` when ``max_position_embeddings`` exceeds
            ``original_max_position_embeddings`` (else short_factor); scale
            ``sqrt(1 + ln(max/original) / ln(original))`` (or ``attention_factor``)
==========  ====================================================================================

Sources: transformers' ``modeling_rope_utils.py`` (``_compute_linear_scaling_rope_parameters``,
``_compute_llama3_parameters``, ``_compute_yarn_parameters``, ``_compute_longrope_parameters``)
and mlx-lm's ``models/rope_utils.py`` (``initialize_rope``, ``Llama3RoPE``, ``YarnRoPE``,
``SuScaledRoPE``), which ropepool's tests compare against. Where they differ:

- longrope: transformers picks short or long factors per forward pass, by whether the current
  sequence is longer than ``original_max_position_embeddings``; mlx-lm always uses the long
  factors. A position-wise kernel cannot see the sequence length, so ropepool decides once from
  the config (long for Phi-3-128k, as mlx-lm).
- yarn and longrope scale: mlx-lm multiplies x before rotating (one more rounding in float16 and
  bfloat16); ropepool multiplies cos and sin, in float32.
- yarn's ``truncate: false``: mlx-lm ignores it; ropepool keeps the ramp's ends unrounded, as
  transformers does.
- yarn's ``mscale`` without ``mscale_all_dim``: mlx-lm scales by ``0.1 mscale ln(factor) + 1``;
  transformers uses the mscale ratio only when both are set (non-zero) and otherwise
  ``0.1 ln(factor) + 1``. ropepool follows transformers, whose configs these are.

No table may turn a pair faster than one radian per position (an inverse frequency above 1, from
a ``rope_base`` below 1 or a scaling factor below 1): the kernels hold ``position * inv_freq`` in
float32, and angles that grow faster than positions lose more to rounding than the tolerance
allows. Such a table is refused, naming the field that made it.

``mrope`` (Qwen2-VL, Qwen2.5-VL): multimodal RoPE. Positions are ``[3, T]`` (time, height, width)
and the NeoX pairs are split into three runs, ``rope_scaling["mrope_section"]`` (Qwen2-VL-7B:
``[16, 24, 24]`` of 64 pairs): pair ``i`` of run ``j`` turns by ``positions[j, t] * inv_freq[i]``
with the default table, as transformers' ``Qwen2VLRotaryEmbedding`` recomposes its cos and sin. A
text token has the same position on all three axes, so plain RoPE is mrope with ``[T]`` positions.

``dynamic`` (its base depends on the current sequence length) is refused: one table per call
cannot express it.

Everything here is float64; the kernels read ``inv_freq`` rounded once to float32.

Example
-------
>>> r = rope_table(128, 500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0,
...     "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
>>> len(r.inv_freq), r.scale, r.inv_freq[0] == 1.0, r.inv_freq[-1] < plain(128, 500000.0).inv_freq[-1]
(64, 1.0, True, True)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ._scalars import check_types, fail, finite_float, is_int


#: The scaling types ropepool computes.
KNOWN_TYPES = ("default", "linear", "llama3", "yarn", "longrope", "mrope")

#: Older names of the same types (Phi-3's first configs said "su" for longrope).
ALIASES = {"su": "longrope"}

#: The types whose table depends on the model's max_position_embeddings.
READS_MAX_POSITION = ("yarn", "longrope")

#: Types refused, with why.
REFUSED_TYPES = {
    "dynamic": "dynamic NTK scaling changes rope_theta with the current sequence length, so one "
    "call's rotation depends on tokens it does not see",
}


@dataclass(frozen=True)
class Rope:
    """How one model rotates a head of ``head_dim`` dimensions.

    Attributes
    ----------
    head_dim : int           D
    rotary_dim : int         dimensions that turn (even, <= D); the rest pass through
    is_neox : bool           NeoX pairs (i, i + rotary_dim/2); False: GPT-J pairs (2i, 2i+1)
    inv_freq : tuple         ``[rotary_dim/2]`` float64, radians per position of pair i
    scale : float            multiplies cos and sin (yarn, longrope); 1.0 otherwise
    rope_type : str          the scaling type it came from
    mrope_section : tuple    mrope's three runs of pairs (time, height, width); () for one position per token
    """

    head_dim: int
    rotary_dim: int
    is_neox: bool
    inv_freq: tuple
    scale: float
    rope_type: str = "default"
    mrope_section: tuple = ()

    def pair_axes(self) -> np.ndarray:
        """Which row of mrope's ``[3, T]`` positions drives each pair, int ``[rotary_dim/2]`` (all 0 without mrope)."""
        if not self.mrope_section:
            return np.zeros(self.rotary_dim // 2, np.int64)
        return np.repeat(np.arange(3), self.mrope_section)

    def section(self, axis: int) -> "Rope":
        """This rotation with only mrope's run ``axis`` turning: every other pair's inverse frequency is 0,
        so it keeps its values bit for bit (cos 0 = 1, sin 0 = 0)."""
        inv = np.where(self.pair_axes() == axis, np.asarray(self.inv_freq), 0.0)
        return Rope(
            self.head_dim,
            self.rotary_dim,
            self.is_neox,
            tuple(inv.tolist()),
            self.scale,
            f"{self.rope_type}-section-{axis}",
        )

    def inv_freq32(self) -> np.ndarray:
        """``inv_freq`` rounded to float32 ``[rotary_dim/2]``: the table every kernel reads."""
        return _float32(self.inv_freq)

    def pairs(self) -> np.ndarray:
        """Element indices ``[rotary_dim/2, 2]`` of each rotated pair (the two halves of a NeoX head,
        or neighbours for GPT-J)."""
        i = np.arange(self.rotary_dim // 2)
        return np.stack([i, i + self.rotary_dim // 2] if self.is_neox else [2 * i, 2 * i + 1], axis=1)

    def wavelengths(self) -> np.ndarray:
        """Positions per full turn of each pair, ``2 pi / inv_freq``, ``[rotary_dim/2]``."""
        return 2 * math.pi / np.asarray(self.inv_freq)


@lru_cache(maxsize=256)
def _float32(values: tuple) -> np.ndarray:
    out = np.asarray(values, np.float32)
    out.setflags(write=False)
    return out


def plain(head_dim: int, rope_base: float) -> Rope:
    """The unscaled NeoX rotation of the whole head: ``inv_freq[i] = rope_base**(-2i/D)``."""
    head_dim = int(head_dim)
    return _rope_table(head_dim, float(rope_base), _rotary_dim(None, head_dim), True, None, None)


#: The op's keywords that choose the rotation, beyond rope_base (see :func:`rope_table`).
ROPE_KEYWORDS = ("rotary_dim", "is_neox", "rope_scaling", "max_position_embeddings")


def rope_of(kw: dict) -> Rope:
    """The :class:`Rope` of an op call's keyword arguments ``kw`` (head_dim, rope_base and the variant keywords)."""
    return rope_table(kw["head_dim"], kw["rope_base"], **{n: kw[n] for n in ROPE_KEYWORDS if n in kw})


def rope_table(
    head_dim: int, rope_base: float, *, rotary_dim=None, is_neox=True, rope_scaling=None, max_position_embeddings=None
) -> Rope:
    """The :class:`Rope` of a model, from the op's RoPE keywords; cached.

    Parameters
    ----------
    head_dim : int, D
    rope_base : float, the config's ``rope_theta``
    rotary_dim : int or None, dimensions rotated (None: all of D)
    is_neox : bool, NeoX pairs (True) or GPT-J pairs (False)
    rope_scaling : dict or None, the config's ``rope_scaling`` (``rope_type`` or ``type``, ...);
        its numbers may be any real numbers, its factor lists lists, tuples or NumPy arrays
    max_position_embeddings : int or None, the config's; needed by longrope

    Raises
    ------
    RopePoolError
        ``argument_type`` (``is_neox``, ``rope_scaling``, ``max_position_embeddings``),
        ``rotary_dim``, ``rope_type``, ``rope_type_refused``, ``rope_factor``,
        ``max_position_missing``, ``rope_scaling_value``, ``longrope_factors``, ``rope_base_range``.
    """
    frozen, max_pos = rope_arguments(is_neox, rope_scaling, max_position_embeddings)
    head_dim = int(head_dim)
    return _rope_table(head_dim, float(rope_base), _rotary_dim(rotary_dim, head_dim), bool(is_neox), frozen, max_pos)


def rope_arguments(is_neox=True, rope_scaling=None, max_position_embeddings=None) -> tuple:
    """The types of the op's RoPE keywords, or ``argument_type``: ``is_neox`` a bool, ``rope_scaling`` None
    or a dict of JSON values (numbers, strings, lists, dicts), ``max_position_embeddings`` None or an int in
    ``[1, 2**63)``. Their values are :func:`rope_table`'s to check. Returns ``(rope_scaling frozen for the
    cache, max_position_embeddings as an int or None)``."""
    check_types(is_neox=is_neox)
    if rope_scaling is not None and not isinstance(rope_scaling, Mapping):
        raise fail(
            "argument_type",
            name="rope_scaling",
            kind="a dict or None",
            expected="the config's rope_scaling dict, or None",
            got=f"{rope_scaling!r} ({type(rope_scaling).__name__})",
            hint="Pass the whole dict, e.g. rope_scaling={'rope_type': 'linear', 'factor': 2.0}, not only its type.",
        )
    max_pos = max_position_embeddings
    if max_pos is not None:
        if not (is_int(max_pos) and 0 < max_pos < 2**63):
            raise fail(
                "argument_type",
                name="max_position_embeddings",
                kind="an int in [1, 2**63) or None",
                expected="max_position_embeddings an int in [1, 2**63), or None",
                got=f"{max_pos!r} ({type(max_pos).__name__})",
                hint="Pass config.max_position_embeddings, an int.",
            )
        max_pos = int(max_pos)
    return (None if rope_scaling is None else _freeze(rope_scaling)), max_pos


def _rotary_dim(rotary_dim, head_dim: int) -> int:
    """``rotary_dim`` as an int, or the catalog's error."""
    rd = head_dim if rotary_dim is None else rotary_dim
    if not is_int(rd) or rd <= 0 or rd % 2 or rd > head_dim:
        raise fail(
            "rotary_dim",
            expected=f"an even rotary_dim in [2, head_dim={head_dim}]",
            got=repr(rotary_dim),
            hint="rotary_dim = int(partial_rotary_factor * head_dim), e.g. 32 for Phi-2 (0.4 * 80).",
        )
    return int(rd)


class _Typed:
    """A scalar inside a frozen rope_scaling that is not a plain int, float or str (a bool, a Decimal,
    ...), kept with its type. Python has True == 1 == 1.0 and Decimal(2) == 2 (and equal hashes), so
    bare, such a value would find the table cached for the plain number and skip the check that
    refuses it; tagged, it is never equal to one, and the scalers refuse it (not a number they read)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, _Typed) and type(other.value) is type(self.value) and other.value == self.value

    def __hash__(self):
        return hash((type(self.value), self.value))

    def __repr__(self):
        return repr(self.value)


_PLAIN = (int, float, str)


def _freeze(x):
    """A hashable copy of a config value, for the cache key: mappings as (key, value) pairs sorted by
    key, lists, tuples and NumPy arrays as tuples, NumPy scalars as Python ones, any other scalar but
    a plain int, float or str as :class:`_Typed`. The values are not checked here: each scaler checks
    the fields it reads."""
    if x is None or type(x) in _PLAIN:  # the common case first: JSON's numbers and strings
        return x
    if isinstance(x, Mapping):
        return tuple(sorted(((k, _freeze(v)) for k, v in x.items()), key=lambda kv: repr(kv[0])))
    if isinstance(x, (np.ndarray, np.generic)):
        x = x.tolist()  # Python scalars, or nested lists of them
        if x is None or type(x) in _PLAIN:
            return x
    if isinstance(x, (list, tuple)):
        return tuple(_freeze(v) for v in x)
    try:
        hash(x)
    except TypeError:
        raise fail(
            "argument_type",
            name="rope_scaling",
            kind="a dict of numbers, strings, lists and dicts",
            expected="a config's rope_scaling, as JSON holds it",
            got=f"{x!r} ({type(x).__name__}) in it",
            hint="Copy rope_scaling from the model's config.json as it is.",
        ) from None
    return _Typed(x)


def scaling_type(scaling: Mapping):
    """The type a rope_scaling dict names: ``rope_type``, else the older ``type``, an alias resolved;
    "default" when it names none (both absent or None). Not checked: any other value (a name outside
    :data:`KNOWN_TYPES`, ``""``, 0, False) comes back as it is, for the caller to refuse."""
    kind = scaling.get("rope_type")
    if kind is None:
        kind = scaling.get("type")
    if kind in (None, "default") and "mrope_section" in scaling:
        return "mrope"  # transformers writes Qwen2-VL's {"type": "mrope"} back as "default", the sections kept
    if kind is None:
        return "default"
    return ALIASES.get(kind, kind) if isinstance(kind, str) else kind


@lru_cache(maxsize=256)
def _rope_table(head_dim, rope_base, rd, is_neox, frozen_scaling, max_position_embeddings) -> Rope:
    scaling = dict(frozen_scaling or ())
    rope_type = scaling_type(scaling)
    if rope_type in REFUSED_TYPES:
        raise fail(
            "rope_type_refused",
            rope_type=rope_type,
            expected=f"one of {list(KNOWN_TYPES)}",
            got=repr(rope_type),
            hint=f"{REFUSED_TYPES[rope_type]}. Apply it outside the op (e.g. "
            "rotate with the model's own RoPE module) and write the pools with the rotated k.",
        )
    if rope_type not in KNOWN_TYPES:
        raise fail(
            "rope_type",
            expected=f"one of {list(KNOWN_TYPES)}",
            got=repr(rope_type),
            hint="rope_type (or the older 'type') comes from the config's rope_scaling dict.",
        )
    base = _default_inv_freq(rd, rope_base)  # [rd/2]
    _check_float32(base, head_dim, rope_base)
    inv_freq, scale = _SCALERS[rope_type](base, scaling, rd, rope_base, max_position_embeddings)
    f32 = np.finfo(np.float32)
    if not float(f32.tiny) <= scale <= float(f32.max):  # the kernels multiply cos and sin by float32(scale)
        raise fail(
            "rope_scaling_value",
            rope_type=rope_type,
            key="attention_factor (or mscale)",
            need=f"giving a cos/sin scale in float32's range [{f32.tiny:.3g}, {f32.max:.3g}]",
            expected=f"a cos/sin scale in [{f32.tiny:.3g}, {f32.max:.3g}]",
            got=f"a scale of {scale!r}",
            hint="attention_factor and mscale are small numbers near 1 in real configs: copy rope_scaling "
            "from the model's config.json as it is.",
        )
    table = np.asarray(inv_freq, np.float64)
    section = _mrope_section(scaling, rd) if rope_type == "mrope" else ()
    return Rope(head_dim, rd, is_neox, tuple(table.tolist()), float(scale), rope_type, section)


#: Positions at or above this lose integer exactness in float32 (24-bit significand); angles reach this times inv_freq.
MAX_POSITION = 2**24


def _in_range(table) -> tuple[bool, np.ndarray]:
    """Whether ``table`` rounded to float32 holds normal numbers of at most 1 radian per position."""
    with np.errstate(all="ignore"):
        inv = np.asarray(table, np.float64).astype(np.float32)
        return bool(np.isfinite(inv).all() and (inv >= np.finfo(np.float32).tiny).all() and (inv <= 1).all()), inv


def _check_float32(table: np.ndarray, head_dim: int, rope_base: float) -> None:
    """The unscaled table as the kernels hold it (float32) must be normal numbers of at most one radian
    per position: a base below 1 turns pairs faster than positions, a huge one gives zero angles."""
    ok, inv = _in_range(table)
    if not ok:
        raise fail(
            "rope_base_range",
            head_dim=head_dim,
            expected=f"float32 inverse frequencies in [{np.finfo(np.float32).tiny:.3g}, 1]",
            got=f"rope_base={rope_base!r}: from {inv[0]:.3g} to {inv[-1]:.3g}",
            hint="Pass config.rope_theta as it is (10000.0, 500000.0, ...): a base below 1 turns pairs "
            "faster than one radian per position, which float32 angles cannot follow, and a huge "
            "one gives zero angles.",
        )


def _check_scaled(table, rope_type: str, key: str, value) -> np.ndarray:
    """``table`` if the scaling kept it in :func:`_in_range`; else the error naming ``key``, the field
    of rope_scaling that pushed it out (a factor below 1 turns pairs faster than positions)."""
    ok, inv = _in_range(table)
    if not ok:
        raise fail(
            "rope_scaling_value",
            rope_type=rope_type,
            key=key,
            need="giving inverse frequencies float32 holds and at most 1 radian per position",
            expected=f"inverse frequencies in [{np.finfo(np.float32).tiny:.3g}, 1]",
            got=f"{value!r}: from {inv.min():.3g} to {inv.max():.3g}",
            hint=f"{key} stretches the rotation: a value below 1 makes pairs turn faster than positions "
            "(which float32 angles cannot follow); copy rope_scaling from the model's config.json as it is.",
        )
    return table


def _default_inv_freq(rotary_dim: int, rope_base: float) -> np.ndarray:
    i = np.arange(rotary_dim // 2, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        return rope_base ** (-2.0 * i / rotary_dim)  # [rd/2]


#: What a number in rope_scaling must be: the rule as the error says it, and its test.
_POSITIVE = ("> 0", lambda x: x > 0)
_NON_NEGATIVE = (">= 0", lambda x: x >= 0)


def _number(
    scaling: dict,
    key: str,
    rope_type: str,
    default=None,
    rule=_POSITIVE,
    why: str = "",
    code: str = "rope_scaling_value",
) -> float:
    """``rope_scaling[key]`` (``default`` where absent or None) as a float: a finite real number
    (int, float, NumPy scalar; not a bool or a string) that passes ``rule``; else the error ``code``
    (``rope_scaling_value``, or ``rope_factor`` for the factor). Every number a scaler reads comes
    through here."""
    value = scaling.get(key)
    if value is None:
        value = default
    f = finite_float(value)
    need, ok = rule
    if f is None or not ok(f):
        if value is None:
            hint = f"{key} is missing: copy rope_scaling from the model's config.json as it is."
        elif f is None:
            hint = (
                f"{key} is read as a number (an int or a float, not a string, a bool or a list): copy "
                "rope_scaling from the model's config.json as it is."
            )
        else:
            hint = why or "copy rope_scaling from the model's config.json as it is."
        raise fail(
            code,
            rope_type=rope_type,
            key=key,
            need=need,
            expected=f"rope_scaling[{key!r}] a finite number {need}",
            got=repr(value),
            hint=hint,
        )
    return f


def _factor(scaling: dict, rope_type: str) -> float:
    return _number(scaling, "factor", rope_type, code="rope_factor")


def _default(base, scaling, rd, rope_base, max_pos):
    return base, 1.0


def position_rows(rope_scaling) -> int:
    """Rows of positions a call takes: 3 (``[3, T]`` or ``[T]``) for an mrope ``rope_scaling``, else 1."""
    return 3 if isinstance(rope_scaling, Mapping) and scaling_type(rope_scaling) == "mrope" else 1


def _mrope_section(scaling: dict, rd: int) -> tuple:
    """``rope_scaling["mrope_section"]``: three ints >= 0 summing to rotary_dim / 2, or the catalog's error.
    Interleaved sections (Qwen3-VL's ``mrope_interleaved``) are refused: the runs here are contiguous."""
    if scaling.get("mrope_interleaved") not in (None, False):
        raise fail(
            "rope_scaling_value",
            rope_type="mrope",
            key="mrope_interleaved",
            need="false (contiguous runs of pairs, as Qwen2-VL and Qwen2.5-VL)",
            expected="mrope_section's runs contiguous (time, then height, then width)",
            got=repr(scaling.get("mrope_interleaved")),
            hint="Qwen3-VL interleaves the three axes over the pairs, which ropepool does not compute: "
            "computing it with contiguous runs would rotate most pairs by the wrong axis.",
        )
    section = scaling.get("mrope_section")
    ok = isinstance(section, tuple) and len(section) == 3 and all(is_int(n) and n >= 0 for n in section)
    if not ok or sum(section) != rd // 2:
        raise fail(
            "rope_scaling_value",
            rope_type="mrope",
            key="mrope_section",
            need=f"three ints summing to rotary_dim / 2 = {rd // 2}",
            expected=f"mrope_section [time, height, width] pairs summing to {rd // 2}",
            got=repr(section),
            hint="copy rope_scaling from the model's config.json as it is (Qwen2-VL-7B: [16, 24, 24] for "
            "head_dim 128).",
        )
    return tuple(int(n) for n in section)


def _linear(base, scaling, rd, rope_base, max_pos):
    factor = _factor(scaling, "linear")
    return _check_scaled(base / factor, "linear", "factor", factor), 1.0


def _llama3(base, scaling, rd, rope_base, max_pos):
    factor = _factor(scaling, "llama3")
    low = _number(
        scaling,
        "low_freq_factor",
        "llama3",
        1.0,
        why="the slowest pairs are those whose wavelength exceeds original / low_freq_factor.",
    )
    high = _number(
        scaling,
        "high_freq_factor",
        "llama3",
        4.0,
        (f"> low_freq_factor = {low:g}", lambda x: x > low),
        why="llama3 blends between the two wavelengths original / low_freq_factor and original / "
        "high_freq_factor, dividing by high_freq_factor - low_freq_factor.",
    )
    original = _number(
        scaling,
        "original_max_position_embeddings",
        "llama3",
        8192,
        why="it is the context length the model was trained for.",
    )
    wavelen = 2 * math.pi / base
    smooth = (original / wavelen - low) / (high - low)  # 0 at the low-frequency edge, 1 at the high one
    blended = (1 - smooth) * base / factor + smooth * base
    out = np.where(wavelen > original / low, base / factor, base)  # slow pairs: interpolated
    medium = (wavelen > original / high) & (wavelen < original / low)
    return _check_scaled(np.where(medium, blended, out), "llama3", "factor", factor), 1.0


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn(base, scaling, rd, rope_base, max_pos):
    factor = _factor(scaling, "yarn")
    if scaling.get("original_max_position_embeddings") is None and max_pos is None:
        raise fail(
            "max_position_missing",
            rope_type="yarn",
            expected="original_max_position_embeddings in rope_scaling, or max_position_embeddings",
            got="neither",
            hint="Pass max_position_embeddings=config.max_position_embeddings.",
        )
    original = _number(
        scaling,
        "original_max_position_embeddings",
        "yarn",
        max_pos,
        why="it is the context length the model was trained for.",
    )
    rotations = "yarn's ramp runs between the pairs that turn beta_fast and beta_slow times over the original context."
    beta_fast = _number(scaling, "beta_fast", "yarn", 32, why=rotations)
    beta_slow = _number(scaling, "beta_slow", "yarn", 1, why=rotations)
    if rope_base == 1:
        raise fail(
            "rope_scaling_value",
            rope_type="yarn",
            key="rope_base",
            need="!= 1",
            expected="rope_base != 1 (yarn divides by log(rope_base))",
            got=repr(rope_base),
            hint="At base 1 every pair turns at 1 radian per position, so no pair index marks where "
            "yarn's ramp starts (transformers and mlx-lm divide by zero): pass config.rope_theta.",
        )

    def correction_dim(rotations):  # the pair index that turns `rotations` times over `original` positions
        turns = original / (rotations * 2 * math.pi)
        if not 0 < turns < math.inf:  # over- or underflow for extreme betas: the same value, by logarithms
            log_turns = math.log(original) - math.log(rotations) - math.log(2 * math.pi)
        else:
            log_turns = math.log(turns)
        return rd * log_turns / (2 * math.log(rope_base))

    truncate = scaling.get("truncate")
    if truncate is not None:  # a bool arrives tagged (_freeze); anything else is refused
        if not (isinstance(truncate, _Typed) and isinstance(truncate.value, (bool, np.bool_))):
            raise fail(
                "rope_scaling_value",
                rope_type="yarn",
                key="truncate",
                need="true or false",
                expected="rope_scaling['truncate'] true or false",
                got=repr(truncate),
                hint="truncate says whether the ramp's ends are rounded to whole pairs (GPT-OSS: false).",
            )
        truncate = bool(truncate.value)
    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate is not False:  # transformers' default: the ends rounded out to whole pairs
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rd - 1)
    if low == high:
        high += 0.001  # as both sources: no division by zero
    # low and high as floats: exact for any sensible config, and no int64 overflow for one near base 1
    ramp = np.clip((np.arange(rd // 2) - float(low)) / float(high - low), 0, 1)  # 0: extrapolate, 1: interpolate
    inv_freq = _check_scaled(base / factor * ramp + base * (1 - ramp), "yarn", "factor", factor)
    if scaling.get("attention_factor") is not None:
        scale = _number(scaling, "attention_factor", "yarn", why="it multiplies cos and sin.")
    else:  # as transformers: the mscale ratio only when both are set and non-zero
        mscales = "0.1 * mscale * ln(factor) + 1 must stay positive."
        mscale = _number(scaling, "mscale", "yarn", 0.0, _NON_NEGATIVE, mscales)
        mscale_all_dim = _number(scaling, "mscale_all_dim", "yarn", 0.0, _NON_NEGATIVE, mscales)
        scale = (
            _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
            if mscale and mscale_all_dim
            else _yarn_mscale(factor)
        )
    return inv_freq, scale


def _longrope(base, scaling, rd, rope_base, max_pos):
    original = scaling.get("original_max_position_embeddings")
    if original is None or max_pos is None:
        raise fail(
            "max_position_missing",
            rope_type="longrope",
            expected="max_position_embeddings and original_max_position_embeddings",
            got=f"max_position_embeddings={max_pos!r}, original_max_position_embeddings={original!r}",
            hint="Pass max_position_embeddings=config.max_position_embeddings; Phi-3 keeps "
            "original_max_position_embeddings at the top level of config.json: put it in rope_scaling.",
        )
    original = _number(
        scaling,
        "original_max_position_embeddings",
        "longrope",
        rule=("> 1", lambda x: x > 1),
        why="longrope's scale sqrt(1 + ln(max / original) / ln(original)) divides by ln(original).",
    )
    which = "long_factor" if max_pos > original else "short_factor"
    factors = scaling.get(which)  # lists, tuples and NumPy arrays are all tuples here (_freeze)
    if not isinstance(factors, tuple) or len(factors) != rd // 2:
        n = len(factors) if isinstance(factors, tuple) else repr(factors)
        raise fail(
            "longrope_factors",
            which=which,
            expected=f"{rd // 2} factors (rotary_dim / 2)",
            got=n,
            hint="The factor lists must belong to this model's head: one per rotated pair.",
        )
    values = [finite_float(f) for f in factors]
    bad = next((i for i, f in enumerate(values) if f is None or f <= 0), None)
    if bad is not None:
        raise fail(
            "longrope_factors",
            which=which,
            expected="finite numbers > 0",
            got=f"factor {bad} = {factors[bad]!r}",
            hint="Each factor is a number that divides its pair's frequency: copy rope_scaling from the "
            "model's config.json as it is.",
        )
    ratio = max_pos / original
    if scaling.get("attention_factor") is not None:
        scale = _number(scaling, "attention_factor", "longrope", why="it multiplies cos and sin.")
    else:
        scale = 1.0 if ratio <= 1 else math.sqrt(1 + math.log(ratio) / math.log(original))
    return _check_scaled(base / np.asarray(values, np.float64), "longrope", which, min(values)), scale


_SCALERS = {
    "default": _default,
    "linear": _linear,
    "llama3": _llama3,
    "yarn": _yarn,
    "longrope": _longrope,
    "mrope": _default,
}
