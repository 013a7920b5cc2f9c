"""The projector rule: every figure the suite draws is legible at 1024x768, no text under 10 pt.

A figure is drawn as the notebooks (and widgets) draw it, then every visible text artist's size
is read and converted to the size a learner sees. The notebook shows a figure's PNG at one CSS
pixel per pixel, so at its saved dpi a font of F pt is ``F * dpi / 72`` px; a browser at ~100
pixels per inch shows that as ``F * dpi / 100`` pt. A PNG wider than the notebook's ~900 px
display width is scaled down to fit, by ``900 / width_px``.
"""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from ropepool import models
from ropepool.teaching.viz import engine as ve, gqa, kernel as vk, pool as pv, real_model as rm, rotation as rv
from ropepool.teaching.viz import scaling as sv

MIN_PT = 10.0
DISPLAY_PX = 900  # the notebook's display width at 1024x768 with the file browser closed
SCREEN_DPI = 100


def effective_pt(fontsize: float, dpi: float, width_px: float) -> float:
    """The size a learner sees of ``fontsize`` pt text in a ``width_px`` wide PNG saved at ``dpi``."""
    return fontsize * dpi / SCREEN_DPI * min(1.0, DISPLAY_PX / width_px)


def test_effective_pt():
    assert effective_pt(10, 100, 800) == 10  # fits: shown as drawn
    assert effective_pt(10, 72, 500) == pytest.approx(7.2)  # a low dpi shrinks the text
    assert effective_pt(10, 100, 1800) == 5  # twice too wide: scaled to half


class _Row:
    def __init__(self, method, tokens, median_ms, ratio):
        self.method, self.tokens, self.median_ms, self.ratio = method, tokens, median_ms, ratio


def _history():
    owner = np.full(16, pv.FREE)
    history, labels = [owner.copy()], ["empty"]
    owner[:5] = 0
    history.append(owner.copy()), labels.append("prefill A")
    owner[5:8] = 1
    history.append(owner.copy()), labels.append("prefill B")
    for step, rows in enumerate(((8, 9), (10, 11), (12, 13)), 1):
        owner[rows[0]], owner[rows[1]] = 0, 1
        history.append(owner.copy()), labels.append(f"decode {step}")
    return history, labels


def _pages():
    owner = np.full(16, pv.FREE)
    owner[8:12], owner[0:2], owner[12:15] = 0, 0, 1
    return owner, 4, {"A": [2, 0], "B": [3]}


def _errors():
    positions = np.concatenate([[0], np.unique(np.geomspace(1, 2**24 - 1, 49).round().astype(np.int64))])
    return rv.position_errors(positions, ("float32", "bfloat16", "float16"), head_dim=64)


def _pool_widget():
    from ropepool.teaching.widgets.pool import PoolPlayground

    return PoolPlayground(slots="7, 2, -1, 4")


def _rng_pool(P=12):
    return np.random.default_rng(0).standard_normal((P, 2, 8)).astype(np.float32)


def _scores():
    rng = np.random.default_rng(0)
    q, k, positions = rng.standard_normal(64), rng.standard_normal(64), np.arange(32)
    return rv.relative_scores(rv.scores(q, k, positions, 10000.0), positions)


def _engine():
    """A tiny mlx-lm Llama in the engine, after its first step: 16 pool rows, three requests (one waits)."""
    import mlx.core as mx
    from mlx_lm.models import llama

    from ropepool.engine import Engine

    mx.random.seed(0)
    model = llama.Model(
        llama.ModelArgs(
            model_type="llama",
            hidden_size=32,
            num_hidden_layers=1,
            intermediate_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-5,
            vocab_size=64,
        )
    )
    engine = Engine(model, pool_rows=16)
    for prompt, new in (([3, 14, 15, 9, 2, 6], 4), ([8, 9, 3], 5), ([3, 8, 4, 6, 2], 4)):
        engine.add_request(prompt, new)
    engine.step()
    return engine


def _presets():
    return {
        n: (p.num_qo_heads, p.num_kv_heads, p.head_dim, p.rotary_dim or p.head_dim)
        for n, p in ((n, models.preset(n)) for n in models.preset_names())
    }


# (name, builder of the figure as the notebook or widget draws it; its PNG is saved at the figure's dpi)
FIGURES = [
    ("00 op_overview", lambda: gqa.op_overview(slots=(5, 1, 6), pool_rows=8)),
    ("01 head_groups GQA", lambda: gqa.head_groups(32, 8)),
    ("01 head_groups MQA falcon", lambda: gqa.head_groups(71, 1)),
    ("01 head_groups MHA", lambda: gqa.head_groups(32, 32)),
    ("01 head_groups 64 heads", lambda: gqa.head_groups(64, 8)),
    ("03 pair_paths", lambda: rv.pair_paths(head_dim=8, rope_base=10000.0, positions=range(0, 13))),
    ("03 frequencies", lambda: rv.frequencies(head_dim=128, bases=(10000.0, 500000.0))),
    ("03 relative_scores", _scores),
    ("03 pairing_diagram", lambda: rv.pairing_diagram(8)),
    ("03 precision", lambda: rv.precision(_errors())),
    (
        "03 RotationExplorer",
        lambda: __import__("ropepool.teaching.widgets.rotation", fromlist=["x"]).explorer_figure(10, 10000.0, 64)[0],
    ),
    ("04 slot_map", lambda: pv.slot_map(np.array([7, 2, 9, 4]), 12, np.array([0, 1, 2, 3]))),
    ("04 before_after", lambda: pv.before_after(np.zeros((12, 2, 8), np.float32), _rng_pool(), np.array([7, 2, 9, 4]))),
    ("04 occupancy", lambda: pv.occupancy(*_history(), ["A", "B"])),
    ("04 pages", lambda: pv.pages(*_pages())),
    ("04 PoolPlayground", lambda: _pool_widget().figure),
    ("05 thread_grid", lambda: vk.thread_grid(tokens=2, num_qo_heads=4, num_kv_heads=2, head_dim=8)),
    ("05 trig_count_bars", lambda: vk.trig_count_bars(_presets())),
    (
        "05 timing_bars",
        lambda: vk.timing_bars(
            [
                _Row(m, T, 0.1 * T**0.5 * (i + 1), float(i + 1))
                for T in (1, 64, 512)
                for i, m in enumerate(("ropepool", "mx.fast.rope", "numpy", "copy (mlx)"))
            ],
            title="Llama-3-8B heads, float16, P = 4096; ropepool on 'cpu'",
        ),
    ),
    ("03b wavelength_plot", lambda: sv.wavelength_plot(sv.scaling_rules(128, 500000.0, 8, 8192), 8192, 8)),
    ("03b slowdown_plot", lambda: sv.slowdown_plot(sv.scaling_rules(128, 500000.0, 8, 8192))),
    ("03b pairing_plot", lambda: sv.pairing_plot(16, 8)),
    (
        "03b mistake_plot",
        lambda: sv.mistake_plot([0, 15, 2047, 131071], [1e-7, 1e-3, 0.5, 2.0], [1e-7, 1e-6, 1e-4, 1e-2]),
    ),
    ("07 plot_pool", lambda: ve.plot_pool(_engine())),
    ("07 plot_timeline", lambda: ve.plot_timeline([ve.pool_owners(_engine())] * 3)),
    ("07 plot_pool_steps", lambda: ve.plot_pool_steps([ve.snapshot(_engine())] * 2)),
    ("08 row_permutation", lambda: rm.row_permutation(8)),
    ("08 logit_agreement", lambda: rm.logit_agreement(np.arange(50.0), np.arange(50.0) + 1e-6, np.arange(50.0)[::-1])),
    (
        "08 kv_memory",
        lambda: rm.kv_memory({"float16": 23_040, "float32": 46_080}, contexts=(1024, 4096), weights_bytes=98_362_432),
    ),
    (
        "03b ScalingExplorer",
        lambda: __import__("ropepool.teaching.widgets.scaling", fromlist=["x"]).ScalingExplorer().figure,
    ),
]


def small_texts(fig) -> list[tuple[str, float]]:
    """(text, effective pt) of every visible, non-empty text artist under MIN_PT."""
    FigureCanvasAgg(fig)
    fig.canvas.draw()  # ticks, legends and constrained layout exist only after a draw
    renderer = fig.canvas.get_renderer()
    bbox = fig.get_tightbbox(renderer)  # the notebook shows the figure cropped to its content
    width_px = bbox.width * fig.dpi
    found = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or not _shown(t):
            continue
        pt = effective_pt(t.get_fontsize(), fig.dpi, width_px)
        if pt < MIN_PT - 1e-6:
            found.append((t.get_text(), round(pt, 1)))
    return found


def _shown(t: Text) -> bool:
    """False for a text whose axes (or any ancestor) is hidden: it is not drawn."""
    a = t.axes
    return a is None or (a.get_visible() and (a.axison or t not in (*a.get_xticklabels(), *a.get_yticklabels())))


@pytest.mark.parametrize("name, build", FIGURES, ids=[n for n, _ in FIGURES])
def test_no_text_under_10pt_at_the_displayed_size(name, build):
    fig = build()
    small = small_texts(fig)
    assert not small, f"{name} (dpi {fig.dpi}, {fig.get_figwidth():.1f} in wide): text under {MIN_PT} pt: {small}"


def test_gqa_explorer_png_is_saved_at_the_figures_dpi():
    from ropepool.teaching.widgets import gqa as wg

    fig = gqa.head_groups(32, 8)
    assert wg.DPI == fig.dpi, "the widget's PNG must be saved at the dpi the projector rule is checked at"
