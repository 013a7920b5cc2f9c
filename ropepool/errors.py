"""The errors ``rope_pool_fused`` raises: one code each, its message, and the exception classes.

:data:`CODES` maps each error code to its :class:`Code`: the message (SGLang's verbatim where
SGLang has the check; a ``str.format`` template, the error's first line) and where the check
comes from. :func:`fail` builds the error for a code. This is the contract: what each error
means, its causes, its fix and a call that raises it are the lesson
(:mod:`ropepool.teaching.catalog`). Nothing here imports MLX or NumPy.

>>> err = fail("head_dim_odd", expected="an even head_dim", got=7, hint="Pass the model's head_dim.")
>>> print(err)
rope_pool_fused: head_dim must be even
  expected an even head_dim, got 7. Pass the model's head_dim.
>>> isinstance(err, RuntimeError), CODES["k_shape"].origin
(True, 'sglang')
"""

from __future__ import annotations

import textwrap
from typing import NamedTuple


class RopePoolError(ValueError):
    """A rejected ``rope_pool_fused`` call.

    The first line of ``str(err)`` is the code's message; the second says what was
    expected, what came, and the likely cause.

    Attributes
    ----------
    code : str      key into ``CODES``
    expected : str  what the op wanted, e.g. ``(4, 8, 128) = [T, Hkv, D]``
    got : str       what it was given
    hint : str      the likely cause and the fix, for this very call
    details : dict  the values the message was formatted with (e.g. ``key`` of
                    ``rope_scaling_value``), for code that needs to know which field was at fault
    """

    def __init__(self, code: str, first_line: str, *, expected, got, hint: str, details: dict | None = None):
        self.code, self.expected, self.got, self.hint = code, str(expected), str(got), sentence(hint)
        self.first_line, self.details = first_line, dict(details or {})
        super().__init__(f"{first_line}\n{wrap(f'expected {self.expected}, got {self.got}. {self.hint}')}")


def sentence(hint: str) -> str:
    """``hint`` starting with a capital where it starts with a plain word ("wrap positions ..." ->
    "Wrap positions ..."); a name of code (``k``, ``rope_scaling=...``, ``mx.array``) is left as written."""
    first = hint.split(" ", 1)[0].rstrip(",:;")
    if len(first) > 1 and first.isalpha() and first.islower() and first not in _CODE_WORDS:
        return hint[0].upper() + hint[1:]
    return hint


#: Words that are names in code (the op's arguments), kept lower-case at the start of a hint.
_CODE_WORDS = {"positions", "slots", "backend", "inplace"}


#: Columns of an error's explanation: short enough that a notebook's output area (which breaks
#: over-long lines anywhere, mid-word) never has to break it: about 70 columns fit at 1024x768 with
#: the file browser open.
WRAP_WIDTH = 66


def wrap(text: str, width: int = WRAP_WIDTH, indent: str = "  ") -> str:
    """``text`` wrapped at word boundaries into lines of at most ``width`` columns, each indented.

    A word longer than a line (a shape, a path) stays whole on a line of its own.
    """
    return textwrap.fill(
        " ".join(text.split()),
        width=width,
        initial_indent=indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


class RopePoolRuntimeError(RopePoolError, RuntimeError):
    """A :class:`RopePoolError` that is also a ``RuntimeError``: the codes SGLang checks in its
    C++ extension (origin "sglang-c++"), which PyTorch raises as ``RuntimeError``, so code written
    against SGLang that catches ``RuntimeError`` there still catches them."""


class Code(NamedTuple):
    """One error code's contract."""

    message: str  # str.format template; the error's first line
    origin: str  # "sglang" (its Python wrapper), "sglang-c++" (its extension) or "ropepool"


#: Every error code of ``rope_pool_fused``, in the order its checks run (:mod:`ropepool.validation`):
#: of two problems in one call, the one whose code comes first here is raised. The arguments' types,
#: then SGLang's checks in its order, then ropepool's (sizes, the rotation, QK-norm, the FP8 scales,
#: the values of positions and slots, in-place pools), the backend last.
CODES: dict[str, Code] = {
    "not_an_array": Code("{name} must be an mx.array or a NumPy array, got {kind}", "ropepool"),
    "argument_type": Code("{name} must be {kind}, got {got}", "ropepool"),
    "qkv_ndim": Code("rope_pool_fused expects q/k/v to be 3-D", "sglang"),
    "index_ndim": Code("rope_pool_fused expects positions/slots to be 1-D", "sglang"),
    "pool_ndim": Code("rope_pool_fused expects pool tensors to be 3-D", "sglang"),
    "q_shape": Code("q shape must be [num_tokens, num_qo_heads, head_dim], got {shape}", "sglang"),
    "k_shape": Code("k shape must be [num_tokens, num_kv_heads, head_dim], got {shape}", "sglang"),
    "v_shape": Code("v shape must match k shape, got {shape} vs {k_shape}", "sglang"),
    "index_len": Code("positions/slots must have one entry per token", "sglang"),
    "k_pool_shape": Code("k_pool has incompatible shape {shape}", "sglang"),
    "v_pool_shape": Code("v_pool shape must match k_pool shape, got {shape} vs {k_shape}", "sglang"),
    "qkv_dtype": Code("q/k/v dtypes must match", "sglang"),
    "pool_dtype": Code("pool dtypes must match q/k/v dtype", "sglang"),
    "fp8_pool_dtype": Code("an FP8 cache needs both pools uint8, got k_pool {k_pool}, v_pool {v_pool}", "ropepool"),
    "index_dtype": Code("rope_pool_fused: positions/slots must be int32", "sglang-c++"),
    "head_dim_odd": Code("rope_pool_fused: head_dim must be even", "sglang-c++"),
    "unsupported_dtype": Code("rope_pool_fused: unsupported dtype", "sglang-c++"),
    "head_count": Code("num_qo_heads, num_kv_heads and head_dim must be positive, got {got}", "ropepool"),
    "group_size": Code("num_qo_heads must be a multiple of num_kv_heads, got {got}", "ropepool"),
    "rope_base": Code("rope_base must be a finite number > 0, got {got}", "ropepool"),
    "rotary_dim": Code("rotary_dim must be even and in [2, head_dim], got {got}", "ropepool"),
    "rope_type": Code("unknown rope_scaling type {got}", "ropepool"),
    "rope_type_refused": Code("rope_scaling type {rope_type!r} cannot be computed by this op", "ropepool"),
    "rope_base_range": Code(
        "rope_base gives inverse frequencies float32 cannot hold for head_dim={head_dim}, got {got}", "ropepool"
    ),
    "rope_factor": Code("rope_scaling type {rope_type!r} needs a factor > 0, got {got}", "ropepool"),
    "longrope_factors": Code("longrope {which} must hold one factor per rotated pair, got {got}", "ropepool"),
    "max_position_missing": Code("rope_scaling type {rope_type!r} needs max_position_embeddings", "ropepool"),
    "rope_scaling_value": Code("rope_scaling type {rope_type!r} needs {key} {need}, got {got}", "ropepool"),
    "norm_weight_shape": Code(
        "{name} must be one weight per head dimension, [head_dim] = [{head_dim}], got {got}", "ropepool"
    ),
    "norm_weight_dtype": Code("{name} must be float16, bfloat16 or float32, got {got}", "ropepool"),
    "norm_eps": Code("norm_eps must be a finite number >= 1e-30, got {got}", "ropepool"),
    "norm_overflow": Code(
        "{name} is too large for QK-norm in float32: |values| must stay below {limit}, got {got}", "ropepool"
    ),
    "kv_scale": Code(
        "{name} must be a number from 2**-126 to 2**126, and 1.0 unless the pools are FP8, got {got}", "ropepool"
    ),
    "position_negative": Code("positions must be >= 0, got {got}", "ropepool"),
    "position_too_large": Code("positions must be below 2**24 = 16777216, got {got}", "ropepool"),
    "slot_out_of_range": Code("slots must be below the pool size {pool_rows}, got {got}", "ropepool"),
    "duplicate_slot": Code("two tokens write the same pool row: {got}", "ropepool"),
    "inplace_unsupported": Code("inplace=True cannot write these pools in place: {got}", "ropepool"),
    "unknown_backend": Code("unknown backend {got}", "ropepool"),
    "backend_unavailable": Code("backend {got} cannot run here", "ropepool"),
}


#: The codes only ``rope_pool_fused_mla`` raises (:mod:`ropepool.mla`), in the order its checks run.
#: Its other checks (arrays, index dtypes and lengths, values, scales, backends) raise the codes above.
MLA_CODES: dict[str, Code] = {
    "mla_ndim": Code("rope_pool_fused_mla expects q_pe/k_pe 3-D, c_kv 2-D and latent_pool 3-D", "ropepool"),
    "mla_sizes": Code("num_qo_heads, kv_lora_rank and rope_dim must be positive, rope_dim even, got {got}", "ropepool"),
    "q_pe_shape": Code("q_pe shape must be [num_tokens, num_qo_heads, rope_dim], got {shape}", "ropepool"),
    "k_pe_shape": Code("k_pe shape must be [num_tokens, 1, rope_dim], got {shape}", "ropepool"),
    "c_kv_shape": Code("c_kv shape must be [num_tokens, kv_lora_rank], got {shape}", "ropepool"),
    "latent_pool_shape": Code("latent_pool shape must be [P, 1, kv_lora_rank + rope_dim], got {shape}", "ropepool"),
    "mla_dtype": Code("q_pe/k_pe/c_kv dtypes must match and latent_pool be theirs or uint8, got {got}", "ropepool"),
}

#: Every code ``rope_pool_fused_mla`` raises, in the order its checks run: :data:`MLA_CODES` where
#: ``rope_pool_fused`` checks q, k, v and the pools, and the shared codes in :data:`CODES`'s order.
MLA_ORDER: tuple[str, ...] = (
    "not_an_array",
    "argument_type",
    "mla_ndim",
    "index_ndim",
    "mla_sizes",
    "q_pe_shape",
    "k_pe_shape",
    "c_kv_shape",
    "index_len",
    "latent_pool_shape",
    "mla_dtype",
    "index_dtype",
    "unsupported_dtype",
    "rope_base",
    "rope_type",
    "rope_type_refused",
    "rope_base_range",
    "rope_factor",
    "longrope_factors",
    "max_position_missing",
    "rope_scaling_value",
    "kv_scale",
    "position_negative",
    "position_too_large",
    "slot_out_of_range",
    "duplicate_slot",
    "inplace_unsupported",
    "unknown_backend",
    "backend_unavailable",
)

_ALL_CODES = {**CODES, **MLA_CODES}


def error_class(code: str) -> type[RopePoolError]:
    """The class raised for ``code``: :class:`RopePoolRuntimeError` for SGLang's C++-side checks."""
    return RopePoolRuntimeError if _ALL_CODES[code].origin == "sglang-c++" else RopePoolError


def fail(code: str, *, expected, got, hint: str, **fmt) -> RopePoolError:
    """Build the error ``code`` with its message formatted by ``fmt``."""
    return error_class(code)(
        code, _ALL_CODES[code].message.format(got=got, **fmt), expected=expected, got=got, hint=hint, details=fmt
    )
