"""ropepool.teaching.viz.fusions: notebook 10's plots, read back from the figures."""

import numpy as np

from ropepool import fp8
from ropepool.reference import encode_e4m3
from ropepool.teaching.viz import fusions as V


def artist(fig, gid):
    found = [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]
    assert len(found) == 1, f"expected one artist with gid {gid!r}, found {len(found)}"
    return found[0]


def test_e4m3_grid_draws_every_positive_finite_value():
    fig = V.e4m3_grid()
    xy = np.asarray(artist(fig, "e4m3_values").get_offsets())
    assert xy.shape == (126, 2)  # codes 0x01-0x7E (0 has no place on a log axis)
    assert xy[:, 0].max() == 448 and xy[:, 0].min() == 2.0**-9
    assert np.array_equal(xy[:, 1], np.arange(1, 127) >> 3)  # the exponent field
    x, rel = artist(fig, "relative_step").get_data()
    normal = np.asarray(x) >= 2.0**-6
    assert np.all(np.asarray(rel)[normal] <= 1 / 8) and np.all(np.asarray(rel)[normal] >= 1 / 16)


def test_fp8_row_shows_the_decoded_codes_and_their_error():
    row = np.array([[0.1, -3.3, 500.0, 1.0]], np.float32)
    codes = encode_e4m3(row)
    fig = V.fp8_row(row, codes, scale=1.0)
    _, before = artist(fig, "before").get_data()
    _, after = artist(fig, "after").get_data()
    _, err = artist(fig, "error").get_data()
    np.testing.assert_array_equal(before, row.reshape(-1))
    np.testing.assert_array_equal(after, fp8.decode_table()[codes.reshape(-1)])
    assert after[2] == 448  # saturated
    np.testing.assert_allclose(err, np.asarray(after) - np.asarray(before))


def test_fp8_row_multiplies_by_the_scale():
    codes = np.array([0x38], np.uint8)  # 1.0
    _, after = artist(V.fp8_row([2.0], codes, scale=2.0), "after").get_data()
    assert after[0] == 2.0


def test_memory_vs_error_places_each_point():
    fig = V.memory_vs_error([("float32", 4 * 2**20, 0.0), ("fp8", 2**20, 0.5)])
    xy = np.asarray(artist(fig, "points").get_offsets())
    np.testing.assert_array_equal(xy, [[4.0, 0.0], [1.0, 0.5]])
    assert {t.get_text() for t in fig.axes[0].texts} == {"float32", "fp8"}


def test_logit_growth_draws_both_curves():
    fig = V.logit_growth([1, 2], [1.0, 4.0], [3.0, 3.0])
    assert list(artist(fig, "plain").get_data()[1]) == [1.0, 4.0]
    assert list(artist(fig, "normed").get_data()[1]) == [3.0, 3.0]
