"""The one reading of numbers: the model's vocabulary of sizes, and the mistake two numbers on one axis name.

A family's reader only extracts what its message says (two sizes that must agree, the axis, the number
of axes). :func:`read_pair` names each number by the model's sizes (:func:`vocabulary`, derived where
the config leaves them out: D = hidden_size / Hq without head_dim, D/2, rotary_dim, G, Hkv x (Hq // Hkv),
the tensor-parallel shares Hq / tp and Hkv / tp, max_position_embeddings, vocab_size) and the mistake from
the two roles and the axis:

=======================================  =================================================================
Hq against Hkv x (Hq // Hkv)             KV heads that do not divide the query heads (repeat_kv falls short)
D against D/2 (or rotary_dim against     cos/sin of half the head: the frequencies not concatenated, or
its half), on the last axis              one half of the head against the whole cos/sin
a head count against a number that is    a layout: [B, T, H, D] against [B, H, T, D] (a transpose missing),
no size of the model, on a middle axis   or two lengths
H against H / tp                         a tensor-parallel shard against the full count
a position at or past a table's length   positions counted past max_position_embeddings (or a vocabulary)
none of the model's sizes                lengths: a mask, positions or a cache of another length, or no
                                         tensor of this model's attention (probably not a head error)
tp that must exceed (or stay below) Hkv  KV heads replicated over ranks, or a per-rank share of 0
                                         (:func:`order_case`)
a cat's other axis differing             the cat joined the wrong axis: the sequence is the one that
                                         differs (:func:`cat_case`)
a scaling factor below 1                 original / target written for target / original
=======================================  =================================================================

Where several readings fit, the verdict lists them (``ambiguous``) with what to print to tell them apart.
:func:`config_lines` checks the model's numbers themselves, one line each, before any message is read.
"""

from __future__ import annotations

from .base import Facts, ambiguous

Verdict = tuple[str, str, str, str]


def head_dim_of(f: Facts) -> int | None:
    """D: ``head_dim``, or ``hidden_size / Hq`` where the config leaves it out and Hq divides it."""
    if f.head_dim:
        return f.head_dim
    if f.hidden_size and f.num_qo_heads and f.hidden_size % f.num_qo_heads == 0:
        return f.hidden_size // f.num_qo_heads
    return None


def vocabulary(f: Facts) -> dict[int, list[str]]:
    """Each size the model gives or implies, by value: ``{128: ['D (head_dim)'], 64: ['D/2'], ...}``."""
    Hq, Hkv, D, rd, tp = f.num_qo_heads, f.num_kv_heads, head_dim_of(f), f.rotary_dim, f.tp
    named: list[tuple[int | None, str]] = [
        (Hq, "Hq (num_attention_heads)"),
        (Hkv, "Hkv (num_key_value_heads)"),
        (D, "D (head_dim)" if f.head_dim else "D (hidden_size / Hq)"),
        (D // 2 if D else None, "D/2 (half a head)"),
        (rd if rd and rd != D else None, "rotary_dim"),
        (rd // 2 if rd and rd != D else None, "rotary_dim/2"),
        (f.naive_head_dim if f.naive_head_dim != D else None, "hidden_size // Hq"),
        (Hq * D if Hq and D else None, "Hq x D (q_proj's width)"),
        (Hkv * D if Hkv and D else None, "Hkv x D (k_proj's width)"),
        (f.hidden_size, "hidden_size"),
        (f.rope_dim, "qk_rope_head_dim (MLA: the part of a head RoPE turns)"),
        (f.nope_dim, "qk_nope_head_dim (MLA: the part of a head without RoPE)"),
        (f.rope_dim + f.nope_dim if f.rope_dim and f.nope_dim else None, "qk_nope_head_dim + qk_rope_head_dim"),
        (f.kv_lora_rank, "kv_lora_rank (MLA's latent)"),
        (f.sliding_window, "sliding_window"),
        (f.max_position_embeddings, "max_position_embeddings"),
        (f.vocab_size, "vocab_size"),
    ]
    if Hq and Hkv:
        if Hq % Hkv == 0:
            named.append((Hq // Hkv if Hq != Hkv else None, "G = Hq / Hkv"))
        else:
            named.append((Hkv * (Hq // Hkv), "Hkv x (Hq // Hkv)"))
    if tp and tp > 1:
        for n, what in ((Hq, "Hq"), (Hkv, "Hkv")):
            if n and n % tp == 0:
                named.append((n // tp, f"{what} / tp ({n} / {tp})"))
    out: dict[int, list[str]] = {}
    for value, name in named:
        if value:
            out.setdefault(value, []).append(name)
    return out


def name_of(n: int, f: Facts) -> str:
    """``32 (Hq (num_attention_heads))``, or ``7 (none of the model's sizes)``; ``32`` where no model is given."""
    if not f.known:
        return str(n)
    names = vocabulary(f).get(n)
    return f"{n} ({' = '.join(names)})" if names else f"{n} (none of the model's sizes)"


def config_lines(f: Facts) -> list[str]:
    """The model's own numbers that cannot all hold, one line each: KV heads that do not divide the query
    heads, a head_dim apart from hidden_size / Hq, a rotary width past head_dim, a tp that splits neither."""
    Hq, Hkv, D, rd, tp, hidden = f.num_qo_heads, f.num_kv_heads, f.head_dim, f.rotary_dim, f.tp, f.hidden_size
    out = list(f.notes)
    if Hq and Hkv and Hq % Hkv:
        out.append(
            f"num_key_value_heads = {Hkv} does not divide num_attention_heads = {Hq}: no group of whole query "
            f"heads per KV head; repeat_kv by {Hq} // {Hkv} = {Hq // Hkv} gives {Hkv * (Hq // Hkv)} heads, not {Hq}"
        )
    if D and hidden and Hq and hidden != Hq * D:
        out.append(
            f"head_dim = {D} differs from hidden_size / num_attention_heads = {hidden} / {Hq} = {hidden / Hq:g}: "
            f"q_proj is {Hq} x {D} = {Hq * D} wide; code that derives head_dim from hidden_size builds it wrong"
        )
    elif not D and hidden and Hq and hidden % Hq:
        out.append(f"hidden_size = {hidden} is not a multiple of num_attention_heads = {Hq} and no head_dim is set")
    D = head_dim_of(f)
    if D and rd and rd > D:
        out.append(f"rotary_dim = {rd} is past head_dim = {D}: a head has only {D} dimensions to rotate")
    factor = (f.rope_scaling or {}).get("factor")
    if isinstance(factor, (int, float)) and 0 < factor < 1:
        out.append(scaling_factor_line(factor, f))
    if tp and tp > 1 and Hq and Hkv:
        splits_q = Hq % tp == 0
        splits_kv = Hkv % tp == 0 or tp % Hkv == 0
        if not splits_q and not splits_kv:
            out.append(f"tp = {tp} splits neither the {Hq} query heads nor the {Hkv} KV heads into whole heads")
        elif not splits_q:
            out.append(f"tp = {tp} does not split the {Hq} query heads into whole heads ({Hq} / {tp})")
        elif not splits_kv:
            out.append(f"tp = {tp} splits the {Hq} query heads but not the {Hkv} KV heads (nor replicates them)")
    return out


def _half(big: int, small: int, f: Facts, at: str) -> list[tuple[str, str]]:
    """D (or rotary_dim) against its half on the last axis."""
    return [
        (
            "half_head_dim",
            f"{big} against {small}{at} is a head of {big} against half of it: cos/sin built from the {small} "
            f"frequencies without doubling them (emb = torch.cat((freqs, freqs), dim=-1) gives {big} columns)",
        ),
        (
            "half_head_dim",
            f"or one half of the head (x[..., :{small}], rotate_half's halves, or GPT-J's interleaved pairs read "
            f"as halves) met the whole {big}-wide cos/sin",
        ),
        ("rotary_dim", f"or a partial RoPE of rotary_dim = {small} whose cos/sin met the whole head"),
    ]


def _layout(h: int, t: int, names: str, at: str) -> list[tuple[str, str]]:
    return [
        (
            "layout",
            f"{h} is {names} and {t} is no head count of the model{at}: one operand is [B, T, H, D] and the other "
            f"[B, H, T, D] (a transpose(1, 2) missing), so its {t} tokens meet the other's {h} heads",
        ),
        ("tokens", f"or {h} and {t} are two lengths (a mask, positions or a cache of another length)"),
    ]


def _tp_share(a: int, b: int, f: Facts) -> list[tuple[str, str]]:
    out = []
    for n, what in ((f.num_qo_heads, "query"), (f.num_kv_heads, "KV")):
        if n and {a, b} & {n} and min(a, b) < n and n % min(a, b) == 0 and max(a, b) == n:
            tp = n // min(a, b)
            out.append(("tp", f"{min(a, b)} is one rank's share of the {n} {what} heads at tp = {tp}"))
    return out


def _axis(dim: int | None, ndim: int | None) -> tuple[bool, bool]:
    """``(last, middle)``: whether axis ``dim`` of ``ndim`` may be the last (head_dim) axis, and a middle (heads
    or tokens) one. Without the number of axes, or with two (a product's operands), the message does not tell:
    axis 1 is a middle one, 3 and past the last, 2 either."""
    if dim is None:
        return True, True
    if ndim is not None and ndim >= 3:
        return dim in (-1, ndim - 1), 1 <= dim < ndim - 1
    if dim == -1:
        return True, False
    return dim >= 2 or (ndim == 2 and dim != 0), 1 <= dim <= 2


def readings(
    a: int, b: int, dim: int | None, ndim: int | None, f: Facts, doing: str | None = None, layout: bool = True
) -> list:
    """The mistakes that give sizes ``a`` and ``b`` on axis ``dim`` (of ``ndim``), read by their roles, as
    ``(name, text)``; ``doing`` what the message says the tensors were in: ``write`` (a copy into a cache or
    a slice), ``attention`` (a product, attention's inputs) or None (it does not say)."""
    sizes = vocabulary(f)
    Hq, Hkv, D, rd = f.num_qo_heads, f.num_kv_heads, head_dim_of(f), f.rotary_dim
    at = f" at dimension {dim}" if dim is not None else ""
    last, middle = _axis(dim, ndim)
    big = max(a, b)
    out: list[tuple[str, str]] = []
    if Hq and Hkv and Hq % Hkv and {a, b} == {Hq, Hkv * (Hq // Hkv)}:
        out.append(
            (
                "kv_heads_do_not_divide",
                f"{Hq} query heads against {Hkv} x ({Hq} // {Hkv}) = {Hkv * (Hq // Hkv)}: k and v were repeated "
                f"to the query heads by {Hq // Hkv}, and {Hkv} KV heads do not divide {Hq}; the config's "
                "num_key_value_heads is not the checkpoint's (or the model cannot be grouped)",
            )
        )
    if Hq and Hkv and Hq != Hkv and {a, b} == {Hq, Hkv}:
        if doing != "write":
            out.append(
                (
                    "missing_repeat_kv",
                    f"q's {Hq} query heads met k/v's {Hkv} KV heads{at}: attention written for MHA got GQA tensors, "
                    f"repeat_kv not applied (G = {Hq // Hkv})"
                    + ("" if middle else "; or two lengths that happen to be these"),
                )
            )
        if doing != "attention":
            out.append(
                (
                    "repeated_kv_written",
                    f"{'or ' if out else ''}k or v repeated to the {Hq} query heads (or built with them) written "
                    f"where the cache holds {Hkv} KV heads{at}: write the un-repeated k and v; repeat_kv belongs "
                    "to attention, after the write",
                )
            )
    if Hq and Hkv and Hq % Hkv == 0 and Hq in (a, b) and middle:
        other = b if a == Hq else a
        if other != Hq and other % Hkv == 0 and other // Hkv not in (1, Hq // Hkv):
            out.append(
                (
                    "repeat_factor",
                    f"k/v repeated {other // Hkv} times, Hkv x {other // Hkv} = {other} heads, against the {Hq} query "
                    f"heads{at}: repeat_kv with n_rep = {other // Hkv} where it is Hq / Hkv = {Hq // Hkv} (a group "
                    "size of another model, or repeated twice)",
                )
            )
            out += _layout(Hq, other, "Hq", at)  # the other may be a token count as well
    for x, y in ((a, b), (b, a)):  # batch x heads in one axis (a bmm over B*H rows): the batch cancels
        if Hq and Hkv and Hq != Hkv and x % Hq == 0 and y % Hkv == 0 and x // Hq == y // Hkv > 1 and x // Hq != D:
            out.append(
                (
                    "missing_repeat_kv",
                    f"batch x heads in one axis{at}: {x} = {x // Hq} x Hq {Hq} against {y} = {y // Hkv} x Hkv {Hkv}: "
                    f"k/v's KV heads met q's query heads in a batched product over B*H rows (bmm, baddbmm): "
                    f"repeat_kv missing (G = {Hq // Hkv})",
                )
            )
            break
    if Hq and Hkv and D and {a, b} == {Hq * D, Hkv * D} and Hq != Hkv:
        out.append(
            (
                "kv_width",
                f"q's width Hq x D = {Hq * D} against k/v's Hkv x D = {Hkv * D}{at}: a projection built for one "
                "fed the other (k_proj or v_proj built with the query heads: a config read without "
                "num_key_value_heads), or k/v's output where q's is taken (o_proj after attention without repeat_kv)",
            )
        )
    nope, rope = f.nope_dim, f.rope_dim
    if nope and rope and nope != rope and {a, b} == {nope, rope} and last:
        out.append(
            (
                "mla_split",
                f"MLA's two parts of a head met{at}: qk_nope_head_dim = {nope} (no RoPE) against qk_rope_head_dim = "
                f"{rope} (the part RoPE turns, k_pe's width): q split in the wrong order (split(q, [{rope}, {nope}]) "
                f"where it is [{nope}, {rope}]), or the no-RoPE part given to RoPE or to the score with k_pe",
            )
        )
    for w in (D, rd):
        if w and {a, b} == {w, w // 2} and last:
            out += _half(w, w // 2, f, at)
            break
    heads = {Hq: "Hq", Hkv: "Hkv"}
    for h, t in ((a, b), (b, a)):
        if h in heads and h and middle and t not in heads and (t not in sizes or not layout):
            if not layout:  # the tokens axis agrees: the other tensor has other heads
                out.append(
                    (
                        "heads_of_another_model",
                        f"{h} is {heads[h]} and the other tensor has {t} heads on the same axis{at} (its tokens and "
                        f"head_dim agree): a KV cache (a saved prompt cache) or k/v made by another model or config "
                        f"with {t} heads",
                    )
                )
                out.append(
                    ("tokens", f"or {h} and {t} are two lengths (a mask, positions or a cache of another length)")
                )
            else:
                out += _layout(h, t, heads[h], at)
            break
    if {a, b} != {Hq, Hkv}:
        out += _tp_share(a, b, f)
    P = f.max_position_embeddings
    if P and P in (a, b) and big > P:
        out.append(("positions", f"{big} positions against a table of max_position_embeddings = {P}"))
    if not out and not f.known:
        out += _without_model(a, b, dim, last, middle, at)
        out.append(("tokens", f"or two lengths ({a} and {b}){at}: a mask, positions or a cache of another length"))
        if len(out) == 1:  # no relation of heads or halves: the numbers may be no attention tensor's at all
            out.append(_not_mine(a, b))
    return out


def _not_mine(a: int, b: int) -> tuple[str, str]:
    return (
        "not_mine",
        f"or neither {a} nor {b} is the model's head count, head_dim or a cache length: then not a head, RoPE or "
        "KV-cache error at all",
    )


def _without_model(a: int, b: int, dim, last: bool, middle: bool, at: str) -> list[tuple[str, str]]:
    """Readings from the relation of the two numbers alone (no model given)."""
    big, small = max(a, b), min(a, b)
    out = []
    if small and big % small == 0 and dim == 0 and big > small:  # a batched product's B*H rows
        out.append(
            (
                "heads",
                f"batch x heads in one axis{at}: q's B x Hq rows ({big}) against k/v's B x Hkv ({small}) in a "
                f"batched product (bmm over B*H rows): repeat_kv missing (G = {big // small})",
            )
        )
    if small and big % small == 0 and middle:
        out.append(
            (
                "heads",
                f"{big} query heads against {small} KV heads{at}: repeat_kv missing (G = {big // small}); or k/v "
                f"already repeated to {big} heads where {small} are taken (a write into a cache of {small} KV heads, "
                f"or repeat_kv applied with too large a factor against {small} query heads)",
            )
        )
    if small and big == 2 * small and last:
        out.append(("half_head_dim", f"a head of {big} against cos/sin (or a half) of {small}{at}"))
    elif small and small % 2 == 0 == big % 2 and last:  # a head and a rotated width are even (pairs)
        out.append(
            (
                "rotary_dim",
                f"the last axis: a head of {big} against cos/sin of {small} (partial RoPE, rotary_dim = {small}, "
                "applied to the whole head) or another head_dim",
            )
        )
    if middle:
        out.append(
            ("layout", f"or a [B, T, H, D] operand against a [B, H, T, D] one: {a} and {b} are heads and tokens")
        )
    return out


#: The fix of a reading that is the only one.
_FIXES = {
    "kv_heads_do_not_divide": (
        "Take num_key_value_heads from the checkpoint's own config.json (k_proj's rows / head_dim): it divides "
        "num_attention_heads; a KV-head count that does not divide it gives no grouping at all."
    ),
    "missing_repeat_kv": (
        "Repeat k and v to the query heads before the product (repeat_kv, torch.repeat_interleave(k, G, dim=1), "
        "mx.repeat(k, G, axis=1)), or call an attention that takes the KV heads as they are "
        "(scaled_dot_product_attention(..., enable_gqa=True), mx.fast.scaled_dot_product_attention)."
    ),
    "repeated_kv_written": (
        "Write the un-repeated k and v of the projections ([T, Hkv, D]) into the cache; repeat_kv belongs to "
        "attention, after the write."
    ),
    "tp": "View with the per-rank count (the full count / tp), or view(..., -1, head_dim).",
    "mla_split": (
        "Split q's head as q_nope, q_pe = q.split([qk_nope_head_dim, qk_rope_head_dim], dim=-1) and turn only "
        "q_pe and k_pe with RoPE; the no-RoPE part meets the latent (or k_nope), the RoPE part k_pe."
    ),
    "repeat_factor": (
        "Repeat k and v by n_rep = num_attention_heads // num_key_value_heads of this model's config "
        "(repeat_kv(k, n_rep)), once; or call an attention that takes the KV heads as they are (enable_gqa=True)."
    ),
    "positions": (
        "Keep positions below max_position_embeddings (a step's positions run cached .. cached + new - 1), or "
        "scale RoPE to reach the length asked."
    ),
}


def read_pair(
    a: int, b: int, dim: int | None, ndim: int | None, f: Facts, doing: str | None = None, layout: bool = True
) -> Verdict:
    """The verdict for sizes ``a`` and ``b`` that must agree on axis ``dim``: one mistake where the roles
    name one, several (``ambiguous``) where they fit several, and two lengths where they name none;
    ``layout`` False where the shapes show both tensors in one layout (the other axes agree)."""
    found = readings(a, b, dim, ndim, f, doing, layout)
    check = f"the shapes of both operands just before the failing line (which holds {a}, which {b}, and on which axis)"
    if len(found) == 1 and found[0][0] != "layout" and f.known:
        name, text = found[0]
        fix = _FIXES.get(name, "Print " + check + ".")
        return name, name, f"{name_of(a, f)} against {name_of(b, f)}: {text}.", fix
    if found:
        case, quantity, why, fix = ambiguous(found, check)
        return case, quantity, f"{name_of(a, f)} against {name_of(b, f)}; " + why, fix
    at = f" at dimension {dim}" if dim is not None else ""
    if not f.known:
        case, quantity, why, fix = ambiguous(
            [
                ("tokens", f"two sequence lengths ({a} and {b}){at}: a mask, positions or a cache of another length"),
                _not_mine(a, b),
            ],
            check + " (or add --model)",
        )
        return case, quantity, why, fix
    sizes = vocabulary(f)
    known = [n for n in (a, b) if n in sizes]
    said = (
        f"neither is a size of the model ({describe_sizes(f)})"
        if not known
        else f"{name_of(a, f)} and {name_of(b, f)} are no two sizes that meet on one axis"
        + ("" if dim is None else f" {dim}")
    )
    return (
        "foreign",
        "tokens",
        f"{a} against {b}{at}: {said}: a mask, positions or a cache of another length, or no tensor of this "
        "model's attention (then probably not a head, RoPE or KV-cache error).",
        "Print both operands' shapes just before the failing line; the one that is not [B, H, T, D] of this "
        "model is the mistake.",
    )


def describe_sizes(f: Facts) -> str:
    """The model's sizes in one line: ``Hq = 32, Hkv = 8, D = 128, D/2 = 64, G = 4``."""
    return ", ".join(f"{' = '.join(names)} = {value}" for value, names in sorted(vocabulary(f).items())[:14])


def _is(n: int, role: str | None, want: str, value: int | None) -> bool:
    return role == want or (role is None and value is not None and n == value)


def divides_case(n: int, n_role: str | None, d: int, d_role: str | None, f: Facts) -> Verdict:
    """``n`` that must be a multiple of ``d`` and is not; ``*_role`` what the message's words call each
    (heads, kv_heads, tp, ...; None: unnamed): the count that does not divide, by roles or by value."""
    Hq, Hkv = f.num_qo_heads, f.num_kv_heads
    heads_n = _is(n, n_role, "heads", Hq) or _is(n, n_role, "kv_heads", Hkv)
    if heads_n and _is(d, d_role, "kv_heads", Hkv):
        return (
            "kv_heads_do_not_divide",
            "heads",
            f"{n} query heads are not a multiple of {d} KV heads: each KV head serves a whole group of Hq / Hkv "
            f"query heads, and {n} / {d} is not whole"
            + (f"; {f.name} has Hq = {Hq}, Hkv = {Hkv}" if Hq and Hkv else "")
            + ".",
            _FIXES["kv_heads_do_not_divide"],
        )
    if heads_n and (d_role == "tp" or (d_role is None and f.tp == d)):
        what = "KV" if n_role == "kv_heads" or (n_role is None and n == Hkv and n != Hq) else "query"
        return (
            "tp_does_not_divide_heads",
            "tp",
            f"tensor parallelism over {d} ranks gives each rank {n} / {d} {what} heads, not whole.",
            f"Pick a tensor-parallel size that divides {n}: {[t for t in range(1, n + 1) if n % t == 0]}.",
        )
    if f.hidden_size and n == f.hidden_size and _is(d, d_role, "heads", Hq):
        return (
            "heads_do_not_divide_hidden",
            "head_dim",
            f"hidden_size = {n} is not a multiple of num_attention_heads = {d}: no whole head_dim exists.",
            "Set head_dim in the config (or take num_attention_heads from the checkpoint's config).",
        )
    return ambiguous(
        [
            ("heads", f"{n} query heads against {d} KV heads: the KV heads do not divide the query heads"),
            ("tp", f"or {n} heads over a tensor-parallel size of {d}"),
            ("tokens", f"or a length of {n} against a block (page) size of {d}"),
        ],
        f"which counts the failing call passed, against the model's ({describe_sizes(f) if f.known else 'add --model'})",
    )


def read_shapes(a: tuple, b: tuple, f: Facts, doing: str | None = None) -> tuple[str, Verdict] | None:
    """``(read, verdict)`` of two shapes that should agree (aligned at the right, as broadcasting does): the
    pair on the last axis they differ on, or, where the middle two axes of one are the other's swapped,
    a layout ([B, T, H, D] against [B, H, T, D]) and what is left; None where they agree."""
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    bad = [i for i in range(n) if pa[i] != pb[i] and 1 not in (pa[i], pb[i])] or [i for i in range(n) if pa[i] != pb[i]]
    if not bad:
        return None
    read = f"shapes {list(a)} and {list(b)}"
    if n == 4 and len(bad) >= 2 and (pa[1] == pb[2] or pa[2] == pb[1]):
        swapped = (pb[0], pb[2], pb[1], pb[3])
        left = [i for i in range(n) if pa[i] != swapped[i] and 1 not in (pa[i], swapped[i])]
        if len(left) <= 1:
            return read + ": axes 1 and 2 swapped between them", _swapped(pa, pb, left, f, doing)
    dim = bad[-1]
    verdict = read_pair(pa[dim], pb[dim], dim, n, f, doing, layout=not one_layout(pa, pb, f))
    return f"{read}: {pa[dim]} against {pb[dim]} on axis {dim}", verdict


def one_layout(a: tuple, b: tuple, f: Facts) -> bool:
    """Two 4-axis shapes (aligned) that differ on axis 1 alone while axis 2, equal in both, is no head count of
    the model: both are [B, H, T, D] (the tokens agree), so no [B, T, H, D] against [B, H, T, D] reading."""
    differ = [i for i in range(len(a)) if a[i] != b[i]]
    heads = {f.num_qo_heads, f.num_kv_heads} - {None}
    return len(a) == len(b) == 4 and differ == [1] and a[2] not in heads


def _swapped(a: tuple, b: tuple, left: list, f: Facts, doing: str | None) -> Verdict:
    """Shapes whose axes 1 and 2 are each other's: one is [B, T, H, D], the other [B, H, T, D]."""
    vocab = vocabulary(f)
    heads_first = a[1] in vocab and a[1] in (f.num_qo_heads, f.num_kv_heads) or a[2] not in vocab
    which = (
        "the first [B, H, T, D], the second [B, T, H, D]"
        if heads_first
        else "the first [B, T, H, D], the second [B, H, T, D]"
    )
    why = f"{list(a)} against {list(b)}: axes 1 and 2 are each other's ({which}): a transpose(1, 2) is missing."
    fix = "Transpose the [B, T, H, D] one to [B, H, T, D] (x.transpose(1, 2)) before the call."
    if left:
        i = left[0]
        other = (b[0], b[2], b[1], b[3])[i]
        case, quantity, more, more_fix = read_pair(a[i], other, i, 4, f, doing)
        why += f" Transposed, {a[i]} still meets {other} on axis {i}: " + more
        fix += " Then: " + more_fix
        return "layout", "layout/" + quantity, why, fix
    return "layout", "layout", why, fix


def scaling_factor_line(factor: float, f: Facts) -> str:
    """A RoPE scaling factor below 1: written as original / target where target / original is meant."""
    inverse = 1 / factor
    orig = (f.rope_scaling or {}).get("original_max_position_embeddings")
    reach = (
        f" ({orig} positions stretched to {orig} x {inverse:g} = {round(orig * inverse)})"
        if isinstance(orig, int)
        else ""
    )
    return (
        f"rope_scaling factor = {factor:g} is below 1: a factor is target / original length, and {factor:g} is "
        f"original / target; the factor meant is 1 / {factor:g} = {inverse:g}{reach}; below 1 it compresses "
        "positions instead of stretching them"
    )


def order_case(n: int, n_role: str | None, m: int, m_role: str | None, relation: str, when: str, f: Facts) -> Verdict:
    """``n`` that must be ``relation`` (greater, less) than ``m`` and is not; roles as the message names them;
    ``when`` the condition the message gives (a feature enabled), or ''."""
    cond = f" (the message's condition: {when})" if when else ""
    roles = {n_role, m_role}
    if roles == {"tp", "kv_heads"}:
        tp, kv = (n, m) if n_role == "tp" else (m, n)
        share = f"{kv} // {tp} = {kv // tp}" if tp else "?"
        if (relation == "greater") == (n_role == "tp"):  # tp must exceed the KV heads
            why = (
                f"tensor parallel size {tp} against {kv} KV heads: at tp = {tp} each rank holds {share} distinct "
                f"KV heads, none replicated; what the message asks for{cond} needs tp > {kv}, each KV head "
                f"replicated over tp / {kv} ranks (the ranks sharing a KV head split its sequence instead)"
            )
            fix = (
                f"Run without that option at tp = {tp}, or raise tp above {kv} (a multiple of it, {2 * kv}) so each "
                "KV head is replicated."
            )
        else:
            why = (
                f"tensor parallel size {tp} past {kv} KV heads: {share} KV heads a rank{cond}; each KV head must "
                f"be replicated over tp / {kv} ranks, or tp kept at most {kv}"
            )
            fix = f"Use tp <= {kv}, or replicate the KV heads: per-rank KV heads = max(1, {kv} // tp)."
        case, quantity, text, check = ambiguous(
            [("tp", why)], "the tensor-parallel size and num_key_value_heads the engine was started with"
        )
        return case, quantity, text, check + " " + fix
    said = f"{n} ({n_role or 'unnamed'}) must be {relation} than {m} ({m_role or 'unnamed'}){cond}"
    return ambiguous(
        [("order", said + ": a count set past another's limit; which are the model's own sizes decides the fix")],
        "which option or config field holds each number"
        + (f", against the model's ({describe_sizes(f)})" if f.known else " (add --model)"),
    )


def cat_case(dim: int, expected: int, got: int, f: Facts) -> Verdict:
    """torch.cat along ``dim`` of tensors that differ on another axis (``expected`` against ``got``)."""
    Hq, Hkv = f.num_qo_heads, f.num_kv_heads
    sizes = vocabulary(f)
    heads = {Hq, Hkv} - {None}
    seq = (
        f"{max(expected, got)} cached tokens against {min(expected, got)} new: a KV-cache append concatenated along "
        f"dim {dim}"
        + (" (the heads of a [B, H, T, D] cache)" if dim == 1 else "")
        + ", so the sequence axis, which differs, is not the one joined: concatenate along the sequence axis (dim=2, "
        "or -2, for [B, H, T, D]; dim=1 for [B, T, H, D])"
    )
    options = []
    D = head_dim_of(f)
    if D and D in (expected, got) and expected != got and dim in (1, 2, -2):  # joined on heads or tokens: the last axis
        other = got if expected == D else expected
        options.append(
            (
                "head_dim_of_another_model",
                f"a KV cache (or k) made by another model: head_dim {other} against this model's D = {D} on the last "
                "axis (a draft model's cache passed to the target, or a cache saved by another model)",
            )
        )
    if {expected, got} <= heads and expected != got:
        options.append(
            ("heads", f"{expected} against {got} are the model's head counts: k or v repeated (or not) on one side")
        )
    options.append(("sequence", seq))
    if not (f.known and not ({expected, got} & set(sizes))):
        options.append(
            (
                "layout",
                f"or one tensor is [B, T, H, D] and the other [B, H, T, D]: {expected} and {got} are heads and tokens",
            )
        )
    check = f"both tensors' shapes just before torch.cat (which axis holds {expected}, which {got}), against the cat's dim={dim}"
    if f.known:
        check += (
            f" and the model's sizes ({describe_sizes(f)}: neither {expected} nor {got} is a head count)"
            if not ({expected, got} & heads)
            else ""
        )
    return ambiguous(options, check)


def _splits(f: Facts) -> list[tuple[str, str, list[int]]]:
    """The model's ways of splitting an axis: (name, quantity, sizes)."""
    Hq, Hkv, D, rd = f.num_qo_heads, f.num_kv_heads, head_dim_of(f), f.rotary_dim
    lora, rope, nope = f.kv_lora_rank, f.rope_dim, f.nope_dim
    out = []
    if lora and rope:
        out.append(("MLA's latent row, kv_lora_rank + qk_rope_head_dim", "mla_split", [lora, rope]))
    if nope and rope:
        out.append(("MLA's q head, qk_nope_head_dim + qk_rope_head_dim", "mla_split", [nope, rope]))
    if Hq and Hkv and D:
        out.append(("a fused qkv row, Hq x D + Hkv x D + Hkv x D", "heads", [Hq * D, Hkv * D, Hkv * D]))
    if D and rd and rd != D:
        out.append(("a head of partial RoPE, rotary_dim + the rest", "rotary_dim", [rd, D - rd]))
    if D:
        out.append(("a head's two halves (rotate_half)", "head_dim", [D // 2, D // 2]))
    return out


def split_case(total: int, parts: list[int], f: Facts) -> Verdict:
    """An axis of ``total`` split into ``parts`` that do not sum to it: the model's split of that total, the
    part that differs named by its role; without one, the sum against the axis."""
    for name, quantity, want in _splits(f):
        if sum(want) == total and len(want) == len(parts) and want != parts:
            wrong = [(i, g, w) for i, (g, w) in enumerate(zip(parts, want)) if g != w]
            said = "; ".join(f"part {i} is {name_of(g, f)} where it is {w}" for i, g, w in wrong)
            return (
                f"split_{quantity}" if quantity != "mla_split" else quantity,
                quantity.replace("mla_split", "heads"),
                f"{total} is {name} = {' + '.join(map(str, want))}; the split asked {parts} (sum {sum(parts)}): {said}.",
                f"Split into {want}: " + ", ".join(f"part {i} = {w}" for i, _, w in wrong) + ".",
            )
    names = " + ".join(name_of(p, f) for p in parts)
    keep = [(i, total - (sum(parts) - p)) for i, p in enumerate(parts) if 0 < total - (sum(parts) - p) != p]
    others = "; ".join(f"the others kept, part {i} would be {n}" for i, n in keep[-2:])
    return (
        "split_sizes",
        "heads" if f.known else "unknown",
        f"the parts {parts} sum to {sum(parts)} ({names}) where the axis holds {name_of(total, f)}: a part sized "
        f"for another model or another axis{f' ({others})' if others else ''}.",
        "Print the tensor's shape before the split and the sizes asked; each part is one of the model's widths.",
    )
