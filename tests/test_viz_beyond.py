"""ropepool.teaching.viz.beyond: memory bars, MLA's latent rows, a window's ring of rows, mrope's sections,
each read back from the figure."""

import numpy as np

from ropepool.rope import rope_table
from ropepool.teaching.viz import beyond as V


def artist(fig, gid):
    found = [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]
    assert len(found) == 1, (gid, len(found))
    return found[0]


def test_memory_bars_are_the_bytes_in_gib():
    fig = V.memory_bars([("a", 2 * 2**30, 2**30), ("b", 3 * 2**29, 3 * 2**28)])
    assert artist(fig, "bf16 a").get_width() == 2.0
    assert artist(fig, "fp8 b").get_width() == 0.75  # 3 x 2**28 B


def test_latent_rows_frame_the_written_rows_and_split_at_the_rank():
    pool = np.arange(4 * 6, dtype=np.float32).reshape(4, 1, 6)
    fig = V.latent_rows(pool, [2, -1, 0], kv_lora_rank=4)
    assert artist(fig, "split").get_xdata()[0] == 3.5
    assert artist(fig, "written 2").get_y() == 1.5 and artist(fig, "written 0").get_y() == -0.5
    np.testing.assert_array_equal(artist(fig, "pool").get_array(), pool[:, 0, :])


def test_a_ring_keeps_window_rows_and_the_window_is_the_last_positions():
    slots = V.ring_slots(10, 4, first_row=3)
    assert slots.tolist() == [3, 4, 5, 6, 3, 4, 5, 6, 3, 4]
    fig = V.window_rows(slots, 4)
    x, y = artist(fig, "window").get_data()
    assert x.tolist() == [6, 7, 8, 9] and sorted(y.tolist()) == [3, 4, 5, 6]  # the window covers every row once


def test_mrope_sections_put_each_pair_at_its_axis_angle():
    rope = rope_table(16, 10000.0, rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]})
    positions3 = np.array([[5, 5], [0, 7], [1, 2]])
    fig = V.mrope_sections(rope, positions3)
    inv = 10000.0 ** (-np.arange(8) * 2 / 16)
    x, y = artist(fig, "1 height").get_data()  # token 1's height pairs: 2, 3, 4, turned by h = 7
    np.testing.assert_allclose(np.arctan2(y, x), np.angle(np.exp(1j * 7 * inv[2:5])), atol=1e-12)
    x, _ = artist(fig, "0 time").get_data()
    np.testing.assert_allclose(x, np.cos(5 * inv[:2]), atol=1e-12)
