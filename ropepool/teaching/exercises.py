"""Workshop exercises: checkers that say what is wrong, and reference solutions kept aside.

=====  =====================================  ==========================================
 n     the learner writes                     ``check_n`` runs it and names the mistake
=====  =====================================  ==========================================
 1     ``heads(config) -> dict``              Hq, Hkv, D of eight configs (GQA, MQA, MHA)
 2     ``fix(kwargs) -> kwargs``              the op on the fixed call: what still fails
 3     ``rope(x, positions, base)``           NeoX RoPE against the float64 reference
 4     a list: the pool after one call        each wrong row, and why (slot -1, ...)
 5     ``choose(occupancy, needs_slot)``      slots taken, out of range, duplicated
=====  =====================================  ==========================================

``check_n(answer)`` returns a passing :class:`Verdict` or raises :class:`ExerciseFailed`
(an ``AssertionError``) whose message names the problem; ``err.problem`` is a short code
for it (``"gptj_pairing"``, ``"slot_taken"``, ...). :func:`feedback` runs a checker and
returns the verdict either way, for a learner's cell; :func:`expect_rejection` proves that a
wrong answer is rejected, the way :func:`ropepool.teaching.checks.expect_error` proves an error.
The reference answers are ``solution_n``; :func:`show_solution` displays one's source.

Example
-------
>>> from ropepool.teaching import exercises
>>> exercises.check_5(exercises.solution_5).passed
True
>>> exercises.feedback(exercises.check_5, lambda occupancy, needs_slot: [0] * len(needs_slot)).problem
'slot_taken'
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import models
from ..errors import CATALOG, RopePoolError
from ..op import rope_pool_fused
from ..reference import rotate_neox, rope_pool_reference
from ..tolerance import error_bound, error_ratio, pair_norms


class ExerciseFailed(AssertionError):
    """A rejected answer. ``problem`` is a short code for the mistake; ``str(err)`` explains it."""

    def __init__(self, exercise: int | str, problem: str, message: str):
        self.exercise, self.problem = exercise, problem
        super().__init__(f"Exercise {exercise} [{problem}]: {message}")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: passed or not, and what the checker said."""

    exercise: int | str  # 1-5 in 06; "03.1" for the end-of-notebook checkers of 00-05
    passed: bool
    message: str
    problem: str | None = None

    def __repr__(self) -> str:
        mark = "PASSED" if self.passed else "NOT YET"
        return f"Exercise {self.exercise} {mark}: {self.message}"

    def _repr_markdown_(self) -> str:
        mark = "**passed**" if self.passed else "**not yet**"
        body = markdown_escape(self.message).replace("\n", "  \n")
        return f"Exercise {self.exercise} {mark}: {body}"


#: Characters Markdown (CommonMark, plus ``$`` for JupyterLab's maths) would read as markup.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~$&])")


def markdown_escape(text: str) -> str:
    r"""``text`` with every character Markdown would read as markup backslash-escaped.

    A checker's message is plain text: ``x1*cos - x2*sin`` must show its asterisks, ``[T, H, D]``
    must not become a link, ``$`` must not start maths.

    >>> markdown_escape("x1*cos - x2*sin")
    'x1\\*cos \\- x2\\*sin'
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def feedback(check: Callable, answer) -> Verdict:
    """Run ``check(answer)`` and return its :class:`Verdict`, passed or not; never raises for a mistake."""
    try:
        return check(answer)
    except ExerciseFailed as err:
        message = str(err).split(": ", 1)[1]
        return Verdict(err.exercise, False, message, err.problem)


def expect_rejection(check: Callable, answer, problem: str | None = None) -> ExerciseFailed:
    """Return the :class:`ExerciseFailed` that ``check(answer)`` raises.

    Raises AssertionError if the answer passes, or if ``problem`` is given and the checker
    found another one: a cell that shows a rejection cannot pass quietly.
    """
    try:
        check(answer)
    except ExerciseFailed as err:
        if problem is not None and err.problem != problem:
            raise AssertionError(f"expected problem {problem!r}, got {err.problem!r}: {err}") from err
        return err
    raise AssertionError("expected the checker to reject this answer, but it passed")


def _call(exercise: int, fn: Callable, *args, what: str, explain: Callable[[Exception], str] = lambda e: ""):
    """``fn(*args)``, with any exception the learner's code raises turned into a verdict."""
    try:
        return fn(*args)
    except NotImplementedError:
        raise ExerciseFailed(exercise, "not_implemented", f"{what} raised NotImplementedError: "
                             "replace the stub's body with your code.") from None
    except Exception as e:  # the learner's bug, reported rather than crashing the checker
        raise ExerciseFailed(exercise, "raised", f"{what} raised {type(e).__name__}: {e}{explain(e)}") from None


# --- 1: Hq, Hkv and D from a config -----------------------------------------------------------

#: An MHA config without ``num_key_value_heads`` (as early Llama and GPT-NeoX configs are).
MHA_CONFIG = {"_name_or_path": "an MHA config without num_key_value_heads", "model_type": "llama",
              "hidden_size": 2048, "num_attention_heads": 16, "rope_theta": 10000.0}

_HEAD_KEYS = ("num_qo_heads", "num_kv_heads", "head_dim")


def exercise_1_configs() -> dict[str, dict]:
    """The configs check 1 reads: the seven presets of plain-RoPE models, then one MHA config without
    ``num_key_value_heads``."""
    configs = {name: models.load_preset(name) for name in models.preset_names()[:7]}
    configs["mha-no-kv-field"] = dict(MHA_CONFIG)
    return configs


def _as_heads(name: str, got) -> dict:
    if got is None:
        raise ExerciseFailed(1, "returned_none", f"on {name} your function returned None: did it forget `return`?")
    if isinstance(got, (tuple, list)) and len(got) == 3:
        got = dict(zip(_HEAD_KEYS, got))
    if not isinstance(got, dict):
        raise ExerciseFailed(1, "wrong_type", f"on {name} your function returned a {type(got).__name__}; return "
                             "a dict with keys num_qo_heads, num_kv_heads, head_dim (or a tuple in that order).")
    missing = [k for k in _HEAD_KEYS if k not in got]
    if missing:
        raise ExerciseFailed(1, "missing_key", f"on {name} your dict has no {', '.join(missing)}; "
                             f"it needs {', '.join(_HEAD_KEYS)}.")
    for key in _HEAD_KEYS:
        value = got[key]
        if isinstance(value, float) and value.is_integer():
            raise ExerciseFailed(1, "float_not_int", f"on {name}, {key} = {value!r} is a float: the op wants an "
                                 "int. Divide with // (hidden_size // num_attention_heads), not /.")
    return got


def _heads_mistake(name: str, config: dict, got: dict, want: models.RopeParams) -> tuple[str, str] | None:
    """(problem, message) for the first wrong field on one config, or None if all three are right."""
    Hq = config.get("num_attention_heads")
    if got["num_qo_heads"] != want.num_qo_heads:
        return "num_qo_heads", (f"on {name}, num_qo_heads = {got['num_qo_heads']!r} but the model has "
                                f"{want.num_qo_heads} query heads: read config['num_attention_heads'].")
    if got["num_kv_heads"] != want.num_kv_heads:
        g = got["num_kv_heads"]
        if config.get("multi_query") is True:
            return "multi_query", (f"on {name}, num_kv_heads = {g!r}, but the config says multi_query: true: "
                                   f"one KV head shared by all {want.num_qo_heads} query heads (MQA), so 1.")
        if g == Hq and "num_key_value_heads" in config:
            return "kv_from_attention_heads", (
                f"on {name}, num_kv_heads = {g} is num_attention_heads, the query heads. That is the classic "
                f"GQA bug: k has config['num_key_value_heads'] = {config['num_key_value_heads']} heads.")
        if "num_key_value_heads" not in config:
            return "kv_default", (f"on {name} (no num_key_value_heads), num_kv_heads = {g!r}: without the "
                                  f"field the model is MHA, one KV head per query head, so {want.num_kv_heads}.")
        return "num_kv_heads", (f"on {name}, num_kv_heads = {g!r}; the model has {want.num_kv_heads} KV heads "
                                "(config['num_key_value_heads']).")
    if got["head_dim"] != want.head_dim:
        g, hidden = got["head_dim"], config.get("hidden_size")
        if "head_dim" in config and hidden and g == hidden // Hq:
            return "head_dim_explicit", (
                f"on {name}, head_dim = {g} = hidden_size // num_attention_heads, but this config sets "
                f"head_dim = {config['head_dim']} explicitly (q_proj is {Hq} x {config['head_dim']} wide): "
                "use config['head_dim'] where it is set.")
        if hidden and want.num_kv_heads and g == hidden // want.num_kv_heads:
            return "head_dim_kv", (f"on {name}, head_dim = {g} = hidden_size // num_key_value_heads: divide "
                                   "by num_attention_heads, the query heads, instead.")
        return "head_dim", f"on {name}, head_dim = {g!r}; the model's is {want.head_dim}."
    return None


def check_1(heads: Callable[[dict], dict]) -> Verdict:
    """Check ``heads(config) -> {"num_qo_heads", "num_kv_heads", "head_dim"}`` on eight configs.

    The expected values come from :func:`ropepool.models.from_config`. The message names the
    first config and field that is wrong and the likely cause; the other failing configs follow.
    """
    configs = exercise_1_configs()
    failures = []
    for name, config in configs.items():
        def explain(e: Exception, config=config) -> str:
            if not isinstance(e, KeyError):
                return ""
            fields = ", ".join(k for k in config if not k.startswith("_"))
            return (f". This config has no such field (it has: {fields}); a missing field has a meaning "
                    "(no num_key_value_heads: MHA; multi_query: one KV head): read it with config.get(...).")
        try:
            got = _as_heads(name, _call(1, heads, dict(config), what=f"your function, on {name}'s config,",
                                        explain=explain))
        except ExerciseFailed as err:
            if err.problem == "not_implemented":
                raise
            failures.append((err.problem, str(err).split(": ", 1)[1]))
            continue
        found = _heads_mistake(name, config, got, models.from_config(config))
        if found:
            failures.append(found)
    if failures:
        problem, message = failures[0]
        right = len(configs) - len(failures)
        later = f"; {len(failures) - 1} more wrong after this one" if len(failures) > 1 else ""
        more = f" ({right} of {len(configs)} configs right{later}.)"
        raise ExerciseFailed(1, problem, message + more)
    return Verdict(1, True, f"right on all {len(configs)} configs: GQA (Llama, Mistral, Qwen, Gemma's explicit "
                   "head_dim), MHA with and without num_key_value_heads, and Falcon's multi_query.")


def solution_1(config: dict) -> dict:
    """Hq, Hkv and D of a Hugging Face config."""
    Hq = config["num_attention_heads"]
    if config.get("multi_query"):
        Hkv = 1  # Falcon: one KV head for all query heads (MQA)
    else:
        Hkv = config.get("num_key_value_heads", Hq)  # absent: MHA
    D = config.get("head_dim") or config["hidden_size"] // Hq  # Gemma sets head_dim itself
    return {"num_qo_heads": Hq, "num_kv_heads": Hkv, "head_dim": D}


# --- 2: fix a broken call ----------------------------------------------------------------------

#: The model of exercise 2: a small GQA config (Hq = 8, Hkv = 2, D = 16).
SMALL_CONFIG = {"num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 128, "rope_theta": 10000.0}


def broken_call() -> dict:
    """The kwargs of a call with three bugs, built the way hurried model code builds them.

    q, k, v are float16 activations of 4 prefill tokens; the pools were allocated as float32;
    positions come from ``np.arange`` (int64); num_kv_heads was read from num_attention_heads.
    """
    cfg = SMALL_CONFIG
    Hq, Hkv, T, P = cfg["num_attention_heads"], cfg["num_key_value_heads"], 4, 10
    D = cfg["hidden_size"] // Hq
    rng = np.random.default_rng(2)
    return dict(
        q=rng.standard_normal((T, Hq, D)).astype(np.float16),  # [T, Hq, D]
        k=rng.standard_normal((T, Hkv, D)).astype(np.float16),  # [T, Hkv, D]
        v=rng.standard_normal((T, Hkv, D)).astype(np.float16),  # [T, Hkv, D]
        positions=np.arange(T),  # bug: int64
        slots=np.array([6, 2, 9, 4], dtype=np.int32),
        k_pool=rng.standard_normal((P, Hkv, D)).astype(np.float32),  # bug: float32 pool, [P, Hkv, D]
        v_pool=rng.standard_normal((P, Hkv, D)).astype(np.float32),
        head_dim=D, num_qo_heads=Hq,
        num_kv_heads=cfg["num_attention_heads"],  # bug: the query heads
        rope_base=cfg["rope_theta"],
    )


def _tampered(before: dict, after: dict) -> tuple[str, str] | None:
    """(problem, message) if the fix changed arrays it should have left alone, else None."""
    for name in ("q", "k", "v"):
        a, b = np.asarray(before[name]), np.asarray(after[name])
        if a.shape != b.shape:
            extra = (" Repeating k's heads to match q turns GQA into MHA: the cache grows G-fold and the "
                     "model's k is lost. Keep k as the K projection made it and fix num_kv_heads."
                     if name in "kv" else "")
            return "changed_shape", f"you changed {name}'s shape from {a.shape} to {b.shape}.{extra}"
        if str(b.dtype) != str(a.dtype):
            return "cast_activations", (f"you cast {name} from {a.dtype} to {b.dtype}. The model computes in "
                                        f"{a.dtype}; the cache stores what the model computes, so cast the "
                                        "pools to the activations' dtype instead.")
        if not np.array_equal(a, b):
            return "changed_values", f"you changed the values of {name}; fix the call, not the data."
    for name in ("positions", "slots"):
        if not np.array_equal(np.asarray(before[name], np.int64), np.asarray(after[name], np.int64)):
            return "changed_values", (f"you changed the values of {name}: cast it with .astype(np.int32) and "
                                      "keep its values.")
    for name in ("k_pool", "v_pool"):
        a, b = np.asarray(before[name]), np.asarray(after[name], np.float32)
        if a.shape != b.shape:
            return "changed_shape", f"you changed {name}'s shape from {a.shape} to {b.shape}."
        if not np.allclose(a.astype(np.float16).astype(np.float32), b, rtol=1e-3, atol=1e-3):
            return "changed_values", f"you changed the contents of {name}; cast it, keep what it holds."
    return None


def _wrong_param(after: dict) -> tuple[str, str] | None:
    """(problem, message) if a scalar parameter does not match SMALL_CONFIG, else None."""
    for name, want in (("num_qo_heads", 8), ("num_kv_heads", 2), ("head_dim", 16), ("rope_base", 10000.0)):
        if after.get(name) != want:
            return "wrong_param", (f"{name} = {after.get(name)!r}, but SMALL_CONFIG gives {want}: read it from "
                                   "the config (num_kv_heads from num_key_value_heads).")
    return None


def check_2(fix: Callable[[dict], dict]) -> Verdict:
    """Run the op on ``fix(broken_call())`` and say what still fails, or what the fix broke."""
    before = broken_call()
    after = _call(2, fix, broken_call(), what="fix(broken_call())")
    if not isinstance(after, dict):
        raise ExerciseFailed(2, "wrong_type", f"fix returned a {type(after).__name__}; return the fixed kwargs dict.")
    missing = [n for n in ("q", "k", "v", "positions", "slots", "k_pool", "v_pool") if n not in after]
    if missing:
        raise ExerciseFailed(2, "bad_kwargs", f"your kwargs lack {', '.join(missing)}; return all of them.")
    tampered = _tampered(before, after)
    if tampered:
        raise ExerciseFailed(2, *tampered)
    try:
        out = rope_pool_fused(**after)
    except RopePoolError as err:
        spec = CATALOG[err.code]
        raise ExerciseFailed(2, err.code, f"the op still fails with {err.code!r}:\n{err}\nWhat it means: "
                             f"{spec.meaning}\nThe fix: {spec.fix}") from None
    except TypeError as err:
        raise ExerciseFailed(2, "bad_kwargs", f"the op could not be called with your kwargs: {err}") from None
    wrong = _wrong_param(after)
    if wrong:
        raise ExerciseFailed(2, *wrong)
    ref = rope_pool_reference(*(after[n] for n in ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")),
                              rope_base=after["rope_base"])
    for got, want, x in zip(out[:2], ref[:2], (after["q"], after["k"])):  # within ropepool.tolerance
        assert error_ratio(np.asarray(got), want, x, after["positions"], "float16") <= 1
    slots = np.asarray(after["slots"])
    assert np.array_equal(np.asarray(out[2])[slots], np.asarray(out[1]))  # pool rows hold k_rot's bits
    return Verdict(2, True, "the call runs and matches the float64 reference: num_kv_heads from "
                   "num_key_value_heads, pools in float16 like the activations, positions as int32.")


def solution_2(kw: dict) -> dict:
    """The three fixes, each where the bug was made."""
    kw = dict(kw)
    kw["num_kv_heads"] = SMALL_CONFIG["num_key_value_heads"]  # not num_attention_heads
    kw["positions"] = kw["positions"].astype(np.int32)  # np.arange gave int64
    kw["k_pool"] = kw["k_pool"].astype(kw["k"].dtype)  # the cache stores the activations' dtype
    kw["v_pool"] = kw["v_pool"].astype(kw["v"].dtype)
    return kw


# --- 3: NeoX RoPE in NumPy ---------------------------------------------------------------------

def _variant(x, positions, base, *, pairing="neox", exponent=lambda i, D: -2 * i / D, sign=1.0,
             negate=True, use_index=False):
    """NeoX RoPE with one knob turned: the mistakes check 3 recognises."""
    x = np.asarray(x, np.float64)
    T, _, D = x.shape
    pos = np.arange(T, dtype=np.float64) if use_index else np.asarray(positions, np.float64)
    i = np.arange(D // 2, dtype=np.float64)
    theta = pos[:, None] * float(base) ** exponent(i, D)  # [T, D/2]
    cos, sin = np.cos(theta)[:, None, :], sign * np.sin(theta)[:, None, :]  # [T, 1, D/2]
    if pairing == "neox":
        x1, x2 = x[..., : D // 2], x[..., D // 2:]  # [T, H, D/2]
    else:
        x1, x2 = x[..., 0::2], x[..., 1::2]  # GPT-J: neighbours
    r1 = x1 * cos - x2 * sin if negate else x1 * cos + x2 * sin  # [T, H, D/2]
    r2 = x1 * sin + x2 * cos
    if pairing == "neox":
        return np.concatenate([r1, r2], axis=-1)  # [T, H, D]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = r1, r2
    return out


ROPE_MISTAKES = {
    "gptj_pairing": (dict(pairing="gptj"),
                     "you paired neighbours (x[2i], x[2i+1]): that is GPT-J's interleaved convention. NeoX pairs "
                     "x[i] with x[i + D/2], the first half of the head with the second."),
    "exponent_missing_2": (dict(exponent=lambda i, D: -i / D),
                           "your frequencies are rope_base**(-i/D): the exponent lost its factor 2. NeoX uses "
                           "rope_base**(-2i/D) for i < D/2."),
    "exponent_over_half": (dict(exponent=lambda i, D: -2 * i / (D / 2)),
                           "your frequencies are rope_base**(-2i/(D/2)): divide the exponent by D, not by D/2 "
                           "(i runs over the D/2 pairs; the exponent 2i/D runs from 0 towards 1)."),
    "exponent_sign": (dict(exponent=lambda i, D: 2 * i / D),
                      "your frequencies grow with i (rope_base**(+2i/D)); they must shrink: rope_base**(-2i/D), "
                      "so pair 0 turns fastest and the last pair slowest."),
    "rotation_sign": (dict(sign=-1.0),
                      "you rotate the wrong way (by -theta): the first half is x1*cos - x2*sin and the second "
                      "x1*sin + x2*cos; your sin terms have the opposite signs."),
    "rotate_half_sign": (dict(negate=False),
                         "rotate_half lost its minus sign: the first half is x1*cos - x2*sin "
                         "(rotate_half(x) = [-x2, x1]), you computed x1*cos + x2*sin."),
    "token_index": (dict(use_index=True),
                    "you rotated token t by its index t, not by positions[t]: in a decode step token 0 can be at "
                    "position 4,000. Use the positions argument."),
}


def rope_with_mistake(problem: str) -> Callable:
    """A ``rope(x, positions, rope_base)`` that makes one of :data:`ROPE_MISTAKES`, to see check 3 reject it."""
    if problem not in ROPE_MISTAKES:
        raise ValueError(f"unknown mistake {problem!r}: choose one of {sorted(ROPE_MISTAKES)}")
    knobs = ROPE_MISTAKES[problem][0]
    return lambda x, positions, rope_base: _variant(x, positions, rope_base, **knobs)


def exercise_3_cases() -> list[dict]:
    """Inputs check 3 runs: a small head with scattered positions, then Llama-3's D and base."""
    rng = np.random.default_rng(3)
    return [
        dict(x=rng.standard_normal((5, 3, 8)), positions=np.array([0, 1, 5, 2, 40]), rope_base=10000.0),
        dict(x=rng.standard_normal((4, 2, 128)), positions=np.array([4096, 7, 0, 300]), rope_base=500000.0),
    ]


def _close(got, want, x, positions) -> bool:
    """Within :mod:`ropepool.tolerance`'s float32 bound, so float32 math passes as well as float64."""
    return error_ratio(got, want, x, positions, "float32") <= 1


def _locate(x, got, want, positions) -> str:
    """Where ``got`` first departs from ``want``, and which half of the head is off."""
    bound = error_bound("float32", positions, pair_norms(x).max(axis=(1, 2)))  # [T]
    bad = ~(np.abs(got - want) <= bound[:, None, None])  # NaN counts as bad
    t, h, d = (int(a) for a in np.argwhere(bad)[0])
    D = want.shape[-1]
    halves = [name for name, sl in (("first", slice(0, D // 2)), ("second", slice(D // 2, D))) if bad[..., sl].any()]
    where = "both halves" if len(halves) == 2 else f"the {halves[0]} half"
    zero = np.flatnonzero(np.asarray(positions) == 0)
    at_zero = ""
    if zero.size and bad[zero].any():
        at_zero = " At position 0 the output must equal x (nothing turns), and yours does not."
    return (f"first difference at token {t} (position {positions[t]}), head {h}, dim {d}: expected "
            f"{want[t, h, d]:.6g}, got {got[t, h, d]:.6g}; wrong values in {where} of the head.{at_zero}")


def check_3(rope: Callable) -> Verdict:
    """Check ``rope(x [T, H, D], positions [T], rope_base) -> [T, H, D]`` against the float64 reference.

    A wrong answer is compared with the common mistakes (GPT-J pairing, a wrong frequency
    exponent, a sign error, the token index for the position) and the message names the one it matches.
    """
    for n, case in enumerate(exercise_3_cases()):
        x = case["x"]
        x_in = x.copy()
        got = _call(3, rope, x_in, case["positions"].copy(), case["rope_base"], what=f"rope(x {x.shape}, ...)")
        if not np.array_equal(x_in, x):
            raise ExerciseFailed(3, "modified_input", "your function changed x in place; return a new array.")
        if got is None:
            raise ExerciseFailed(3, "returned_none", "rope returned None: did it forget `return`?")
        got = np.asarray(got, np.float64)
        if got.shape != x.shape:
            raise ExerciseFailed(3, "shape", f"rope returned shape {got.shape} for x of shape {x.shape}: "
                                 "the rotated x keeps x's shape [T, H, D].")
        want = rotate_neox(x, case["positions"], case["rope_base"])
        if _close(got, want, x, case["positions"]):
            continue
        for problem, (knobs, message) in ROPE_MISTAKES.items():
            if _close(got, _variant(x, case["positions"], case["rope_base"], **knobs), x, case["positions"]):
                raise ExerciseFailed(3, problem, message)
        raise ExerciseFailed(3, "mismatch", f"on case {n} (D = {x.shape[-1]}, rope_base = {case['rope_base']}) "
                             + _locate(x, got, want, case["positions"]))
    return Verdict(3, True, "matches ropepool.reference.rotate_neox on both cases (D = 8 and D = 128).")


def solution_3(x, positions, rope_base):
    """NeoX RoPE, ``x [T, H, D]`` at ``positions [T]``."""
    x = np.asarray(x, np.float64)
    D = x.shape[-1]
    inv_freq = rope_base ** (-2.0 * np.arange(D // 2) / D)  # [D/2], fast to slow
    theta = np.asarray(positions, np.float64)[:, None] * inv_freq  # [T, D/2]
    cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]  # [T, 1, D/2]: shared by every head
    x1, x2 = x[..., : D // 2], x[..., D // 2:]  # [T, H, D/2]
    return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)  # [T, H, D]


# --- 4: predict the pool after a batch ---------------------------------------------------------

def pool_scenario() -> dict:
    """Exercise 4's call: 8 pool rows, row r holding ``100 + r``; token t carrying the value t.

    ``slots[t]`` is the row token t writes; -1 writes nothing.
    """
    return dict(pool_before=[100 + r for r in range(8)], slots=[5, 2, -1, 6, 0, -1], token_values=list(range(6)))


def run_pool_scenario(slots=None) -> list[int]:
    """Run the real op on exercise 4's call and return the pool after it, one number per row.

    Each row is ``[Hkv=1, D=2]`` holding its number twice; every token sits at position 0, where
    RoPE turns nothing, so token t writes exactly the value t.
    """
    s = pool_scenario()
    slots = s["slots"] if slots is None else slots
    T, P = len(slots), len(s["pool_before"])
    values = np.repeat(np.asarray(s["token_values"][:T], np.float32), 2).reshape(T, 1, 2)  # [T, Hkv, D]
    pool = np.repeat(np.asarray(s["pool_before"], np.float32), 2).reshape(P, 1, 2)  # [P, Hkv, D]
    _, _, k_pool, _ = rope_pool_fused(values, values, values, np.zeros(T, np.int32), np.asarray(slots, np.int32),
                                      pool, pool.copy(), head_dim=2, num_qo_heads=1, num_kv_heads=1,
                                      rope_base=10000.0)
    return [int(x) for x in k_pool[:, 0, 0]]


def _row_mistake(r: int, a, want: int, s: dict) -> tuple[str, str]:
    slots, old = s["slots"], s["pool_before"][r]
    skipped = [t for t, slot in enumerate(slots) if slot < 0]
    if a is None:
        return "unanswered", f"row {r}: still None; write the number it holds after the call."
    if r == len(s["pool_before"]) - 1 and a in skipped:
        return "negative_index", (f"row {r}: you put token {a} here, but its slot is -1, which writes nothing. "
                                  "-1 is not Python's 'last row' here: the op skips that token; row "
                                  f"{r} holds {want}.")
    if want != old:  # a token writes this row
        t = slots.index(r)
        if a == old:
            return "write_missed", (f"row {r}: token {t} writes it (slots[{t}] = {r}), so it holds {t} now, "
                                    f"not its old {old}.")
        return "wrong_token", f"row {r}: slots[{t}] = {r}, so it holds token {t}'s value {t}, not {a!r}."
    if a == -1:
        return "untouched_changed", (f"row {r}: no token writes it, so it keeps its old value {old}; -1 is a "
                                     "slot meaning 'write nothing', not a row's value.")
    return "untouched_changed", (f"row {r}: no token writes it, so it keeps its old value {old} (rows no "
                                 f"token names keep their bits), not {a!r}.")


_ROW_PRIORITY = ("negative_index", "write_missed", "untouched_changed", "wrong_token", "unanswered")


def check_4(answer) -> Verdict:
    """Check a predicted pool (a list of 8 numbers, or a function returning it) against the real op."""
    s = pool_scenario()
    if callable(answer):
        answer = _call(4, answer, what="your function")
    answer = list(answer) if isinstance(answer, (list, tuple, np.ndarray)) else answer
    P = len(s["pool_before"])
    if not isinstance(answer, list) or len(answer) != P:
        size = len(answer) if isinstance(answer, list) else type(answer).__name__
        raise ExerciseFailed(4, "wrong_length", f"the pool has {P} rows: answer with a list of {P} numbers, "
                             f"got {size}.")
    if all(a is None for a in answer):
        raise ExerciseFailed(4, "unanswered", f"every row is still None: replace each with the number row r "
                             "holds after the call.")
    want = run_pool_scenario()
    slots = s["slots"]
    if all(answer[t] == slots[t] for t in range(len(slots))) and answer[: len(slots)] != want[: len(slots)]:
        raise ExerciseFailed(4, "indexed_by_token", "you wrote slots[t] into row t. The op does the opposite: it "
                             "writes token t's k and v INTO row slots[t].")
    found = [_row_mistake(r, a, w, s) for r, (a, w) in enumerate(zip(answer, want)) if a != w]
    if found:
        problem = min((p for p, _ in found), key=_ROW_PRIORITY.index)
        wrong = [str(r) for r, (a, w) in enumerate(zip(answer, want)) if a != w]
        head = f"row {wrong[0]} is wrong" if len(wrong) == 1 else f"rows {', '.join(wrong)} are wrong"
        raise ExerciseFailed(4, problem, f"{head}:\n" + "\n".join(m for _, m in found))
    changed = sum(w != b for w, b in zip(want, s["pool_before"]))
    return Verdict(4, True, f"the op agrees: {want}. {changed} rows changed, one per slot >= 0; slot -1 wrote "
                   "nothing, and every other row kept its value.")


def solution_4() -> list[int]:
    """The pool after exercise 4's call."""
    s = pool_scenario()
    pool = list(s["pool_before"])
    for t, slot in enumerate(s["slots"]):
        if slot >= 0:  # -1 writes nothing (it is not Python's "last row")
            pool[slot] = s["token_values"][t]
    return pool


# --- 5: choose slots for a decode step ---------------------------------------------------------

def slot_scenarios() -> dict[str, dict]:
    """Pool occupancy maps (row -> owning request, None where free) and the tokens of one decode step.

    ``needs_slot[t]`` is False for a padding token (a finished request), which must write nothing.
    """
    return {
        "decode": dict(occupancy=["A", "A", None, "B", "A", "B", None, None, "C", "B", None, "C"],
                       needs_slot=[True, True, False, True]),
        "tight": dict(occupancy=["X", None, "Y", None, None], needs_slot=[True, True, True]),
        "all padding": dict(occupancy=[None, "A", None], needs_slot=[False, False]),
        "empty step": dict(occupancy=["A", None], needs_slot=[]),
    }


def _slot_mistakes(slots, occupancy, needs_slot) -> list[tuple[str, str]]:
    P, found, owner_of = len(occupancy), [], {}
    for t, (slot, needs) in enumerate(zip(slots, needs_slot)):
        if isinstance(slot, bool) or not isinstance(slot, (int, np.integer)):
            found.append(("not_int", f"token {t}: slot {slot!r} is not an int."))
        elif not needs and slot != -1:
            found.append(("padding_slot", f"token {t} is padding (needs_slot is False): give it -1 so it writes "
                          f"nothing, not row {slot}."))
        elif needs and slot == -1:
            found.append(("missing_slot", f"token {t} needs a slot: -1 would drop its k and v, and the next "
                          "step's attention would miss this token."))
        elif slot >= P or slot < -1:
            found.append(("out_of_range", f"token {t}: slot {slot} is out of range: the pool has rows 0..{P - 1} "
                          "(and -1 for 'write nothing'). In SGLang's kernel that is an out-of-bounds write."))
        elif slot >= 0 and occupancy[slot] is not None:
            found.append(("slot_taken", f"token {t}: slot {slot} is taken by request {occupancy[slot]}; writing "
                          "there overwrites its cached k and v. The op cannot tell: to it a row is a row."))
        elif slot >= 0 and slot in owner_of:
            found.append(("duplicate_slot", f"token {t}: slot {slot} is already token {owner_of[slot]}'s; two "
                          "tokens writing one row race in the kernel."))
        if isinstance(slot, (int, np.integer)) and slot >= 0:
            owner_of.setdefault(int(slot), t)
    return found


def check_5(choose: Callable) -> Verdict:
    """Check ``choose(occupancy, needs_slot) -> slots`` on four decode steps.

    The message names the scenario and, for each wrong token, whether its slot is taken,
    out of range, duplicated, or wrongly -1 / not -1. Then the op runs with the chosen slots.
    """
    for name, s in slot_scenarios().items():
        slots = _call(5, choose, list(s["occupancy"]), list(s["needs_slot"]), what=f"choose(...) on '{name}'")
        if slots is None:
            raise ExerciseFailed(5, "returned_none", "choose returned None: did it forget `return`?")
        slots = list(slots)
        T = len(s["needs_slot"])
        if len(slots) != T:
            raise ExerciseFailed(5, "wrong_length", f"on '{name}' the step has {T} tokens; you returned "
                                 f"{len(slots)} slots (one per token, -1 for padding).")
        found = _slot_mistakes(slots, s["occupancy"], s["needs_slot"])
        if found:
            raise ExerciseFailed(5, found[0][0], f"on '{name}' (occupancy {s['occupancy']}, needs_slot "
                                 f"{s['needs_slot']}) you chose {slots}:\n" + "\n".join(m for _, m in found))
    s = slot_scenarios()["decode"]
    chosen = [int(x) for x in choose(list(s["occupancy"]), list(s["needs_slot"]))]
    T, P = len(chosen), len(s["occupancy"])
    x = np.ones((T, 1, 2), np.float32)
    pool = np.zeros((P, 1, 2), np.float32)
    _, _, k_pool, _ = rope_pool_fused(x, x, x, np.zeros(T, np.int32), np.array(chosen, np.int32), pool, pool.copy(),
                                      head_dim=2, num_qo_heads=1, num_kv_heads=1, rope_base=10000.0)
    written = sorted(int(r) for r in np.flatnonzero(k_pool[:, 0, 0]))
    return Verdict(5, True, f"free rows only, one per real token, -1 for padding; the op accepts {chosen} and "
                   f"writes rows {written}.")


def solution_5(occupancy: list, needs_slot: list) -> list[int]:
    """Hand the free rows out in order; padding tokens get -1."""
    free = iter([r for r, owner in enumerate(occupancy) if owner is None])
    return [next(free) if needs else -1 for needs in needs_slot]


# --- Solutions, kept out of the way ------------------------------------------------------------

SOLUTIONS = {1: solution_1, 2: solution_2, 3: solution_3, 4: solution_4, 5: solution_5}
CHECKS = {1: check_1, 2: check_2, 3: check_3, 4: check_4, 5: check_5}


@dataclass(frozen=True)
class Solution:
    """The source of one reference solution; Jupyter shows it as a code block."""

    exercise: int
    source: str

    def __repr__(self) -> str:
        return self.source

    def _repr_markdown_(self) -> str:
        return f"Solution to exercise {self.exercise}:\n\n```python\n{self.source}```"


def show_solution(n: int) -> Solution:
    """The reference solution of exercise ``n`` (1 to 5), to display when you are stuck."""
    if n not in SOLUTIONS:
        raise ValueError(f"exercise {n!r} does not exist: choose one of {sorted(SOLUTIONS)}")
    return Solution(n, inspect.getsource(SOLUTIONS[n]))
