"""ropepool.teaching.widgets.rotation: set a control, check the angles, vectors and figure that follow."""

import numpy as np
import pytest

from ropepool.reference import inverse_frequencies
from ropepool.teaching.widgets.rotation import RotationExplorer, explorer_figure


@pytest.fixture
def w():
    return RotationExplorer(position=10, rope_base=10000.0, head_dim=16)


def pairs_segments(fig):
    (coll,) = [c for c in fig.axes[0].collections if c.get_gid() == "pairs"]
    return np.array(coll.get_segments())  # [D/2, 2, 2]


def test_initial_state(w):
    np.testing.assert_allclose(w.angles, 10 * inverse_frequencies(16, 10000.0))
    assert w.image.value[:8] == b"\x89PNG\r\n\x1a\n"


def test_position_turns_every_pair(w):
    w.position.value = 1234
    np.testing.assert_allclose(w.angles, 1234 * inverse_frequencies(16, 10000.0))
    seg = pairs_segments(w.figure)
    np.testing.assert_allclose(seg[:, 0], 0)  # every arrow starts at the origin
    np.testing.assert_allclose(seg[:, 1, 0], np.cos(w.angles), atol=1e-12)
    np.testing.assert_allclose(seg[:, 1, 1], np.sin(w.angles), atol=1e-12)
    assert "position 1,234" in w.figure.axes[0].get_title()


def test_head_dim_changes_the_number_of_pairs(w):
    w.head_dim.value = 128
    assert w.angles.shape == (64,) and w.vectors.shape == (64, 2)
    assert len(pairs_segments(w.figure)) == 64


def test_base_slows_the_slow_pairs(w):
    before = w.angles.copy()
    w.base.value = 1e6
    assert w.angles[0] == before[0]  # pair 0 always turns 1 rad per position
    assert np.all(w.angles[1:] < before[1:])


def test_wrapped_pairs_are_counted_in_the_title():
    fig, angles, _ = explorer_figure(100, 10000.0, 8)  # angles 100, 10, 1, 0.1
    assert int((angles >= 2 * np.pi).sum()) == 2
    assert fig.axes[1].get_title().startswith("2 pairs wrapped")
    (ln,) = [ln for ln in fig.axes[1].lines if ln.get_gid() == "angles"]
    np.testing.assert_allclose(ln.get_ydata(), angles)


# --- The position slider is usable: log-spaced stops, and any exact position typed --------------


def test_position_slider_stops_are_log_spaced():
    from ropepool.teaching.widgets.rotation import POSITION_STOPS

    assert POSITION_STOPS[0] == 0 and POSITION_STOPS[-1] == 131_072
    ratios = [b / a for a, b in zip(POSITION_STOPS[1:], POSITION_STOPS[2:])]
    assert all(1 < r <= 2.5 for r in ratios), ratios  # no stop jumps more than 2.5x past the last
    assert len(POSITION_STOPS) <= 20  # ~20 px a stop on a 360 px slider


def test_slider_moves_the_exact_position_and_typing_moves_the_slider(w):
    w.position_slider.value = 5_000
    assert w.position.value == 5_000 and "position 5,000" in w.figure.axes[0].get_title()
    w.position.value = 1234  # typed: the exact value is used, the slider shows the nearest stop
    assert w.position.value == 1234 and w.position_slider.value == 1_000
    assert w.angles[0] == 1234
    w.position.value = 2**24
    assert w.position_slider.value == 131_072 and w.angles[0] == 2**24
