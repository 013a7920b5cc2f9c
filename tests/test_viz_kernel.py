"""viz.kernel: the thread map mirrors the kernel, and the figures hold the data they claim."""

import numpy as np
import pytest

from ropepool.kernels import source
from ropepool.teaching.viz import kernel as vk

CASES = [
    # (name, T, Hq, Hkv, D)
    ("gqa", 2, 4, 2, 8),
    ("mqa", 3, 4, 1, 4),  # Falcon-style, one KV head
    ("mha", 1, 2, 2, 6),
    ("d2", 2, 2, 1, 2),  # one pair per head
    ("one token, Llama-3-8B heads", 1, 32, 8, 128),
]


@pytest.mark.parametrize("backend", sorted(source.HEADER_FILES))
def test_mapping_lines_are_the_kernels_own(backend):
    body = source.body(backend)
    for line in vk.MAPPING_LINES:
        assert line in body, f"the kernel no longer maps threads with {line!r}: update viz.kernel.thread_map"


@pytest.mark.parametrize("name, T, Hq, Hkv, D", CASES, ids=[c[0] for c in CASES])
def test_thread_map_covers_each_token_head_pair_once(name, T, Hq, Hkv, D):
    m = vk.thread_map(T, Hq, Hkv, D)
    assert len(m["gid"]) == T * (Hq + Hkv) * D // 2 == source.grid_size(T, Hq, Hkv, D)
    triples = set(zip(m["token"].tolist(), m["head"].tolist(), m["pair"].tolist()))
    assert len(triples) == len(m["gid"])
    assert m["token"].max() == T - 1 and m["head"].max() == Hq + Hkv - 1 and m["pair"].max() == D // 2 - 1


def test_thread_map_runs_pairs_fastest_then_heads_then_tokens():
    m = vk.thread_map(2, 2, 1, 4)
    assert m["pair"].tolist()[:4] == [0, 1, 0, 1]
    assert m["head"].tolist()[:6] == [0, 0, 1, 1, 2, 2]
    assert m["token"].tolist() == [0] * 6 + [1] * 6


@pytest.mark.parametrize("name, T, Hq, Hkv, D", CASES, ids=[c[0] for c in CASES])
def test_writers_write_every_element_once_two_per_thread(name, T, Hq, Hkv, D):
    q_w, k_w = vk.writers(T, Hq, Hkv, D)
    assert q_w.shape == (T, Hq, D) and k_w.shape == (T, Hkv, D)
    assert (q_w >= 0).all() and (k_w >= 0).all()
    counts = np.bincount(np.concatenate([q_w.ravel(), k_w.ravel()]))
    assert (counts == 2).all()
    np.testing.assert_array_equal(q_w[..., : D // 2], q_w[..., D // 2 :])  # pair (i, i + D/2)
    np.testing.assert_array_equal(k_w[..., : D // 2], k_w[..., D // 2 :])


def test_writers_q_heads_come_before_k_heads_within_a_token():
    q_w, k_w = vk.writers(2, 4, 2, 8)
    for t in range(2):
        assert q_w[t].max() < k_w[t].min()
    assert k_w[0].max() < q_w[1].min()


def test_writers_empty_call():
    q_w, k_w = vk.writers(0, 4, 2, 8)
    assert q_w.shape == (0, 4, 8) and k_w.shape == (0, 2, 8)


def test_thread_grid_images_hold_the_writers():
    fig = vk.thread_grid(2, 4, 2, 8)
    q_img = next(im for ax in fig.axes for im in ax.images if im.get_gid() == "q_rot")
    k_img = next(im for ax in fig.axes for im in ax.images if im.get_gid() == "k_rot")
    q_w, k_w = vk.writers(2, 4, 2, 8)
    np.testing.assert_array_equal(np.asarray(q_img.get_array()), q_w.reshape(8, 8))
    np.testing.assert_array_equal(np.asarray(k_img.get_array()), k_w.reshape(4, 8))
    assert "48 threads" in fig._suptitle.get_text()


def test_thread_grid_numbers_every_cell_when_small_and_none_when_large():
    small = vk.thread_grid(2, 4, 2, 8)
    texts = [t.get_text() for ax in small.axes for t in ax.texts]
    assert len(texts) == 2 * (4 + 2) * 8 and texts[:3] == ["0", "1", "2"]
    large = vk.thread_grid(4, 8, 2, 16)  # 320 threads
    assert not any(ax.texts for ax in large.axes)


def test_thread_grid_labels_rows_by_token_and_head():
    fig = vk.thread_grid(2, 2, 1, 4)
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert labels == ["t0 h0", "t1 h0"]


@pytest.mark.parametrize(
    "Hq, Hkv, D, shared, per_thread",
    [
        (32, 8, 128, 64, 2560),  # Llama-3-8B
        (71, 1, 64, 32, 2304),  # Falcon-7B, MQA
        (16, 8, 256, 128, 3072),  # Gemma-2-9B
        (1, 1, 2, 1, 2),  # the smallest head
    ],
)
def test_trig_counts(Hq, Hkv, D, shared, per_thread):
    assert vk.trig_counts(Hq, Hkv, D) == {"shared": shared, "per_thread": per_thread}


def test_trig_counts_count_rotated_pairs_only():
    assert vk.trig_counts(32, 32, 80, rotary_dim=32) == {"shared": 16, "per_thread": 1024}  # Phi-2


def test_trig_count_bars_widths():
    fig = vk.trig_count_bars({"llama-3-8b": (32, 8, 128), "falcon-7b": (71, 1, 64), "phi-2": (32, 32, 80, 32)})
    ax = fig.axes[0]
    widths = {gid: [p.get_width() for p in ax.patches if p.get_gid() == gid] for gid in ("shared", "per_thread")}
    assert widths == {"shared": [64, 32, 16], "per_thread": [2560, 2304, 1024]}
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["llama-3-8b", "falcon-7b", "phi-2"]
    assert " 1,024" in [t.get_text() for t in ax.texts]


class _Row:
    """What timing_bars reads from a bench.Timing."""

    def __init__(self, method, tokens, median_ms, ratio, ratio_range=(float("nan"), float("nan"))):
        self.method, self.tokens, self.median_ms, self.ratio = method, tokens, median_ms, ratio
        self.ratio_range = ratio_range


def test_timing_bars_heights_groups_and_labels():
    rows = [
        _Row("ropepool", 1, 0.4, 1.0),
        _Row("mx.fast.rope", 1, 0.2, 0.5),
        _Row("ropepool", 64, 3.0, 1.0),
        _Row("mx.fast.rope", 64, 6.0, 2.0, (1.7, 2.4)),
    ]
    ax = vk.timing_bars(rows).axes[0]
    by_method = {
        m: [(round(p.get_x() + p.get_width() / 2, 6), p.get_height()) for p in ax.patches if p.get_gid() == m]
        for m in ("ropepool", "mx.fast.rope")
    }
    assert [h for _, h in by_method["ropepool"]] == [0.4, 3.0]
    assert [h for _, h in by_method["mx.fast.rope"]] == [0.2, 6.0]
    assert all(x < 0.5 for x, _ in (by_method["ropepool"][0], by_method["mx.fast.rope"][0]))  # T = 1 group
    assert [t.get_text() for t in ax.get_xticklabels()] == ["T = 1", "T = 64"]
    assert {t.get_text() for t in ax.texts} == {"1x", "0.5x", "2x"}
    (segment,) = next(c for c in ax.collections if c.get_gid() == "mx.fast.rope spread").get_segments()
    assert np.allclose(segment[:, 1], [1.7 * 3.0, 2.4 * 3.0])  # ropepool's 3 ms at T = 64 times each round's ratio
    assert [c.get_gid() for c in ax.collections] == ["mx.fast.rope spread"]  # rows without a spread: no whisker
    assert ax.get_yscale() == "log"


def test_a_whisker_whose_end_is_the_median_up_to_a_float_s_last_bit_is_drawn():
    """The median ratio equals a round's ratio (both medians from one round) but is computed otherwise: the
    whisker's length may come out as -1e-17, which matplotlib refuses; it is drawn as 0."""
    from ropepool.cli.bench import Timing

    base = Timing("ropepool", "float32", 64, 128, 3.0, 2.9, 3)
    other = Timing("mx.fast.rope", "float32", 64, 128, 0.3, 0.29, 3)
    other.ratio = 0.3 / 3.0
    other.ratio_range = (other.ratio * (1 + 1e-13), 0.2)  # just above the median ratio
    ax = vk.timing_bars([base, other]).axes[0]
    assert [c.get_gid() for c in ax.collections] == ["mx.fast.rope spread"]


def test_timing_bars_takes_bench_compare_rows():
    from ropepool.cli.bench import compare
    from ropepool.shapes import Shapes

    rows = compare(Shapes(2, 4, 2, 8, 16), "float32", repeats=3, warmup=0, methods=("ropepool", "mx.fast.rope"))
    ax = vk.timing_bars(rows).axes[0]
    assert sorted(p.get_gid() for p in ax.patches) == ["mx.fast.rope", "ropepool"]
    fast = next(r for r in rows if r.method == "mx.fast.rope")
    lo, hi = fast.ratio_range
    assert lo * (1 - 1e-12) <= fast.ratio <= hi * (1 + 1e-12)  # within the rounds' own ratios (to a float's last bit)
    (segment,) = next(c for c in ax.collections if c.get_gid() == "mx.fast.rope spread").get_segments()
    base = next(r.median_ms for r in rows if r.method == "ropepool")
    assert np.allclose(segment[:, 1], [lo * base, hi * base])


def test_code_block_highlights_and_scrolls():
    from ropepool.kernels import source

    body = source.body("metal")
    block = vk.CodeBlock(body, max_lines=24)
    html = block._repr_html_()
    assert str(block) == body and "max-height:32.4em;overflow:auto" in html
    assert "<span" in html and "style=" in html  # highlighted, inline colours (no stylesheet needed)
    assert "thread_position_in_grid" in html
