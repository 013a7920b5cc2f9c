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
            set by ``beta_fast``/``beta_slow``; scale ``0.1 ln(factor) + 1`` (or
            ``attention_factor``; or the mscale/mscale_all_dim ratio)
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

``dynamic`` (its base depends on the current sequence length) and ``mrope`` (multimodal position
sections) are refused: one table per call cannot express them.

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
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


#: The scaling types ropepool computes.
KNOWN_TYPES = ("default", "linear", "llama3", "yarn", "longrope")

#: Older names of the same types (Phi-3's first configs said "su" for longrope).
ALIASES = {"su": "longrope"}

#: Types refused, with why.
REFUSED_TYPES = {
    "dynamic": "dynamic NTK scaling changes rope_theta with the current sequence length, so one "
               "call's rotation depends on tokens it does not see",
    "mrope": "multimodal RoPE splits each head into sections driven by separate (time, height, "
             "width) positions, not one position per token",
}


def fail(code: str, **kw):
    """The catalog's error ``code`` (imported here, not at the top: this module, like the float64
    reference, loads without MLX, for ``benchmarks/cuda_check.py`` on a GPU machine without it)."""
    from .errors import fail as catalog_fail

    return catalog_fail(code, **kw)


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
    """

    head_dim: int
    rotary_dim: int
    is_neox: bool
    inv_freq: tuple
    scale: float
    rope_type: str = "default"

    @property
    def is_plain(self) -> bool:
        """Whole head, NeoX pairs, scale 1 (the unscaled default): SGLang's kernel's rotation."""
        return self.rotary_dim == self.head_dim and self.is_neox and self.scale == 1.0

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
    return rope_table(head_dim, rope_base)


def rope_table(head_dim: int, rope_base: float, *, rotary_dim=None, is_neox=True, rope_scaling=None,
               max_position_embeddings=None) -> Rope:
    """The :class:`Rope` of a model, from the op's RoPE keywords; cached.

    Parameters
    ----------
    head_dim : int, D
    rope_base : float, the config's ``rope_theta``
    rotary_dim : int or None, dimensions rotated (None: all of D)
    is_neox : bool, NeoX pairs (True) or GPT-J pairs (False)
    rope_scaling : dict or None, the config's ``rope_scaling`` (``rope_type`` or ``type``, ...)
    max_position_embeddings : int or None, the config's; needed by longrope

    Raises
    ------
    RopePoolError
        ``rotary_dim``, ``rope_type``, ``rope_factor``, ``longrope_factors``,
        ``max_position_missing``, ``rope_base_range``.
    """
    return _rope_table(int(head_dim), float(rope_base), rotary_dim, bool(is_neox), _freeze(rope_scaling),
                       max_position_embeddings)


def _freeze(x):
    """A hashable copy of a config value (dicts and lists inside)."""
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(_freeze(v) for v in x)
    return x


@lru_cache(maxsize=256)
def _rope_table(head_dim, rope_base, rotary_dim, is_neox, frozen_scaling, max_position_embeddings) -> Rope:
    rd = head_dim if rotary_dim is None else rotary_dim
    if isinstance(rd, bool) or not isinstance(rd, int) or rd <= 0 or rd % 2 or rd > head_dim:
        raise fail("rotary_dim", expected=f"an even rotary_dim in [2, head_dim={head_dim}]", got=repr(rotary_dim),
                   hint="rotary_dim = int(partial_rotary_factor * head_dim), e.g. 32 for Phi-2 (0.4 * 80).")
    scaling = dict(frozen_scaling or ())
    rope_type = scaling.get("rope_type") or scaling.get("type") or "default"
    rope_type = ALIASES.get(rope_type, rope_type)
    if rope_type in REFUSED_TYPES:
        raise fail("rope_type_refused", rope_type=rope_type, expected=f"one of {list(KNOWN_TYPES)}",
                   got=repr(rope_type), hint=f"{REFUSED_TYPES[rope_type]}. Apply it outside the op (e.g. "
                   "rotate with the model's own RoPE module) and write the pools with the rotated k.")
    if rope_type not in KNOWN_TYPES:
        raise fail("rope_type", expected=f"one of {list(KNOWN_TYPES)}", got=repr(rope_type),
                   hint="rope_type (or the older 'type') comes from the config's rope_scaling dict.")
    base = _default_inv_freq(rd, rope_base)  # [rd/2]
    inv_freq, scale = _SCALERS[rope_type](base, scaling, rd, rope_base, max_position_embeddings)
    table = np.asarray(inv_freq, np.float64)
    _check_float32(table, scale, head_dim, rope_base)
    return Rope(head_dim, rd, is_neox, tuple(table.tolist()), float(scale), rope_type)


#: Positions at or above this lose integer exactness in float32 (24-bit significand); angles reach this times inv_freq.
MAX_POSITION = 2**24


def _check_float32(table: np.ndarray, scale: float, head_dim: int, rope_base: float) -> None:
    """The table as the kernels hold it (float32) must be normal numbers whose angles stay finite up
    to 2**24 positions (else cos and sin give NaN or 0), and the scale finite."""
    f32 = np.finfo(np.float32)
    with np.errstate(all="ignore"):
        inv = table.astype(np.float32)
        ok = bool(np.isfinite(inv).all() and (inv >= f32.tiny).all() and (inv.max() * MAX_POSITION <= f32.max)
                  and math.isfinite(scale))
    if not ok:
        raise fail("rope_base_range", head_dim=head_dim,
                   expected=f"float32 inverse frequencies in [{f32.tiny:.3g}, {f32.max / MAX_POSITION:.3g}]",
                   got=f"rope_base={rope_base!r}: from {inv[0]:.3g} to {inv[-1]:.3g}",
                   hint="pass config.rope_theta as it is (10000.0, 500000.0, ...): this base gives "
                        "NaN or zero angles in float32.")


def _default_inv_freq(rotary_dim: int, rope_base: float) -> np.ndarray:
    i = np.arange(rotary_dim // 2, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        return rope_base ** (-2.0 * i / rotary_dim)  # [rd/2]


def _factor(scaling: dict, rope_type: str) -> float:
    f = scaling.get("factor")
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f <= 0:
        raise fail("rope_factor", rope_type=rope_type, expected="a finite factor > 0 in rope_scaling",
                   got=repr(f), hint="copy rope_scaling from the model's config.json as it is.")
    return float(f)


def _default(base, scaling, rd, rope_base, max_pos):
    return base, 1.0


def _linear(base, scaling, rd, rope_base, max_pos):
    return base / _factor(scaling, "linear"), 1.0


def _llama3(base, scaling, rd, rope_base, max_pos):
    factor = _factor(scaling, "llama3")
    low, high = scaling.get("low_freq_factor", 1.0), scaling.get("high_freq_factor", 4.0)
    original = scaling.get("original_max_position_embeddings", 8192)
    wavelen = 2 * math.pi / base
    smooth = (original / wavelen - low) / (high - low)  # 0 at the low-frequency edge, 1 at the high one
    blended = (1 - smooth) * base / factor + smooth * base
    out = np.where(wavelen > original / low, base / factor, base)  # slow pairs: interpolated
    medium = (wavelen > original / high) & (wavelen < original / low)
    return np.where(medium, blended, out), 1.0


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn(base, scaling, rd, rope_base, max_pos):
    factor = _factor(scaling, "yarn")
    original = scaling.get("original_max_position_embeddings") or max_pos
    if original is None:
        raise fail("max_position_missing", rope_type="yarn", expected="original_max_position_embeddings "
                   "in rope_scaling, or max_position_embeddings", got="neither",
                   hint="pass max_position_embeddings=config.max_position_embeddings.")
    beta_fast, beta_slow = scaling.get("beta_fast", 32), scaling.get("beta_slow", 1)

    def correction_dim(rotations):  # the pair index that turns `rotations` times over `original` positions
        return rd * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(rope_base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), rd - 1)
    if low == high:
        high += 0.001  # as both sources: no division by zero
    ramp = np.clip((np.arange(rd // 2) - low) / (high - low), 0, 1)  # 0: extrapolate, 1: interpolate
    inv_freq = base / factor * ramp + base * (1 - ramp)
    if scaling.get("attention_factor") is not None:
        scale = float(scaling["attention_factor"])
    else:
        scale = (_yarn_mscale(factor, scaling.get("mscale", 1.0))
                 / _yarn_mscale(factor, scaling.get("mscale_all_dim", 0.0)))
    return inv_freq, scale


def _longrope(base, scaling, rd, rope_base, max_pos):
    original = scaling.get("original_max_position_embeddings")
    if original is None or max_pos is None:
        raise fail("max_position_missing", rope_type="longrope",
                   expected="max_position_embeddings and original_max_position_embeddings",
                   got=f"max_position_embeddings={max_pos!r}, original_max_position_embeddings={original!r}",
                   hint="pass max_position_embeddings=config.max_position_embeddings; Phi-3 keeps "
                        "original_max_position_embeddings at the top level of config.json: put it in rope_scaling.")
    which = "long_factor" if max_pos > original else "short_factor"
    factors = scaling.get(which)
    if not isinstance(factors, (list, tuple)) or len(factors) != rd // 2:
        n = len(factors) if isinstance(factors, (list, tuple)) else repr(factors)
        raise fail("longrope_factors", which=which, expected=f"{rd // 2} factors (rotary_dim / 2)", got=n,
                   hint="the factor lists must belong to this model's head: one per rotated pair.")
    factors = np.asarray(factors, np.float64)
    if not (np.isfinite(factors).all() and (factors > 0).all()):
        raise fail("longrope_factors", which=which, expected="finite factors > 0", got="a non-positive factor",
                   hint="copy rope_scaling from the model's config.json as it is.")
    ratio = max_pos / original
    if scaling.get("attention_factor") is not None:
        scale = float(scaling["attention_factor"])
    else:
        scale = 1.0 if ratio <= 1 else math.sqrt(1 + math.log(ratio) / math.log(original))
    return base / factors, scale


_SCALERS = {"default": _default, "linear": _linear, "llama3": _llama3, "yarn": _yarn, "longrope": _longrope}
