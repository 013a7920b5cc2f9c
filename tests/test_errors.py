"""The validation contract: every catalog error fires, with its message, and loses nothing."""

import subprocess
import sys

import mlx.core as mx
import numpy as np
import pytest
from helpers import for_each

import ropepool
from ropepool import CATALOG, RopePoolError, Shapes, make_inputs, rope_pool_fused
from ropepool.teaching.catalog import BASE
from ropepool.teaching.checks import expect_error

CODES = list(CATALOG)

# SGLang's messages, verbatim, for the catalog's minimal triggers: the contract users search for.
SGLANG_FIRST_LINES = [
    ("qkv_ndim", "rope_pool_fused expects q/k/v to be 3-D"),
    ("index_ndim", "rope_pool_fused expects positions/slots to be 1-D"),
    ("pool_ndim", "rope_pool_fused expects pool tensors to be 3-D"),
    ("q_shape", "q shape must be [num_tokens, num_qo_heads, head_dim], got (3, 4, 8)"),
    ("k_shape", "k shape must be [num_tokens, num_kv_heads, head_dim], got (3, 2, 8)"),
    ("v_shape", "v shape must match k shape, got (3, 4, 8) vs (3, 2, 8)"),
    ("index_len", "positions/slots must have one entry per token"),
    ("k_pool_shape", "k_pool has incompatible shape (6, 4, 8)"),
    ("v_pool_shape", "v_pool shape must match k_pool shape, got (5, 2, 8) vs (6, 2, 8)"),
    ("qkv_dtype", "q/k/v dtypes must match"),
    ("pool_dtype", "pool dtypes must match q/k/v dtype"),
    ("index_dtype", "rope_pool_fused: positions/slots must be int32"),
    ("head_dim_odd", "rope_pool_fused: head_dim must be even"),
    ("unsupported_dtype", "rope_pool_fused: unsupported dtype"),
]


def _pools(kw) -> list[np.ndarray]:
    """The pools' values as NumPy copies (bfloat16 through float32, exactly)."""
    return [
        np.array(p.astype(mx.float32) if isinstance(p, mx.array) else p, copy=True)
        for p in (kw["k_pool"], kw["v_pool"])
        if hasattr(p, "shape")
    ]


def test_every_trigger_raises_exactly_its_error():
    """Each catalog trigger raises its code; the explanation says expected, got and the hint."""

    def check(code):
        err = expect_error(code, rope_pool_fused, **CATALOG[code].trigger())
        assert isinstance(err, ValueError)
        first, *rest = str(err).split("\n")
        assert err.first_line == first
        second = " ".join(line.strip() for line in rest)  # the explanation, wrapped at word boundaries
        assert second.startswith("expected ") and err.expected in second and err.got in second
        assert err.hint and " ".join(err.hint.split()) in second

    for_each(CODES, check)


def test_every_explanation_wraps_at_word_boundaries():
    """No line of the explanation is longer than WRAP_WIDTH unless it is one unbreakable word, and
    no word is cut: the output area never has to break a line mid-word."""
    from ropepool.errors import WRAP_WIDTH

    def check(code):
        err = expect_error(code, rope_pool_fused, **CATALOG[code].trigger())
        first, *rest = str(err).split("\n")
        for line in rest:
            assert line.startswith("  ") and (len(line) <= WRAP_WIDTH or " " not in line.strip()), line
        words = f"expected {err.expected}, got {err.got}. {err.hint}".split()
        assert " ".join(" ".join(rest).split()) == " ".join(words)

    for_each(CODES, check)


def test_sglang_messages_verbatim():
    def check(row):
        code, first_line = row
        assert CATALOG[code].origin.startswith("sglang")
        err = expect_error(code, rope_pool_fused, **CATALOG[code].trigger())
        assert str(err).split("\n")[0] == first_line

    for_each(SGLANG_FIRST_LINES, check)


def test_every_code_has_one_lesson():
    """The teaching catalog explains exactly the contract's codes, in the same order."""
    from ropepool.errors import CODES

    assert list(CATALOG) == list(CODES)


def test_the_contract_loads_without_mlx_or_numpy():
    """ropepool.errors imports only the standard library: the lower modules import it at their top."""
    import ast
    from pathlib import Path

    tree = ast.parse((Path(ropepool.__file__).parent / "errors.py").read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "textwrap", "typing"}, imported


def test_every_sglang_check_is_in_the_contract_table():
    sglang = {c for c, s in CATALOG.items() if s.origin.startswith("sglang")}
    assert sglang == {c for c, _ in SGLANG_FIRST_LINES}


def test_every_catalog_entry_is_documented():
    def check(code):
        spec = CATALOG[code]
        assert spec.code == code
        assert spec.meaning and spec.fix and spec.causes
        assert spec.origin in ("sglang", "sglang-c++", "ropepool")

    for_each(CODES, check)


def test_every_trigger_leaves_the_pools_unchanged():
    def check(code):
        kw = CATALOG[code].trigger()
        before = _pools(kw)
        assert len(before) == 2  # both pools are arrays in every trigger
        with pytest.raises(RopePoolError):
            rope_pool_fused(**kw)
        for after, arr in zip(_pools(kw), before):
            np.testing.assert_array_equal(after, arr)

    for_each(CODES, check)


def test_numpy_pools_unchanged_after_value_error():
    kw = make_inputs(Shapes(3, 4, 2, 8, 6), "float32", kind="numpy", slots=[0, 5, 5])
    before = kw["k_pool"].copy(), kw["v_pool"].copy()
    expect_error("duplicate_slot", rope_pool_fused, **kw)
    np.testing.assert_array_equal(kw["k_pool"], before[0])
    np.testing.assert_array_equal(kw["v_pool"], before[1])


def test_llama_mha_style_k_hint():
    # Llama-3-8B: 32 query heads, 8 KV heads; k wrongly carries 32 heads.
    s = Shapes(tokens=4, num_qo_heads=32, num_kv_heads=8, head_dim=128, pool_rows=8)
    kw = make_inputs(s, "float16")
    kw["k"] = mx.repeat(kw["k"], 4, axis=1)  # [T, Hq, D]: MHA-style k
    err = expect_error("k_shape", rope_pool_fused, **kw)
    assert str(err).startswith("k shape must be [num_tokens, num_kv_heads, head_dim], got (4, 32, 128)")
    assert "as many heads as q" in err.hint and "MHA-style k under a GQA config" in err.hint
    assert "config.num_key_value_heads" in err.hint
    assert err.expected.startswith("(4, 8, 128)")


def test_num_kv_heads_from_num_attention_heads_hint():
    s = Shapes(tokens=4, num_qo_heads=32, num_kv_heads=8, head_dim=128, pool_rows=8)
    kw = make_inputs(s, "float16")
    kw["num_kv_heads"] = 32  # the classic: taken from num_attention_heads
    err = expect_error("k_shape", rope_pool_fused, **kw)
    assert "config.num_attention_heads" in err.hint and "config.num_key_value_heads (here 8)" in err.hint


def test_head_dim_mismatch_hint_mentions_gemma():
    s = Shapes(tokens=2, num_qo_heads=16, num_kv_heads=8, head_dim=256, pool_rows=4)
    kw = make_inputs(s, "float32")
    kw.update(head_dim=224, q=kw["q"][..., :224])  # hidden_size 3584 / 16 heads = 224, but Gemma-2 sets 256
    err = expect_error("k_shape", rope_pool_fused, **kw)
    assert "head_dim" in err.hint and "Gemma" in err.hint


# Inputs with two problems report SGLang's first check, in SGLang's order.
ORDER_CASES = [
    (
        "q 2-D beats int64 positions",
        "qkv_ndim",
        lambda kw: {"q": kw["q"].reshape(3, 32), "positions": kw["positions"].astype(mx.int64)},
    ),
    ("k shape beats pool dtype", "k_shape", lambda kw: {"num_kv_heads": 4, "k_pool": kw["k_pool"].astype(mx.float16)}),
    (
        "pool shape beats dtype",
        "k_pool_shape",
        lambda kw: {"k_pool": kw["k_pool"][:, :1], "k": kw["k"].astype(mx.float16)},
    ),
    ("dtype beats odd head_dim", "qkv_dtype", lambda kw: {"v": kw["v"].astype(mx.float16)}),
    (
        "sglang checks beat ours",
        "index_dtype",
        lambda kw: {"slots": mx.array([0, 9, 9], dtype=mx.int64), "rope_base": -1.0},
    ),
    (
        "rope_base beats slot values",
        "rope_base",
        lambda kw: {"slots": mx.array([0, 9, 9], dtype=mx.int32), "rope_base": float("nan")},
    ),
]


@pytest.mark.parametrize("name,code,change", ORDER_CASES, ids=[c[0] for c in ORDER_CASES])
def test_check_order(name, code, change):
    kw = make_inputs(BASE, slots=[0, 2, 4])
    kw.update(change(kw))
    expect_error(code, rope_pool_fused, **kw)


@pytest.mark.parametrize("bad", [None, "10000", float("inf"), -5.0])
def test_rope_base_rejected(bad):
    kw = make_inputs(BASE, slots=[0, 2, 4], rope_base=bad)
    expect_error("rope_base", rope_pool_fused, **kw)


def test_check_values_false_skips_value_checks_but_never_writes_out_of_range():
    s = Shapes(tokens=3, num_qo_heads=4, num_kv_heads=2, head_dim=8, pool_rows=6)
    kw = make_inputs(s, slots=[1, 6, 1000])
    expect_error("slot_out_of_range", rope_pool_fused, **kw)
    before = np.array(kw["k_pool"])
    _, k_rot, k_pool, _ = rope_pool_fused(**kw, check_values=False)
    after = np.array(k_pool)
    np.testing.assert_array_equal(after[1], np.array(k_rot)[0])
    rest = [0, 2, 3, 4, 5]
    np.testing.assert_array_equal(after[rest], before[rest])


def test_validation_survives_python_O():
    code = (
        "import ropepool; spec = ropepool.CATALOG['k_shape']\n"
        "try:\n    ropepool.rope_pool_fused(**spec.trigger())\n"
        "except ropepool.RopePoolError as e:\n    print('raised', e.code)\n"
    )
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "raised k_shape"


def test_expect_error_fails_when_nothing_raises():
    with pytest.raises(AssertionError, match="succeeded"):
        expect_error("k_shape", rope_pool_fused, **CATALOG["k_shape"].fixed())


def test_expect_error_fails_on_the_wrong_error():
    with pytest.raises(AssertionError, match="expected error 'q_shape', got 'k_shape'"):
        expect_error("q_shape", rope_pool_fused, **CATALOG["k_shape"].trigger())


def test_hints_start_as_sentences_and_names_of_code_stay_as_written():
    import numpy as np

    from ropepool.errors import sentence
    from ropepool.op import plan_step

    with pytest.raises(RopePoolError) as e:
        plan_step([1, 2], np.array([0, 1], np.int32), 8)  # a list: the hint starts with a plain word
    assert ". Wrap positions with" in " ".join(str(e.value).split()) and e.value.hint.startswith("Wrap")
    assert sentence("pass num_qo_heads=32.") == "Pass num_qo_heads=32."
    for code_first in ("k was built with 32 heads.", "rope_scaling={...} is read.", "mx.array(...) it.", "slots must"):
        assert sentence(code_first) == code_first


# --- Of two problems, the check listed first: CODES for rope_pool_fused, MLA_ORDER for the MLA op ------


def _same(a, b) -> bool:
    """Whether two argument values are the same input: the same kind (list, mx.array, NumPy, ...) and, for
    arrays, the same shape, dtype and values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (mx.array, np.ndarray)):
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(np.asarray(a), np.asarray(b))
    return a == b


def _changes(call: dict, base: dict) -> dict:
    """The arguments in which ``call`` differs from ``base``: the problem it carries."""
    return {name: x for name, x in call.items() if name not in base or not _same(x, base[name])}


def _pairs(bad: dict[str, dict]):
    """Every two problems that touch different arguments, as ``(code, code, changes)``."""
    codes = list(bad)
    for i, a in enumerate(codes):
        for b in codes[i + 1 :]:
            if not set(bad[a]) & set(bad[b]):
                yield a, b, {**bad[a], **bad[b]}


def _walk_pairs(op, base: dict, bad: dict[str, dict], order: list[str]) -> tuple[int, list[str]]:
    """Calls ``op`` with each two problems of ``bad``; the count of pairs, and those where the code
    raised is not the one of the two that ``order`` lists first."""
    wrong, count = [], 0
    for a, b, changes in _pairs(bad):
        count += 1
        want = min(a, b, key=order.index)
        try:
            op(**{**base, **changes})
            got = "nothing"
        except RopePoolError as e:
            got = e.code
        if got != want:
            wrong.append(f"{a} + {b}: raised {got}, expected {want}")
    return count, wrong


def test_of_two_problems_the_one_first_in_the_catalog_is_raised():
    """The catalog's triggers, two at a time: rope_pool_fused runs its checks in CODES's order."""
    from ropepool.errors import CODES as ORDER

    base = make_inputs(BASE, slots=[0, 2, 4])  # the call every trigger breaks (ropepool.teaching.catalog)
    bad = {code: _changes(spec.trigger(), base) for code, spec in CATALOG.items()}
    assert all(bad.values()), [c for c, ch in bad.items() if not ch]
    count, wrong = _walk_pairs(rope_pool_fused, base, bad, list(ORDER))
    assert count > 400 and not wrong, "\n".join(wrong)


def test_a_negative_position_and_an_odd_rotary_dim_raise_rotary_dim():
    """rotary_dim comes before the positions' values in the catalog, so it is raised first."""
    from ropepool.errors import CODES as ORDER

    assert list(ORDER).index("rotary_dim") < list(ORDER).index("position_negative")
    kw = make_inputs(BASE, slots=[0, 2, 4], positions=[-1, 0, 1])
    expect_error("position_negative", rope_pool_fused, **kw)
    expect_error("rotary_dim", rope_pool_fused, **kw, rotary_dim=3)


def _mla_problems(base: dict) -> dict[str, dict]:
    """One problem per code rope_pool_fused_mla shares with rope_pool_fused, on the MLA catalog's call."""
    from ropepool.teaching.catalog import _unavailable_backend

    int32 = lambda values: mx.array(values, dtype=mx.int32)  # noqa: E731
    read_only = np.array(base["latent_pool"])
    read_only.setflags(write=False)
    f64 = {n: np.array(base[n]).astype(np.float64) for n in ("q_pe", "k_pe", "c_kv", "latent_pool")}
    return {
        "not_an_array": {"q_pe": np.array(base["q_pe"]).tolist()},
        "argument_type": {"num_qo_heads": 4.0},
        "index_ndim": {"positions": base["positions"].reshape(1, 3)},
        "index_len": {"slots": int32([0, 2])},
        "index_dtype": {"positions": base["positions"].astype(mx.int64)},
        "unsupported_dtype": f64,
        "rope_base": {"rope_base": 0.0},
        "rope_type": {"rope_scaling": {"rope_type": "llama-3"}},
        "rope_base_range": {"rope_base": 1e-300},
        "kv_scale": {"kv_scale": 2.0},
        "position_negative": {"positions": int32([0, -1, 2])},
        "position_too_large": {"positions": int32([0, 1, 2**24])},
        "slot_out_of_range": {"slots": int32([0, 2, 6])},
        "duplicate_slot": {"slots": int32([0, 2, 2])},
        "inplace_unsupported": {"latent_pool": read_only, "inplace": True},
        "unknown_backend": {"backend": "gpu"},
        "backend_unavailable": {"backend": _unavailable_backend()},
    }


def test_of_two_problems_the_mla_op_raises_the_one_first_in_its_order():
    """rope_pool_fused_mla's own triggers and one problem per shared code, two at a time: MLA_ORDER holds."""
    from ropepool import rope_pool_fused_mla
    from ropepool.errors import MLA_CODES, MLA_ORDER
    from ropepool.teaching.catalog import MLA_BASE, MLA_CATALOG

    base = ropepool.inputs.mla_inputs(**MLA_BASE, slots=[0, 2, 4])  # the MLA catalog's call
    bad = {code: _changes(spec.trigger(), base) for code, spec in MLA_CATALOG.items()}
    bad.update(_mla_problems(base))
    assert set(MLA_CODES) <= set(bad) <= set(MLA_ORDER)
    for code, changes in bad.items():  # each problem alone raises its code
        expect_error(code, rope_pool_fused_mla, **{**base, **changes})
    count, wrong = _walk_pairs(rope_pool_fused_mla, base, bad, list(MLA_ORDER))
    assert count > 150 and not wrong, "\n".join(wrong)


def test_the_mla_order_is_the_catalogs_for_the_codes_both_ops_raise():
    from ropepool.errors import CODES as ORDER
    from ropepool.errors import MLA_CODES, MLA_ORDER

    shared = [c for c in MLA_ORDER if c not in MLA_CODES]
    assert len(set(MLA_ORDER)) == len(MLA_ORDER) and set(MLA_CODES) <= set(MLA_ORDER)
    assert shared == [c for c in ORDER if c in shared]


@pytest.mark.parametrize(
    "scale,ok",
    [(2.0**-126.5, False), (2.0**-126, True), (0.5, True), (2.0**126, True), (2.0**126.5, False), (0.0, False)],
)
def test_both_ops_take_the_same_fp8_scales(scale, ok):
    """k_scale, v_scale and MLA's kv_scale share one code, one message and one range, [2**-126, 2**126]."""
    from ropepool import rope_pool_fused_mla
    from ropepool.inputs import mla_inputs

    fused = make_inputs(BASE, slots=[0, 2, 4])
    fused["k_pool"], fused["v_pool"] = (mx.zeros(fused[n].shape, mx.uint8) for n in ("k_pool", "v_pool"))
    calls = [
        (rope_pool_fused, {**fused, "k_scale": scale}),
        (rope_pool_fused, {**fused, "v_scale": scale}),
        (rope_pool_fused_mla, {**mla_inputs(3, 4, 8, 4, 6, slots=[0, 2, 4], fp8_pool=True), "kv_scale": scale}),
    ]
    for op, kw in calls:
        if ok:
            op(**kw)
        else:
            err = expect_error("kv_scale", op, **kw)
            assert "from 2**-126 to 2**126" in str(err).split("\n")[0]
