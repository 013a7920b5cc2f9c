"""ropepool.teaching.widgets.pool: type slots, check the pool the widget shows against the reference."""

import numpy as np
import pytest

from ropepool.reference import rope_pool_reference
from ropepool.teaching.widgets.pool import PoolPlayground, parse_slots


@pytest.fixture
def w():
    return PoolPlayground(slots="7, 2, -1, 4")


def reference_pool(w, slots):
    kw = w.call_kwargs(np.array(slots, np.int32))
    return rope_pool_reference(
        kw["q"], kw["k"], kw["v"], kw["positions"], kw["slots"], kw["k_pool"], kw["v_pool"], rope_base=kw["rope_base"]
    )[2]


def test_parse_slots():
    np.testing.assert_array_equal(parse_slots(" 3, 7 -1,"), [3, 7, -1])
    assert parse_slots("").shape == (0,)
    with pytest.raises(ValueError):
        parse_slots("3, x")


def test_initial_call_writes_its_rows(w):
    assert w.error is None
    np.testing.assert_array_equal(w.written, [2, 4, 7])
    np.testing.assert_allclose(w.k_pool, reference_pool(w, [7, 2, -1, 4]), atol=1e-5)
    untouched = np.setdiff1d(np.arange(12), [2, 4, 7])
    assert np.array_equal(w.k_pool[untouched], w.pool_before[untouched])  # bit for bit
    assert "1 token(s) wrote nothing" in w.status.value
    assert w.image.value[:4] == b"\x89PNG"


def test_new_slots_update_pool_and_figure(w):
    w.slots.value = "0, 11"
    np.testing.assert_array_equal(w.written, [0, 11])
    np.testing.assert_allclose(w.k_pool, reference_pool(w, [0, 11]), atol=1e-5)
    (after,) = [im for ax in w.figure.axes for im in ax.images if im.get_gid() == "after"]
    np.testing.assert_allclose(np.asarray(after.get_array()), w.k_pool.reshape(12, -1))


def test_start_position_rotates_the_written_rows(w):
    row7 = w.k_pool[7].copy()
    w.start.value = 50
    assert not np.allclose(w.k_pool[7], row7)
    np.testing.assert_allclose(w.k_pool, reference_pool(w, [7, 2, -1, 4]), atol=1e-4)


@pytest.mark.parametrize("slots, code", [("1, 1", "duplicate_slot"), ("0, 12", "slot_out_of_range")])
def test_bad_slots_show_the_validation_error(w, slots, code):
    w.slots.value = slots
    assert w.error is not None and w.error.code == code
    assert w.k_pool is None and w.image.value == b""
    assert code in w.status.value


def test_without_check_values_an_out_of_range_slot_writes_nothing(w):
    w.check_values.value = False
    w.slots.value = "3, 12"
    assert w.error is None
    np.testing.assert_array_equal(w.written, [3])
    others = np.setdiff1d(np.arange(12), [3])
    assert np.array_equal(w.k_pool[others], w.pool_before[others])


def test_garbage_text_says_so(w):
    w.slots.value = "three"
    assert w.k_pool is None and "integers" in w.status.value


def test_no_broken_image_under_an_error():
    """On an error the image is hidden (an empty PNG shows the browser's broken-image icon); it comes back."""
    w = PoolPlayground(slots="7, 2, -1, 4")
    assert w.image.value and w.image.layout.display is None
    for bad in ("5, 5", "0, 12", "x"):
        w.slots.value = bad
        assert w.image.layout.display == "none" and w.image.value == b""
    w.slots.value = "3"
    assert w.image.value and w.image.layout.display is None
