"""The plots of notebook 15: key splits by count and by size, and the gap per layer, read off their data."""

import numpy as np
import pytest

from ropepool.teaching.viz.determinism import gap_plot, key_splits, part_of, split_plot


def test_a_fixed_count_of_parts_moves_a_key_and_a_fixed_size_does_not():
    assert key_splits(12, "count", 4).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert part_of(12, "count", 4, 5) == (3, 4, 5) and part_of(20, "count", 4, 5) == (5, 6, 7, 8, 9)
    assert part_of(12, "size", 8, 5) == part_of(20, "size", 8, 5) == tuple(range(8))
    assert key_splits(3, "count", 4).tolist() == [0, 1, 2]  # fewer keys than parts


def test_key_splits_refuses_an_unknown_rule():
    with pytest.raises(ValueError, match="how must be 'count' or 'size' and n >= 1, got how='even', n=2"):
        key_splits(4, "even", 2)


def test_split_plot_names_each_keys_partners():
    fig = split_plot(lengths=(12, 20), parts=4, size=8, key=5)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [
        "L = 12, 4 parts: key 5 summed with keys 3-5",
        "L = 12, parts of 8: key 5 summed with keys 0-7",
        "L = 20, 4 parts: key 5 summed with keys 5-9",
        "L = 20, parts of 8: key 5 summed with keys 0-7",
    ]
    assert len(fig.axes[2].patches) == 20


def test_gap_plot_draws_zeros_at_the_floor():
    fig = gap_plot({"default": np.array([0.0, 1e-7, 1e-6, 2e-6])}, floor=1e-9)
    y = fig.axes[0].lines[0].get_ydata()
    assert y.tolist() == [1e-9, 1e-7, 1e-6, 2e-6]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["embed", "0", "1", "logits"]
