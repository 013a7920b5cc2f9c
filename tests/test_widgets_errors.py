"""Error cards and the break-it widget, checked against the catalog they read."""

import html

import numpy as np
import pytest
from helpers import for_each

import ropepool.teaching.widgets.errors as werr
from ropepool.teaching.catalog import CATALOG
from ropepool.teaching.checks import expect_error
from ropepool.op import rope_pool_fused
from ropepool.teaching.widgets.errors import ORIGINS, BreakIt, by_origin, changes, error_card, run_fixed

CODES = list(CATALOG)


def test_origins_partition_the_catalog():
    groups = {origin: [s.code for s in by_origin(origin)] for origin in ORIGINS}
    assert all(groups.values())
    assert sorted(c for codes in groups.values() for c in codes) == sorted(CODES)


def test_by_origin_rejects_an_unknown_origin():
    with pytest.raises(ValueError, match="origin must be one of"):
        by_origin("cuda")


def test_every_fixed_call_matches_the_reference():
    def check(code):
        run = run_fixed(code)
        assert run.matches, run.max_error
        assert [o.shape for o in run.outputs] == [r.shape for r in run.reference]

    for_each(CODES, check)


def test_run_fixed_notices_a_wrong_answer(monkeypatch):
    real = werr.rope_pool_fused

    def off_by_a_little(**kw):
        q_rot, k_rot, k_pool, v_pool = real(**kw)
        return q_rot, k_rot + 1e-3, k_pool, v_pool

    monkeypatch.setattr(werr, "rope_pool_fused", off_by_a_little)
    run = run_fixed("k_shape")
    assert not run.matches and run.max_error == pytest.approx(1e-3, rel=1e-2)


def test_break_it_shows_each_error_its_meaning_and_fix():
    w = BreakIt()

    def check(code):
        w.mistake.value = code
        spec = CATALOG[code]
        assert w.error.code == code
        card = w.card.value
        assert f'data-code="{code}"' in card
        assert html.escape(w.error.first_line) in card
        assert html.escape(spec.meaning) in card and html.escape(spec.fix) in card
        assert "matches the float64 reference" in card

    for_each(CODES, check)


def test_break_it_offers_every_catalog_entry():
    w = BreakIt()
    assert w.mistake.description == "Mistake"
    assert [value for _, value in w.mistake.options] == CODES


def test_changes_names_only_what_the_fix_changes():
    spec = CATALOG["k_shape"]
    assert changes(spec.trigger(), spec.fixed()) == [("num_kv_heads", "4", "2")]
    spec = CATALOG["slot_out_of_range"]
    assert changes(spec.trigger(), spec.fixed()) == [
        ("slots", "mx.array (3,) int32 [0, 2, 6]", "mx.array (3,) int32 [0, 2, 4]")
    ]


def test_error_card_escapes_html():
    spec = CATALOG["k_shape"]
    err = ValueError("<script>alert(1)</script>")
    card = error_card(spec, err)
    assert "<script>" not in card and "&lt;script&gt;" in card
    assert "After the fix" not in card  # no run given, no verdict


def test_card_reports_a_mismatch_honestly():
    spec = CATALOG["k_shape"]
    run = werr.FixedRun("k_shape", "float32", (np.zeros(1),), (np.ones(1),), 1.0, False)
    assert "does NOT match" in error_card(spec, ValueError("x"), run)


def test_catalog_html_has_a_row_per_error():
    from ropepool.teaching.widgets.errors import catalog_html

    text = catalog_html()
    assert text.count("<tr>") == 1 + len(CATALOG)
    assert all(f">{code}</td>" in text for code in CODES)


# --- Error text is never cut mid-word -----------------------------------------------------------


def test_card_error_text_wraps_only_at_word_boundaries():
    from ropepool.teaching.widgets.errors import ERROR_TEXT_STYLE

    for prop in ("white-space:pre-wrap", "word-break:normal", "overflow-wrap:normal"):
        assert prop in ERROR_TEXT_STYLE
    spec = CATALOG["k_shape"]
    err = expect_error("k_shape", rope_pool_fused, **spec.trigger())
    assert f"<pre style='{ERROR_TEXT_STYLE}'>" in error_card(spec, err)


def test_breakit_labels_are_whole_words_and_fit():
    from ropepool.teaching.widgets.errors import LABEL_CHARS, mistake_label

    w = BreakIt()
    for (label, code), spec in zip(w.mistake.options, CATALOG.values()):
        assert label == mistake_label(spec) and len(label) <= LABEL_CHARS and label.startswith(code)
        words = f"{spec.code}: {spec.causes[0]}".split()
        shown = label.removesuffix(" ...").split()
        assert shown == words[: len(shown)], label  # a prefix of whole words, none cut
    assert float(w.mistake.layout.width.removesuffix("em")) >= 5 + 0.6 * LABEL_CHARS


def test_every_card_shows_what_the_fix_changes():
    """No card has an empty change table (inplace_unsupported's pools differ only in their flags)."""

    def check(code):
        spec = CATALOG[code]
        assert changes(spec.trigger(), spec.fixed()), "the bad and the fixed call describe the same"

    for_each(CODES, check)
