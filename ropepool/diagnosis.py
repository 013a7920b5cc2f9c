"""Why a shape check failed: the numbers of an error, and which mistake they point to.

One piece of reasoning, used twice: the op's own hint (:mod:`ropepool.validation`, with the numbers
the call has: T, Hq, the ``num_kv_heads`` passed, D) and ``python -m ropepool explain`` (with the
numbers read out of an error's text and, given a model, its Hq, Hkv and D).

For a rejected k of shape ``[Tk, Hk, Dk]`` the cases are, in this order:

==================  ==========================================================================
``tokens``          Tk differs from q's T: k was sliced or gathered differently from q
``head_dim``        Dk differs from D
``repeated_k``      Hk == Hq != Hkv: k built with q's head count, or after ``repeat_kv``
``num_kv_heads``    Hk == Hkv: k is right and ``num_kv_heads`` is not (passed as Hq: the classic bug)
``foreign_k``       Hk is neither: look at what produced k (another model's config?)
==================  ==========================================================================

Example
-------
>>> case = k_shape_case((6, 32, 128), num_qo_heads=28, head_dim=128, tokens=6, model_kv_heads=4)
>>> case.name
'foreign_k'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: The cases of a rejected k, in the order they are tried.
K_CASES = ("tokens", "head_dim", "repeated_k", "num_kv_heads", "foreign_k")


@dataclass(frozen=True)
class Case:
    """One diagnosis: ``name`` (one of :data:`K_CASES`, or a code-specific name), why it happened and
    the fix that changes the outcome."""

    name: str
    why: str
    fix: str


def _heads(n: int) -> str:
    return f"{n} head" if n == 1 else f"{n} heads"


def k_shape_case(k_shape, *, num_qo_heads: int, head_dim: int, tokens: int | None = None,
                 model_kv_heads: int | None = None, passed_kv_heads: int | None = None,
                 others: tuple[str, ...] = ()) -> Case:
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
    kv = Hkv if Hkv is not None else N  # the KV head count k should have, as far as we know
    if tokens is not None and Tk != tokens:
        return Case("tokens", f"k has {Tk} tokens but q has {tokens}: k was sliced or gathered differently "
                              "from q (another chunk, another batch, padding removed from one of them).",
                    "Take q, k and v from the same tokens: all three [T, ...] with one T, and positions and "
                    "slots with T entries.")
    if Dk != D:
        why = f"k's last axis is {Dk}, not head_dim={D}."
        if kv is not None and Hk * Dk == kv * D and Hk != kv:
            why += f" {Hk} x {Dk} = {kv} x {D}: k was reshaped with the wrong head count."
            return Case("head_dim", why, f"Reshape k as [T, {kv}, {D}]: k_proj(x).reshape(T, {kv}, {D}).")
        why += (" If head_dim was computed as hidden_size // num_attention_heads, the model may set "
                "head_dim explicitly (Gemma-2: 256).")
        return Case("head_dim", why, "Pass the model's head_dim (config.head_dim where the config sets one) "
                                     f"and build k with it: [T, Hkv, head_dim]; k's {Dk} says which it was built with.")
    if Hk == Hq and kv is not None and kv != Hq and N != Hq:
        G = f"G = {Hq} // {kv}" + (f" = {Hq // kv}" if kv and Hq % kv == 0 else "")
        return Case("repeated_k",
                    f"k carries as many heads as q ({Hq}): an MHA-style k under a GQA config ({G}). k was built "
                    "with q's head count, or repeated to the query heads (repeat_kv) before the cache write.",
                    f"Write the un-repeated k of the K projection, [T, {kv}, {D}]; repeat_kv belongs to attention, "
                    f"after the write. num_kv_heads={kv} (config.num_key_value_heads) is right: changing it "
                    "would only move the error to the pool's shape.")
    if Hkv is not None and Hk == Hkv:
        passed = (f"num_kv_heads={N} was passed" if N is not None
                  else "num_kv_heads was passed as something else")
        if N is None or N == Hq:
            passed += f", likely config.num_attention_heads ({Hq}): the classic GQA bug"
        return Case("num_kv_heads", f"k has the model's {_heads(Hkv)} (config.num_key_value_heads): k is right "
                                    f"and num_kv_heads is not; {passed}.",
                    f"Pass num_kv_heads={Hkv} (config.num_key_value_heads), and allocate the pools as "
                    f"[P, {Hkv}, {D}] if they were made with the same wrong count.")
    if Hkv is None and N == Hq and Hk < Hq:
        return Case("num_kv_heads", f"num_kv_heads equals num_qo_heads ({Hq}) but k has {_heads(Hk)}: "
                                    "num_kv_heads was likely taken from config.num_attention_heads (the classic "
                                    "GQA bug). Under GQA it comes from the K projection, i.e. "
                                    f"config.num_key_value_heads (here {Hk}).",
                    f"Pass num_kv_heads={Hk} (config.num_key_value_heads), and allocate the pools as "
                    f"[P, {Hk}, {D}].")
    if Hkv is not None:
        why = (f"k has {_heads(Hk)}, neither Hq = {Hq} nor Hkv = {Hkv}: the fault is in what produced k, "
               f"not in num_kv_heads ({Hkv} is config.num_key_value_heads already).")
    elif N is not None:
        why = (f"k has {_heads(Hk)} but num_kv_heads={N} (and num_qo_heads={Hq}): k matches neither. If {N} is "
               "your model's config.num_key_value_heads, the fault is in what produced k, not in num_kv_heads; "
               f"if k comes straight from the model's K projection, num_kv_heads should be {Hk}.")
    else:
        why = f"k has {_heads(Hk)}, not num_qo_heads = {Hq}."
    if others:
        why += f" {Hk} heads of {Dk} is a head count of {', '.join(others)}: was k built with another model's config?"
    elif Hk == 0:
        why += " A tensor-parallel split with more ranks than KV heads leaves a rank none: replicate the KV heads."
    elif kv is not None and kv % Hk == 0:
        why += f" {Hk} divides {kv}: a tensor-parallel shard of k (tp = {kv // Hk})?"
    fix = (f"Build k with this model's K projection: [T, {kv}, {D}]. " + (
           "Under tensor parallelism every rank keeps at least one KV head." if Hk == 0 else
           f"Passing num_kv_heads={Hk} would only move the error to the next check (the group size or the "
           "pool's shape).") if kv is not None else
           "Build k with the model's K projection, [T, config.num_key_value_heads, head_dim].")
    return Case("foreign_k", why, fix)


# --- Reading an error's text -----------------------------------------------------------------

_SHAPE = re.compile(r"-?\d+(?:\s*,\s*-?\d+)*")


def read_shape(text: str) -> tuple[int, ...] | None:
    """The integers of a printed shape: ``(6, 32, 128)``, ``[6, 32, 128]``, ``torch.Size([6, 32, 128])``.

    >>> read_shape("torch.Size([6, 32, 128])")
    (6, 32, 128)
    """
    inner = re.search(r"[\(\[]\s*(" + _SHAPE.pattern + r")\s*,?\s*[\)\]]", text)
    if not inner:
        return None
    return tuple(int(x) for x in re.split(r"\s*,\s*", inner.group(1)))


def _template_regex(template: str) -> re.Pattern:
    """A catalog message template as a regex, each ``{field}`` (or ``{field!r}``) a named group."""
    out, pos = [], 0
    for m in re.finditer(r"\{(\w+)(?:![rs])?\}", template):
        out.append(re.escape(template[pos:m.start()]))
        out.append(f"(?P<{m.group(1)}>.+?)")
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return re.compile("".join(out) + r"\s*$")


@dataclass(frozen=True)
class ReadError:
    """An error's text, read: the catalog ``code``, the message's ``fields`` as text, and from
    ropepool's second line (if pasted) the ``expected`` shape of the failing argument."""

    code: str
    line: str
    fields: dict = field(default_factory=dict)
    expected: tuple[int, ...] | None = None


def read_error(text: str, catalog) -> ReadError | None:
    """Find which of ``catalog``'s messages (a ``{code: ErrorSpec}``) ``text`` holds, and its numbers.

    ``text`` may be SGLang's message alone, ropepool's two lines, or a traceback's last lines
    (``RuntimeError: ...``). The most specific matching message wins. None if no message matches.
    """
    best = None
    for line in text.splitlines():
        line = line.strip()
        for code, spec in catalog.items():
            m = _template_regex(spec.message).search(line)
            literal = len(re.sub(r"\{[^}]*\}", "", spec.message))
            if m and (best is None or literal > best[0]):
                best = (literal, code, m.group(0).strip(), m.groupdict())
    if best is None:
        return None
    _, code, line, fields = best
    flat = " ".join(text.split())
    exp = re.search(r"expected (\([\d, ]+\))", flat)
    return ReadError(code, line, fields, read_shape(exp.group(1)) if exp else None)


def _shape_field(read: ReadError, name: str) -> tuple[int, ...] | None:
    text = read.fields.get(name)
    return read_shape(text) if text else None


def case_of(read: ReadError, *, num_qo_heads: int, num_kv_heads: int, head_dim: int,
            passed_kv_heads: int | None = None, others: tuple[str, ...] = ()) -> Case | None:
    """Which mistake an error read from text is, for a model of Hq = ``num_qo_heads``,
    Hkv = ``num_kv_heads`` and D = ``head_dim``; None where the model's numbers say nothing more
    than the catalog does (value checks, dtypes, RoPE options).

    ``passed_kv_heads`` is the ``num_kv_heads`` the failing code passed, where known (else it is read
    from ropepool's "expected" line, if the text has it).
    """
    Hq, Hkv, D = num_qo_heads, num_kv_heads, head_dim
    exp = read.expected if read.expected and len(read.expected) == 3 else None
    if read.code == "k_shape":
        got = _shape_field(read, "shape")
        if not got or len(got) != 3:
            return None
        if passed_kv_heads is None and exp:
            passed_kv_heads = exp[1]
        return k_shape_case(got, num_qo_heads=Hq, head_dim=D, tokens=exp[0] if exp else None,
                            model_kv_heads=Hkv, passed_kv_heads=passed_kv_heads, others=others)
    if read.code == "q_shape":
        got = _shape_field(read, "shape")
        if not got or len(got) != 3:
            return None
        _, H, Dq = got
        if Dq != D:
            return Case("head_dim", f"q's last axis is {Dq}, but the model's head_dim is {D}.",
                        f"Build q as [T, {Hq}, {D}] and pass head_dim={D} (config.head_dim where set; Gemma-2 "
                        "sets 256, not hidden_size // num_attention_heads).")
        if H == Hq:
            return Case("num_qo_heads", f"q has the model's {_heads(Hq)}: q is right and num_qo_heads is not"
                                        + (f" ({exp[1]} was passed)" if exp else "")
                                        + "; num_qo_heads and num_kv_heads swapped?",
                        f"Pass num_qo_heads={Hq} (config.num_attention_heads) and num_kv_heads={Hkv}.")
        if H == Hkv:
            return Case("q_as_kv", f"q has {_heads(H)}, the model's KV head count: q was reshaped with "
                                   "num_key_value_heads.", f"Reshape q as [T, {Hq}, {D}].")
        return Case("foreign_q", f"q has {_heads(H)}, neither Hq = {Hq} nor Hkv = {Hkv}: look at what produced q "
                                 "(another model's config? a tensor-parallel shard?).",
                    f"Build q with this model's Q projection: [T, {Hq}, {D}].")
    if read.code == "v_shape":
        v, k = _shape_field(read, "shape"), _shape_field(read, "k_shape")
        if not v or not k or len(v) != 3 or len(k) != 3:
            return None
        if v[1] == Hq != Hkv and k[1] == Hkv:
            return Case("repeated_v", f"v has q's {_heads(Hq)} while k has {Hkv}: v was repeated (repeat_kv) "
                                      "before the cache write, k was not.",
                        f"Write the un-repeated v, [T, {Hkv}, {D}], like k.")
        return Case("v_differs", f"v is {v} and k is {k}: they come from different projections, layers or "
                                 "token slices.", f"Pass v of k's shape, [T, {Hkv}, {D}], from the same tokens.")
    if read.code in ("k_pool_shape", "v_pool_shape"):
        pool = _shape_field(read, "shape")
        if not pool or len(pool) != 3:
            return None
        _, H, Dp = pool
        if (H, Dp) == (Hkv, D):
            return Case("pool_right", f"the pool's rows are the model's [{Hkv}, {D}]: the pool is right, and "
                                      "num_kv_heads or head_dim as passed is not"
                                      + (f" (the op expected [P, {exp[1]}, {exp[2]}])" if exp else "") + ".",
                        f"Pass num_kv_heads={Hkv} and head_dim={D}.")
        if H == Hq != Hkv:
            return Case("pool_with_hq", f"the pool was allocated with the query heads ({Hq}), not the KV heads "
                                        f"({Hkv}): G = {Hq // Hkv} times the memory it needs.",
                        f"Allocate k_pool and v_pool as [P, {Hkv}, {D}] (config.num_key_value_heads).")
        return Case("foreign_pool", f"the pool's rows are [{H}, {Dp}], not the model's [{Hkv}, {D}]: a pool of "
                                    "another model or layer?", f"Allocate the pools as [P, {Hkv}, {D}].")
    if read.code == "group_size":
        nums = [int(x) for x in re.findall(r"-?\d+", read.fields.get("got", ""))]
        if len(nums) != 2:
            return None
        q_heads, kv_heads = nums
        wrong = [f"num_qo_heads={q_heads} (the model's is {Hq})"] if q_heads != Hq else []
        wrong += [f"num_kv_heads={kv_heads} (the model's is {Hkv})"] if kv_heads != Hkv else []
        return Case("group_size", ("passed " + " and ".join(wrong) if wrong else "both counts are the model's")
                    + f": {q_heads} query heads cannot be split evenly over {kv_heads} KV heads.",
                    f"Pass num_qo_heads={Hq} and num_kv_heads={Hkv} from one config (G = {Hq // Hkv}); with "
                    "tensor parallelism, divide both by the same tp.")
    return None
