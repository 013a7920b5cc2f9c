"""Why the op refused a k: the cases of a rejected ``k [Tk, Hk, Dk]``, from the numbers a call has.

:func:`k_shape_case` is the op's hint for ``k_shape`` (:mod:`ropepool.validation`, from T, Hq, the
``num_kv_heads`` passed and D) and ``explain``'s reasoning for the same error read back
(:mod:`ropepool.diagnosis.op`, with the model's numbers too). The cases, in the order they are tried:

==================  ==========================================================================
``zero_heads``      Hk == 0: a tensor-parallel split with tp > Hkv, or an empty slice
``tokens``          Tk differs from q's T: k was sliced or gathered differently from q
``head_dim``        Dk differs from D
``repeated_k``      Hk == Hq != Hkv: k built with q's head count, or after ``repeat_kv``
``num_kv_heads``    Hk == Hkv: k is right and ``num_kv_heads`` is not (passed as Hq: the classic bug)
``foreign_k``       Hk is neither: look at what produced k (another model's config?)
==================  ==========================================================================

Standard library only: the op imports it, and nothing of ``explain``'s recognisers.

Example
-------
>>> case = k_shape_case((6, 32, 128), num_qo_heads=28, head_dim=128, tokens=6, model_kv_heads=4)
>>> case.name
'foreign_k'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    """One diagnosis of the op's own check: ``name``, why it happened, and the fix that changes the outcome."""

    name: str
    why: str
    fix: str


def heads(n: int) -> str:
    return f"{n} head" if n == 1 else f"{n} heads"


#: The cases of a rejected k, in the order they are tried.
K_CASES = ("zero_heads", "tokens", "head_dim", "repeated_k", "num_kv_heads", "foreign_k")


def zero_heads(what: str = "k") -> Case:
    return Case(
        "zero_heads",
        f"{what} has no head at all, what a tensor-parallel split with more ranks than KV "
        f"heads (tp > Hkv) leaves a rank; or {what} was sliced empty.",
        "Give every rank whole KV heads: tp <= Hkv with Hkv % tp == 0, or replicate each KV head over "
        "tp / Hkv ranks; k is then [T, max(1, Hkv // tp), D] on every rank, never empty.",
    )


def k_shape_case(
    k_shape,
    *,
    num_qo_heads: int,
    head_dim: int,
    tokens: int | None = None,
    model_kv_heads: int | None = None,
    passed_kv_heads: int | None = None,
    others: tuple[str, ...] = (),
) -> Case:
    """The case of a k of shape ``k_shape = (Tk, Hk, Dk)`` that the op rejected.

    Parameters
    ----------
    k_shape : the rejected k's shape ``(Tk, Hk, Dk)``
    num_qo_heads : Hq (the model's, or the one passed to the op)
    head_dim : D (the model's, or the one passed)
    tokens : q's T, where known
    model_kv_heads : the model's Hkv (``config.num_key_value_heads``), where a model is known
    passed_kv_heads : the ``num_kv_heads`` passed to the op, where known
    others : names of other models whose head count is Hk at this head_dim (for ``foreign_k``)
    """
    Tk, Hk, Dk = (int(x) for x in k_shape)
    Hq, D, N, Hkv = num_qo_heads, head_dim, passed_kv_heads, model_kv_heads
    kv = Hkv if Hkv else (N or None)  # the KV head count k should have, as far as we know
    if Hk == 0:
        return zero_heads()
    if tokens is not None and Tk != tokens:
        return Case(
            "tokens",
            f"k has {Tk} tokens but q has {tokens}: k was sliced or gathered differently "
            "from q (another chunk, another batch, padding removed from one of them).",
            "Take q, k and v from the same tokens: all three [T, ...] with one T, and positions and "
            "slots with T entries.",
        )
    if Dk != D:
        why = f"k's last axis is {Dk}, not head_dim={D}."
        if kv is not None and Hk * Dk == kv * D and Hk != kv:
            why += f" {Hk} x {Dk} = {kv} x {D}: k was reshaped with the wrong head count."
            return Case("head_dim", why, f"Reshape k as [T, {kv}, {D}]: k_proj(x).reshape(T, {kv}, {D}).")
        why += (
            " If head_dim was computed as hidden_size // num_attention_heads, the model may set "
            "head_dim explicitly (Gemma-2: 256)."
        )
        return Case(
            "head_dim",
            why,
            "Pass the model's head_dim (config.head_dim where the config sets one) "
            f"and build k with it: [T, Hkv, head_dim]; k's {Dk} says which it was built with.",
        )
    if Hk == Hq and kv is not None and kv != Hq and N != Hq:
        G = f"G = {Hq} // {kv}" + (f" = {Hq // kv}" if Hq % kv == 0 else "")
        return Case(
            "repeated_k",
            f"k carries as many heads as q ({Hq}): an MHA-style k under a GQA config ({G}). k was built "
            "with q's head count, or repeated to the query heads (repeat_kv) before the cache write.",
            f"Write the un-repeated k of the K projection, [T, {kv}, {D}]; repeat_kv belongs to attention, "
            f"after the write. num_kv_heads={kv} (config.num_key_value_heads) is right: changing it "
            "would only move the error to the pool's shape.",
        )
    if Hkv is not None and Hk == Hkv:
        passed = f"num_kv_heads={N} was passed" if N is not None else "num_kv_heads was passed as something else"
        if N is None or N == Hq:
            passed += f", likely config.num_attention_heads ({Hq}): the classic GQA bug"
        return Case(
            "num_kv_heads",
            f"k has the model's {heads(Hkv)} (config.num_key_value_heads): k is right "
            f"and num_kv_heads is not; {passed}.",
            f"Pass num_kv_heads={Hkv} (config.num_key_value_heads), and allocate the pools as "
            f"[P, {Hkv}, {D}] if they were made with the same wrong count.",
        )
    if Hkv is None and N == Hq and Hk < Hq:
        return Case(
            "num_kv_heads",
            f"num_kv_heads equals num_qo_heads ({Hq}) but k has {heads(Hk)}: "
            "num_kv_heads was likely taken from config.num_attention_heads (the classic "
            "GQA bug). Under GQA it comes from the K projection, i.e. "
            f"config.num_key_value_heads (here {Hk}).",
            f"Pass num_kv_heads={Hk} (config.num_key_value_heads), and allocate the pools as [P, {Hk}, {D}].",
        )
    if Hkv is not None:
        why = (
            f"k has {heads(Hk)}, neither Hq = {Hq} nor Hkv = {Hkv}: the fault is in what produced k, "
            f"not in num_kv_heads ({Hkv} is config.num_key_value_heads already)."
        )
    elif N is not None:
        why = (
            f"k has {heads(Hk)} but num_kv_heads={N} (and num_qo_heads={Hq}): k matches neither. If {N} is "
            "your model's config.num_key_value_heads, the fault is in what produced k, not in num_kv_heads; "
            f"if k comes straight from the model's K projection, num_kv_heads should be {Hk}."
        )
    else:
        why = f"k has {heads(Hk)}, not num_qo_heads = {Hq}."
    if others:
        why += f" {Hk} heads of {Dk} is a head count of {', '.join(others)}: was k built with another model's config?"
    elif kv and kv % Hk == 0:
        why += f" {Hk} divides {kv}: a tensor-parallel shard of k (tp = {kv // Hk})?"
    fix = (
        f"Build k with this model's K projection: [T, {kv}, {D}]. Passing num_kv_heads={Hk} would only move "
        "the error to the next check (the group size or the pool's shape)."
        if kv is not None
        else "Build k with the model's K projection, [T, config.num_key_value_heads, head_dim]."
    )
    return Case("foreign_k", why, fix)
