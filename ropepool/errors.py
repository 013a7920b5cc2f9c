"""Every error ``rope_pool_fused`` raises, listed once.

``CATALOG`` maps each error code to an :class:`ErrorSpec`: the message (SGLang's verbatim
where SGLang has the check), what it means, common causes, the fix, and two functions:
``trigger()`` returns the keyword arguments of a minimal call that raises exactly that
error, ``fixed()`` the same call with the fix applied. Tests, docs and the error-gallery
notebook iterate this catalog; nothing lists the errors a second time.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Callable

import mlx.core as mx
import numpy as np

from .inputs import make_inputs
from .shapes import Shapes


class RopePoolError(ValueError):
    """A rejected ``rope_pool_fused`` call.

    The first line of ``str(err)`` is the catalog message; the second says what was
    expected, what came, and the likely cause.

    Attributes
    ----------
    code : str      key into ``CATALOG``
    expected : str  what the op wanted, e.g. ``(4, 8, 128) = [T, Hkv, D]``
    got : str       what it was given
    hint : str      the likely cause and the fix, for this very call
    """

    def __init__(self, code: str, first_line: str, *, expected, got, hint: str):
        self.code, self.expected, self.got, self.hint = code, str(expected), str(got), hint
        self.first_line = first_line
        super().__init__(f"{first_line}\n{wrap(f'expected {self.expected}, got {self.got}. {hint}')}")


#: Columns of an error's explanation: short enough that a notebook's output area (which breaks
#: over-long lines anywhere, mid-word) never has to break it: about 70 columns fit at 1024x768 with
#: the file browser open.
WRAP_WIDTH = 66


def wrap(text: str, width: int = WRAP_WIDTH, indent: str = "  ") -> str:
    """``text`` wrapped at word boundaries into lines of at most ``width`` columns, each indented.

    A word longer than a line (a shape, a path) stays whole on a line of its own.
    """
    return textwrap.fill(" ".join(text.split()), width=width, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


@dataclass(frozen=True)
class ErrorSpec:
    """One entry of the catalog."""

    code: str
    message: str  # str.format template; the error's first line
    origin: str  # "sglang" (its Python wrapper), "sglang-c++" (its extension) or "ropepool"
    meaning: str
    causes: tuple[str, ...]
    fix: str
    trigger: Callable[[], dict] = field(repr=False)
    fixed: Callable[[], dict] = field(repr=False)


# The small GQA call every trigger starts from: T=3, Hq=4, Hkv=2 (G=2), D=8, P=6.
BASE = Shapes(tokens=3, num_qo_heads=4, num_kv_heads=2, head_dim=8, pool_rows=6)


def _call(shapes: Shapes = BASE, dtype: str = "float32", **changes) -> dict:
    kw = make_inputs(shapes, dtype, slots=[0, 2, 4][: shapes.tokens])
    kw.update(changes)
    return kw


def _with(fn: Callable[[dict], dict], shapes: Shapes = BASE, dtype: str = "float32") -> Callable[[], dict]:
    """A trigger that starts from a valid call and breaks it with ``fn``."""

    def build() -> dict:
        kw = _call(shapes, dtype)
        kw.update(fn(kw))
        return kw

    return build


def _inplace_call(writable: bool) -> dict:
    """The base call with NumPy pools, inplace=True: read-only pools (the trigger) or writable ones."""
    kw = _call()
    for name in ("k_pool", "v_pool"):
        kw[name] = np.array(kw[name])
        kw[name].setflags(write=writable)
    return {**kw, "inplace": True}


def _first_unavailable_backend() -> str:
    from .backends import available_backends

    return next(name for name, s in available_backends().items() if not s.available)


_SPECS = [
    ErrorSpec(
        "not_an_array", "{name} must be an mx.array or a NumPy array, got {kind}", "ropepool",
        "An argument is neither an mx.array nor a NumPy array, so it has no shape or dtype to check.",
        ("a Python list or a torch tensor passed directly",),
        "Wrap it: mx.array(x) or np.asarray(x).",
        _with(lambda kw: {"q": np.array(kw["q"]).tolist()}), _call),
    ErrorSpec(
        "qkv_ndim", "rope_pool_fused expects q/k/v to be 3-D", "sglang",
        "q, k and v must each be [tokens, heads, head_dim].",
        ("the projection output passed before splitting heads: [T, H*D] instead of [T, H, D]",
         "a leading batch axis kept: [B, T, H, D]"),
        "Reshape: q.reshape(T, num_qo_heads, head_dim), k and v with num_kv_heads.",
        _with(lambda kw: {"q": kw["q"].reshape(3, 32)}), _call),
    ErrorSpec(
        "index_ndim", "rope_pool_fused expects positions/slots to be 1-D", "sglang",
        "positions and slots hold one integer per token: shape [T].",
        ("a batch axis left on: [1, T]", "a column vector [T, 1]"),
        "Flatten them: positions.reshape(-1).",
        _with(lambda kw: {"positions": kw["positions"].reshape(1, 3)}), _call),
    ErrorSpec(
        "pool_ndim", "rope_pool_fused expects pool tensors to be 3-D", "sglang",
        "Each pool is [P, num_kv_heads, head_dim]: one row per cache slot.",
        ("a pool allocated flat as [P, Hkv*D]", "a paged pool [pages, page_size, Hkv, D] not flattened"),
        "Allocate or view the pool as [P, num_kv_heads, head_dim].",
        _with(lambda kw: {"k_pool": kw["k_pool"].reshape(6, 16), "v_pool": kw["v_pool"].reshape(6, 16)}), _call),
    ErrorSpec(
        "q_shape", "q shape must be [num_tokens, num_qo_heads, head_dim], got {shape}", "sglang",
        "q's heads or head_dim disagree with num_qo_heads and head_dim.",
        ("num_qo_heads and num_kv_heads swapped", "head_dim computed as hidden_size // num_attention_heads "
         "for a model that sets head_dim explicitly (Gemma)"),
        "Pass num_qo_heads=config.num_attention_heads and the model's head_dim.",
        _with(lambda kw: {"num_qo_heads": 2, "num_kv_heads": 4}), _call),
    ErrorSpec(
        "k_shape", "k shape must be [num_tokens, num_kv_heads, head_dim], got {shape}", "sglang",
        "k's heads or head_dim disagree with num_kv_heads and head_dim. Under grouped-query "
        "attention k has fewer heads than q.",
        ("num_kv_heads taken from config.num_attention_heads instead of config.num_key_value_heads",
         "k already repeated to the query heads (repeat_kv) before the cache write",
         "q, k, v of different token counts"),
        "Pass num_kv_heads=config.num_key_value_heads and the un-repeated k from the K projection.",
        _with(lambda kw: {"num_kv_heads": 4}), _call),
    ErrorSpec(
        "v_shape", "v shape must match k shape, got {shape} vs {k_shape}", "sglang",
        "v is written to the pool beside k, so it must have k's shape.",
        ("v repeated to the query heads while k was not", "v from another layer or batch"),
        "Pass v as [T, num_kv_heads, head_dim], like k.",
        _with(lambda kw: {"v": mx.repeat(kw["v"], 2, axis=1)}), _call),
    ErrorSpec(
        "index_len", "positions/slots must have one entry per token", "sglang",
        "positions[t] and slots[t] belong to token t, so both have T entries.",
        ("positions for the whole sequence passed in a decode step", "slots allocated for fewer tokens"),
        "Give exactly one position and one slot per token of q.",
        _with(lambda kw: {"positions": mx.arange(4, dtype=mx.int32)}), _call),
    ErrorSpec(
        "k_pool_shape", "k_pool has incompatible shape {shape}", "sglang",
        "k_pool's rows must hold [num_kv_heads, head_dim], the shape of one token's k.",
        ("the pool allocated with num_attention_heads instead of num_key_value_heads",
         "a pool of another model or layer"),
        "Allocate pools as [P, num_kv_heads, head_dim].",
        _with(lambda kw: {"k_pool": mx.repeat(kw["k_pool"], 2, axis=1),
                          "v_pool": mx.repeat(kw["v_pool"], 2, axis=1)}), _call),
    ErrorSpec(
        "v_pool_shape", "v_pool shape must match k_pool shape, got {shape} vs {k_shape}", "sglang",
        "Token t's k and v go to the same row of two pools of one shape.",
        ("k and v pools allocated with different sizes",),
        "Allocate v_pool exactly like k_pool.",
        _with(lambda kw: {"v_pool": kw["v_pool"][:5]}), _call),
    ErrorSpec(
        "qkv_dtype", "q/k/v dtypes must match", "sglang",
        "q, k and v share one dtype.",
        ("one of them cast (or not cast) after the projection",),
        "Cast them to one dtype, the pool's.",
        _with(lambda kw: {"k": kw["k"].astype(mx.float16)}), _call),
    ErrorSpec(
        "pool_dtype", "pool dtypes must match q/k/v dtype", "sglang",
        "The pool stores k and v as they are, so it has their dtype.",
        ("a float32 pool with float16 activations", "a quantized (fp8/int8) cache: this op does not quantize"),
        "Allocate the pools in the activations' dtype.",
        _with(lambda kw: {"k_pool": kw["k_pool"].astype(mx.float32), "v_pool": kw["v_pool"].astype(mx.float32)},
              dtype="float16"),
        lambda: _call(dtype="float16")),
    ErrorSpec(
        "index_dtype", "rope_pool_fused: positions/slots must be int32", "sglang-c++",
        "The kernel reads positions and slots as 32-bit integers.",
        ("np.arange or torch.arange default to int64",),
        "Cast: positions.astype(mx.int32) (or np.int32).",
        _with(lambda kw: {"positions": kw["positions"].astype(mx.int64)}), _call),
    ErrorSpec(
        "head_dim_odd", "rope_pool_fused: head_dim must be even", "sglang-c++",
        "NeoX RoPE pairs dimension i with i + head_dim/2, so head_dim must split in two halves.",
        ("head_dim computed with a rounding division", "a partial rotary dimension passed as head_dim"),
        "Pass the model's real (even) head_dim.",
        lambda: _call(Shapes(3, 4, 2, 7, 6)), _call),
    ErrorSpec(
        "unsupported_dtype", "rope_pool_fused: unsupported dtype", "sglang-c++",
        "The kernel supports float16, bfloat16 and float32.",
        ("NumPy arrays left in NumPy's default float64",),
        "Cast to float16, bfloat16 or float32.",
        lambda: {**make_inputs(BASE, "float64", kind="numpy", slots=[0, 2, 4])},
        lambda: make_inputs(BASE, "float32", kind="numpy", slots=[0, 2, 4])),
    ErrorSpec(
        "head_count", "num_qo_heads, num_kv_heads and head_dim must be positive, got {got}", "ropepool",
        "A head count or head_dim of zero or less describes no attention at all.",
        ("a config field missing and defaulted to 0",),
        "Read num_attention_heads, num_key_value_heads and head_dim from the model's config.",
        lambda: _call(Shapes(3, 4, 0, 8, 6)), _call),
    ErrorSpec(
        "group_size", "num_qo_heads must be a multiple of num_kv_heads, got {got}", "ropepool",
        "Under GQA each KV head serves G = num_qo_heads // num_kv_heads query heads; "
        "G must be a whole number.",
        ("num_kv_heads or num_qo_heads of another model or of a tensor-parallel shard",),
        "Use the model's num_key_value_heads (it divides num_attention_heads).",
        lambda: _call(Shapes(3, 4, 3, 8, 6)), _call),
    ErrorSpec(
        "rope_base", "rope_base must be a finite number > 0, got {got}", "ropepool",
        "rope_base (config.rope_theta) sets the rotation frequencies base**(-2i/D).",
        ("rope_theta missing from the config and passed as None or 0",),
        "Pass config.rope_theta, or 10000.0 where the config has none.",
        lambda: _call(rope_base=0.0), _call),
    ErrorSpec(
        "position_negative", "positions must be >= 0, got {got}", "ropepool",
        "A position counts tokens from the start of the sequence.",
        ("a padding marker (-1) passed as a position",),
        "Pass real positions; mark tokens to skip with slot -1 instead.",
        lambda: _call(positions=mx.array([0, -1, 2], dtype=mx.int32)), _call),
    ErrorSpec(
        "position_too_large", "positions must be below 2**24 = 16777216, got {got}", "ropepool",
        "The kernel turns positions into float32 angles; past 2**24 float32 no longer holds "
        "every integer, so neighbouring positions would get the same rotation.",
        ("an uninitialised or garbage positions buffer", "a slot index passed as a position"),
        "Pass positions below 2**24 (16,777,216).",
        lambda: _call(positions=mx.array([0, 1, 2**24], dtype=mx.int32)), _call),
    ErrorSpec(
        "slot_out_of_range", "slots must be below the pool size {pool_rows}, got {got}", "ropepool",
        "A slot names a pool row. One past the end would be an out-of-bounds write in SGLang's "
        "kernel, and MLX's own indexing does not bound-check either.",
        ("slots from a larger pool or another layer's allocator", "an off-by-one in the allocator"),
        "Allocate slots in [0, P), or grow the pool.",
        lambda: _call(slots=mx.array([0, 2, 6], dtype=mx.int32)), _call),
    ErrorSpec(
        "duplicate_slot", "two tokens write the same pool row: {got}", "ropepool",
        "Two tokens writing one row race in the kernel: which one lands is undefined.",
        ("the allocator handed out a slot twice", "a decode step reusing the previous step's slots"),
        "Give every writing token its own slot (use -1 for tokens that write nothing).",
        lambda: _call(slots=mx.array([0, 2, 2], dtype=mx.int32)), _call),
    ErrorSpec(
        "inplace_unsupported", "inplace=True cannot write these pools in place: {got}", "ropepool",
        "With inplace=True the op writes k_rot and v into the pools themselves, as SGLang's kernel "
        "does: the pools must be writable, row-contiguous host memory, two distinct buffers, and "
        "the backend one that runs on the host ('cpu' or 'mlx').",
        ("a read-only NumPy array (np.frombuffer of bytes, or setflags(write=False))",
         "a strided view such as pool[:, :, ::2] or a transposed array",
         "the same array passed as k_pool and v_pool",
         "mx.array pools while MLX's default device is the GPU, or backend='metal'/'cuda'"),
        "Pass writable, contiguous and distinct pools (np.ascontiguousarray makes a copy), use "
        "backend='auto', or call without inplace=True and rebind the pools it returns.",
        lambda: _inplace_call(writable=False), lambda: _inplace_call(writable=True)),
    ErrorSpec(
        "unknown_backend", "unknown backend {got}", "ropepool",
        "backend names the implementation to run.",
        ("a typo",),
        "Use backend='auto' or a name from ropepool.available_backends().",
        lambda: _call(backend="gpu"), lambda: _call(backend="auto")),
    ErrorSpec(
        "backend_unavailable", "backend {got} cannot run here", "ropepool",
        "The backend exists but this machine cannot run it.",
        ("backend='metal' on a machine without Apple Silicon", "backend='cuda' without an NVIDIA GPU and mlx[cuda13]"),
        "Use backend='auto', which picks the best backend that runs here.",
        lambda: _call(backend=_first_unavailable_backend()), lambda: _call(backend="auto")),
]

CATALOG: dict[str, ErrorSpec] = {spec.code: spec for spec in _SPECS}
