"""Exercise 2: fix a broken ``rope_pool_fused`` call."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ...errors import RopePoolError
from ..catalog import CATALOG
from ...op import rope_pool_fused
from ...reference import rope_pool_reference
from ...tolerance import error_ratio
from ..feedback import ExerciseFailed, Verdict, guarded


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
        head_dim=D,
        num_qo_heads=Hq,
        num_kv_heads=cfg["num_attention_heads"],  # bug: the query heads
        rope_base=cfg["rope_theta"],
    )


def _tampered(before: dict, after: dict) -> tuple[str, str] | None:
    """(problem, message) if the fix changed arrays it should have left alone, else None."""
    for name in ("q", "k", "v"):
        a, b = np.asarray(before[name]), np.asarray(after[name])
        if a.shape != b.shape:
            extra = (
                " Repeating k's heads to match q turns GQA into MHA: the cache grows G-fold and the "
                "model's k is lost. Keep k as the K projection made it and fix num_kv_heads."
                if name in "kv"
                else ""
            )
            return "changed_shape", f"you changed {name}'s shape from {a.shape} to {b.shape}.{extra}"
        if str(b.dtype) != str(a.dtype):
            return "cast_activations", (
                f"you cast {name} from {a.dtype} to {b.dtype}. The model computes in "
                f"{a.dtype}; the cache stores what the model computes, so cast the "
                "pools to the activations' dtype instead."
            )
        if not np.array_equal(a, b):
            return "changed_values", f"you changed the values of {name}; fix the call, not the data."
    for name in ("positions", "slots"):
        if not np.array_equal(np.asarray(before[name], np.int64), np.asarray(after[name], np.int64)):
            return "changed_values", (
                f"you changed the values of {name}: cast it with .astype(np.int32) and keep its values."
            )
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
            return "wrong_param", (
                f"{name} = {after.get(name)!r}, but SMALL_CONFIG gives {want}: read it from "
                "the config (num_kv_heads from num_key_value_heads)."
            )
    return None


def check_2(fix: Callable[[dict], dict]) -> Verdict:
    """Run the op on ``fix(broken_call())`` and say what still fails, or what the fix broke."""
    before = broken_call()
    after = guarded(2, fix, broken_call(), what="fix(broken_call())")
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
        raise ExerciseFailed(
            2,
            err.code,
            f"the op still fails with {err.code!r}:\n{err}\nWhat it means: {spec.meaning}\nThe fix: {spec.fix}",
        ) from None
    except TypeError as err:
        raise ExerciseFailed(2, "bad_kwargs", f"the op could not be called with your kwargs: {err}") from None
    wrong = _wrong_param(after)
    if wrong:
        raise ExerciseFailed(2, *wrong)
    ref = rope_pool_reference(
        *(after[n] for n in ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")), rope_base=after["rope_base"]
    )
    for got, want, x in zip(out[:2], ref[:2], (after["q"], after["k"])):  # within ropepool.tolerance
        assert error_ratio(np.asarray(got), want, x, after["positions"], "float16") <= 1
    slots = np.asarray(after["slots"])
    assert np.array_equal(np.asarray(out[2])[slots], np.asarray(out[1]))  # pool rows hold k_rot's bits
    return Verdict(
        2,
        True,
        "the call runs and matches the float64 reference: num_kv_heads from "
        "num_key_value_heads, pools in float16 like the activations, positions as int32.",
    )


def solution_2(kw: dict) -> dict:
    """The three fixes, each where the bug was made."""
    kw = dict(kw)
    kw["num_kv_heads"] = SMALL_CONFIG["num_key_value_heads"]  # not num_attention_heads
    kw["positions"] = kw["positions"].astype(np.int32)  # np.arange gave int64
    kw["k_pool"] = kw["k_pool"].astype(kw["k"].dtype)  # the cache stores the activations' dtype
    kw["v_pool"] = kw["v_pool"].astype(kw["v"].dtype)
    return kw
