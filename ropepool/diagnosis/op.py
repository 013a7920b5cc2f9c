"""The op's own messages: SGLang's (verbatim) and ropepool's, read back and compared with the model.

:func:`case_of` is ``explain``'s reasoning, from a message read back (:func:`read_error`: SGLang's
first line alone, or with ropepool's second line ``expected (...)``) and the model's :class:`Facts`.
A rejected k's cases are the op's own hint's (:mod:`ropepool.k_shape`, re-exported here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import CODES, MLA_CODES
from ..k_shape import K_CASES, k_shape_case  # noqa: F401  (re-exported: ropepool.diagnosis)
from ..k_shape import zero_heads as _zero_heads
from .base import Case, Diagnosis, Facts, ambiguous, heads
from .heads import head_dim_from_hidden
from .mla import MLA_SHAPE_CODES, mla_case
from .text import WINDOW, after, ints, line_at, read_shape

#: The catalog codes whose numbers a model can explain further.
SHAPE_CODES = ("q_shape", "k_shape", "v_shape", "k_pool_shape", "v_pool_shape", "group_size")


# --- Reading the op's messages back ---------------------------------------------------------------


@dataclass(frozen=True)
class ReadError:
    """An error's text, read: the catalog ``code``, the message's ``fields`` as text, and from
    ropepool's second line (if pasted) the ``expected`` shape of the failing argument (a pool's
    ``[P, H, D]`` reads as ``(None, H, D)``)."""

    code: str
    line: str
    fields: dict = field(default_factory=dict)
    expected: tuple | None = None


def _template(message: str) -> tuple[re.Pattern, str, int]:
    """A message template as a regex (each ``{field}`` a bounded named group), its longest literal
    piece (the anchor searched for) and its count of literal characters (its specificity)."""
    pieces = re.split(r"\{(\w+)(?:![rs])?\}", message)
    literals, names = pieces[0::2], pieces[1::2]
    out = [re.escape(literals[0])]
    for name, lit in zip(names, literals[1:]):
        out += [f"(?P<{name}>[^\\n]{{1,300}}?)", re.escape(lit)]
    return re.compile("".join(out) + r"\s*$"), max(literals, key=len), sum(map(len, literals))


def _argument_name(text: str) -> str:
    """The argument a ``{name} must be ...`` message names: its last word, quotes dropped."""
    words = text.split()
    return words[-1].strip("`'\"") if words else ""


#: The arguments of ``rope_pool_fused`` and ``rope_pool_fused_mla`` (``argument_type`` names one of them;
#: tests/test_explain_frameworks.py checks this list against their signatures).
OP_ARGUMENTS = frozenset(
    "backend c_kv check_values head_dim inplace is_neox k k_norm_weight k_pe k_pool k_scale kv_lora_rank "
    "kv_scale latent_pool max_position_embeddings norm_eps num_kv_heads num_qo_heads positions q "
    "q_norm_weight q_pe rope_base rope_dim rope_scaling rotary_dim slots v v_pool v_scale".split()
)


_TEMPLATES: dict[str, tuple] = {}
ALL_CODES = {**CODES, **MLA_CODES}  # rope_pool_fused's messages and rope_pool_fused_mla's own


def read_error(text: str, catalog=None) -> ReadError | None:
    """Find which of ``catalog``'s messages (``{code: spec with .message}``; default
    :data:`ropepool.errors.CODES` and ``MLA_CODES``) ``text`` holds, and its numbers; None if none.

    ``text`` may be SGLang's message alone, ropepool's two lines, or a traceback's last lines
    (``RuntimeError: ...``). The most specific matching message wins, then the last in the text.
    Time: linear in ``len(text)`` (one ``rfind`` per message, then a bounded window).
    """
    catalog = ALL_CODES if catalog is None else catalog
    best = None
    for code, spec in catalog.items():
        if spec.message not in _TEMPLATES:
            _TEMPLATES[spec.message] = _template(spec.message)
        regex, anchor, literal = _TEMPLATES[spec.message]
        i = text.rfind(anchor)
        if i < 0:
            continue
        line = line_at(text, i).rstrip()
        m = regex.search(line)
        if m and code == "argument_type" and _argument_name(m.group("name")) not in OP_ARGUMENTS:
            continue  # "X must be Y, got Z" of another library (or of the engine): not the op's check
        if m and (best is None or (literal, i) > best[:2]):
            best = (literal, i, code, m.group(0).strip(), m.groupdict())
    if best is None:
        return None
    _, i, code, line, fields = best
    tail = after(text, i + len(line) - 1 if len(line) else i, 700)
    exp = re.search(r"expected (\((?:-?\d+, ){1,2}-?\d+\)|\[P, \d+, \d+\])", tail)
    expected = None
    if exp:
        nums = ints(exp.group(1))
        expected = (None, *nums) if exp.group(1).startswith("[P") else tuple(nums)
        if len(expected) != (2 if code == "c_kv_shape" else 3):  # only c_kv is 2-D
            expected = None
    return ReadError(code, line, fields, expected)


def _shape(read: ReadError, name: str) -> tuple[int, ...] | None:
    text = read.fields.get(name)
    shape = read_shape(text) if text else None
    return shape if shape and len(shape) == 3 else None


# --- With the model --------------------------------------------------------------------------------


def _tensor_wrong(tensor: str, got, f: Facts, others=()) -> Case:
    """The tensor itself differs from the model's ``[T, H, D]``: which mistake built it."""
    _, H, Dg = got
    Hq, Hkv, D = f.num_qo_heads, f.num_kv_heads, f.head_dim
    want = Hq if tensor == "q" else Hkv
    if Dg != D:
        if f.naive_head_dim == Dg:
            name, _, why, fix = head_dim_from_hidden(f, Dg)
            return Case(
                name, f"{tensor} was built with head_dim {Dg}: " + why, f"Build {tensor} as [T, {want}, {D}]. " + fix
            )
        if H * Dg == want * D:
            return Case(
                "head_dim",
                f"{tensor} is [T, {H}, {Dg}]: {H} x {Dg} = {want} x {D}, the right values "
                "reshaped with the wrong head count.",
                f"Reshape {tensor} as [T, {want}, {D}].",
            )
        return Case(
            "head_dim",
            f"{tensor}'s last axis is {Dg}, the model's head_dim {D}: {tensor} comes from another model or layer.",
            f"Build {tensor} as [T, {want}, {D}].",
        )
    if tensor in ("k", "v") and H == Hq != Hkv:
        return Case(
            f"repeated_{tensor}",
            f"{tensor} carries q's {Hq} heads, the model has {Hkv} KV heads: {tensor} "
            "was repeated to the query heads (repeat_kv) before the cache write, or "
            "built with num_attention_heads.",
            f"Write the un-repeated {tensor} of the projection, [T, {Hkv}, {D}]; repeat_kv belongs to "
            f"attention, after the write. num_kv_heads={Hkv} is right: changing it would only move the error "
            "to the pool's shape.",
        )
    if tensor == "q" and H == Hkv != Hq:
        return Case(
            "q_as_kv",
            f"q has {heads(H)}, the model's KV head count: q was reshaped with num_key_value_heads.",
            f"Reshape q as [T, {Hq}, {D}].",
        )
    why = f"{tensor} has {heads(H)}, neither Hq = {Hq} nor Hkv = {Hkv}: the fault is in what produced {tensor}."
    if want and H and H < want and want % H == 0 and Hq % (want // H) == 0 and Hkv % (want // H) == 0:
        tp = want // H
        other = f" ({H} heads of {Dg} is also a head count of {', '.join(others)})" if others else ""
        return Case(
            "ambiguous",
            f"{why} Two mistakes give these numbers: (A) a tensor-parallel shard, tp = {tp}: each rank holds "
            f"{H} of the {want} heads, but the call passed the whole model's counts; or (B) {tensor} built "
            f"with another model's projection{other}.",
            f"Check whether this runs with tensor parallelism: if so, pass the per-rank counts "
            f"num_qo_heads={Hq // tp}, num_kv_heads={Hkv // tp} (and pools of {Hkv // tp} heads); if not, build "
            f"{tensor} with this model's projection: [T, {want}, {D}].",
        )
    if others:
        why += f" {H} heads of {Dg} is a head count of {', '.join(others)}: was it built with another model's config?"
    elif want and H and want % H == 0:
        why += f" {H} divides {want}: a tensor-parallel shard (tp = {want // H})?"
    return Case(
        f"foreign_{tensor}",
        why,
        f"Build {tensor} with this model's projection: [T, {want}, {D}]. Passing "
        f"a head count of {H} would only move the error to the next check.",
    )


def _passed_wrong(tensor: str, got, exp, f: Facts) -> Case | None:
    """The tensor is the model's, so what was passed is not: read which from the expected line."""
    _, H, Dg = got
    Hq, Hkv, D = f.num_qo_heads, f.num_kv_heads, f.head_dim
    _, He, De = exp
    if De != Dg:
        if f.naive_head_dim == De:
            name, _, why, fix = head_dim_from_hidden(f, De)
            return Case(name, f"head_dim={De} was passed. " + why, f"Pass head_dim={D}. " + fix)
        return Case(
            "head_dim",
            f"{tensor} has the model's head_dim {D} but head_dim={De} was passed.",
            f"Pass head_dim={D} (config.head_dim).",
        )
    if He != H:
        if tensor == "q":
            swapped = " (num_qo_heads and num_kv_heads swapped)" if He == Hkv else ""
            return Case(
                "num_qo_heads",
                f"q has the model's {heads(Hq)}: q is right and num_qo_heads={He} was passed{swapped}.",
                f"Pass num_qo_heads={Hq} (config.num_attention_heads) and num_kv_heads={Hkv} "
                "(config.num_key_value_heads).",
            )
        classic = ", config.num_attention_heads: the classic GQA bug" if He == Hq != Hkv else ""
        return Case(
            "num_kv_heads",
            f"k has the model's {heads(Hkv)} (config.num_key_value_heads): k is right and "
            f"num_kv_heads={He} was passed{classic}.",
            f"Pass num_kv_heads={Hkv} (config.num_key_value_heads), and allocate the pools as "
            f"[P, {Hkv}, {D}] if they were made with the same count.",
        )
    return None


def _alone(tensor: str, got, f: Facts) -> Case:
    """SGLang's line alone, and the tensor is the model's: what the call passed differs, but which?"""
    Hq, Hkv, D = f.num_qo_heads, f.num_kv_heads, f.head_dim
    N = f.passed_kv_heads
    if tensor == "q":
        options = [
            (
                "num_qo_heads",
                f"num_qo_heads was passed as something other than {Hq} (num_kv_heads={Hkv} "
                "swapped in?); Pass num_qo_heads=" + str(Hq),
            ),
            (
                "head_dim",
                f"head_dim was passed as something other than {D}"
                + (
                    f" (hidden_size // num_attention_heads = {f.naive_head_dim}?)"
                    if f.naive_head_dim and f.naive_head_dim != D
                    else ""
                )
                + f"; Pass head_dim={D}",
            ),
        ]
        case, _, why, fix = ambiguous(options, "the num_qo_heads and head_dim your call passed")
        return Case(case, why, fix)
    classic = (
        f"num_kv_heads was passed as something other than {Hkv}, likely config.num_attention_heads "
        f"({Hq}): the classic GQA bug; Pass num_kv_heads={Hkv}"
    )
    tokens = (
        f"k has {got[0]} tokens and q another count: k sliced or gathered differently from q; take q, k "
        "and v from the same tokens"
    )
    if N is not None and N != Hkv:
        return Case(
            "num_kv_heads",
            f"k has the model's {heads(Hkv)}: k is right and num_kv_heads={N} was passed"
            + (", config.num_attention_heads: the classic GQA bug" if N == Hq else "")
            + ".",
            f"Pass num_kv_heads={Hkv} (config.num_key_value_heads), and allocate the pools as [P, {Hkv}, {D}].",
        )
    if N is not None:
        return Case(
            "tokens",
            f"k is the model's [T, {Hkv}, {D}] and num_kv_heads={N} is right, so k's token count "
            f"({got[0]}) is not q's: k was sliced or gathered differently from q.",
            "Take q, k and v from the same tokens: all three [T, ...] with one T (check q.shape[0] == "
            "k.shape[0]), and positions and slots with T entries.",
        )
    case, _, why, fix = ambiguous(
        [("num_kv_heads", classic), ("tokens", tokens)],
        "print(num_kv_heads, q.shape[0], k.shape[0]) just before the call",
    )
    return Case(case, why, fix)


def case_of(read: ReadError, facts: Facts | None = None, *, others: tuple[str, ...] = (), **numbers) -> Case | None:
    """Which mistake an error read from text is, for the model of ``facts`` (or the numbers
    ``num_qo_heads=``, ``num_kv_heads=``, ``head_dim=``, ``passed_kv_heads=``); None where the
    model's numbers say nothing more than the catalog does (value checks, dtypes, RoPE options).
    """
    f = facts or Facts(**{k: v for k, v in numbers.items() if v is not None})
    Hq, Hkv, D = f.num_qo_heads, f.num_kv_heads, f.head_dim
    exp = read.expected
    code = read.code
    if code in MLA_SHAPE_CODES:
        return mla_case(code, read_shape(read.fields.get("shape", "")), exp, f)
    if code in ("q_shape", "k_shape"):
        got = _shape(read, "shape")
        if not got:
            return None
        tensor = code[0]
        if got[1] == 0:
            return _zero_heads(tensor)
        if tensor == "k" and exp and exp[0] is not None and got[0] != exp[0]:
            return k_shape_case(got, num_qo_heads=Hq or 0, head_dim=exp[2], tokens=exp[0])
        if not (Hq and Hkv and D):
            return None
        want = Hq if tensor == "q" else Hkv
        if (got[1], got[2]) == (want, D):
            return _passed_wrong(tensor, got, exp, f) if exp else _alone(tensor, got, f)
        if exp and (exp[1], exp[2]) != (want, D) and (exp[1], exp[2]) != (got[1], got[2]):
            return Case(
                "other_model",
                f"both {tensor} [T, {got[1]}, {got[2]}] and the values passed "
                f"[T, {exp[1]}, {exp[2]}] differ from {f.name}'s [T, {want}, {D}].",
                f"Check that {f.name} is the model this code serves (--model); then build {tensor} as "
                f"[T, {want}, {D}] and pass its numbers.",
            )
        return _tensor_wrong(tensor, got, f, others)
    if not (Hq and Hkv and D):
        return None
    if code == "v_shape":
        v, k = _shape(read, "shape"), _shape(read, "k_shape")
        if not v or not k:
            return None
        if v[1] == Hq != Hkv and k[1] == Hkv:
            return Case(
                "repeated_v",
                f"v has q's {heads(Hq)} while k has {Hkv}: v was repeated (repeat_kv) "
                "before the cache write, k was not.",
                f"Write the un-repeated v, [T, {Hkv}, {D}], like k.",
            )
        return Case(
            "v_differs",
            f"v is {v} and k is {k}: they come from different projections, layers or token slices.",
            f"Pass v of k's shape, [T, {Hkv}, {D}], from the same tokens.",
        )
    if code in ("k_pool_shape", "v_pool_shape"):
        pool = _shape(read, "shape")
        if not pool:
            return None
        _, H, Dp = pool
        other = _shape(read, "k_shape")
        if code == "v_pool_shape" and other and tuple(other[1:]) == (H, Dp) == (Hkv, D) and other[0] != pool[0]:
            return Case(
                "pool_rows_differ",
                f"both pools hold the model's [{Hkv}, {D}] rows, but v_pool has {pool[0]} rows and k_pool "
                f"{other[0]}: the two pools were allocated with different row counts.",
                f"Allocate v_pool exactly like k_pool: [P, {Hkv}, {D}] with the same P ({other[0]}).",
            )
        if (H, Dp) == (Hkv, D):
            passed = f" (the op expected [P, {exp[1]}, {exp[2]}])" if exp else ""
            wrong = []
            if not exp or exp[1] != Hkv:
                wrong.append(f"num_kv_heads={Hkv}")
            if not exp or exp[2] != D:
                wrong.append(f"head_dim={D}")
            return Case(
                "pool_right",
                f"the pool's rows are the model's [{Hkv}, {D}]: the pool is right, and what was passed is not{passed}.",
                "Pass " + " and ".join(wrong) + ".",
            )
        if H == Hq != Hkv:
            return Case(
                "pool_with_hq",
                f"the pool was allocated with the query heads ({Hq}), not the KV heads "
                f"({Hkv}): G = {Hq // Hkv} times the memory it needs.",
                f"Allocate k_pool and v_pool as [P, {Hkv}, {D}] (config.num_key_value_heads).",
            )
        return Case(
            "foreign_pool",
            f"the pool's rows are [{H}, {Dp}], not the model's [{Hkv}, {D}]: a pool of another model or layer?",
            f"Allocate the pools as [P, {Hkv}, {D}].",
        )
    if code == "group_size":
        nums = ints(read.fields.get("got", "")[:WINDOW])
        if len(nums) != 2:
            return None
        q_heads, kv_heads = nums
        wrong = [f"num_qo_heads={q_heads} (the model's is {Hq})"] if q_heads != Hq else []
        wrong += [f"num_kv_heads={kv_heads} (the model's is {Hkv})"] if kv_heads != Hkv else []
        if not wrong:
            return None
        return Case(
            "group_size",
            "passed "
            + " and ".join(wrong)
            + f": {q_heads} query heads cannot be split evenly over {kv_heads} KV heads.",
            f"Pass num_qo_heads={Hq} and num_kv_heads={Hkv} from one config (G = {Hq // Hkv}); with "
            "tensor parallelism, divide both by the same tp.",
        )
    return None


def diagnose(text: str, f: Facts, others_of=None) -> Diagnosis | None:
    """The op's message in ``text`` as a :class:`Diagnosis` (``case`` ``catalog`` where only the
    catalog's lesson applies, ``needs_model`` where the model's numbers would name the mistake)."""
    read = read_error(text)
    if read is None:
        return None
    origin = (CODES.get(read.code) or MLA_CODES[read.code]).origin
    family = "ropepool" if origin == "ropepool" else "sglang"
    source = {
        "sglang": "SGLang's Python wrapper (rope_pool_fused)",
        "sglang-c++": "SGLang's C++ extension",
        "ropepool": "ropepool's own check (SGLang has none)",
    }[origin]
    numbers = ", ".join(f"{k} = {read_shape(v) or v}" if "shape" in k else f"{k} = {v}" for k, v in read.fields.items())
    if read.expected:
        numbers += ("; " if numbers else "") + "the op expected " + str(read.expected).replace("None", "P")
    got = _shape(read, "shape")
    others = others_of(got[1], got[2]) if (others_of and got) else ()
    case = case_of(read, f, others=others)
    if case is None:
        kind = (
            "needs_model"
            if read.code in SHAPE_CODES and not (f.num_qo_heads and f.num_kv_heads and f.head_dim)
            else "catalog"
        )
        return Diagnosis(family, source, read.line, numbers, kind, "", "", "", code=read.code)
    quantity = {
        "tokens": "tokens",
        "head_dim": "head_dim",
        "head_dim_from_hidden": "head_dim",
        "zero_heads": "tp",
        "ambiguous": "heads/head_dim" if read.code == "q_shape" else "heads/tokens",
        "q_pe_whole_head": "layout",  # MLA: a projection's split left undone
        "k_pe_with_c_kv": "layout",
        "c_kv_with_k_pe": "layout",
        "latent_pool_without_rope": "layout",
    }.get(case.name, "heads")
    return Diagnosis(family, source, read.line, numbers, case.name, quantity, case.why, case.fix, code=read.code)
