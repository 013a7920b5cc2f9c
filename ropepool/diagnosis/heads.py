"""The reasoning every framework's shape error shares: how many heads of which size a tensor holds.

Three kinds of numbers reach it:

- a *view*: a tensor of ``width`` values per token viewed as ``[heads, dim]`` (PyTorch's ``view``,
  MLX's ``reshape``): :func:`view_case`;
- a *projection weight*: ``out`` rows in the weights against ``out`` rows the config builds
  (``load_state_dict``, mlx's ``load_weights``, llama.cpp's loader): :func:`weight_case`;
- a *broadcast*: two sizes that meet on one axis (``q @ k``, ``x * cos``): :func:`broadcast_case`.

Each returns ``(case, quantity, why, fix)`` from the numbers and the model's :class:`Facts`.
"""

from __future__ import annotations

from dataclasses import replace

from .base import Facts, ambiguous, heads
from .sizes import read_pair
from .text import product

Verdict = tuple[str, str, str, str]


def _kv_fix(f: Facts) -> str:
    return f"config.num_key_value_heads = {f.num_kv_heads}" if f.num_kv_heads else "config.num_key_value_heads"


def _tp(width_total: int, width: int, count: int) -> int | None:
    """The tensor-parallel degree that cuts ``width_total`` into pieces of ``width``, if it exceeds ``count``."""
    if width and width_total % width == 0 and width_total // width > count:
        return width_total // width
    return None


def tp_case(tp: int, kv: int, what: str = "k_proj") -> Verdict:
    return (
        "tp_over_kv_heads",
        "tp",
        f"tensor parallelism over tp = {tp} ranks split {what}'s {kv} KV heads: each rank gets {kv}/{tp} "
        "of a head, and no view of whole heads exists. tp may not exceed Hkv unless KV heads are replicated.",
        f"Use tp <= {kv} with {kv} % tp == 0 (tp = {', '.join(str(t) for t in range(1, kv + 1) if kv % t == 0)}), "
        f"or replicate each KV head over tp / {kv} ranks (vLLM and SGLang do; transformers' native TP does not).",
    )


def head_dim_from_hidden(f: Facts, D_seen: int) -> Verdict:
    return (
        "head_dim_from_hidden",
        "head_dim",
        f"head_dim was taken as hidden_size // num_attention_heads = {f.hidden_size} // {f.num_qo_heads} = "
        f"{D_seen}, but the config sets head_dim = {f.head_dim} (q_proj is {f.num_qo_heads} x {f.head_dim} = "
        f"{f.num_qo_heads * f.head_dim} wide, not {f.hidden_size}).",
        f"Read config.head_dim first: head_dim = getattr(config, 'head_dim', None) or hidden_size // "
        f"num_attention_heads (here {f.head_dim}).",
    )


def merged_view_case(dims: list, numel: int, f: Facts) -> tuple | None:
    """A view (or MLX reshape) to ``[B, T, X]`` that merges heads (the attention output before ``o_proj``),
    not one that splits them: ``(read, case, quantity, why, fix)``, or None where the numbers are no such merge."""
    B, T, X = dims
    if B * T == 0 or numel % (B * T):
        return None
    width = numel // (B * T)
    read = f"view {dims} of a tensor of {numel} values: {width} per token, merged into {X}"
    Hq, D, hidden = f.num_qo_heads, f.head_dim, f.hidden_size
    if Hq and D and width == Hq * D and X != width:
        why = (
            f"the attention output has Hq x head_dim = {Hq} x {D} = {width} values per token"
            + (f", and {f.name}'s hidden_size is {hidden}: in this model the two differ" if hidden == X else "")
            + f"; it was reshaped to {X}."
        )
        return (
            read,
            "attn_output_width",
            "head_dim",
            why,
            (
                f"Reshape the attention output to [B, T, {width}] (Hq x head_dim, "
                "config.num_attention_heads * config.head_dim), not hidden_size: o_proj maps it to hidden_size."
            ),
        )
    case, quantity, why, fix = ambiguous(
        [
            (
                "attn_output_width",
                f"the attention output ({width} per token) reshaped to {X}: Hq x head_dim "
                "differs from hidden_size in this model (Gemma, Qwen3 and others set head_dim apart)",
            ),
            ("tokens", f"a tensor of another length: {width} values per token do not fill {X}"),
        ],
        "num_attention_heads * head_dim against hidden_size in the config (or pass --model)",
    )
    return read, case, quantity, why, fix


def fused_qkv_case(dims: list, numel: int, f: Facts) -> Verdict | None:
    """A fused qkv output of ``numel`` values split as ``[..., 3, H, D]``: three equal parts of H heads, an MHA
    split, where a GQA model's row is (Hq + 2 x Hkv) x D. None where ``dims`` has no 3 before its last two
    axes, or the values do not fit such a row."""
    if len(dims) < 4 or dims[-3] != 3 or min(dims) < 1:
        return None
    H, D, tokens = dims[-2], dims[-1], product(dims[:-3])
    if numel % tokens or (numel // tokens) % D:
        return None
    row = numel // tokens
    total = row // D  # heads of D in one token's row: Hq + 2 x Hkv
    if total == 3 * H or total <= H or (total - H) % 2:
        return None
    kv = (total - H) // 2
    Hq, Hkv = f.num_qo_heads, f.num_kv_heads
    if f.known and (Hq, Hkv) != (H, kv):
        return None
    why = (
        f"{numel} values are {tokens} tokens of {row} = ({H} + 2 x {kv}) x {D}: a fused qkv row of {H} query "
        f"heads and {kv} KV heads (GQA), split as [3, {H}, {D}], three equal parts of {H} heads (an MHA split, "
        f"3 x {H} x {D} = {3 * H * D} a token)"
    )
    fix = (
        f"Split the last axis at [{H * D}, {(H + kv) * D}]: q is {H} x {D} = {H * D} wide, k and v {kv} x {D} = "
        f"{kv * D} each; view q with {H} heads and k, v with {kv}."
    )
    if f.known:
        return "qkv_split_as_mha", "heads", why + f"; {f.name} has Hq = {Hq}, Hkv = {Hkv}.", fix
    case, quantity, text, check = ambiguous(
        [
            ("qkv_split_as_mha", why + f" (if {H} is num_attention_heads, num_key_value_heads is {kv})"),
            ("tokens", f"or the leading axes ({tokens} tokens) are not the tensor's"),
        ],
        f"config.num_key_value_heads (is it {kv}?) and qkv_proj.out_features (is it {row}?)",
    )
    return case, quantity, text, check + " If (A): " + fix


def zero_heads_case(width: int, dim: int, f: Facts) -> Verdict:
    """A view with 0 heads: a per-rank head count ``count // tp`` with tp past the count."""
    have = width // dim if dim and width % dim == 0 else None
    holds = f"the tensor holds {heads(have)} of {dim} a row" if have else f"the tensor holds {width} values a row"
    Hkv = f.num_kv_heads
    kv = (
        f"{f.name} has {Hkv} KV heads: at any tp > {Hkv} (tp = {2 * Hkv}, say), {Hkv} // tp = 0"
        if Hkv
        else "at tp > num_key_value_heads, num_key_value_heads // tp = 0"
    )
    return (
        "tp_over_kv_heads",
        "tp",
        f"the view asks for 0 heads: a per-rank count computed as heads // tp with tp larger than the count "
        f"({kv}), while {holds}: each rank holds a replicated KV head, {Hkv or 'Hkv'} heads over tp ranks.",
        "Take the per-rank KV heads as max(1, num_key_value_heads // tp) and replicate each KV head over "
        f"tp / num_key_value_heads ranks (vLLM's and SGLang's rule), i.e. view(..., {have or 1}, {dim}); or run "
        "at tp <= num_key_value_heads.",
    )


def view_case(
    width: int | None, nheads: int | None, dim: int, f: Facts, *, rows: int | None = None, numel: int | None = None
) -> Verdict:
    """A tensor of ``width`` values per row viewed as ``[nheads, dim]`` (``nheads`` None for ``-1``).

    ``width`` is None when the leading axes do not divide the size (then ``rows`` and ``numel`` say so).
    """
    if f.hidden_size and f.num_qo_heads and f.hidden_size % f.num_qo_heads and f.head_dim is None:
        return _heads_do_not_divide(f)
    if width is None:
        return (
            "tokens",
            "tokens",
            f"{numel} values are not a whole number of rows of {rows}: the view's leading axes (batch, "
            "tokens) are not the tensor's: q_len or the batch size was taken from another tensor.",
            "Take the leading sizes from this tensor itself: x.view(*x.shape[:-1], -1, head_dim).",
        )
    if nheads is None:  # view(..., -1, dim)
        return _view_inferred_heads(width, dim, f)
    if nheads == 0:
        return zero_heads_case(width, dim, f)
    if not f.known:
        return _view_without_model(width, nheads, dim)
    D = f.head_dim
    split = _view_of_a_split(width, nheads, dim, f)
    if split is not None:
        return split
    if D and dim == D and width % D == 0:
        return _view_whole_heads(width // D, nheads, f)
    if D and dim != D:
        return _view_head_dim(dim, f)
    return (
        "foreign",
        "heads",
        f"{width} values per row do not make {nheads} heads of {dim}.",
        "Print the tensor's shape before the view and compare it with the projection's output size.",
    )


def _view_of_a_split(width: int, nheads: int, dim: int, f: Facts) -> Verdict | None:
    """A row of ``width`` values that is a split of the model's projections gone wrong: a fused qkv cut in three
    equal parts (chunk(3)), or k and v split over more tensor-parallel ranks than KV heads; None otherwise."""
    Hq, Hkv, D, tp = f.num_qo_heads, f.num_kv_heads, f.head_dim, f.tp
    if not (Hq and Hkv and D):
        return None
    qkv = (Hq + 2 * Hkv) * D
    if Hq != Hkv and 3 * width == qkv and not tp:
        why = (
            f"{width} values per row are a third of the fused qkv row, (Hq + 2 x Hkv) x D = ({Hq} + 2 x {Hkv}) x {D} "
            f"= {qkv}: it was cut into three equal parts (chunk(3)), which holds only for MHA; with GQA q is "
            f"{Hq * D} wide and k and v {Hkv * D} each"
        )
        fix = (
            f"q, k, v = qkv.split([{Hq * D}, {Hkv * D}, {Hkv * D}], dim=-1), then view q with {Hq} heads and k, v "
            f"with {Hkv}."
        )
        if width % D or (Hq * D) % width:
            return "qkv_chunked", "heads", why + ".", fix
        return ambiguous(  # the same width is a tensor-parallel rank's share of q
            [
                ("qkv_chunked", why),
                (
                    "tp_shard_full_count",
                    f"or this rank's q holds {width // D} heads (a tensor-parallel shard, tp = {Hq * D // width}) "
                    f"viewed with the full {nheads}",
                ),
            ],
            "how q, k and v come from the fused projection (chunk or split) and whether this runs with tensor "
            f"parallelism (add --tp); {fix}",
        )
    if tp and tp > Hkv and width * tp == Hkv * D and tp % Hkv == 0:
        return (
            "tp_below_one_kv_head",
            "tp",
            f"{width} values per row are k_proj's Hkv x D = {Hkv} x {D} = {Hkv * D} rows split over tp = {tp} ranks: "
            f"{D * Hkv // tp} a rank, {'half' if tp == 2 * Hkv else f'1/{tp // Hkv} of'} a KV head. With more ranks "
            f"than KV heads each rank holds one whole KV head, replicated: {tp // Hkv} ranks share each.",
            f"Shard k_proj and v_proj by whole heads: rank r takes KV head r // {tp // Hkv} (its {D} rows), and view "
            f"k with 1 head of {D} on each rank; or run at tp <= {Hkv}.",
        )
    return None


def _heads_do_not_divide(f: Facts) -> Verdict:
    hidden, Hq = f.hidden_size, f.num_qo_heads
    return (
        "heads_do_not_divide_hidden",
        "head_dim",
        f"hidden_size = {hidden} is not a multiple of num_attention_heads = {Hq}: head_dim = "
        f"{hidden} // {Hq} = {hidden // Hq} drops {hidden - Hq * (hidden // Hq)} "
        "columns, and no view of whole heads matches the projection.",
        "The config is wrong for these weights: num_attention_heads must divide hidden_size (or the config "
        "must set head_dim); take the value from the checkpoint's own config.json "
        "(transformers now refuses such a config).",
    )


def _view_head_dim(dim: int, f: Facts) -> Verdict:
    """A view whose head size ``dim`` is not the model's head_dim."""
    if f.naive_head_dim == dim:
        return head_dim_from_hidden(f, dim)
    return (
        "head_dim",
        "head_dim",
        f"the view's head size is {dim}, the model's head_dim is {f.head_dim}.",
        f"View with head_dim = {f.head_dim} (config.head_dim).",
    )


def _view_inferred_heads(width: int, dim: int, f: Facts) -> Verdict:
    """``view(..., -1, dim)`` of ``width`` values per row: a tp split of heads, or another head size."""
    Hq, Hkv, D = f.num_qo_heads, f.num_kv_heads, f.head_dim
    if D and dim == D and width % dim:
        for count, total, what in ((Hkv, (Hkv or 0) * D, "k_proj"), (Hq, (Hq or 0) * D, "q_proj")):
            tp = count and _tp(total, width, count)
            if tp:
                return tp_case(tp, count, what)
    if D and dim != D and width % D == 0:
        return _view_head_dim(dim, f)
    if not f.known:
        return ambiguous(
            [
                (
                    "tp",
                    f"{width} values per row is less than one head of {dim} if a tensor-parallel "
                    "split gave each rank part of a head (tp > Hkv)",
                ),
                ("head_dim", f"or head_dim {dim} is not the model's"),
            ],
            "config.num_key_value_heads and config.head_dim against tp (add --model)",
        )
    return (
        "foreign",
        "heads",
        f"{width} values per row are not whole heads of {dim}.",
        f"Check which projection produced this tensor: the model's are [T, {Hq} x {D}] and [T, {Hkv} x {D}].",
    )


def _view_without_model(width: int, nheads: int, dim: int) -> Verdict:
    """A view to ``[nheads, dim]`` of ``width`` values per row, the model unknown: which mistakes fit."""
    if width % dim == 0:
        have = width // dim
        if have < nheads:  # fewer heads than the view: k or v viewed with the query heads, or a rank's share
            options = [
                (
                    "heads",
                    f"the tensor holds {heads(have)} of {dim} and was viewed with {nheads}: if "
                    f"{have} is num_key_value_heads and {nheads} num_attention_heads, k or v was "
                    "viewed with the query head count (view with num_key_value_heads)",
                ),
                ("tp", f"or a tensor-parallel shard ({have} heads per rank) viewed with the full count"),
            ]
        else:  # more heads than the view: q viewed with the KV heads, or the whole tensor with a rank's count
            options = [
                (
                    "heads",
                    f"the tensor holds {heads(have)} of {dim} and was viewed with {nheads}: if {have} is "
                    f"num_attention_heads and {nheads} num_key_value_heads, q was viewed with the KV head count "
                    "(view q with num_attention_heads)",
                ),
                (
                    "tp",
                    f"or the whole tensor viewed with one rank's count ({nheads} = {have} / tp, tp = {have // nheads})",
                )
                if have % nheads == 0
                else ("tp", f"or a tensor of another split viewed with {nheads}"),
            ]
        if width % nheads == 0 and width // nheads != dim:
            options.append(
                ("head_dim", f"or {heads(nheads)} of {width // nheads}: head_dim is {width // nheads}, not {dim}")
            )
        return ambiguous(
            options,
            f"config.num_attention_heads, config.num_key_value_heads (is one {have}?), head_dim and the tp degree "
            "(add --model)",
        )
    return ambiguous(
        [
            ("head_dim", f"{width} values per row are not whole heads of {dim}: head_dim is not {dim}"),
            ("heads", "or the tensor comes from another projection"),
        ],
        "config.head_dim and the projection's output size (add --model)",
    )


def _view_whole_heads(have: int, nheads: int, f: Facts) -> Verdict:
    """A tensor of ``have`` whole heads of the model's head_dim viewed with ``nheads``: which count it holds."""
    Hq, Hkv, D = f.num_qo_heads, f.num_kv_heads, f.head_dim
    width = have * D
    if Hkv and have == Hkv and nheads == Hq and Hq != Hkv:
        return (
            "kv_viewed_with_hq",
            "heads",
            f"k (or v) from k_proj holds Hkv x D = {Hkv} x {D} = {width} values per token, but was viewed with "
            f"the query head count {Hq} (num_attention_heads): the classic GQA mistake in a view.",
            f"View k and v with num_key_value_heads: k.view(B, T, {Hkv}, {D}) ({_kv_fix(f)}); "
            "q keeps num_attention_heads.",
        )
    if Hq and have == Hq and nheads == Hkv and Hq != Hkv:
        return ambiguous(
            [
                (
                    "q_viewed_with_hkv",
                    f"q (Hq x D = {Hq} x {D} = {width} values per token) was viewed "
                    f"with the KV head count {Hkv}: view q with num_attention_heads",
                ),
                (
                    "kv_projected_with_hq",
                    f"or k/v were projected with num_attention_heads ({Hq} x {D}, "
                    "an MHA projection under a GQA config) and viewed with "
                    f"num_key_value_heads: build k_proj and v_proj with "
                    f"{Hkv} x {D} outputs",
                ),
            ],
            "which tensor the failing line views (the traceback's line) and k_proj.out_features",
        )
    if Hkv and nheads == Hkv and have < Hkv and Hkv % have == 0:
        tp = f.tp or Hkv // have
        why = (
            f"this rank's k holds {heads(have)} (a tensor-parallel shard, tp = {tp}) but was viewed with the full {Hkv}"
        )
        fix = f"View with the per-rank count, {Hkv} // tp = {have}, or view(..., -1, {D})."
        if Hq and Hq % tp == 0 and Hq // tp == nheads:  # the rank's query heads are that count too
            return ambiguous(
                [
                    ("tp_shard_full_count", why + " (num_key_value_heads, not divided by tp)"),
                    (
                        "kv_viewed_with_hq",
                        f"or k viewed with the rank's query-head count, Hq / tp = {Hq} / {tp} = {nheads}: the GQA "
                        "mistake on one rank (k and v have Hkv / tp heads there)",
                    ),
                ],
                f"which count the failing view uses (the traceback's line; k and v take Hkv / tp = {have} on a rank, "
                f"q Hq / tp = {nheads}, or view(..., -1, {D}))",
            )
        return "tp_shard_full_count", "tp", why + ".", fix
    if Hq and nheads == Hq and have < Hq and Hq % have == 0:
        tp = Hq // have
        kv = f" (k and v: {Hkv} // tp = {Hkv // tp})" if Hkv and Hkv % tp == 0 else ""
        return ambiguous(
            [
                (
                    "tp_shard_full_count",
                    f"this rank's q holds {heads(have)} (a tensor-parallel shard, tp = {tp}) but was viewed "
                    f"with the full {Hq}: view with the per-rank count {have}{kv}, or view(..., -1, {D})",
                ),
                ("foreign", f"or the tensor comes from another model's projection ({have} x {D} per token)"),
            ],
            "whether this runs with tensor parallelism (tp) and which projection produced the tensor",
        )
    options = [
        (
            "foreign",
            f"the tensor holds {heads(have)} of {D} and was viewed with {nheads}; the model has Hq = {Hq}, "
            f"Hkv = {Hkv}: it comes from another model's projection or config",
        )
    ]
    for n, what in ((Hq, "query"), (Hkv, "KV")):
        if n and have < n and n % have == 0:
            options.append(("tp", f"or {have} is one rank's share of the {n} {what} heads at tp = {n // have}"))
    options.append(
        ("tokens", "or the view's leading axes (batch, tokens) are not the tensor's, so its width a row is not")
    )
    return ambiguous(
        options,
        f"x.shape just before the view, the projection's out_features (the model's: q {Hq} x {D}, k and v "
        f"{Hkv} x {D}) and the tp size",
    )


def _kv_weight_case(
    proj: str, have: int, want: int, f: Facts, hidden: int | None, where: str, sharded: Verdict | None
) -> Verdict | None:
    """k_proj or v_proj with ``have`` rows where ``where`` builds ``want``: MHA built, a tp shard, a model not
    built from the config, another model's weights; None where none fits."""
    Hq, Hkv, D = f.num_qo_heads, f.num_kv_heads, f.head_dim
    per = D or (hidden // Hq if hidden and Hq else None)
    if hidden and want == hidden and have < want and want % have == 0:
        kv = f" = {have // per}" if per and have % per == 0 else ""
        return (
            "config_without_kv_heads",
            "heads",
            f"{where} builds {proj}_proj with as many KV heads as query heads ({want} = hidden_size rows: "
            f"MHA, what a config without num_key_value_heads means), but the weights are GQA: {have} rows, "
            f"{want // have} times fewer (G = {want // have}).",
            f"Set num_key_value_heads{kv} (num_attention_heads / {want // have}) in {where}: the checkpoint's "
            "own config.json has it; a loader that ignores it needs updating.",
        )
    if sharded is not None:
        return sharded
    if Hkv and per and have == Hkv * per and want != have and want % per == 0 and Hq and want == Hq * per:
        return (
            "config_without_kv_heads",
            "heads",
            f"the weights have {have} = Hkv x D = {Hkv} x {per} rows, {where}'s own {proj}_proj; the model that "
            f"raised built it as MHA, {want} = Hq x D = {Hq} x {per}: what a config without num_key_value_heads "
            "means where the config class fills it with num_attention_heads (LlamaConfig does).",
            f"Build the model with num_key_value_heads = {Hkv}: from this config.json (from_pretrained(path)), or "
            "set the field in the config object it is built with.",
        )
    if Hkv and per and have == Hkv * per and want != have and want % per == 0:
        return (
            "model_not_from_config",
            "heads",
            f"the weights have {have} = Hkv x D = {Hkv} x {per} rows, {where}'s own {proj}_proj; the model that "
            f"raised built {want} = {want // per} x {per}: it was not built from {where}, but from another one, "
            "or from one without num_key_value_heads, which its config class fills with a default of its own "
            "(transformers 5.25: Qwen2Config 32, MistralConfig 8, LlamaConfig num_attention_heads).",
            f"Build the model from this config.json (from_pretrained(path)) and print the config object it was "
            f"built with: config.num_key_value_heads should be {Hkv}.",
        )
    if have > want:
        w_heads = f"{have // D} KV heads" if D and have % D == 0 else f"{have} rows"
        c_heads = f"{want // D}" if D and want % D == 0 else f"{want} rows"
        mha = have == hidden  # the checkpoint's k rows are hidden_size: an MHA model's
        return (
            "weights_of_another_model",
            "heads",
            f"the weights have {w_heads} where {where} says {c_heads}: the weights and the config are of "
            + (
                "different models (an MHA checkpoint, k_proj as wide as hidden_size, under a GQA config, e.g. "
                "Llama-2 weights with a Llama-3 config) or the config was edited."
                if mha
                else "different models (another size of the family, or another family) or the config was edited."
            ),
            "Use the config.json that ships with these weights"
            + (f" (num_key_value_heads = the weights' {proj}_proj rows / head_dim)." if mha else "."),
        )
    if D and have % D == 0 and want % D == 0:
        return (
            "weights_of_another_model",
            "heads",
            f"the weights have {have // D} KV heads of {D}, {where} {want // D}: config and weights disagree.",
            "Use the config.json that ships with these weights.",
        )
    return None


def weight_case(
    proj: str,
    have: int,
    want: int,
    f: Facts,
    *,
    cols: int | None = None,
    built_cols: int | None = None,
    where: str = "the config",
) -> Verdict:
    """A projection ``proj`` (q, k, v, o, qkv) whose weights have ``have`` output rows where
    ``where`` (the config, the GGUF metadata) builds ``want``; ``cols`` its input size (hidden_size), and
    ``built_cols`` the built model's, where the message gives it. Weights whose input size is not the
    model's hidden_size are another model's: read from their own numbers."""
    if not f.hidden_size and built_cols and cols and built_cols != cols and proj != "o":
        f = replace(f, hidden_size=built_cols, name=f.name or "the model built")
    if proj != "o" and cols and f.hidden_size and cols != f.hidden_size:
        case, quantity, why, fix = weight_case(proj, have, want, Facts(hidden_size=cols), cols=cols, where=where)
        other = (
            f"these weights take {cols} inputs, not {f.name}'s hidden_size {f.hidden_size}: they belong to another "
            "model (a draft model, another size), so they are read from their own numbers: "
        )
        return case, quantity, other + why, fix
    Hq, Hkv = f.num_qo_heads, f.num_kv_heads
    hidden = f.hidden_size or cols
    sharded = _tp_shard_case(proj, have, want, f, hidden, where)
    if sharded is not None and (f.tp or not Hq):  # a tp given, or no model: the shard is read first
        return sharded
    if proj in ("k", "v"):
        found = _kv_weight_case(proj, have, want, f, hidden, where, sharded)
        if found is not None:
            return found
    if proj == "qkv":
        mha = _qkv_built_as_mha(have, want, f, hidden, where)
        if mha is not None:
            return mha
    if sharded is not None:
        return sharded
    if proj in ("q", "o", "qkv"):
        n = Hq if proj != "qkv" else (Hq + 2 * Hkv if Hq and Hkv else None)
        if n and have % n == 0 and want % n == 0:
            d_have, d_want = have // n, want // n
            if hidden and Hq and d_want == hidden // Hq and d_have != d_want:
                return (
                    "head_dim_from_hidden",
                    "head_dim",
                    f"{where} built the {proj} projection with head_dim = hidden_size // num_attention_heads = "
                    f"{hidden} // {Hq} = {d_want}; the weights use head_dim = {d_have} ({have} = {n} x {d_have} "
                    "rows): the model sets head_dim explicitly (Qwen3, Gemma).",
                    f"Read config.head_dim ({d_have}) before falling back to hidden_size // num_attention_heads.",
                )
            return (
                "head_dim",
                "head_dim",
                f"the weights have head_dim {d_have}, {where} {d_want}.",
                f"Build the model with head_dim = {d_have} (the checkpoint's config.head_dim).",
            )
        if hidden and want == hidden and have != want:
            return (
                "head_dim_from_hidden",
                "head_dim",
                f"{where} builds {proj}_proj {want} = hidden_size rows, the weights have {have}: the model's "
                "q_proj is num_attention_heads x head_dim wide, not hidden_size (head_dim is set explicitly).",
                "Read config.head_dim before falling back to hidden_size // num_attention_heads.",
            )
    return (
        "weights_of_another_model",
        "heads",
        f"the weights of {proj}_proj have {have} rows, {where} builds {want}: they are not of the same model.",
        "Use the config.json that ships with these weights.",
    )


def _tp_shard_case(proj: str, have: int, want: int, f: Facts, hidden: int | None, where: str) -> Verdict | None:
    """q, k or v rows that are the whole projection on one side and one tensor-parallel rank's share on the
    other (rows split over ranks; a KV head replicated where tp exceeds Hkv): with ``f.tp`` given, that is the
    reading; without it, one of two (another model's weights fit the numbers too). None where neither fits."""
    if proj not in ("q", "k", "v") or have == want:
        return None
    if not f.num_qo_heads:  # no model: the ratio alone
        full, part = max(have, want), min(have, want)
        if f.hidden_size or full % part:
            return None
        side = "the checkpoint" if have == part else "the model built"
        mha = (
            [
                (
                    "config_without_kv_heads",
                    f"the model was built with k/v as wide as its hidden state ({want} = the weights' {want} "
                    f"inputs: MHA, what a config without num_key_value_heads means) and the weights are GQA, "
                    f"{have} rows (G = {want // have}): set num_key_value_heads",
                )
            ]
            if proj in ("k", "v") and hidden and want == hidden and have < want
            else []
        )
        return ambiguous(
            mha
            + [
                (
                    "tp_unsplit_checkpoint" if have == full else "tp_shard_in_whole_model",
                    f"{side} holds one tensor-parallel rank's share of {proj}_proj: {part} of {full} rows, "
                    f"tp = {full // part} (shard the checkpoint by rows, or load the merged one)",
                ),
                (
                    "weights_of_another_model",
                    f"or the weights are another model's ({have} rows where the config builds {want})",
                ),
            ],
            "the model (--model or --config), the tensor-parallel size it runs at (--tp) and which checkpoint was loaded",
        )
    D = f.head_dim or (hidden // f.num_qo_heads if hidden else None)
    n = f.num_qo_heads if proj == "q" else f.num_kv_heads
    if not (D and n) or have == want:
        return None
    full, part = max(have, want), min(have, want)
    if full != n * D or part % D or full % part:
        return None
    share = part // D
    tp = f.tp if f.tp else (n // share if n % share == 0 else None)
    if tp is None or tp < 2 or share != (n // tp if n % tp == 0 else 1 if tp % n == 0 else -1):
        return None
    replicated = f" (tp = {tp} is more than the {n} KV heads: each rank holds a copy of one)" if n < tp else ""
    if have == full:
        why = (
            f"the checkpoint's {proj}_proj is the whole projection, {n} x {D} = {full} rows, but the model {where} "
            f"built is one tensor-parallel rank's share: {heads(share)} x {D} = {part} rows at tp = {tp}{replicated}."
        )
        fix = (
            f"Shard {proj}_proj by rows before loading: rank r takes rows [{part}*r, {part}*(r+1)) "
            f"(weight.chunk({tp}, dim=0)[r])"
            + (", each KV head's rows on the ranks that share it" if n < tp else "")
            + "; the same for the other projections, or load with the framework's tensor-parallel loader."
        )
        case = "tp_unsplit_checkpoint"
    else:
        why = (
            f"the checkpoint holds one tensor-parallel rank's share of {proj}_proj, {heads(share)} x {D} = {part} "
            f"rows (tp = {tp}), but the model {where} built is whole: {n} x {D} = {full} rows{replicated}."
        )
        fix = f"Load the merged checkpoint (all {tp} ranks' shards concatenated by rows), or build the model at tp = {tp}."
        case = "tp_shard_in_whole_model"
    if f.tp:
        return case, "tp", why, fix
    return ambiguous(
        [
            (case, why[:1].lower() + why[1:] + " " + fix),
            (
                "weights_of_another_model",
                f"or the weights are another model's ({have} rows where the config builds {want})",
            ),
        ],
        "the tensor-parallel size the model runs at (--tp) and which checkpoint was loaded",
    )


def _qkv_built_as_mha(have: int, want: int, f: Facts, hidden: int | None, where: str) -> Verdict | None:
    """A fused qkv_proj (Phi-3's) built with 3 x Hq heads where the weights hold Hq + 2 x Hkv: None otherwise."""
    Hq = f.num_qo_heads
    D = f.head_dim or (hidden // Hq if hidden and Hq else None)
    if not (Hq and D) and hidden and want == 3 * hidden and hidden < have < want and (have - hidden) % 2 == 0:
        kv_width = (have - hidden) // 2  # no model: the numbers alone are MHA's signature
        return (
            "config_without_kv_heads",
            "heads",
            f"{where} built the fused qkv_proj as MHA: 3 x hidden_size = 3 x {hidden} = {want} rows (q, k and v as "
            f"wide as the hidden state), what a config without num_key_value_heads means; the weights hold "
            f"{have} = {hidden} + 2 x {kv_width} rows: k and v {kv_width} wide each, fewer KV heads than query "
            f"heads (GQA, G = {hidden // kv_width if hidden % kv_width == 0 else hidden / kv_width}).",
            f"Build the model with num_key_value_heads = {kv_width} / head_dim (the checkpoint's own config.json "
            "has it); add --model or --config to get the numbers.",
        )
    if not (Hq and D) or want != 3 * Hq * D or not Hq * D < have < want or (have - Hq * D) % (2 * D):
        return None
    kv = (have - Hq * D) // (2 * D)
    if Hq % kv:
        return None
    given = ""
    if f.num_kv_heads == kv:
        given = (
            f" The config given says {kv} KV heads: the model that raised was built from another config (one "
            "without the field), or by modeling code that reads the KV heads from another field (Falcon: "
            "multi_query, or num_kv_heads with new_decoder_architecture)."
        )
    return (
        "config_without_kv_heads",
        "heads",
        f"{where} built the fused qkv_proj as MHA: 3 x {Hq} x {D} = {want} rows (q, k and v of {Hq} heads each), "
        f"what a config without num_key_value_heads means; the weights hold {have} = ({Hq} + 2 x {kv}) x {D} rows: "
        f"{kv} KV heads (GQA, G = {Hq // kv}). head_dim = {D} is right.{given}",
        f"Build the model with num_key_value_heads = {kv} (the field its config class reads; Falcon: "
        "multi_query=True, or num_kv_heads with new_decoder_architecture): load the checkpoint's own config.json "
        "(from_pretrained(path), no hand-made config).",
    )


def broadcast_case(a: int, b: int, dim: int | None, f: Facts, ndim: int | None = None, layout: bool = True) -> Verdict:
    """Sizes ``a`` and ``b`` that must match on axis ``dim`` (of ``ndim`` axes, where known); ``layout`` False
    where the shapes show both in one layout."""
    Hq, Hkv, D, rd = f.num_qo_heads, f.num_kv_heads, f.head_dim, f.rotary_dim
    pair = {a, b}
    heads_axis = dim is None or dim <= 1 or (ndim is not None and dim == ndim - 3)
    if Hq and Hkv and Hq != Hkv and pair == {Hq, Hkv} and not heads_axis:
        return ambiguous(
            [
                (
                    "heads",
                    f"q's {Hq} heads against k/v's {Hkv} on a [B, T, H, D] layout: repeat_kv missing (G = {Hq // Hkv})",
                ),
                ("tokens", f"or {a} and {b} are two sequence lengths that happen to be the head counts"),
            ],
            "q.shape and k.shape just before the failing line",
        )
    if Hq and Hkv and Hq != Hkv and pair == {Hq, Hkv}:
        return (
            "missing_repeat_kv",
            "heads",
            f"q's {Hq} query heads met k/v's {Hkv} KV heads: attention written for MHA got GQA tensors, and "
            f"repeat_kv was not applied (G = {Hq // Hkv}).",
            f"Repeat k and v to the query heads before the product: repeat_kv(k, {Hq // Hkv}) (torch."
            "repeat_interleave(k, G, dim=1)), or call an attention that takes Hkv heads (F.scaled_dot_product_"
            "attention(..., enable_gqa=True), mx.fast.scaled_dot_product_attention).",
        )
    if D and rd and rd != D and pair == {D, rd}:
        return (
            "rotary_dim",
            "rotary_dim",
            f"cos/sin cover rotary_dim = {rd} dimensions, the head has {D}: partial RoPE applied to the whole head "
            "(rotary_dim or partial_rotary_factor read as 1).",
            f"Rotate only q[..., :{rd}] and k[..., :{rd}] and pass the other {D - rd} through; read rotary_dim "
            "from the config (rotary_dim, or int(partial_rotary_factor * head_dim)).",
        )
    if D and f.naive_head_dim and f.naive_head_dim != D and pair == {D, f.naive_head_dim}:
        return head_dim_from_hidden(f, f.naive_head_dim)
    at = f" at dimension {dim}" if dim is not None else ""
    last_axis = dim is not None and ndim is not None and dim == ndim - 1
    small = min(a, b)
    if D and rd is None and max(a, b) == D and 0 < small < D // 2 and D % small == 0 and last_axis:
        return ambiguous(
            [
                (
                    "rotary_dim",
                    f"cos/sin cover {small} of the head's {D} dimensions{at}: partial RoPE applied to the whole "
                    f"head (rotary_dim = {small}, or partial_rotary_factor = {small / D:g}, read as the whole head)",
                ),
                ("head_dim", f"or a tensor built with head_dim {small}, not the model's {D}"),
            ],
            "the config's rotary_dim / partial_rotary_factor (or pass --rotary-dim) and cos.shape",
        )
    return read_pair(a, b, dim, ndim, f, layout=layout)


def einsum_case(a: int, b: int, label: str | None, f: Facts) -> Verdict:
    """An einsum whose subscript ``label`` has size ``a`` in one operand and ``b`` in an earlier one."""
    Hq, Hkv = f.num_qo_heads, f.num_kv_heads
    on = f"subscript {label}" if label else "one subscript"
    if Hq and Hkv and Hq != Hkv and {a, b} == {Hq, Hkv}:
        G = Hq // Hkv
        return (
            "missing_repeat_kv",
            "heads",
            f"{on} is the head axis of both q ({Hq} query heads) and k ({Hkv} KV heads): an einsum written "
            f"for MHA got GQA tensors, and k was never repeated to the query heads (G = {G}).",
            f"Repeat k and v before the einsum: k = repeat_kv(k, {G}) (torch.repeat_interleave(k, {G}, dim=1) on "
            f"[B, H, T, D]); or keep k as it is and give q a group axis: torch.einsum('bhgqd,bhkd->bhgqk', "
            f"q.view(B, {Hkv}, {G}, T, D), k).",
        )
    if f.known:
        return broadcast_case(a, b, None, f)
    big, small = max(a, b), min(a, b)
    options = []
    if small and big % small == 0:
        options.append(
            (
                "heads",
                f"{on} is the head axis: {big} query heads against {small} KV heads, repeat_kv missing "
                f"(G = {big // small})",
            )
        )
    options.append(("other_axis", f"or {on} joins two other sizes ({a} and {b}): lengths or head sizes that differ"))
    return ambiguous(options, "the equation's subscripts against q.shape and k.shape (or add --model)")


def expand_case(target: tuple, existing: tuple, dim: int, f: Facts) -> Verdict | None:
    """``Tensor.expand`` (or a copy into a slice) of a tensor of shape ``existing`` to ``target``, refused at
    axis ``dim`` of ``target``: the two GQA mistakes whose shapes say which; None for any other."""
    a = target[dim] if 0 <= dim < len(target) else None
    b = existing[dim - (len(target) - len(existing))] if len(existing) >= len(target) - dim else None
    if (
        len(target) == 5
        and len(existing) == 5
        and dim == 1
        and existing[2] == 1
        and target[2] == existing[1]
        and a != existing[1]
    ):
        kv, n_rep, D = existing[1], a, target[4]
        note = ""
        if f.num_kv_heads and f.num_qo_heads and (f.num_kv_heads, f.num_qo_heads // f.num_kv_heads) != (kv, n_rep):
            note = f" ({f.name}'s own numbers are Hkv = {f.num_kv_heads}, G = {f.num_qo_heads // f.num_kv_heads})"
        return (
            "repeat_kv_swapped",
            "heads",
            f"repeat_kv inserts an axis of size 1 after the KV heads, [B, {kv}, 1, T, {D}], and expands it to n_rep: "
            f"[B, {kv}, n_rep, T, {D}]. This expand asked for [B, {n_rep}, {kv}, T, {D}]: num_key_value_heads "
            f"({kv}) and n_rep ({n_rep}) are swapped in its arguments{note}.",
            f"hidden_states[:, :, None, :, :].expand(B, {kv}, {n_rep}, T, {D}).reshape(B, {kv * n_rep}, T, {D}): "
            "num_key_value_heads first, then n_rep = num_attention_heads // num_key_value_heads.",
        )
    Hq, Hkv, D = f.num_qo_heads, f.num_kv_heads, f.head_dim
    if len(target) == 4 and a and b and a > b and a % b == 0 and (not (Hq and Hkv) or (a, b) == (Hq, Hkv)):
        why = (
            f"the place written (a cache slice, [B, {a}, T, D]) has {a} heads and the k or v written {b}: the cache "
            f"was allocated with the query heads"
            + (
                f" ({f.name}'s Hq = {Hq}) where k and v have Hkv = {Hkv}"
                if Hq
                else f" ({a}) where k and v have {b} (G = {a // b})"
            )
        )
        fix = (
            f"Allocate the KV cache with num_key_value_heads: [B, {Hkv or b}, max_len, {D or 'D'}] (G = {a // b} times "
            "less memory); only q has num_attention_heads."
        )
        if Hq and len(existing) < 4:  # a [H, T, D] value into a [B, H, T, D] place: a write
            return "cache_with_query_heads", "heads", why + ".", fix
        return ambiguous(
            [
                ("cache_with_query_heads", why),
                (
                    "missing_repeat_kv",
                    f"or k expanded to the query heads as a repeat (k.expand(B, {a}, T, D)): expand only stretches "
                    f"axes of size 1; repeat_interleave(k, {a // b}, dim=1) repeats the {b} KV heads",
                ),
                (
                    "heads",
                    f"or the value written is not k or v: a {b}-head tensor written into a {a}-head buffer (q's)",
                ),
            ],
            "the line that fails (a write into a cache, or an expand) and the cache's allocation against "
            "config.num_key_value_heads",
        )
    if Hq and Hkv and Hq != Hkv and a == Hkv and b == Hq and len(target) == 4:
        return (
            "repeated_kv_written",
            "heads",
            f"the value written holds q's {Hq} heads, the place it is written (a cache slice) {Hkv}: k or v was "
            f"repeated to the query heads (repeat_kv) before the cache write, or built with num_attention_heads.",
            f"Write the un-repeated k and v of the projections, [B, {Hkv}, T, {D}], into the cache; repeat_kv "
            f"belongs to attention, after the write (the cache then needs {Hq // Hkv} times less memory).",
        )
    return None


def index_case(index: int, dim: int, size: int, f: Facts) -> Verdict:
    """An index ``index`` past the end of axis ``dim`` (of ``size``): a slot past a pool, or a head past Hkv."""
    Hq, Hkv = f.num_qo_heads, f.num_kv_heads
    if dim == 1 and Hq and Hkv and Hq > Hkv == size and size <= index < Hq:
        G = Hq // Hkv
        return (
            "query_head_as_kv_head",
            "heads",
            f"axis 1 of a pool [P, Hkv, D] holds {f.name}'s {Hkv} KV heads; index {index} is a query head "
            f"(0..{Hq - 1}): the KV head of query head h is h // G.",
            f"Index the pool with the KV head kv_head = h // {G} (G = Hq / Hkv = {Hq} / {Hkv}), not the query head h.",
        )
    P, V = f.max_position_embeddings, f.vocab_size
    W = f.sliding_window
    if size and W and size == W and index >= size and (not P or P > W):
        return ambiguous(
            [
                (
                    "window_not_rolled",
                    f"{size} is {f.name}'s sliding_window: a cache of the window's {W} rows (a rolling buffer) "
                    f"written at position {index} without wrapping: the row of position p is p % {W}",
                ),
                ("pool_size", f"or a cache or pool of {size} rows for another reason, too few for position {index}"),
            ],
            f"whether the cache is a rolling buffer of the window (slot = position % {W}) and its allocated rows",
        )
    original = (f.rope_scaling or {}).get("original_max_position_embeddings")
    if size and original and size == original and P and P > size:
        return (
            "positions_unscaled_table",
            "positions",
            f"{size} is {f.name}'s original_max_position_embeddings (its rope_scaling's), and the model reaches "
            f"max_position_embeddings = {P}: a RoPE cos/sin table built for the original {size} positions was read "
            f"at position {index}.",
            f"Build the table for max_position_embeddings ({P}) with the model's rope_scaling "
            f"({(f.rope_scaling or {}).get('rope_type', 'its rope_type')}), or keep the sequence below {size}.",
        )
    if size and size in (P, V):
        table = "max_position_embeddings" if size == P else "vocab_size"
        what = "a position" if size == P else "a token id"
        return (
            "positions" if size == P else "token_id",
            "positions" if size == P else "token_id",
            f"{size} is {f.name}'s {table}: index {index} is {what} at or past the end of that table.",
            "Keep positions below max_position_embeddings (scale RoPE to reach further)"
            if size == P
            else "Resize the embeddings to the tokenizer (resize_token_embeddings) or use the model's own tokenizer.",
        )
    edge = (
        f"index {index} is one past the last row ({size - 1}): an off-by-one (a slot counted from 1, or <= where "
        "< was meant)"
        if index == size
        else f"index {index} is {'past' if index > size else 'before'} the {size} rows"
    )
    return ambiguous(
        [
            (
                "pool_size",
                f"the pool has fewer rows than the slots handed out: it was allocated with {size} rows while the "
                "allocator or page table counts more (num_pages x page_size of another page_size, or a pool sized "
                f"for the prompt and not the generated tokens); {edge}",
            ),
            (
                "slots",
                "or the slot was computed wrongly: a token's position taken as its slot, page x page_size + offset "
                "with another page_size, or a slot of another pool",
            ),
            (
                "positions",
                f"or the table is indexed by position: a RoPE cos/sin cache or a position embedding of {size} rows "
                f"read at position {index}, the sequence run past the positions it covers"
                + (f" (the model's max_position_embeddings is {P})" if P else ""),
            ),
            (
                "not_a_pool",
                f"or the tensor is no pool: a token id past a vocabulary of {size} (an embedding), or another table",
            ),
        ],
        "print(k_pool.shape[0], slots.min(), slots.max(), positions.max()) just before the write, and the "
        "allocator's num_pages * page_size against k_pool.shape[0]; the traceback's line names the table "
        "(cos_cached[positions]: a position)",
    )
