"""Every bad input a catalogued error or a correct result, a kernel cache nobody else can
plant code in, a CLI that neither hangs nor dumps a traceback, threads that get correct results.

Each table names its cases; a bad input must end in the catalog's error with both pools unchanged,
a valid but awkward one in the result the plain call gives, bit for bit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from decimal import Decimal
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from helpers import bits

from ropepool import CATALOG, RopePoolError, Shapes, make_inputs, rope_pool_fused
from ropepool.models import ConfigError, RopeParams, from_config
from ropepool.reference import rope_pool_reference
from ropepool.tolerance import error_ratio
from ropepool.teaching.checks import expect_error
from ropepool.kernels import build

ROOT = Path(__file__).resolve().parent.parent
BASE = Shapes(tokens=3, num_qo_heads=4, num_kv_heads=2, head_dim=8, pool_rows=6)
ARRAYS = ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")
OUTPUTS = ("q_rot", "k_rot", "k_pool", "v_pool")


def _copy(kw: dict) -> dict:
    return {n: (np.array(x, copy=True) if isinstance(x, np.ndarray) else x) for n, x in kw.items()}


def _call(kw: dict, **opts):
    return rope_pool_fused(**kw, **opts)


# --- 1, 2: byte order and NumPy layouts ---------------------------------------------------------
# Each case rewrites some arrays into the same values in another layout; the call must give what
# the plain (native, row-contiguous) arrays give, and never read bytes of the wrong order.


def _swapped(x: np.ndarray) -> np.ndarray:
    return x.astype(x.dtype.newbyteorder("S"))


def _reversed_view(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x[::-1])[::-1]  # the same values, negative strides


def _unaligned(x: np.ndarray) -> np.ndarray:
    raw = np.zeros(x.nbytes + 1, np.uint8)
    out = raw[1:].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


def _strided(x: np.ndarray) -> np.ndarray:
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


LAYOUT_CASES = [
    ("big-endian q, k, v", ("q", "k", "v"), _swapped),
    ("big-endian positions", ("positions",), _swapped),
    ("big-endian slots (>i4 [256] wrote row 65536)", ("slots",), _swapped),
    ("negative strides q (x[::-1])", ("q",), _reversed_view),
    ("negative strides positions, slots", ("positions", "slots"), _reversed_view),
    ("Fortran-order k", ("k",), np.asfortranarray),
    ("every other element of a wider v", ("v",), _strided),
    ("unaligned q", ("q",), _unaligned),
    ("read-only v", ("v",), lambda x: np.frombuffer(x.tobytes(), x.dtype).reshape(x.shape)),
    ("big-endian pools (copied, not in place)", ("k_pool", "v_pool"), _swapped),
    ("negative-stride pools (copied, not in place)", ("k_pool", "v_pool"), _reversed_view),
]


def _layout_pair(names, change, dtype, P=300, slots=(256, -1, 7)):
    plain = make_inputs(Shapes(3, 4, 2, 8, P), dtype, kind="numpy", slots=list(slots))
    odd = _copy(plain)
    odd.update({n: change(plain[n]) for n in names})
    return plain, odd


# Pools written in place must be plain (test_inplace_refuses_odd_pools): odd pools only without inplace.
LAYOUT_CALLS = [
    pytest.param(*case, inplace, id=f"{case[0]}, {'inplace' if inplace else 'new pools'}")
    for case in LAYOUT_CASES
    for inplace in (False, True)
    if not (inplace and {"k_pool", "v_pool"} & set(case[1]))
]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("label, names, change, inplace", LAYOUT_CALLS)
def test_any_numpy_layout_gives_the_plain_result(backend, label, names, change, dtype, inplace):
    plain, odd = _layout_pair(names, change, dtype)
    want = _call(plain, backend=backend, inplace=inplace)
    got = _call(odd, backend=backend, inplace=inplace)
    for name, a, b in zip(OUTPUTS, got, want):
        np.testing.assert_array_equal(bits(a), bits(b), err_msg=name)
    if inplace:  # the very pools passed hold the rows; row 256 written, nothing past the pool
        np.testing.assert_array_equal(odd["k_pool"][256], got[1][0])


ODD_POOLS = [
    ("big-endian pools", _swapped),
    ("unaligned pools", _unaligned),
    ("negative-stride pools", _reversed_view),
]


@pytest.mark.parametrize("label, change", ODD_POOLS, ids=[c[0] for c in ODD_POOLS])
def test_inplace_refuses_odd_pools(backend, label, change):
    kw = make_inputs(BASE, "float32", kind="numpy", slots=[0, 2, 4])
    kw.update(k_pool=change(kw["k_pool"]), v_pool=change(kw["v_pool"]))
    before = [p.copy() for p in (kw["k_pool"], kw["v_pool"])]
    expect_error("inplace_unsupported", rope_pool_fused, **kw, backend=backend, inplace=True)
    for p, b in zip((kw["k_pool"], kw["v_pool"]), before):
        np.testing.assert_array_equal(bits(p), bits(b))


# --- 3: argument types and ranges ------------------------------------------------------------------

# rope_scaling dicts of each type, valid for BASE's head of 8 (4 pairs)
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
YARN_NO_ORIGINAL = {"rope_type": "yarn", "factor": 4.0}
LONGROPE = {
    "rope_type": "longrope",
    "original_max_position_embeddings": 4096,
    "short_factor": [1.0, 1.0, 1.5, 2.0],
    "long_factor": [1.0, 2.0, 3.0, 4.0],
}

ARGUMENT_CASES = [
    ("rope_base an int too large for a float", dict(rope_base=10**400), "rope_base"),
    ("rope_base so small its frequencies overflow", dict(rope_base=1e-300), "rope_base_range"),
    ("rope_base 1e-60: angles overflow float32", dict(rope_base=1e-60), "rope_base_range"),
    ("rope_base so large its frequencies underflow", dict(rope_base=1e300), "rope_base_range"),
    ("rope_base the smallest float", dict(rope_base=5e-324), "rope_base_range"),
    ("rope_base 1e-20: pairs turn faster than positions", dict(rope_base=1e-20), "rope_base_range"),
    ("rope_base a Decimal", dict(rope_base=Decimal("10000")), "rope_base"),
    ("rope_base complex", dict(rope_base=10000j), "rope_base"),
    ("rope_base a string", dict(rope_base="1e4"), "rope_base"),
    ("rope_base True", dict(rope_base=True), "rope_base"),
    ("num_qo_heads 4.0 (SGLang takes int only)", dict(num_qo_heads=4.0), "argument_type"),
    ("num_kv_heads 2.0", dict(num_kv_heads=2.0), "argument_type"),
    ("head_dim 8.0", dict(head_dim=8.0), "argument_type"),
    ("head_dim '8'", dict(head_dim="8"), "argument_type"),
    ("head_dim None", dict(head_dim=None), "argument_type"),
    ("num_kv_heads True", dict(num_kv_heads=True), "argument_type"),
    ("num_qo_heads np.float64(4)", dict(num_qo_heads=np.float64(4)), "argument_type"),
    ("check_values 'no'", dict(check_values="no"), "argument_type"),
    ("check_values None", dict(check_values=None), "argument_type"),
    ("inplace 1", dict(inplace=1), "argument_type"),
    ("backend ['cpu']", dict(backend=["cpu"]), "unknown_backend"),
    ("backend None", dict(backend=None), "unknown_backend"),
    ("backend b'mlx'", dict(backend=b"mlx"), "unknown_backend"),
    ("backend 'MLX '", dict(backend="MLX "), "unknown_backend"),
    # the RoPE keywords (BASE's head of 8: 4 pairs)
    ("is_neox 'False'", dict(is_neox="False"), "argument_type"),
    ("is_neox None", dict(is_neox=None), "argument_type"),
    ("is_neox 0", dict(is_neox=0), "argument_type"),
    ("rotary_dim np.float64(4)", dict(rotary_dim=np.float64(4)), "rotary_dim"),
    ("rotary_dim [4]", dict(rotary_dim=[4]), "rotary_dim"),
    ("rope_scaling 'linear'", dict(rope_scaling="linear"), "argument_type"),
    ("rope_scaling a list of pairs", dict(rope_scaling=[("rope_type", "linear"), ("factor", 2.0)]), "argument_type"),
    ("rope_scaling holding a set", dict(rope_scaling={"rope_type": "linear", "factor": {2.0}}), "argument_type"),
    (
        "max_position_embeddings [131072]",
        dict(rope_scaling=LONGROPE, max_position_embeddings=[131072]),
        "argument_type",
    ),
    (
        "max_position_embeddings np.array(131072)",
        dict(rope_scaling=LONGROPE, max_position_embeddings=np.array(131072)),
        "argument_type",
    ),
    (
        "max_position_embeddings 131072.0",
        dict(rope_scaling=LONGROPE, max_position_embeddings=131072.0),
        "argument_type",
    ),
    ("max_position_embeddings 0", dict(rope_scaling=YARN_NO_ORIGINAL, max_position_embeddings=0), "argument_type"),
    ("factor '2'", dict(rope_scaling={"rope_type": "linear", "factor": "2"}), "rope_factor"),
    ("factor True", dict(rope_scaling={"rope_type": "linear", "factor": True}), "rope_factor"),
    ("factor [2.0]", dict(rope_scaling={"rope_type": "linear", "factor": [2.0]}), "rope_factor"),
    ("llama3 low_freq_factor 'x'", dict(rope_scaling={**LLAMA3, "low_freq_factor": "x"}), "rope_scaling_value"),
    ("llama3 low_freq_factor 0", dict(rope_scaling={**LLAMA3, "low_freq_factor": 0}), "rope_scaling_value"),
    ("llama3 high_freq_factor == low", dict(rope_scaling={**LLAMA3, "high_freq_factor": 1.0}), "rope_scaling_value"),
    (
        "llama3 original '8192'",
        dict(rope_scaling={**LLAMA3, "original_max_position_embeddings": "8192"}),
        "rope_scaling_value",
    ),
    ("yarn rope_base 1.0", dict(rope_base=1.0, rope_scaling=YARN), "rope_scaling_value"),
    ("yarn beta_fast 0", dict(rope_scaling={**YARN, "beta_fast": 0}), "rope_scaling_value"),
    ("yarn beta_slow -1", dict(rope_scaling={**YARN, "beta_slow": -1}), "rope_scaling_value"),
    ("yarn beta_fast 'x'", dict(rope_scaling={**YARN, "beta_fast": "x"}), "rope_scaling_value"),
    ("yarn original 0", dict(rope_scaling={**YARN, "original_max_position_embeddings": 0}), "rope_scaling_value"),
    ("yarn attention_factor 'x'", dict(rope_scaling={**YARN, "attention_factor": "x"}), "rope_scaling_value"),
    (
        "yarn attention_factor 1e39 (past float32)",
        dict(rope_scaling={**YARN, "attention_factor": 1e39}),
        "rope_scaling_value",
    ),
    ("yarn attention_factor 1e300", dict(rope_scaling={**YARN, "attention_factor": 1e300}), "rope_scaling_value"),
    (
        "yarn attention_factor 1e-300 (zero in float32)",
        dict(rope_scaling={**YARN, "attention_factor": 1e-300}),
        "rope_scaling_value",
    ),
    (
        "longrope attention_factor 1e39",
        dict(rope_scaling={**LONGROPE, "attention_factor": 1e39}, max_position_embeddings=131072),
        "rope_scaling_value",
    ),
    (
        "yarn mscale_all_dim -1",
        dict(rope_scaling={**YARN, "factor": 1e6, "mscale_all_dim": -1.0}),
        "rope_scaling_value",
    ),
    (
        "longrope original 1",
        dict(rope_scaling={**LONGROPE, "original_max_position_embeddings": 1}, max_position_embeddings=131072),
        "rope_scaling_value",
    ),
    (
        "longrope original '4096'",
        dict(rope_scaling={**LONGROPE, "original_max_position_embeddings": "4096"}, max_position_embeddings=131072),
        "rope_scaling_value",
    ),
    (
        "longrope attention_factor [1.0]",
        dict(rope_scaling={**LONGROPE, "attention_factor": [1.0]}, max_position_embeddings=131072),
        "rope_scaling_value",
    ),
    (
        "longrope factors strings",
        dict(rope_scaling={**LONGROPE, "long_factor": ["2.0"] * 4}, max_position_embeddings=131072),
        "longrope_factors",
    ),
    (
        "longrope factors nested",
        dict(rope_scaling={**LONGROPE, "long_factor": [[2.0]] * 4}, max_position_embeddings=131072),
        "longrope_factors",
    ),
    (
        "longrope factor True",
        dict(rope_scaling={**LONGROPE, "long_factor": [2.0, True, 2.0, 2.0]}, max_position_embeddings=131072),
        "longrope_factors",
    ),
    (
        "longrope factors a 2-D array",
        dict(rope_scaling={**LONGROPE, "long_factor": np.full((4, 1), 2.0)}, max_position_embeddings=131072),
        "longrope_factors",
    ),
]


@pytest.mark.parametrize("kind", ["mlx", "numpy"])
@pytest.mark.parametrize("label, change, code", ARGUMENT_CASES, ids=[c[0] for c in ARGUMENT_CASES])
def test_bad_arguments_are_catalogued(label, change, code, kind):
    kw = make_inputs(BASE, "float32", kind=kind, slots=[0, 2, 4])
    before = [bits(kw[n]) for n in ("k_pool", "v_pool")]
    with pytest.raises(RopePoolError) as info:
        rope_pool_fused(**{**kw, **change})
    assert info.value.code == code, str(info.value)
    assert code in CATALOG
    for n, b in zip(("k_pool", "v_pool"), before):
        np.testing.assert_array_equal(bits(kw[n]), b)


GOOD_ARGUMENTS = [
    ("NumPy integer head counts", dict(num_qo_heads=np.int64(4), num_kv_heads=np.int32(2), head_dim=np.int16(8))),
    ("np.float32 rope_base", dict(rope_base=np.float32(10000.0))),
    ("int rope_base", dict(rope_base=500000)),
    ("rope_base 1.0: no rotation frequency below 1", dict(rope_base=1.0)),
    ("np.bool_ flags", dict(check_values=np.bool_(True))),
]


@pytest.mark.parametrize("label, change", GOOD_ARGUMENTS, ids=[c[0] for c in GOOD_ARGUMENTS])
def test_valid_argument_kinds_still_run(label, change):
    out = rope_pool_fused(**{**make_inputs(BASE, "float32", slots=[0, 2, 4]), **change})
    assert all(np.isfinite(np.array(o)).all() for o in out[:2])


# NumPy spellings of the RoPE keywords, and the plain Python ones they must equal bit for bit
NUMPY_SPELLINGS = [
    ("rotary_dim np.int64(4)", dict(rotary_dim=np.int64(4)), dict(rotary_dim=4)),
    ("is_neox np.bool_(False)", dict(is_neox=np.bool_(False)), dict(is_neox=False)),
    (
        "factor np.float32(2)",
        dict(rope_scaling={"rope_type": "linear", "factor": np.float32(2)}),
        dict(rope_scaling={"rope_type": "linear", "factor": 2.0}),
    ),
    (
        "llama3 numbers np.int64",
        dict(
            rope_scaling={**LLAMA3, "low_freq_factor": np.int64(1), "original_max_position_embeddings": np.int64(8192)}
        ),
        dict(rope_scaling=LLAMA3),
    ),
    (
        "yarn numbers NumPy",
        dict(rope_scaling={**YARN, "factor": np.float64(4), "beta_fast": np.int32(32)}),
        dict(rope_scaling={**YARN, "beta_fast": 32}),
    ),
    (
        "longrope factor arrays, max_position_embeddings np.int64",
        dict(
            rope_scaling={
                **LONGROPE,
                "short_factor": np.array(LONGROPE["short_factor"], np.float32),
                "long_factor": np.array(LONGROPE["long_factor"]),
            },
            max_position_embeddings=np.int64(131072),
        ),
        dict(rope_scaling=LONGROPE, max_position_embeddings=131072),
    ),
    (
        "longrope factor tuples of ints",
        dict(rope_scaling={**LONGROPE, "long_factor": (1, 2, 3, 4)}, max_position_embeddings=131072),
        dict(rope_scaling=LONGROPE, max_position_embeddings=131072),
    ),
]


@pytest.mark.parametrize("label, numpy_kw, plain_kw", NUMPY_SPELLINGS, ids=[c[0] for c in NUMPY_SPELLINGS])
def test_numpy_spellings_of_the_rope_keywords_give_the_plain_result(label, numpy_kw, plain_kw):
    kw = make_inputs(BASE, "float32", slots=[0, 2, 4], positions=[0, 5000, 70000])
    for got, want in zip(rope_pool_fused(**kw, **numpy_kw), rope_pool_fused(**kw, **plain_kw)):
        np.testing.assert_array_equal(bits(got), bits(want))


@pytest.mark.parametrize(
    "plain, other",
    [(1.0, True), (2, Decimal(2)), (2.0, Decimal("2.0"))],
    ids=["True after 1.0", "Decimal(2) after 2", "Decimal('2.0') after 2.0"],
)
def test_a_value_refused_alone_is_refused_where_an_equal_number_was_cached(plain, other):
    """True == 1 and Decimal(2) == 2 in Python, with equal hashes: what is refused on a fresh cache must
    not find the table cached for the plain number."""
    kw = make_inputs(BASE, "float32", slots=[0, 2, 4])
    rope_pool_fused(**kw, rope_scaling={"rope_type": "linear", "factor": plain})
    with pytest.raises(RopePoolError) as info:
        rope_pool_fused(**kw, rope_scaling={"rope_type": "linear", "factor": other})
    assert info.value.code == "rope_factor"


# from_config: every bad RoPE field a one-line ConfigError naming its field
LLAMA_CONFIG = {"num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "rope_theta": 500000.0}
LONGROPE_64 = {
    "rope_type": "longrope",
    "original_max_position_embeddings": 4096,
    "short_factor": [1.0] * 64,
    "long_factor": [2.0] * 64,
}
CONFIG_CASES = [
    ("rope_scaling 'linear'", dict(rope_scaling="linear"), ("rope_scaling",), "rope_scaling must be a dict"),
    ("rope_parameters a list", dict(rope_parameters=[10000.0]), ("rope_parameters",), "rope_parameters must be a dict"),
    (
        "factor '2'",
        dict(rope_scaling={"rope_type": "linear", "factor": "2"}),
        ("rope_scaling",),
        "needs a factor > 0, got '2'",
    ),
    (
        "yarn beta_fast 'x'",
        dict(rope_scaling={**YARN, "beta_fast": "x"}),
        ("rope_scaling",),
        "needs beta_fast > 0, got 'x'",
    ),
    ("yarn beta_fast 0", dict(rope_scaling={**YARN, "beta_fast": 0}), ("rope_scaling",), "needs beta_fast > 0, got 0"),
    ("rope_theta 1e-300: frequencies past float32", dict(rope_theta=1e-300), ("rope_theta",), "rope_base"),
    (
        "yarn rope_theta 1",
        dict(rope_theta=1.0, rope_scaling=YARN),
        ("rope_theta", "rope_scaling"),
        "needs rope_base != 1",
    ),
    (
        "longrope original 1 at the top level",
        dict(
            rope_scaling={k: v for k, v in LONGROPE_64.items() if k != "original_max_position_embeddings"},
            original_max_position_embeddings=1,
            max_position_embeddings=131072,
        ),
        ("original_max_position_embeddings",),
        "needs original_max_position_embeddings > 1, got 1",
    ),
    (
        "longrope factors strings",
        dict(rope_scaling={**LONGROPE_64, "long_factor": ["2"] * 64}, max_position_embeddings=131072),
        ("rope_scaling",),
        "got factor 0 = '2'",
    ),
    (
        "max_position_embeddings a list",
        dict(rope_scaling=LONGROPE_64, max_position_embeddings=[131072]),
        ("max_position_embeddings",),
        "max_position_embeddings must be a positive integer",
    ),
    ("rotary_dim '32'", dict(rotary_dim="32"), ("rotary_dim",), "rotary_dim must be a positive integer"),
]


@pytest.mark.parametrize("label, change, fields, phrase", CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_bad_rope_configs_are_config_errors(label, change, fields, phrase):
    with pytest.raises(ConfigError) as info:
        from_config({**LLAMA_CONFIG, **change})
    assert info.value.fields == fields and phrase in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


def test_a_field_only_some_scaling_types_read_is_not_checked_for_the_others():
    """linear and llama3 never read max_position_embeddings: a float there (as some hand-written
    configs have) is no reason to refuse them; yarn and longrope read it and refuse it."""
    p = from_config(
        {**LLAMA_CONFIG, "max_position_embeddings": 4096.0, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    )
    assert p.rope_scaling == {"rope_type": "linear", "factor": 2.0} and p.max_position_embeddings is None
    assert any("max_position_embeddings 4096.0 ignored" in n for n in p.notes)
    with pytest.raises(ConfigError) as info:
        from_config({**LLAMA_CONFIG, "max_position_embeddings": 4096.0, "rope_scaling": LONGROPE_64})
    assert info.value.fields == ("max_position_embeddings",)


def test_from_config_takes_numpy_values():
    numpy_config = {
        "num_attention_heads": np.int64(32),
        "num_key_value_heads": np.int32(8),
        "hidden_size": np.int64(4096),
        "rope_theta": np.float32(500000.0),
        "max_position_embeddings": np.int64(131072),
        "rope_scaling": {**LONGROPE_64, "long_factor": np.full(64, 2.0)},
    }
    p = from_config(numpy_config)
    assert (
        p.rope() == from_config({**LLAMA_CONFIG, "rope_scaling": LONGROPE_64, "max_position_embeddings": 131072}).rope()
    )


def test_from_config_lets_an_uncatalogued_error_through(monkeypatch):
    """Only the catalog's errors become ConfigErrors; any other is a bug, raised as it is."""

    def broken(self):
        raise ValueError("not from the catalog")

    monkeypatch.setattr(RopeParams, "rope", broken)
    with pytest.raises(ValueError, match="not from the catalog") as info:
        from_config(LLAMA_CONFIG)
    assert not isinstance(info.value, ConfigError)


# --- 4: valid calls must not fail: empty pools, empty calls -------------------------------------

EMPTY_CASES = [
    ("P = 0, every slot skipped", Shapes(3, 4, 2, 8, 0), [-1, -1, -1]),
    ("P = 0, slots past the (empty) pool", Shapes(3, 4, 2, 8, 0), [0, 5, -1]),
    ("P = 0, T = 0", Shapes(0, 4, 2, 8, 0), []),
    ("T = 0, P = 6", Shapes(0, 4, 2, 8, 6), []),
    ("T = 1, P = 1, MQA", Shapes(1, 4, 1, 8, 1), [0]),
]


@pytest.mark.parametrize("check_values", [True, False])
@pytest.mark.parametrize("inplace", [False, True], ids=["new pools", "inplace"])
@pytest.mark.parametrize("label, shapes, slots", EMPTY_CASES, ids=[c[0] for c in EMPTY_CASES])
def test_empty_and_tiny_calls_run(backend, label, shapes, slots, inplace, check_values):
    kw = make_inputs(shapes, "float32", kind="numpy", slots=slots)
    if check_values and any(s >= shapes.pool_rows for s in slots):
        expect_error("slot_out_of_range", rope_pool_fused, **kw, backend=backend, inplace=inplace)
        return
    want_k, want_v = kw["k_pool"].copy(), kw["v_pool"].copy()  # before the call: inplace writes kw's pools
    q_rot, k_rot, k_pool, v_pool = rope_pool_fused(**kw, backend=backend, inplace=inplace, check_values=check_values)
    assert q_rot.shape == kw["q"].shape and k_pool.shape == (shapes.pool_rows, shapes.num_kv_heads, 8)
    ref_q, ref_k, _, _ = rope_pool_reference(
        *(kw[n] for n in ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")), rope_base=kw["rope_base"]
    )
    for got, want, x in ((q_rot, ref_q, kw["q"]), (k_rot, ref_k, kw["k"])):
        assert error_ratio(got, want, x, kw["positions"], "float32") <= 1
    for t, s in enumerate(slots):  # each token in range wrote its row; every other row kept its bits
        if 0 <= s < shapes.pool_rows:
            want_k[s], want_v[s] = np.asarray(k_rot)[t], kw["v"][t]
    np.testing.assert_array_equal(np.asarray(k_pool), want_k)
    np.testing.assert_array_equal(np.asarray(v_pool), want_v)


# --- 5: duplicate slots with check_values=False: the last token wins, on every backend -----------

DUPLICATE_CASES = [
    ("two tokens, one row", [2, 2, 4, 5], 6),
    ("three tokens, one row", [1, 1, 1, 5], 6),
    ("a skipped token and a duplicate", [-1, 3, 3, 0], 6),
    ("interleaved duplicates", [0, 5, 0, 5], 6),
    ("a duplicate out of range writes nothing", [7, 7, 1, 1], 6),
    ("row 0 twice, a skip aimed at row 0 too", [0, -1, 0, 2], 6),
    ("80 tokens over 10 rows (past PAIRWISE_TOKENS: the sort)", [(7 * t) % 10 - (t % 9 == 0) for t in range(80)], 12),
]


@pytest.mark.parametrize("kind", ["mlx", "numpy"])
@pytest.mark.parametrize("inplace", [False, True], ids=["new pools", "inplace"])
@pytest.mark.parametrize("label, slots, P", DUPLICATE_CASES, ids=[c[0] for c in DUPLICATE_CASES])
def test_duplicate_slots_last_token_wins(backend, label, slots, P, inplace, kind):
    kw = make_inputs(Shapes(len(slots), 4, 2, 8, P), "float16", kind=kind, slots=slots)
    if inplace and kind == "mlx" and mx.default_device() != mx.cpu:
        pytest.skip("in-place mx.array pools need MLX's CPU device")
    expect_error("duplicate_slot" if max(slots) < P else "slot_out_of_range", rope_pool_fused, **kw)
    want_k, want_v = np.array(kw["k_pool"]), np.array(kw["v_pool"])
    v = np.array(kw["v"])
    _, k_rot, k_pool, v_pool = rope_pool_fused(**kw, backend=backend, inplace=inplace, check_values=False)
    k_rot = np.array(k_rot)
    for t, s in enumerate(slots):  # in token order: the last writer of a row stays
        if 0 <= s < P:
            want_k[s], want_v[s] = k_rot[t], v[t]
    np.testing.assert_array_equal(bits(np.array(k_pool)), bits(want_k))
    np.testing.assert_array_equal(bits(np.array(v_pool)), bits(want_v))


# --- 6: SGLang's C++-side checks are RuntimeErrors there, so they are here too -----------------

RUNTIME_CODES = ["index_dtype", "head_dim_odd", "unsupported_dtype"]


@pytest.mark.parametrize("code", RUNTIME_CODES)
def test_sglang_cpp_checks_are_runtime_errors(code):
    with pytest.raises(RuntimeError) as info:
        rope_pool_fused(**CATALOG[code].trigger())
    assert isinstance(info.value, RopePoolError) and isinstance(info.value, ValueError)
    assert info.value.code == code


def test_only_sglang_cpp_codes_are_runtime_errors():
    assert {c for c, s in CATALOG.items() if s.origin == "sglang-c++"} == set(RUNTIME_CODES)
    err = expect_error("k_shape", rope_pool_fused, **CATALOG["k_shape"].trigger())
    assert not isinstance(err, RuntimeError)


# --- 7: inplace=True refuses inputs that share memory with a pool ---------------------------------


def _np_overlap(name_of_input: str, pool: str):
    def build(kw):
        P = kw[pool]
        shape = kw[name_of_input].shape
        n = int(np.prod(shape))
        view = P.reshape(-1)[:n].reshape(shape) if n <= P.size else None
        return {name_of_input: view}

    return build


OVERLAP_CASES = [
    ("v a view of k_pool rows", "numpy", lambda kw: {"v": kw["k_pool"][:3]}),
    ("v a view of v_pool rows", "numpy", lambda kw: {"v": kw["v_pool"][3:]}),
    ("k a view of v_pool rows", "numpy", lambda kw: {"k": kw["v_pool"][1:4]}),
    ("q over all of k_pool's memory", "numpy", _np_overlap("q", "k_pool")),
    (
        "slots the bits of a v_pool row",
        "numpy",
        lambda kw: {"slots": _zeroed(kw["v_pool"]).reshape(-1).view(np.int32)[:3]},
    ),
    ("v a strided view of k_pool", "numpy", lambda kw: {"v": kw["k_pool"][::2]}),
    ("mx: v a slice of k_pool", "mlx", lambda kw: {"v": kw["k_pool"][:3]}),
    ("mx: k a slice of v_pool", "mlx", lambda kw: {"k": kw["v_pool"][2:5]}),
]


def _zeroed(pool: np.ndarray) -> np.ndarray:
    pool[...] = 0
    return pool


@pytest.mark.parametrize("label, kind, change", OVERLAP_CASES, ids=[c[0] for c in OVERLAP_CASES])
def test_inplace_refuses_inputs_sharing_a_pool(backend, label, kind, change):
    if kind == "mlx" and mx.default_device() != mx.cpu:
        pytest.skip("in-place mx.array pools need MLX's CPU device")
    kw = make_inputs(BASE, "float32", kind=kind, slots=[0, 2, 4])
    kw.update(change(kw))
    before = [bits(kw[n]) for n in ("k_pool", "v_pool")]
    err = expect_error("inplace_unsupported", rope_pool_fused, **kw, backend=backend, inplace=True, check_values=False)
    assert "shares memory with" in err.got
    for n, b in zip(("k_pool", "v_pool"), before):
        np.testing.assert_array_equal(bits(kw[n]), b)


def test_inplace_accepts_disjoint_slices_of_one_buffer(backend):
    """Overlap means shared memory, not a shared base: pools and inputs cut from one arena are fine."""
    kw = make_inputs(BASE, "float32", kind="numpy", slots=[0, 2, 4])
    arena = np.concatenate([kw["k_pool"], kw["v_pool"], kw["v"]])  # [P + P + T, Hkv, D]
    k_pool, v_pool, v = arena[:6], arena[6:12], arena[12:]
    _, k_rot, _, _ = rope_pool_fused(
        **{**kw, "k_pool": k_pool, "v_pool": v_pool, "v": v}, backend=backend, inplace=True
    )
    np.testing.assert_array_equal(k_pool[2], k_rot[1])
    np.testing.assert_array_equal(v_pool[4], kw["v"][2])


# --- 8, 9: the kernel cache ------------------------------------------------------------------------

TINY = 'extern "C" int ropepool_tiny() { return 7; }\n'
TINY_CALL = "from ropepool.kernels import build; print(build.shared_library('tiny', {src!r}, ['-O0']).ropepool_tiny())"


def _python(code: str, env: dict, timeout: float = 240) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=timeout)


needs_cxx = pytest.mark.skipif(build.compiler() is None, reason="no C++ compiler")


def _truncate(lib: Path):
    lib.write_bytes(lib.read_bytes()[: lib.stat().st_size // 3])


def _foreign(lib: Path):
    cxx = build.compiler()
    src = lib.parent / "foreign.cpp"
    src.write_text('extern "C" int something_else() { return 1; }\n')
    subprocess.run([cxx, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)


def _garbage(lib: Path):
    lib.write_bytes(b"\x7fELF" + b"\x00" * 64)


def _symlink(lib: Path):
    other = lib.parent / "elsewhere.so"
    lib.rename(other)
    lib.symlink_to(other)


CORRUPT_LIBRARY = [
    ("truncated library (SIGBUS when loaded)", _truncate),
    ("foreign library under our name", _foreign),
    ("garbage with an ELF magic", _garbage),
    ("library a symlink", _symlink),
    ("digest missing", lambda lib: build.digest_path(lib).unlink()),
    ("digest of other bytes", lambda lib: build.digest_path(lib).write_text("0" * 64)),
]


@needs_cxx
@pytest.mark.parametrize("label, corrupt", CORRUPT_LIBRARY, ids=[c[0] for c in CORRUPT_LIBRARY])
def test_a_library_we_did_not_verify_is_rebuilt_not_loaded(tmp_path, label, corrupt):
    cache = tmp_path / "cache"
    env = {"ROPEPOOL_KERNEL_CACHE": str(cache)}
    first = _python(TINY_CALL.format(src=TINY), env)
    assert first.returncode == 0 and first.stdout.strip() == "7", first.stderr
    (lib,) = cache.glob("tiny_*.so")
    corrupt(lib)
    again = _python(TINY_CALL.format(src=TINY), env)
    assert again.returncode == 0 and again.stdout.strip() == "7", (again.returncode, again.stderr[-2000:])
    assert build.verified(lib) and not lib.is_symlink()


@pytest.fixture(scope="module")
def host_cache(tmp_path_factory):
    """A kernel cache holding the verified host build (the 'cpu' backend)."""
    from ropepool.kernels import host

    if host.unavailable_reason() is not None:
        pytest.skip(host.unavailable_reason())
    cache = tmp_path_factory.mktemp("host-cache")
    out = _python(
        "from ropepool.kernels import host; print(host.unavailable_reason())",
        {"ROPEPOOL_KERNEL_CACHE": str(cache)},
        timeout=600,
    )
    assert out.stdout.strip().splitlines()[-1] == "None", out.stderr  # after the build's progress lines
    return cache


def _plant(lib: Path, content: bytes):
    """What another build (or a user) left: bytes and a digest that vouches for them."""
    lib.write_bytes(content)
    build.digest_path(lib).write_text(build._sha256(lib))


PLANTED = [
    ("an ELF without ropepool_rope, digest matching", "no ropepool_rope"),
    ("not a library at all, digest matching", "loading"),
]


@needs_cxx
@pytest.mark.parametrize("label, reason", PLANTED, ids=[c[0] for c in PLANTED])
def test_a_library_that_fails_to_load_falls_back_to_mlx(tmp_path, host_cache, label, reason):
    cache = tmp_path / "cache"
    shutil.copytree(host_cache, cache)
    os.chmod(cache, 0o700)
    for lib in cache.glob("ropepool_host_*.so"):
        if "ELF" in label:
            _foreign(lib)
            _plant(lib, lib.read_bytes())
        else:
            _plant(lib, b"not a shared library\n" * 100)
    code = textwrap.dedent("""
        import ropepool
        from ropepool.cli.doctor import report
        print(report())
        kw = ropepool.make_inputs(ropepool.Shapes(2, 4, 2, 8, 4), slots=[0, 3])
        ropepool.rope_pool_fused(**kw)
        print("auto picks", ropepool.best_backend())
    """)
    out = _python(code, {"ROPEPOOL_KERNEL_CACHE": str(cache)})
    assert out.returncode == 0, out.stderr[-2000:]
    cpu_line = next(line for line in out.stdout.splitlines() if line.startswith("backend cpu"))
    assert "does not run" in cpu_line and reason in cpu_line, cpu_line
    assert "auto picks mlx" in out.stdout


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_cache_dir_is_created_private(tmp_path, monkeypatch):
    monkeypatch.setenv("ROPEPOOL_KERNEL_CACHE", str(tmp_path / "a" / "cache"))
    assert build.cache_dir() == tmp_path / "a" / "cache" and _mode(tmp_path / "a" / "cache") == 0o700


def test_own_readable_cache_dir_is_narrowed_to_0700(tmp_path, monkeypatch):
    (tmp_path / "cache").mkdir(mode=0o755)
    os.chmod(tmp_path / "cache", 0o755)
    monkeypatch.setenv("ROPEPOOL_KERNEL_CACHE", str(tmp_path / "cache"))
    build.cache_dir()
    assert _mode(tmp_path / "cache") == 0o700


def _chown_other(path: Path):
    if os.geteuid() != 0:
        pytest.skip("making a folder another user's needs root")
    os.chown(path, 65534, 65534)


BAD_CACHE_DIRS = [
    ("owned by another user", lambda p: (p.mkdir(mode=0o700), _chown_other(p)), "owned by uid"),
    ("writable by everyone", lambda p: (p.mkdir(), os.chmod(p, 0o777)), "written by others"),
    ("writable by its group", lambda p: (p.mkdir(), os.chmod(p, 0o770)), "written by others"),
    (
        "a symlink to a private folder",
        lambda p: ((p.parent / "real").mkdir(mode=0o700), p.symlink_to(p.parent / "real")),
        "symlink",
    ),
    ("a regular file", lambda p: p.write_text("x"), "unusable"),
]


@needs_cxx
@pytest.mark.parametrize("label, make, message", BAD_CACHE_DIRS, ids=[c[0] for c in BAD_CACHE_DIRS])
def test_cache_dir_not_ours_alone_is_refused(tmp_path, monkeypatch, label, make, message):
    path = tmp_path / "cache"
    make(path)
    monkeypatch.setenv("ROPEPOOL_KERNEL_CACHE", str(path))
    with pytest.raises(RuntimeError, match=message):
        build.cache_dir()
    reason = build.unavailable(lambda: build.shared_library("tiny", TINY, ["-O0"]), "the tiny library cannot build")
    assert reason is not None and message in reason


def _shared(mode: int, owner: int | None = None):
    """A folder of ``mode`` (and ``owner``) above the cache: what another user can or cannot swap."""

    def make(tmp: Path) -> Path:
        (tmp / "shared").mkdir()
        os.chmod(tmp / "shared", mode)
        if owner is not None:
            _chown_other(tmp / "shared")
        return tmp / "shared" / "me" / "cache"

    return make


#: label, the folder above the cache, and the refusal's reason (None: accepted).
CACHE_ANCESTORS = [
    ("under a folder everyone can write", _shared(0o777), "can be written by others (mode 777, not sticky)"),
    ("under a folder its group can write", _shared(0o775), "can be written by others (mode 775, not sticky)"),
    ("under another user's folder", _shared(0o755, owner=65534), "is owned by uid 65534"),
    ("under a sticky folder, as /tmp", _shared(0o1777), None),
    ("under a private folder", _shared(0o700), None),
]


@pytest.mark.parametrize("which", ["kernel", "model"])
@pytest.mark.parametrize("label, make, reason", CACHE_ANCESTORS, ids=[c[0] for c in CACHE_ANCESTORS])
def test_cache_under_a_folder_others_can_swap_is_refused(tmp_path, monkeypatch, label, make, reason, which):
    from ropepool.loaders import fetch

    path = make(tmp_path)
    monkeypatch.setenv("ROPEPOOL_KERNEL_CACHE" if which == "kernel" else "ROPEPOOL_MODEL_CACHE", str(path))
    cache_dir = build.cache_dir if which == "kernel" else fetch.cache_dir
    if reason is None:
        assert cache_dir() == path and _mode(path) == 0o700
        return
    with pytest.raises(RuntimeError if which == "kernel" else fetch.ModelCacheError) as err:
        cache_dir()
    assert f"{which} cache {path} is refused: {tmp_path / 'shared'} above it {reason}" in str(err.value)


def test_cache_reached_through_a_link_is_used_at_its_real_path(tmp_path, monkeypatch):
    """A link above the cache may be swapped later: the folder is used by its real path, checked."""
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.setenv("ROPEPOOL_KERNEL_CACHE", str(tmp_path / "link" / "cache"))
    assert build.cache_dir() == tmp_path / "real" / "cache"


def test_temp_fallback_is_per_user_and_refused_when_planted(tmp_path, monkeypatch):
    """~/.cache unusable: the fallback in the temp dir is this user's own; another user's is refused."""
    monkeypatch.delenv("ROPEPOOL_KERNEL_CACHE", raising=False)
    (tmp_path / "home").write_text("a file, not a folder")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(build.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    path = build.cache_dir()
    assert path == tmp_path / "tmp" / f"ropepool-kernels-{os.geteuid()}" and _mode(path) == 0o700
    _chown_other(path)
    with pytest.raises(RuntimeError, match="owned by uid"):
        build.cache_dir()


@needs_cxx
def test_lock_file_symlink_is_not_followed(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("ROPEPOOL_KERNEL_CACHE", str(cache))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    build.shared_library("tiny", TINY, ["-O0"])  # learn the library's name
    (lib,) = cache.glob("tiny_*.so")
    lib.unlink()
    lib.with_suffix(".lock").unlink()
    lib.with_suffix(".lock").symlink_to(victim)
    reason = build.unavailable(lambda: build.shared_library("tiny", TINY, ["-O0"]), "tiny cannot build")
    assert reason is not None and "lock file" in reason
    assert victim.read_text() == "precious"


# --- background builds: one compiler at a time, a bounded cache, a timeout, the whole message -------


def _fake_compiler(tmp: Path, body: str) -> Path:
    """A shell script standing in for g++ (``body`` runs; arguments ignored)."""
    script = tmp / "fake-cxx"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script


QUEUE = textwrap.dedent("""
    import os, sys
    from ropepool.kernels import host
    from ropepool.rope import plain
    host._library()  # the run-time build, with the real compiler
    os.environ["CXX"] = sys.argv[1]  # every specialisation now runs the fake one
    for D in range(2, 82, 2):  # 40 new shapes
        host.kernel(host.shape_key(4, 2, D, plain(D, 10000.0)))
    host.wait_for_builds()
    print("queued", host.MAX_SPECIALISED)
""")


@needs_cxx
def test_new_shapes_build_one_at_a_time_and_at_most_max_specialised(tmp_path):
    """40 new shapes: one compiler at a time, and no more builds than MAX_SPECIALISED shapes allow
    (each shape tries -march=native, then a portable build)."""
    log = tmp_path / "log"
    cxx = _fake_compiler(
        tmp_path,
        f'mkdir "{tmp_path}/running.$$"\nls -d "{tmp_path}"/running.* | wc -l >> "{log}"\n'
        f'sleep 0.2\nrmdir "{tmp_path}/running.$$"\necho "fake: no" >&2\nexit 1\n',
    )
    out = subprocess.run(
        [sys.executable, "-c", QUEUE, str(cxx)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT), "ROPEPOOL_MAX_SPECIALISED": "8"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    limit = int(out.stdout.split()[-1])
    assert limit == 8
    running = [int(n) for n in log.read_text().split()]
    assert max(running) == 1, running
    assert 0 < len(running) <= 2 * limit, running


@needs_cxx
def test_a_hanging_compiler_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("ROPEPOOL_KERNEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", str(_fake_compiler(tmp_path, f'echo $$ > "{tmp_path}/pid"\nsleep 60\n')))
    monkeypatch.setenv("ROPEPOOL_BUILD_TIMEOUT", "1")
    with pytest.raises(build.CompileError, match=r"took over 1 s and was stopped \(set ROPEPOOL_BUILD_TIMEOUT"):
        build.shared_library("tiny", TINY, ["-O0"])
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@needs_cxx
def test_a_failed_build_gives_the_compilers_whole_message(tmp_path, monkeypatch):
    monkeypatch.setenv("ROPEPOOL_KERNEL_CACHE", str(tmp_path / "cache"))
    broken = "".join(f"int f{i}() {{ return undeclared_{i}; }}\n" for i in range(200))
    with pytest.raises(build.CompileError) as err:
        build.shared_library("broken", broken, ["-O0"])
    message = str(err.value)
    assert len(message) > 4000 and "undeclared_0" in message and "undeclared_199" in message


@needs_cxx
def test_the_kernel_cache_keeps_the_most_recently_used_libraries(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("ROPEPOOL_KERNEL_CACHE", str(cache))
    monkeypatch.setattr(build, "MAX_LIBRARIES", 3)
    sources = [f'extern "C" int ropepool_tiny() {{ return {i}; }}\n' for i in range(5)]
    for i, src in enumerate(sources):
        assert build.shared_library(f"tiny{i}", src, ["-O0"]).ropepool_tiny() == i
        if i == 2:
            build.shared_library("tiny0", sources[0], ["-O0"])  # used again: more recent than tiny1
    kept = sorted(p.name.split("_")[0] for p in cache.glob("*.so"))
    assert kept == ["tiny0", "tiny3", "tiny4"], kept
    assert len(list(cache.glob("*.sha256"))) == 3


KILLED_BUILD = (
    "from ropepool.kernels import build; build.shared_library('tiny', 'int x;', ['-O0'])"  # the fake compiler sleeps
)


@needs_cxx
def test_a_build_folder_left_by_a_killed_process_is_removed_by_a_later_build(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("ROPEPOOL_KERNEL_CACHE", str(cache))
    started = tmp_path / "started"
    sleeper = _fake_compiler(tmp_path, f'echo $$ > "{started}.tmp"\nmv "{started}.tmp" "{started}"\nexec sleep 60\n')
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_BUILD],
        env={**os.environ, "PYTHONPATH": str(ROOT), "CXX": str(sleeper), "ROPEPOOL_KERNEL_CACHE": str(cache)},
    )
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()  # SIGKILL mid-compile: no cleanup runs
    proc.wait()
    os.kill(int(started.read_text()), signal.SIGKILL)  # the compiler, in its own session
    left = [p for p in cache.glob("tmp*") if p.is_dir()]
    assert len(left) == 1 and any(left[0].glob("*.cpp")), left
    an_hour_ago = time.time() - 3600
    os.utime(left[0], (an_hour_ago, an_hour_ago))
    live = cache / "tmp_a_build_running_now"  # another process's build in progress: kept
    live.mkdir()
    assert build.shared_library("tiny", TINY, ["-O0"]).ropepool_tiny() == 7
    assert not left[0].exists() and live.is_dir()


# --- 11: the command line ---------------------------------------------------------------------------


def _cli(args: list[str], env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ropepool", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "fifo")
    return str(tmp / "fifo")


def _folder(tmp: Path) -> str:
    (tmp / "model").mkdir()
    return str(tmp / "model")


def _big(tmp: Path) -> str:
    (tmp / "config.json").write_text('{"x": "' + "y" * (2 << 20) + '"}')
    return str(tmp / "config.json")


def _a_file(tmp: Path) -> str:
    (tmp / "afile").write_text("x")
    return str(tmp / "afile")


def _config(**fields):
    """A config.json of Llama's heads with ``fields`` changed, in the test's folder."""

    def write(tmp: Path) -> str:
        (tmp / "config.json").write_text(json.dumps({**LLAMA_CONFIG, **fields}))
        return str(tmp / "config.json")

    return write


CLI_CASES = [
    ("preset typo suggests the closest", lambda t: ["check", "lama-3-8b"], 2, "did you mean 'llama-3-8b'"),
    ("preset typo names no other preset", lambda t: ["check", "mistral-7"], 2, "did you mean 'mistral-7b'"),
    (
        "preset in capitals",
        lambda t: ["check", "Llama-3-8B", "--tokens", "1", "--pool", "2"],
        0,
        "ran rope_pool_fused once",
    ),
    ("folder without config.json", lambda t: ["check", _folder(t)], 2, "without a config.json"),
    ("a FIFO", lambda t: ["check", _fifo(t)], 2, "not a regular file"),
    ("/dev/zero", lambda t: ["check", "/dev/zero"], 2, "not a regular file"),
    ("a 2 MiB config", lambda t: ["check", _big(t)], 2, "larger than"),
    ("rope_scaling 'linear'", lambda t: ["check", _config(rope_scaling="linear")(t)], 1, "rope_scaling must be a dict"),
    (
        "yarn beta_fast 'x'",
        lambda t: ["check", _config(rope_scaling={**YARN, "beta_fast": "x"})(t)],
        1,
        "needs beta_fast > 0",
    ),
    (
        "yarn rope_theta 1",
        lambda t: ["check", _config(rope_theta=1.0, rope_scaling=YARN)(t)],
        1,
        "needs rope_base != 1",
    ),
    (
        "longrope original 1",
        lambda t: [
            "check",
            _config(
                rope_scaling={**LONGROPE_64, "original_max_position_embeddings": 1}, max_position_embeddings=131072
            )(t),
        ],
        1,
        "needs original_max_position_embeddings > 1",
    ),
    ("bench --repeats 0", lambda t: ["bench", "--quick", "--repeats", "0", "--out", str(t)], 2, "--repeats must be"),
    ("bench --repeats -3", lambda t: ["bench", "--quick", "--repeats", "-3", "--out", str(t)], 2, "--repeats must be"),
    ("bench --out a file", lambda t: ["bench", "--quick", "--out", _a_file(t)], 2, "is not a folder"),
    ("bench --out under a file", lambda t: ["bench", "--quick", "--out", _a_file(t) + "/sub"], 2, "cannot create"),
    ("bench --out ''", lambda t: ["bench", "--quick", "--out", ""], 2, "must name a folder"),
    (
        "bench --readme missing",
        lambda t: ["bench", "--quick", "--out", str(t), "--readme", str(t / "no.md")],
        2,
        "cannot read it",
    ),
    (
        "bench --readme without markers",
        lambda t: ["bench", "--quick", "--out", str(t), "--readme", _a_file(t)],
        2,
        "needs one <!-- bench: start --> line",
    ),
]


@pytest.mark.parametrize("label, argv, status, message", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input_one_line_no_hang(tmp_path, label, argv, status, message):
    out = _cli(argv(tmp_path), timeout=120)
    assert out.returncode == status, (out.returncode, out.stdout[-500:], out.stderr[-1500:])
    assert "Traceback" not in out.stderr
    assert message in (out.stderr if status else out.stdout)
    if status:
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_doctor_does_not_claim_a_compiler_that_fails(tmp_path):
    out = _cli(["doctor"], env={"CXX": "false", "ROPEPOOL_KERNEL_CACHE": str(tmp_path / "c")})
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines() if line.startswith("kernel CPU check"))
    assert "does not build the kernel body" in line and "builds the kernel body as" not in line
    assert re.search(r"backend='auto' picks\s+mlx", out.stdout)


# --- 12: threads -----------------------------------------------------------------------------------

THREADS = textwrap.dedent("""
    import threading, numpy as np, ropepool
    from ropepool.reference import rope_pool_reference
    results = {}
    def work(i, backend):
        kw = ropepool.make_inputs(ropepool.Shapes(5, 4, 2, 8, 16), "float32", slots=[i, i + 1, -1, 15 - i, 8],
                                  positions=[i, 10 * i, 3, 7, 1000])
        for _ in range(20):
            out = ropepool.rope_pool_fused(**kw, backend=backend)
        ref = rope_pool_reference(*(kw[n] for n in ("q", "k", "v", "positions", "slots", "k_pool", "v_pool")),
                                  rope_base=kw["rope_base"])
        results[(i, backend)] = all(np.allclose(np.array(o), r, rtol=1e-4, atol=1e-4) for o, r in zip(out, ref))
    backends = [b for b in ("mlx", "cpu") if ropepool.available_backends()[b].available]
    threads = [threading.Thread(target=work, args=(i, b)) for i in range(4) for b in backends]
    for t in threads: t.start()
    for t in threads: t.join()
    print("correct", sum(results.values()), "of", len(threads), flush=True)
""")


def test_threads_get_correct_results():
    """Four threads per backend at once, each checked against the reference. The process may still
    abort at exit (MLX's, with plain mx.compile too: see docs/op.md); that is not asserted on."""
    out = _python(THREADS, {})
    line = next((line for line in out.stdout.splitlines() if line.startswith("correct")), out.stderr[-2000:])
    n = line.split()
    assert n[0] == "correct" and n[1] == n[3], line


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e400"])
def test_a_build_timeout_that_is_no_finite_number_keeps_the_default(monkeypatch, value):
    monkeypatch.setenv("ROPEPOOL_BUILD_TIMEOUT", value)
    assert build.build_timeout() == build.BUILD_TIMEOUT


def test_calibrate_refuses_nan_activations_instead_of_scale_one():
    import mlx.core as mx

    from ropepool.engine import EngineArgumentError
    from ropepool.engine.kv_scales import calibrate
    from ropepool.loaders.tiny import build as tiny_build

    model = tiny_build("llama-gqa")
    layer = model.model.layers[1].self_attn
    layer.k_proj.weight = mx.full(layer.k_proj.weight.shape, float("nan"))
    with pytest.raises(EngineArgumentError, match=r"model: layer 1's k or v holds NaN or inf"):
        calibrate(model, [[1, 2, 3]])
