"""``explain`` on the corpus of real errors (tests/explain_corpus.py): the case named, and what it says."""

import pytest

from explain_corpus import CORPUS
from ropepool.cli.explain import diagnosis_of, explain, facts_of

FAMILIES = {"pytorch", "transformers", "mlx", "mlx-lm", "vllm", "llama.cpp", "tensorrt-llm", "sglang"}


def test_the_corpus_is_forty_real_cases_of_every_family():
    assert len(CORPUS) >= 40 and len({c["id"] for c in CORPUS}) == len(CORPUS)
    assert all(c["source"] and c["cause"] and c["text"] for c in CORPUS)
    families = {diagnosis_of(c["text"], c.get("model"), **c.get("numbers", {})).family for c in CORPUS}
    assert FAMILIES <= families, FAMILIES - families


@pytest.mark.parametrize("row", CORPUS, ids=[c["id"] for c in CORPUS])
def test_corpus_case(row):
    f = facts_of(row.get("model"), **row.get("numbers", {}))
    d = diagnosis_of(row["text"], f)
    assert d is not None, row["id"]
    said = " ".join(f"{d.why} {d.fix}".split())
    assert d.case == row["expect"], f"{row['id']}: {d.case}: {said}"
    for phrase in row["says"]:
        assert phrase in said, f"{row['id']}: {phrase!r} not in {said!r}"
    report = explain(row["text"], f)
    assert " ".join(d.fix.split())[:60] in " ".join(report.split())
