"""``explain`` on the corpus of real errors (tests/explain_corpus.py): the case named, and what it says,
for both halves of the corpus (the rows code was tuned on, and the held-out rows)."""

import re

import pytest

from explain_corpus import CORPUS, HELD_OUT, TUNE, half
from ropepool.cli.explain import diagnosis_of, explain, facts_of

FAMILIES = {"pytorch", "transformers", "mlx", "mlx-lm", "vllm", "llama.cpp", "tensorrt-llm", "sglang"}


def test_the_corpus_is_eighty_real_cases_of_every_family():
    assert len(CORPUS) >= 80 and len({c["id"] for c in CORPUS}) == len(CORPUS)
    assert all(c["source"] and c["cause"] and c["text"] for c in CORPUS)
    families = {diagnosis_of(c["text"], c.get("model"), **c.get("numbers", {})).family for c in CORPUS}
    assert FAMILIES <= families, FAMILIES - families


def test_every_source_names_a_framework_file_and_version_and_no_tracker():
    for row in CORPUS:
        src = row["source"]
        assert re.search(r"\w\.(py|cpp|h|c)\b", src), f"{row['id']}: no file in {src!r}"
        assert re.search(r"\b\d+\.\d+|\d+\.x\b|\d+\.\d+x\b|\bb\d{3,}", src), f"{row['id']}: no version in {src!r}"
        assert not re.search(r"https?://|#\d|\bissue\b|\bprobe\b|\bseed\b", src, re.I), f"{row['id']}: {src!r}"
        if "reported" in row:
            assert row["reported"].startswith("https://"), row["id"]


def test_the_split_is_by_the_message_and_both_halves_are_large():
    assert {row["id"] for row in TUNE} | {row["id"] for row in HELD_OUT} == {row["id"] for row in CORPUS}
    assert not {row["id"] for row in TUNE} & {row["id"] for row in HELD_OUT}
    assert len(HELD_OUT) >= len(CORPUS) // 3 and len(TUNE) >= len(CORPUS) // 3
    moved = dict(CORPUS[0], id="another-id", model=None, says=())  # the half depends on the text alone
    assert half(moved) == half(CORPUS[0])


def check_row(row):
    f = facts_of(row.get("model"), **row.get("numbers", {}))
    d = diagnosis_of(row["text"], f)
    assert d is not None, row["id"]
    said = " ".join(f"{d.why} {d.fix}".split())
    assert d.case == row["expect"], f"{row['id']}: {d.case}: {said}"
    for phrase in row["says"]:
        assert phrase in said, f"{row['id']}: {phrase!r} not in {said!r}"
    report = explain(row["text"], f)
    assert " ".join(d.fix.split())[:60] in " ".join(report.split())


@pytest.mark.parametrize("row", TUNE, ids=[c["id"] for c in TUNE])
def test_corpus_case(row):
    check_row(row)


@pytest.mark.parametrize("row", HELD_OUT, ids=[c["id"] for c in HELD_OUT])
def test_held_out_case(row):
    check_row(row)
