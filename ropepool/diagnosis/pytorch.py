"""PyTorch's messages, as transformers' attention and loaders print them.

==========================================================  =================================================
``shape '[1, 7, 32, 128]' is invalid for input of size N``  ``Tensor.view`` (aten/src/ATen/InferSize.h)
``The size of tensor a (32) must match the size of tensor   broadcasting (aten/src/ATen/ExpandUtils.cpp):
b (8) at non-singleton dimension 1``                        ``q @ k`` without ``repeat_kv``, ``x * cos``
``The expanded size of the tensor (128) must match the      ``Tensor.expand`` (the same file)
existing size (64) at non-singleton dimension 3``
``einsum(): subscript h has size 8 for operand 1 which does  ``torch.einsum`` (aten/src/ATen/native/Linear.cpp;
not broadcast with previously seen size 32``                 older: ``operands do not broadcast with remapped``)
``index 4096 is out of bounds for dimension 0 with size      indexing (TensorAdvancedIndexing.cpp; NumPy's
4096``                                                      ``for axis 0``): a slot past a pool
``index out of range in self``                              ``index_select`` on CPU (the same file), as
                                                            ``F.embedding`` calls it: a token id or a position
                                                            past its table
``size mismatch for ...k_proj.weight: copying a param with  ``Module.load_state_dict`` (torch/nn/modules/
shape torch.Size([1024, 4096]) from checkpoint, the shape   module.py), what ``from_pretrained`` prints
in current model is torch.Size([4096, 4096]).``
==========================================================  =================================================
"""

from __future__ import annotations

import re

from .base import Diagnosis, Facts
from .heads import (
    broadcast_case,
    einsum_case,
    expand_case,
    fused_qkv_case,
    index_case,
    merged_view_case,
    view_case,
    weight_case,
)
from .sizes import cat_case, split_case
from .text import last_read, line_at, product, shapes

VIEW = "PyTorch's Tensor.view (aten/src/ATen/InferSize.h), as transformers' attention calls it"
BROADCAST = "PyTorch broadcasting (aten/src/ATen/ExpandUtils.cpp)"
EINSUM = "PyTorch's torch.einsum (aten/src/ATen/native/Linear.cpp)"
INDEX = "PyTorch's indexing (aten/src/ATen/native/TensorAdvancedIndexing.cpp)"
NUMPY_INDEX = "NumPy's indexing (numpy/_core/src/multiarray/mapping.c)"
LOOKUP = (
    "PyTorch's index_select on CPU (aten/src/ATen/native/TensorAdvancedIndexing.cpp), as F.embedding calls it "
    "(aten/src/ATen/native/Embedding.cpp)"
)
LOAD = "PyTorch's Module.load_state_dict (torch/nn/modules/module.py), as from_pretrained calls it"

_PROJ = re.compile(r"(?:^|[._])(q|k|v|o)_proj\b|(query_key_value|qkv_proj|qkv|c_attn)\b|attn_(q|k|v)\b")

#: Tensor.view: (the shape asked, the tensor's size).
_VIEW = re.compile(r"shape '\[([-\d, ]{1,200})\]' is invalid for input of size (\d{1,25})")
#: Broadcasting and Tensor.expand: (one size, the other, the dimension).
_BROADCAST = re.compile(
    r"The size of tensor a \((\d{1,19})\) must match the size of tensor b \((\d{1,19})\) at "
    r"non-singleton dimension (\d{1,3})"
)
_EXPAND = re.compile(
    r"The expanded size of the tensor \((\d{1,19})\) must match the existing size \((\d{1,19})\) at "
    r"non-singleton dimension (\d{1,3})"
)
#: einsum: (the subscript, its size, the operand, the size seen before); older: each operand's [original->remapped].
_EINSUM = re.compile(
    r"subscript (\w) has size (\d{1,19}) for operand (\d{1,3}) which does not broadcast with previously seen "
    r"size (\d{1,19})"
)
_REMAPPED = re.compile(r"\[([\d, ]{0,120})\]->\[([\d, ]{0,120})\]")
#: Indexing (PyTorch's dimension, NumPy's axis): (the index, the word, the dimension, its size).
_INDEX = re.compile(r"index (-?\d{1,19}) is out of bounds for (dimension|axis) (\d{1,3}) with size (\d{1,19})")
#: load_state_dict: (the parameter), its two shapes after it.
#: transformers 5's load report prints a row a parameter: ``name | MISMATCH | ... ckpt: torch.Size([..]) vs model:..``.
_SIZE_MISMATCH = re.compile(
    r"size mismatch for ([\w.]{1,300}): copying a param with shape |([\w.]{1,300}) {0,4}\| {0,4}MISMATCH {0,4}\| "
)
#: torch.cat: (the dimension joined, the size expected on another, the size got).
_CAT = re.compile(r"must match except in dimension (-?\d{1,3})\. Expected size (\d{1,19}) but got size (\d{1,19})")
CAT = "PyTorch's torch.cat (aten/src/ATen/native/TensorShape.cpp)"
#: torch.split with sizes: (the size of the axis, its dimension, the sizes asked).
_SPLIT = re.compile(
    r"split_with_sizes expects split_sizes to sum exactly to (\d{1,19}) \(input tensor's size at dimension "
    r"(-?\d{1,3})\), but got split_sizes=\[([\d, ]{1,200})\]"
)
SPLIT = "PyTorch's torch.split with sizes (aten/src/ATen/native/TensorShape.cpp)"


def proj_of(name: str) -> str | None:
    """``q``, ``k``, ``v``, ``o`` or ``qkv`` for a parameter name (``model.layers.0.self_attn.k_proj.weight``)."""
    m = _PROJ.search(name)
    if not m:
        return None
    return m.group(1) or m.group(3) or "qkv"


def _view(text: str, i: int, f: Facts) -> Diagnosis | None:
    line = line_at(text, i)
    m = _VIEW.search(line)
    if not m:
        return None
    dims = [int(x) for x in m.group(1).split(",") if x.strip()]
    numel = int(m.group(2)) if len(m.group(2)) < 20 else None
    if len(dims) < 3 or numel is None or -1 in dims[:-2]:
        return None
    if len(dims) == 3 and -1 not in dims:
        merged = merged_view_case(dims, numel, f)
        if merged is not None:
            return Diagnosis("pytorch", VIEW, m.group(0), *merged)
    fused = fused_qkv_case(dims, numel, f)
    if fused is not None:
        return Diagnosis("pytorch", VIEW, m.group(0), f"{numel} values into {dims}: a fused qkv split", *fused)
    lead, nheads, dim = dims[:-2], dims[-2], dims[-1]
    rows = product(lead)
    width = numel // rows if rows and numel % rows == 0 else None
    case, quantity, why, fix = view_case(width, None if nheads == -1 else nheads, dim, f, rows=rows, numel=numel)
    per = f"{width} values per row" if width is not None else f"not a multiple of the {rows} rows"
    read = (
        f"view {dims} of a tensor of {numel} values: {per} (leading axes {lead}), viewed as "
        f"[{'-1' if nheads == -1 else nheads}, {dim}]"
    )
    return Diagnosis("pytorch", VIEW, m.group(0), read, case, quantity, why, fix)


def _broadcast(text: str, i: int, f: Facts) -> Diagnosis | None:
    line = line_at(text, i)
    m = _BROADCAST.search(line)
    if m:
        a, b, dim = (int(x) for x in m.groups())
        case, quantity, why, fix = broadcast_case(a, b, dim, f)
        return Diagnosis(
            "pytorch", BROADCAST, m.group(0), f"sizes {a} and {b} meet at dimension {dim}", case, quantity, why, fix
        )
    m = _EXPAND.search(line)
    if not m:
        return None
    a, b, dim = (int(x) for x in m.groups())
    found = shapes(line[m.end() :])
    ndim = len(found[0]) if found else None
    verdict = expand_case(found[0], found[1], dim, f) if len(found) >= 2 else None
    case, quantity, why, fix = verdict or broadcast_case(a, b, dim, f, ndim)
    return Diagnosis(
        "pytorch",
        BROADCAST.replace("broadcasting", "Tensor.expand"),
        line.strip()[:400],
        f"target size {a} against existing size {b} at dimension {dim}",
        case,
        quantity,
        why,
        fix,
    )


def _einsum(text: str, i: int, f: Facts) -> Diagnosis | None:
    line = line_at(text, i)
    m = _EINSUM.search(line)
    if m:
        label, a, b = m.group(1), int(m.group(2)), int(m.group(4))
        read = f"subscript {label}: size {a} in operand {m.group(3)}, {b} before it"
    else:
        pairs = _REMAPPED.findall(line)
        remapped = [tuple(int(x) for x in r.split(",") if x.strip()) for _, r in pairs]
        if len(remapped) < 2 or len(remapped[0]) != len(remapped[1]):
            return None
        x, y = remapped[0], remapped[1]
        bad = [j for j in range(len(x)) if x[j] != y[j] and 1 not in (x[j], y[j])]
        if not bad:
            return None
        label, a, b = None, y[bad[0]], x[bad[0]]
        read = f"operands {[p[0] for p in pairs[:2]]}: sizes {b} and {a} under one subscript"
    case, quantity, why, fix = einsum_case(a, b, label, f)
    return Diagnosis("pytorch", EINSUM, line.strip()[:400], read, case, quantity, why, fix)


def _split(text: str, i: int, f: Facts) -> Diagnosis | None:
    m = _SPLIT.search(line_at(text, i))
    if m is None:
        return None
    parts = [int(x) for x in m.group(3).split(",") if x.strip()]
    read = f"an axis of {m.group(1)} (dimension {m.group(2)}) split into {parts}, which sum to {sum(parts)}"
    return Diagnosis("pytorch", SPLIT, m.string.strip()[:400], read, *split_case(int(m.group(1)), parts, f))


def _index(text: str, i: int, f: Facts) -> Diagnosis | None:
    line = line_at(text, i)
    m = _INDEX.search(line)
    if not m:
        return None
    index, dim, size = int(m.group(1)), int(m.group(3)), int(m.group(4))
    case, quantity, why, fix = index_case(index, dim, size, f)
    numpy = m.group(2) == "axis"
    return Diagnosis(
        "numpy" if numpy else "pytorch",
        NUMPY_INDEX if numpy else INDEX,
        line.strip()[:300],
        f"index {index} on {m.group(2)} {dim} of size {size}",
        case,
        quantity,
        why,
        fix,
    )


def _lookup(text: str, i: int, f: Facts) -> Diagnosis:
    """An embedding lookup (``index_select`` of rows) past its table: the message carries no numbers, so it
    names the two tables a model reads by index, and what to print to tell which."""
    rows = f" ({f.max_position_embeddings})" if f.max_position_embeddings else ""
    why = (
        "the message carries no numbers; three mistakes give it: (A) token_id: a token id past the vocabulary, "
        "an id >= vocab_size (a tokenizer with added tokens and embed_tokens not resized, or another model's "
        "tokenizer) or a negative one (labels' -100 or a pad id of -1 fed as input_ids); or (B) position: a "
        f"position >= max_position_embeddings{rows} in a table of one row a position, a learned position "
        "embedding (GPT-2's wpe, OPT's embed_positions) or a RoPE cos/sin cache read with index_select "
        "(vLLM's forward_native), at positions counted past the cache; or (C) block: a paged KV cache's block "
        "table holding a block id >= its pool's num_blocks (a table of another pool, an id counted from 1) or a "
        "-1 pad read as an id."
    )
    fix = (
        "To tell them apart, print(input_ids.min(), input_ids.max(), config.vocab_size) and "
        "print(position_ids.max(), config.max_position_embeddings), and block_table.min(), block_table.max() "
        "against the pool's num_blocks, just before the forward (the traceback's last "
        "line in the model names the table: embed_tokens or wte, a token; embed_positions, wpe or the cos/sin "
        "cache, a position). A token: resize_token_embeddings(len(tokenizer)), or the model's own tokenizer. A "
        "position: a step's positions run cached .. cached + new - 1, below max_position_embeddings."
    )
    read = "no numbers: an index_select of rows (an embedding lookup) got an index past its table, or a negative one"
    line = line_at(text, i).strip()[:300]
    return Diagnosis("pytorch", LOOKUP, line, read, "ambiguous", "token_id/position/block", why, fix)


def _cat(text: str, i: int, f: Facts) -> Diagnosis | None:
    line = line_at(text, i)
    m = _CAT.search(line)
    if not m:
        return None
    dim, expected, got = (int(g) for g in m.groups())
    read = f"torch.cat along dim {dim}: another axis differs, {expected} against {got}"
    return Diagnosis("pytorch", CAT, m.group(0), read, *cat_case(dim, expected, got, f))


_RANK = {"k": 0, "v": 1, "q": 2, "qkv": 3, "o": 4}


def _load(text: str, i: int, f: Facts) -> Diagnosis | None:
    """The first attention projection among all of ``text``'s size mismatches (``i``, the last one's position,
    is not needed)."""
    best = None
    for n, m in enumerate(_SIZE_MISMATCH.finditer(text)):
        if n > 4096:
            break
        name = m.group(1) or m.group(2)
        proj = proj_of(name)
        if proj is None:
            continue
        found = shapes(text[m.end() - 2 : m.end() + 300])
        if len(found) < 2 or not found[0] or not found[1]:
            continue
        if best is None or _RANK[proj] < _RANK[best[1]]:
            best = (name, proj, found[0], found[1], m)
    if best is None:
        return None
    name, proj, ckpt, model, m = best
    cols = ckpt[1] if len(ckpt) == 2 else None
    built = model[1] if len(model) == 2 else None
    case, quantity, why, fix = weight_case(proj, ckpt[0], model[0], f, cols=cols, built_cols=built, where="the config")
    line = line_at(text, m.start()).strip()[:500]
    read = f"{name}: the checkpoint has {list(ckpt)}, the model built from the config {list(model)}"
    return Diagnosis("transformers", LOAD, line, read, case, quantity, why, fix)


#: Each message's phrase, and its reader.
_READERS = {
    "is invalid for input of size": _view,
    "must match the size of tensor b": _broadcast,
    "must match the existing size": _broadcast,
    "size mismatch for ": _load,
    "| MISMATCH |": _load,
    "must match except in dimension": _cat,
    "split_with_sizes expects split_sizes": _split,
    "einsum(): subscript": _einsum,
    "einsum(): operands do not broadcast": _einsum,
    "is out of bounds for dimension": _index,
    "is out of bounds for axis": _index,
    "index out of range in self": _lookup,
}


def diagnose(text: str, f: Facts) -> tuple[int, Diagnosis] | None:
    """The last PyTorch message in ``text``, diagnosed for ``f``; with its position."""
    return last_read(text, _READERS, f)
