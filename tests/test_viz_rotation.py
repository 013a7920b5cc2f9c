"""ropepool.teaching.viz.rotation: the data behind each rotation plot, read back from the figures."""

import numpy as np
import pytest

from ropepool.reference import inverse_frequencies, rotate_neox
from ropepool.teaching.viz import rotation as R


def line(fig, gid):
    found = [ln for ax in fig.axes for ln in ax.lines if ln.get_gid() == gid]
    assert len(found) == 1, f"expected one line with gid {gid!r}, found {len(found)}"
    return found[0]


@pytest.mark.parametrize("head_dim, base", [(2, 10000.0), (8, 10000.0), (16, 500000.0)])
def test_pair_vectors_start_at_one_zero_and_turn_by_theta(head_dim, base):
    pos = np.arange(7)
    vec = R.pair_vectors(R.unit_pairs(head_dim), pos, base)  # [N, D/2, 2]
    theta = pos[:, None] * inverse_frequencies(head_dim, base)[None, :]
    np.testing.assert_allclose(vec[..., 0], np.cos(theta), atol=1e-12)
    np.testing.assert_allclose(vec[..., 1], np.sin(theta), atol=1e-12)


def test_pair_paths_draws_one_panel_per_pair_with_the_turning_vector():
    fig = R.pair_paths(head_dim=8, rope_base=100.0, positions=range(5))
    paths = [ln for ax in fig.axes for ln in ax.lines if ln.get_gid() == "path"]
    assert len(paths) == 4
    inv = inverse_frequencies(8, 100.0)
    for i, ln in enumerate(paths):
        np.testing.assert_allclose(ln.get_xdata(), np.cos(np.arange(5) * inv[i]), atol=1e-12)
        np.testing.assert_allclose(ln.get_ydata(), np.sin(np.arange(5) * inv[i]), atol=1e-12)
    assert "pair (1, 5)" in fig.axes[1].get_title()


def test_pair_paths_can_pick_pairs():
    fig = R.pair_paths(head_dim=16, pairs=[0, 7])
    assert [ax.get_title().split("\n")[0] for ax in fig.axes] == ["pair (0, 8)", "pair (7, 15)"]


def test_frequencies_go_fast_to_slow_and_wavelength_is_two_pi_over_theta():
    fig = R.frequencies(head_dim=64, bases=(10000.0, 500000.0))
    for base in (10000.0, 500000.0):
        theta = line(fig, f"omega {base:g}").get_ydata()
        np.testing.assert_allclose(theta, inverse_frequencies(64, base))
        assert theta[0] == 1.0 and np.all(np.diff(theta) < 0)
        np.testing.assert_allclose(line(fig, f"wavelength {base:g}").get_ydata(), 2 * np.pi / theta)
    assert line(fig, "context").get_ydata()[0] == 8192


def test_scores_depend_only_on_the_offset():
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal(16), rng.standard_normal(16)
    S = R.scores(q, k, np.arange(20), 10000.0)
    np.testing.assert_allclose(S[3:, 3:], S[:-3, :-3], atol=1e-12)  # shift both positions by 3
    assert np.ptp(np.diag(S, 2)) < 1e-12
    assert abs(S[5, 5] - q @ k) < 1e-12  # offset 0: the unrotated dot product
    assert np.ptp(S[0]) > 0.1  # but the score does change with the offset


def test_relative_scores_plots_each_row_against_the_offset():
    pos = np.arange(10)
    S = R.scores(np.ones(8), np.arange(8.0), pos, 100.0)
    fig = R.relative_scores(S, pos)
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(), S)
    ln = line(fig, "row 9")
    np.testing.assert_array_equal(ln.get_xdata(), pos - 9)
    np.testing.assert_allclose(ln.get_ydata(), S[9])


def test_neox_to_gptj_interleaves_the_halves():
    np.testing.assert_array_equal(R.neox_to_gptj(8), [0, 4, 1, 5, 2, 6, 3, 7])
    np.testing.assert_array_equal(np.sort(R.neox_to_gptj(128)), np.arange(128))


@pytest.mark.parametrize("head_dim", [2, 8, 128])
def test_gptj_is_neox_up_to_the_permutation(head_dim):
    rng = np.random.default_rng(head_dim)
    x, pos = rng.standard_normal((3, 2, head_dim)), np.array([0, 7, 4096])
    perm = R.neox_to_gptj(head_dim)
    np.testing.assert_allclose(rotate_neox(x, pos, 1e4)[..., perm], R.rotate_gptj(x[..., perm], pos, 1e4), atol=1e-12)
    if head_dim > 2:  # without the permutation the two conventions differ
        assert not np.allclose(rotate_neox(x, pos, 1e4), R.rotate_gptj(x, pos, 1e4))


def test_pairing_diagram_arcs_join_the_paired_dimensions():
    fig = R.pairing_diagram(8)
    for i in range(4):
        neox, gptj = line(fig, f"neox {i}").get_xdata(), line(fig, f"gptj {i}").get_xdata()
        assert (round(neox[0]), round(neox[-1])) == (i, i + 4)
        assert (round(gptj[0]), round(gptj[-1])) == (2 * i, 2 * i + 1)


def test_error_bound_values_and_growth():
    assert R.error_bound("float32", 0) == pytest.approx(2 * 2.0**-23 + 2.0**-22)
    assert R.error_bound("bfloat16", 0, scale=2.0) == pytest.approx(2.0 * (2 * 2.0**-7 + 2.0**-22))
    b = R.error_bound("float16", [0, 10, 10**6], scale=3.0)
    assert np.all(np.diff(b) > 0)


def test_pair_norms():
    np.testing.assert_allclose(R.pair_norms(np.array([3.0, 0.0, 4.0, 1.0])), [5.0, 1.0])


@pytest.fixture(scope="module")
def errors():
    pos = np.unique(np.round(np.logspace(0, np.log10(2**24 - 1), 25)).astype(np.int64))
    return R.position_errors(np.concatenate([[0], pos]), head_dim=32)


def test_position_errors_stay_within_the_bound_and_grow(errors):
    assert set(errors) == {"float32", "bfloat16", "float16"}
    for dtype, e in errors.items():
        assert e["error"][0] == 0.0  # position 0 turns nothing
        assert np.all(e["error"] <= R.error_bound(dtype, e["positions"], e["scale"])), dtype
    f32 = errors["float32"]
    small, large = (
        f32["error"][(f32["positions"] > 0) & (f32["positions"] <= 16)],
        f32["error"][f32["positions"] > 2**20],
    )
    assert large.min() > 100 * small.max()
    # at small positions the output format dominates: bfloat16 > float16 > float32
    assert errors["bfloat16"]["error"][1] > errors["float16"]["error"][1] > errors["float32"]["error"][1]


def test_precision_plot_holds_the_errors_on_log_axes(errors):
    fig = R.precision(errors)
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    e = errors["float16"]
    np.testing.assert_allclose(line(fig, "float16").get_ydata(), e["error"][1:])  # position 0 left off
    np.testing.assert_allclose(
        line(fig, "bound float16").get_ydata(), R.error_bound("float16", e["positions"][1:], e["scale"][1:])
    )
