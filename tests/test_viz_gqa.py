"""The GQA plots, checked on the data they draw (segments, colours, gids), not on pixels."""

import numpy as np
import pytest
from matplotlib.colors import to_rgba

from ropepool.teaching.viz.gqa import UNTOUCHED, WRITTEN, head_groups, kv_head_of, op_overview

# (name, Hq, Hkv): why each row is here.
HEADS = [
    ("gqa", 32, 8),  # Llama-3-8B, Mistral-7B
    ("gqa-odd-group", 28, 4),  # Qwen2.5-7B: G = 7
    ("gqa-small-group", 16, 8),  # Gemma-2-9B: G = 2
    ("mqa", 71, 1),  # Falcon-7B: one KV head, an odd Hq
    ("mha", 32, 32),  # Phi-3-mini
    ("one-head", 1, 1),
]


def _collection(fig, gid):
    return next(c for c in fig.axes[0].collections if c.get_gid() == gid)


@pytest.mark.parametrize("name, hq, hkv", HEADS, ids=[h[0] for h in HEADS])
def test_kv_head_of_gives_each_query_head_its_group(name, hq, hkv):
    kv = kv_head_of(hq, hkv)
    G = hq // hkv
    assert kv.shape == (hq,)
    assert kv.tolist() == [h // G for h in range(hq)]
    assert np.bincount(kv).tolist() == [G] * hkv  # every KV head serves exactly G query heads


@pytest.mark.parametrize(
    "hq, hkv, words", [(4, 3, "not a multiple"), (0, 1, "positive"), (4, 0, "positive"), (4, 8, "not a multiple")]
)
def test_kv_head_of_rejects_impossible_groups(hq, hkv, words):
    with pytest.raises(ValueError, match=words):
        kv_head_of(hq, hkv)


@pytest.mark.parametrize("name, hq, hkv", HEADS, ids=[h[0] for h in HEADS])
def test_head_groups_links_each_query_head_to_its_kv_head(name, hq, hkv):
    fig = head_groups(hq, hkv)
    G = hq // hkv
    segments = _collection(fig, "links").get_segments()
    assert len(segments) == hq
    for h, seg in enumerate(segments):
        (x_top, y_top), (x_bottom, y_bottom) = seg
        assert (x_top, y_top) == (h + 0.5, 1.0)
        assert (x_bottom, y_bottom) == ((h // G + 0.5) * G, 0.0)  # the centre of KV head h // G


@pytest.mark.parametrize("name, hq, hkv", HEADS, ids=[h[0] for h in HEADS])
def test_head_groups_colours_query_heads_like_their_kv_head(name, hq, hkv):
    fig = head_groups(hq, hkv)
    q_colours = _collection(fig, "q_heads").get_facecolor()
    kv_colours = _collection(fig, "kv_heads").get_facecolor()
    assert len(q_colours) == hq and len(kv_colours) == hkv
    np.testing.assert_array_equal(q_colours, kv_colours[kv_head_of(hq, hkv)])
    assert len({tuple(c) for c in kv_colours}) == hkv  # neighbouring groups are told apart


@pytest.mark.parametrize(
    "hq, hkv, words",
    [
        (32, 8, "GQA: Hq = 32 query heads share Hkv = 8 KV heads, G = 4"),
        (71, 1, "MQA: Hq = 71 query heads share Hkv = 1 KV head, G = 71"),
        (32, 32, "MHA: Hq = Hkv = 32"),
    ],
)
def test_head_groups_title_names_the_kind_and_group_size(hq, hkv, words):
    title = next(t for t in head_groups(hq, hkv).texts if t.get_gid() == "title")
    assert words in title.get_text()


def test_head_groups_labels_every_head_up_to_16_then_every_step():
    labels = {t.get_text() for t in head_groups(8, 2).axes[0].texts}
    assert {"q0", "q7", "kv0", "kv1"} <= labels
    falcon = {t.get_text() for t in head_groups(71, 1).axes[0].texts if t.get_text()[1:].isdigit()}
    assert falcon == {f"q{h}" for h in range(0, 71, 4)}  # 10 pt labels need room: every 4th of 71
    mha = {t.get_text() for t in head_groups(32, 32).axes[0].texts if t.get_text().startswith("kv")}
    assert mha == {f"kv{j}" for j in range(0, 32, 4)}  # "kv30" is wider than "q30": every 4th, not every 2nd


def _pool_rows(fig, pool):
    return {
        int(p.get_gid().split(":")[1]): p for p in fig.axes[0].patches if (p.get_gid() or "").startswith(pool + ":")
    }


@pytest.mark.parametrize("slots, pool_rows", [((5, 1, 6), 8), ((2, -1, 0), 5), ((0,), 1), ((-1, -1), 3)])
def test_op_overview_colours_exactly_the_written_rows(slots, pool_rows):
    fig = op_overview(slots=slots, pool_rows=pool_rows)
    written = {s for s in slots if s >= 0}
    for pool in ("k_pool", "v_pool"):
        rows = _pool_rows(fig, pool)
        assert sorted(rows) == list(range(pool_rows))
        for r, patch in rows.items():
            assert patch.get_facecolor() == to_rgba(WRITTEN if r in written else UNTOUCHED), (pool, r)


def test_op_overview_draws_one_write_arrow_per_writing_token():
    fig = op_overview(slots=(3, -1, 0), pool_rows=4)
    arrows = sorted(p.get_gid() for p in fig.axes[0].patches if (p.get_gid() or "").startswith("write:"))
    assert arrows == ["write:k:0", "write:k:2", "write:v:0", "write:v:2"]  # token 1 (slot -1) writes nothing


def test_op_overview_names_the_inputs_and_the_rotation():
    fig = op_overview()
    gids = {p.get_gid() for p in fig.axes[0].patches}
    assert {"tensor:q", "tensor:k", "tensor:v", "tensor:positions", "tensor:slots", "rotate"} <= gids
    assert "slots = [5, 1, 6]" in fig.axes[0].get_title()


def test_op_overview_rejects_a_slot_past_the_pool():
    with pytest.raises(ValueError, match="below pool_rows=4"):
        op_overview(slots=(4,), pool_rows=4)
