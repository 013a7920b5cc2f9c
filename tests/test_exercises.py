"""Every checker accepts its solution and rejects each typical mistake with the right message."""

import numpy as np
import pytest

from ropepool.teaching import exercises as ex


@pytest.mark.parametrize("n", sorted(ex.CHECKS))
def test_solution_passes(n):
    verdict = ex.CHECKS[n](ex.SOLUTIONS[n])
    assert verdict.passed and verdict.exercise == n


# --- 1: heads from a config --------------------------------------------------------------------


def _heads(qo, kv, d):
    return lambda c: {"num_qo_heads": qo(c), "num_kv_heads": kv(c), "head_dim": d(c)}


def _hq(c):
    return c["num_attention_heads"]


def _d_naive(c):
    return c["hidden_size"] // c["num_attention_heads"]


def _d_right(c):
    return c.get("head_dim") or _d_naive(c)


def _kv_right(c):
    return 1 if c.get("multi_query") else c.get("num_key_value_heads", _hq(c))


def _stub(*args):
    raise NotImplementedError


MISTAKES_1 = [
    # (name, answer, problem, a phrase the message must hold)
    ("classic GQA bug", _heads(_hq, _hq, _d_right), "kv_from_attention_heads", "num_key_value_heads"),
    ("Gemma's explicit head_dim", _heads(_hq, _kv_right, _d_naive), "head_dim_explicit", "head_dim = 256"),
    (
        "Falcon's multi_query ignored",
        _heads(_hq, lambda c: c.get("num_key_value_heads", _hq(c)), _d_right),
        "multi_query",
        "multi_query: true",
    ),
    (
        "MHA default of 1",
        _heads(_hq, lambda c: 1 if c.get("multi_query") else c.get("num_key_value_heads", 1), _d_right),
        "kv_default",
        "MHA",
    ),
    ("KeyError on a missing field", _heads(_hq, lambda c: c["num_key_value_heads"], _d_right), "raised", "config.get"),
    (
        "true division",
        _heads(_hq, _kv_right, lambda c: c.get("head_dim") or c["hidden_size"] / _hq(c)),
        "float_not_int",
        "//",
    ),
    (
        "divided by KV heads",
        _heads(_hq, _kv_right, lambda c: c.get("head_dim") or c["hidden_size"] // _kv_right(c)),
        "head_dim_kv",
        "num_attention_heads",
    ),
    ("query heads from KV", _heads(_kv_right, _kv_right, _d_right), "num_qo_heads", "num_attention_heads"),
    ("forgot return", lambda c: None, "returned_none", "return"),
    ("missing key", lambda c: {"num_qo_heads": 1}, "missing_key", "num_kv_heads, head_dim"),
    ("stub", _stub, "not_implemented", "NotImplementedError"),
]


@pytest.mark.parametrize("name, answer, problem, phrase", MISTAKES_1, ids=[m[0] for m in MISTAKES_1])
def test_check_1_names_the_mistake(name, answer, problem, phrase):
    err = ex.expect_rejection(ex.check_1, answer, problem)
    assert phrase in str(err)


def test_check_1_accepts_a_tuple():
    assert ex.check_1(lambda c: tuple(ex.solution_1(c).values())).passed


def test_check_1_reports_the_first_failing_config_and_counts_the_rest():
    err = ex.expect_rejection(ex.check_1, _heads(_hq, _hq, _d_naive))
    assert "on llama-3-8b" in str(err)
    assert "2 of 8 configs right; 5 more wrong" in str(err)


# --- 2: fix a broken call ----------------------------------------------------------------------


def _fix(*names):
    """Apply only some of solution_2's fixes."""

    def fix(kw):
        full = ex.solution_2(kw)
        return {**kw, **{n: full[n] for n in names}}

    return fix


def _repeat_k(kw):
    """Make k, v and the pools match num_kv_heads = 8 instead of fixing num_kv_heads."""
    kw = _fix("positions", "k_pool", "v_pool")(kw)
    return {**kw, **{n: np.repeat(kw[n], 4, axis=1) for n in ("k", "v", "k_pool", "v_pool")}}


def _cast_activations(kw):
    kw = _fix("num_kv_heads", "positions")(kw)
    return {**kw, **{n: kw[n].astype(np.float32) for n in ("q", "k", "v")}}


MISTAKES_2 = [
    ("nothing fixed", lambda kw: kw, "k_shape", "num_key_value_heads"),
    ("only num_kv_heads", _fix("num_kv_heads"), "pool_dtype", "activations' dtype"),
    ("positions left int64", _fix("num_kv_heads", "k_pool", "v_pool"), "index_dtype", "int32"),
    ("k repeated to the query heads", _repeat_k, "changed_shape", "Repeating k's heads"),
    ("activations cast instead of pools", _cast_activations, "cast_activations", "cast the pools"),
    (
        "positions rewritten",
        lambda kw: {**ex.solution_2(kw), "positions": np.arange(1, 5, dtype=np.int32)},
        "changed_values",
        "positions",
    ),
    ("returned None", lambda kw: None, "wrong_type", "kwargs dict"),
    (
        "dropped an argument",
        lambda kw: {k: v for k, v in ex.solution_2(kw).items() if k != "rope_base"},
        "bad_kwargs",
        "rope_base",
    ),
    (
        "dropped an array",
        lambda kw: {k: v for k, v in ex.solution_2(kw).items() if k != "v_pool"},
        "bad_kwargs",
        "v_pool",
    ),
    ("wrong rope_base", lambda kw: {**ex.solution_2(kw), "rope_base": 500000.0}, "wrong_param", "rope_base"),
]


@pytest.mark.parametrize("name, answer, problem, phrase", MISTAKES_2, ids=[m[0] for m in MISTAKES_2])
def test_check_2_names_what_still_fails(name, answer, problem, phrase):
    err = ex.expect_rejection(ex.check_2, answer, problem)
    assert phrase in str(err)


def test_broken_call_raises_three_catalog_errors_in_turn():
    from ropepool import rope_pool_fused
    from ropepool.teaching.checks import expect_error

    kw = ex.broken_call()
    expect_error("k_shape", rope_pool_fused, **kw)
    expect_error("pool_dtype", rope_pool_fused, **_fix("num_kv_heads")(kw))
    expect_error("index_dtype", rope_pool_fused, **_fix("num_kv_heads", "k_pool", "v_pool")(kw))


def test_check_2_explains_with_the_catalog():
    err = ex.expect_rejection(ex.check_2, lambda kw: kw)
    assert ex.CATALOG["k_shape"].meaning in str(err) and ex.CATALOG["k_shape"].fix in str(err)


# --- 3: NeoX RoPE ------------------------------------------------------------------------------


@pytest.mark.parametrize("problem", sorted(ex.ROPE_MISTAKES))
def test_check_3_recognises_each_common_mistake(problem):
    knobs, message = ex.ROPE_MISTAKES[problem]
    err = ex.expect_rejection(ex.check_3, lambda x, p, b: ex._variant(x, p, b, **knobs), problem)
    assert message in str(err)
    ex.expect_rejection(ex.check_3, ex.rope_with_mistake(problem), problem)


def test_check_3_messages_name_the_mistake():
    assert "GPT-J" in ex.ROPE_MISTAKES["gptj_pairing"][1]
    assert "factor 2" in ex.ROPE_MISTAKES["exponent_missing_2"][1]
    assert "wrong way" in ex.ROPE_MISTAKES["rotation_sign"][1]


def test_variant_without_knobs_is_the_reference():
    case = ex.exercise_3_cases()[1]
    np.testing.assert_allclose(
        ex._variant(case["x"], case["positions"], case["rope_base"]), ex.solution_3(**case), rtol=1e-12
    )


def test_check_3_locates_an_unknown_mistake():
    err = ex.expect_rejection(ex.check_3, lambda x, p, b: ex.solution_3(x, p, b) * 1.001, "mismatch")
    assert "position 0" in str(err) and "both halves" in str(err)


def test_check_3_second_half_only():
    def half_wrong(x, p, b):
        out = ex.solution_3(x, p, b)
        out[..., x.shape[-1] // 2 :] *= 2
        return out

    err = ex.expect_rejection(ex.check_3, half_wrong, "mismatch")
    assert "the second half" in str(err)


def test_check_3_rejects_in_place_edits_and_wrong_shapes():
    def in_place(x, p, b):
        x[...] = ex.solution_3(x, p, b)
        return x

    ex.expect_rejection(ex.check_3, in_place, "modified_input")
    err = ex.expect_rejection(ex.check_3, lambda x, p, b: ex.solution_3(x, p, b)[..., :4], "shape")
    assert "[T, H, D]" in str(err)


def _rope_float32(x, positions, rope_base):
    """NeoX RoPE with every step in float32, angles included: right within the project's tolerance."""
    x = np.asarray(x, np.float32)
    D = x.shape[-1]
    inv_freq = np.float32(rope_base) ** (-2 * np.arange(D // 2, dtype=np.float32) / np.float32(D))
    theta = np.asarray(positions, np.float32)[:, None] * inv_freq  # [T, D/2]
    cos, sin = np.cos(theta)[:, None], np.sin(theta)[:, None]
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def test_check_3_accepts_float32_math():
    assert ex.check_3(_rope_float32).passed


def test_check_3_names_a_mistake_made_in_float32():
    gptj = ex.rope_with_mistake("gptj_pairing")
    ex.expect_rejection(ex.check_3, lambda x, p, b: gptj(x, p, b).astype(np.float32), "gptj_pairing")


def test_check_3_rejects_float16_precision():
    err = ex.expect_rejection(ex.check_3, lambda x, p, b: ex.solution_3(x, p, b).astype(np.float16), "mismatch")
    assert "first difference" in str(err)


# --- 4: the pool after a batch -----------------------------------------------------------------


def _python_indexing():
    s = ex.pool_scenario()
    pool = list(s["pool_before"])
    for t, slot in enumerate(s["slots"]):
        pool[slot] = t  # -1 lands on the last row, as Python indexing does
    return pool


MISTAKES_4 = [
    ("slot -1 as the last row", _python_indexing, "negative_index", "not Python's 'last row'"),
    ("untouched rows cleared", [4, 0, 1, 0, 0, 0, 3, 0], "untouched_changed", "keeps its old value 101"),
    ("untouched rows marked -1", [4, -1, 1, -1, -1, 0, 3, -1], "untouched_changed", "not a row's value"),
    ("a write missed", [100, 101, 1, 103, 104, 0, 3, 107], "write_missed", "token 4 writes it"),
    ("wrong token", [4, 101, 1, 103, 104, 0, 2, 107], "wrong_token", "token 3's value 3"),
    ("indexed by token", [5, 2, -1, 6, 0, -1, 106, 107], "indexed_by_token", "INTO row slots[t]"),
    ("stub", [None] * 8, "unanswered", "every row is still None"),
    ("one row left open", [4, 101, 1, None, 104, 0, 3, 107], "unanswered", "row 3: still None"),
    ("wrong length", [1, 2, 3], "wrong_length", "8 rows"),
]


@pytest.mark.parametrize("name, answer, problem, phrase", MISTAKES_4, ids=[m[0] for m in MISTAKES_4])
def test_check_4_names_each_wrong_row(name, answer, problem, phrase):
    err = ex.expect_rejection(ex.check_4, answer, problem)
    assert phrase in str(err)


def test_check_4_expected_pool_comes_from_the_op():
    assert ex.run_pool_scenario() == [4, 101, 1, 103, 104, 0, 3, 107]
    assert ex.run_pool_scenario(slots=[-1, -1]) == ex.pool_scenario()["pool_before"]


def test_write_numbers_puts_each_token_at_its_slot():
    from ropepool.teaching.exercises.pool_predict import write_numbers

    after = write_numbers([1.5, -2.0, 7.0], [3, -1, 0], [10.0, 11.0, 12.0, 13.0])
    assert after.tolist() == [7.0, 11.0, 12.0, 1.5]  # token 1's slot -1 writes nothing


def test_check_4_accepts_a_list():
    assert ex.check_4([4, 101, 1, 103, 104, 0, 3, 107]).passed


# --- 5: slots for a decode step ----------------------------------------------------------------


def _first_rows(occupancy, needs):
    return list(range(len(needs)))


def _free_but_pad_too(occupancy, needs):
    free = [r for r, o in enumerate(occupancy) if o is None]
    return free[: len(needs)]


def _same_free_row(occupancy, needs):
    row = occupancy.index(None)
    return [row if n else -1 for n in needs]


def _past_the_end(occupancy, needs):
    out = ex.solution_5(occupancy, needs)
    return [len(occupancy) if i == 0 and s >= 0 else s for i, s in enumerate(out)]


MISTAKES_5 = [
    ("taken rows", _first_rows, "slot_taken", "taken by request A"),
    ("padding given a row", _free_but_pad_too, "padding_slot", "token 2 is padding"),
    ("one row for everyone", _same_free_row, "duplicate_slot", "already token 0's"),
    ("past the end", _past_the_end, "out_of_range", "rows 0..11"),
    ("everything skipped", lambda o, n: [-1] * len(n), "missing_slot", "drop its k and v"),
    ("too few slots", lambda o, n: ex.solution_5(o, n)[:1], "wrong_length", "4 tokens"),
    ("stub", _stub, "not_implemented", "NotImplementedError"),
]


@pytest.mark.parametrize("name, answer, problem, phrase", MISTAKES_5, ids=[m[0] for m in MISTAKES_5])
def test_check_5_names_the_bad_slot(name, answer, problem, phrase):
    err = ex.expect_rejection(ex.check_5, answer, problem)
    assert phrase in str(err)


def test_check_5_lists_every_bad_token():
    err = ex.expect_rejection(ex.check_5, _first_rows)
    assert str(err).count("taken by request") == 3 and "token 2 is padding" in str(err)


def test_check_5_runs_the_op_on_the_chosen_slots():
    verdict = ex.check_5(ex.solution_5)
    assert "[2, 6, -1, 7]" in verdict.message and "rows [2, 6, 7]" in verdict.message


# --- The helpers -------------------------------------------------------------------------------


def test_feedback_returns_a_verdict_either_way():
    bad = ex.feedback(ex.check_5, _first_rows)
    assert not bad.passed and bad.problem == "slot_taken" and "taken" in bad.message
    assert "not yet" in bad._repr_markdown_()
    assert ex.feedback(ex.check_5, ex.solution_5).passed


def test_expect_rejection_fails_on_a_passing_answer_or_another_problem():
    with pytest.raises(AssertionError, match="passed"):
        ex.expect_rejection(ex.check_5, ex.solution_5)
    with pytest.raises(AssertionError, match="expected problem 'out_of_range'"):
        ex.expect_rejection(ex.check_5, _first_rows, "out_of_range")


def test_exercise_failed_is_an_assertion_error():
    with pytest.raises(AssertionError):
        ex.check_5(_first_rows)


@pytest.mark.parametrize("n", sorted(ex.SOLUTIONS))
def test_show_solution_shows_the_source(n):
    shown = ex.show_solution(n)
    assert f"def solution_{n}" in shown.source and "```python" in shown._repr_markdown_()


def test_show_solution_rejects_an_unknown_exercise():
    with pytest.raises(ValueError, match="choose one of"):
        ex.show_solution(9)


# --- How a verdict shows in Jupyter --------------------------------------------------------------

MARKUP_MESSAGES = [
    "x1*cos - x2*sin",  # the hint of check 3: asterisks must not turn into emphasis
    "x[..., :D//2] and x_1 * x_2 ** 2",
    "# not a heading, [T, H, D](not a link) <b>not bold</b> $not maths$ `not code` ~~no~~ 1. no list",
    "a_b_c __init__ \\ backslash & ampersand | pipe !",
]


@pytest.mark.parametrize("message", MARKUP_MESSAGES)
def test_verdict_markdown_shows_the_message_verbatim(message):
    markdown_it = pytest.importorskip("markdown_it")
    import html
    import re

    for passed in (True, False):
        rendered = markdown_it.MarkdownIt("commonmark").render(ex.Verdict(3, passed, message)._repr_markdown_())
        text = html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()
        assert text.endswith(message), rendered
        assert "<em>" not in rendered and "<a " not in rendered and "<code>" not in rendered


def test_verdict_markdown_needs_no_emoji():
    for passed in (True, False):
        shown = ex.Verdict(1, passed, "m")._repr_markdown_()
        assert all(ord(ch) < 0x2000 for ch in shown), shown
