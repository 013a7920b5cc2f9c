"""The scaling plots and widget of notebook 03b draw what the rules compute."""

import numpy as np
import pytest

from ropepool.teaching.viz import scaling as viz
from ropepool.teaching.widgets.scaling import ScalingExplorer


def test_scaling_rules_slow_what_each_rule_says():
    rules = viz.scaling_rules(128, 500000.0, 8, 8192)
    base = np.asarray(rules["plain"].inv_freq)
    slow = {name: base / np.asarray(r.inv_freq) for name, r in rules.items()}
    assert np.allclose(slow["linear"], 8)  # every pair 8x slower
    assert slow["llama3"][0] == 1 and slow["llama3"][-1] == pytest.approx(8)  # fast pairs kept, slow ones 8x
    assert slow["yarn"][0] == 1 and slow["yarn"][-1] == pytest.approx(8)
    assert slow["NTK (larger base)"][0] == 1 and 1 < slow["NTK (larger base)"][-1] <= 8.01


def test_wavelength_plot_draws_one_line_per_rule_and_both_contexts():
    rules = viz.scaling_rules(64, 10000.0, 4, 4096)
    fig = viz.wavelength_plot(rules, 4096, 4)
    ax = fig.axes[0]
    lines = [line for line in ax.get_lines() if len(line.get_xdata()) == 32]
    assert len(lines) == len(rules)
    np.testing.assert_allclose(lines[0].get_ydata(), rules["plain"].wavelengths())
    assert {4096, 16384} <= {round(line.get_ydata()[0]) for line in ax.get_lines() if len(line.get_xdata()) == 2}


def test_pairing_plot_colours_each_pair_and_greys_the_pass_through():
    fig = viz.pairing_plot(16, 8)
    labels = [[t.get_text() for t in ax.texts] for ax in fig.axes]
    assert len(labels[0]) == 16 and len(labels[1]) == 16 and len(labels[2]) == 8  # partial: 4 pairs, 8 dims
    neox_dim8 = [t for t in fig.axes[0].texts if t.get_position()[0] == 8.45][0]
    gptj_dim1 = [t for t in fig.axes[1].texts if t.get_position()[0] == 1.45][0]
    assert neox_dim8.get_text() == "0" and gptj_dim1.get_text() == "0"  # dim 0 pairs with 8 (NeoX), 1 (GPT-J)


def test_scaling_explorer_updates_with_its_controls():
    w = ScalingExplorer(head_dim=64, rope_base=10000.0, factor=4, original=4096)
    first = w.image.value
    w.factor.value = 16
    assert w.image.value != first
    assert np.allclose(np.asarray(w.rules["plain"].inv_freq) / np.asarray(w.rules["linear"].inv_freq), 16)
    w.original.value = 32768
    assert w.rules["yarn"].wavelengths()[-1] == pytest.approx(16 * w.rules["plain"].wavelengths()[-1])
