"""ropepool.teaching.viz.pool: the pool heatmaps, slot map, occupancy and pages, read back from the figures."""

import numpy as np
import pytest

from ropepool.teaching.viz import pool as V


def image(fig, gid):
    found = [im for ax in fig.axes for im in ax.images if im.get_gid() == gid]
    assert len(found) == 1, f"expected one image with gid {gid!r}, found {len(found)}"
    return np.asarray(found[0].get_array())


def gids(fig):
    return {a.get_gid() for ax in fig.axes for a in ax.get_children() if a.get_gid()}


def test_rows_image_puts_heads_side_by_side():
    pool = np.arange(2 * 3 * 4).reshape(2, 3, 4)  # [P, Hkv, D]
    img = V.rows_image(pool)
    assert img.shape == (2, 12)
    np.testing.assert_array_equal(img[1, 4:8], pool[1, 1])


def test_written_rows_skip_negative_and_out_of_range():
    np.testing.assert_array_equal(V.written_rows([7, -1, 2, 12], 12), [2, 7])


@pytest.mark.parametrize("compact", [False, True])
def test_before_after_shows_both_pools_and_outlines_written_rows(compact):
    rng = np.random.default_rng(0)
    before = rng.standard_normal((6, 2, 4))
    after = before.copy()
    after[[1, 4]] = 5.0
    fig = V.before_after(before, after, [4, -1, 1], compact=compact)
    np.testing.assert_allclose(image(fig, "before"), V.rows_image(before))
    np.testing.assert_allclose(image(fig, "after"), V.rows_image(after))
    assert {g for g in gids(fig) if g.startswith("written")} == {"written 1", "written 4"}
    assert "rows [1, 4] written" in fig.axes[1].get_title()


def test_slot_map_arrows_end_at_the_slots_and_skips_are_marked():
    fig = V.slot_map([3, -1, 0], pool_rows=5)
    ax = fig.axes[0]
    lines = {ln.get_gid(): ln for ln in ax.lines if ln.get_gid()}
    assert lines["token 0"].get_ydata()[-1] == 3 and lines["token 2"].get_ydata()[-1] == 0
    assert "skip 1" in lines and "token 1" not in lines
    assert any("writes nothing" in t.get_text() for t in ax.texts)


def test_occupancy_image_is_owners_per_step():
    owners = np.array([[-1, -1, -1], [0, 0, -1], [0, 0, 1]])  # [steps, P]
    fig = V.occupancy(owners, ["empty", "A", "B"], ["A", "B"])
    np.testing.assert_array_equal(image(fig, "owners"), owners.T + 1)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["empty", "A", "B"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["A", "B", "free"]


def test_pages_fold_rows_and_show_the_page_table():
    owners = np.array([0, 0, 0, 1, 1, -1, -1, -1])
    fig = V.pages(owners, page_size=2, page_tables={"A": [0, 1], "B": [1, 2]})
    np.testing.assert_array_equal(image(fig, "pages"), owners.reshape(4, 2) + 1)
    assert "7" in [t.get_text() for t in fig.axes[0].texts]  # slot 7 = page 3, offset 1
    (table,) = [t for t in fig.axes[1].tables]
    cells = {(r, c): cell.get_text().get_text() for (r, c), cell in table.get_celld().items()}
    assert cells[(1, 0)] == "A" and cells[(2, 1)] == "[1, 2]"
