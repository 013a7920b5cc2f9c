"""What notebooks 04, 07 and 08 use to show why the op takes slots and why engines batch: the
throughput measurement, the pool-memory count, their figures, the live answer stream, the 07/08
checkers, and the figures fixed to fit a 1024x768 projector."""

import io
from contextlib import redirect_stdout

import mlx.core as mx
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from ropepool.engine import Engine
from ropepool.teaching import exercises as ex
from ropepool.teaching import throughput as tp
from ropepool.teaching.viz import engine as ve, pool as pv, scaling as sv, throughput as vt


def tiny_llama():
    from mlx_lm.models import llama

    mx.random.seed(0)
    return llama.Model(
        llama.ModelArgs(
            model_type="llama",
            hidden_size=32,
            num_hidden_layers=1,
            intermediate_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-5,
            vocab_size=64,
            rope_theta=10000.0,
        )
    )


PROMPTS = [[(5 * i + j) % 64 for j in range(4)] for i in range(4)]


def test_measure_serves_every_count_with_every_method_and_the_same_tokens():
    lines = []
    t = tp.measure(
        tiny_llama(),
        PROMPTS,
        new=3,
        counts=(1, 2, 4),
        methods=(tp.ENGINE, tp.MLX_BATCH, tp.MLX_ALONE),
        progress=lines.append,
    )
    assert t.requests == [1, 2, 4] and len(lines) == 3 and lines[2].startswith("4 requests at once: ropepool engine")
    for m in t.tokens_per_s:
        assert len(t.tokens_per_s[m]) == 3 and all(v > 0 for v in t.tokens_per_s[m])
        assert [len(x) for x in t.tokens[m]] == [1, 2, 4] and all(len(r) == 3 for x in t.tokens[m] for r in x)
    assert t.tokens[tp.ENGINE] == t.tokens[tp.MLX_ALONE] == t.tokens[tp.MLX_BATCH]  # greedy: the same work
    assert t.ratio(tp.ENGINE, 4) == t.tokens_per_s[tp.ENGINE][2] / t.tokens_per_s[tp.ENGINE][0]
    assert t.engine_steps == [3, 3, 3]  # one pass per new token, however many requests
    assert t.table().splitlines()[0].startswith("requests |")


def test_measure_refuses_too_few_prompts_and_unknown_methods():
    with pytest.raises(ValueError, match="8 requests need 8 prompts"):
        tp.measure(tiny_llama(), PROMPTS, new=2)
    with pytest.raises(ValueError, match="unknown method"):
        tp.measure(tiny_llama(), PROMPTS, new=2, counts=(1,), methods=("vllm",))


def test_pool_memory_counts_rows_against_reserved_caches():
    m = tp.pool_memory(96, 3, bytes_per_token=46_080, reserve=256)
    assert (m.pool_bytes, m.contiguous_bytes) == (96 * 46_080, 3 * 256 * 46_080)
    assert m.contiguous_bytes == 8 * m.pool_bytes


def size_px(fig):
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    return box.width * fig.dpi, box.height * fig.dpi


def pool_snapshots(P, steps):
    engine = Engine(tiny_llama(), pool_rows=P)
    engine.add_request(list(range(5)), 3)
    shots = []
    for _ in range(steps):
        if not engine.done:
            engine.step()
        shots.append(ve.snapshot(engine))
    return shots


@pytest.mark.parametrize("P, panels, row_height", [(16, 8, 0.16), (96, 4, 0.06)], ids=["07 eight panels", "08 pool"])
def test_pool_steps_fit_a_1024x768_screen_unscaled(P, panels, row_height):
    fig = ve.plot_pool_steps(pool_snapshots(P, panels), row_height=row_height)
    w, h = size_px(fig)
    assert w <= 900 and h <= 740, (w, h)
    assert sum(ax.get_visible() for ax in fig.axes) == panels


def test_throughput_and_memory_figures_fit_and_carry_their_data():
    t = tp.Throughput([1, 2, 4, 8], 2, {tp.ENGINE: [1.0, 2.0, 3.0, 4.0], tp.MLX_BATCH: [1.0, 1.5, 2.0, 2.5]})
    fig = vt.plot_throughput(t)
    lines = {ln.get_gid(): list(ln.get_ydata()) for ln in fig.axes[0].lines}
    assert lines == {tp.ENGINE: [1.0, 2.0, 3.0, 4.0], tp.MLX_BATCH: [1.0, 1.5, 2.0, 2.5]}
    assert max(size_px(fig)) <= 900
    fig = vt.plot_pool_memory(tp.pool_memory(16, 3, 512, 256), reserve_label="mlx-lm's step")
    widths = {p.get_gid(): p.get_width() for p in fig.axes[0].patches}
    assert widths == {"pool": 16 * 512 / 1e6, "contiguous": 3 * 256 * 512 / 1e6}
    assert "48.0x less" in fig.axes[0].get_title()


def test_slots_vs_append_draws_reserved_rows_and_one_call():
    fig = pv.slots_vs_append({"A": 5, "B": 3, "C": 4}, 8, [2, 2, 2, 2, 0, 1, 0, 1, 0, 1, 0, 0], {"B": [9], "C": [0, 1]})
    ax_a, ax_s = fig.axes
    reserved = {p.get_gid(): p.get_width() for p in ax_a.patches if str(p.get_gid()).startswith("reserved")}
    assert reserved == {"reserved A": 3, "reserved B": 5, "reserved C": 4}
    assert "24 rows reserved" in ax_a.get_title() and "12 rows" in ax_s.get_title()
    assert "B: [9], C: [0, 1]" in ax_s.get_xlabel()
    assert max(size_px(fig)) <= 900


def test_mistake_plot_draws_exact_zeros_on_a_labelled_floor_not_a_clamp():
    fig = sv.mistake_plot([0, 15, 2047], [0.0, 1e-3, 0.5], [0.0, 1e-7, 1e-6])
    ax = fig.axes[0]
    lines = {ln.get_gid(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.lines if ln.get_gid()}
    assert lines["plain"] == ([15, 2047], [1e-3, 0.5]) and lines["fixed"] == ([15, 2047], [1e-7, 1e-6])
    floor = 1e-8  # a tenth of the smallest non-zero error
    assert lines["plain zero"] == ([0], [pytest.approx(floor)]) and lines["fixed zero"] == ([0], [pytest.approx(floor)])
    assert any("exactly 0" in t.get_text() for t in ax.texts) and ax.get_ylim()[0] < floor


def test_live_answers_shows_progress_and_each_answer_every_step():
    engine = Engine(tiny_llama(), pool_rows=32)
    for p in PROMPTS[:2]:
        engine.add_request(p, 2)
    live = ve.LiveAnswers(lambda tokens: " ".join(map(str, tokens)), total_tokens=4)
    out = io.StringIO()
    with redirect_stdout(out):  # no notebook here: each step prints what it would redraw
        while not engine.done:
            live(engine, engine.step())
    text = out.getvalue()
    assert "step 1: 8 tokens in this pass; 2 of at most 4 new tokens" in text and "step 2: 2 tokens" in text
    assert len(live.history) == 2 and "request 1: " in text
    assert ve.stream_table(live.history).count("\n") == 2


# --- The checkers of 07 and 08 ----------------------------------------------------------------


def _positions(rs):
    return [p for r in rs for p in range(r["cached"], r["cached"] + r["new"])]


SLOT_MISTAKES = [
    ("positions as slots", lambda rs: (_positions(rs), _positions(rs)), "positions_as_slots"),
    (
        "table from its start",
        lambda rs: (_positions(rs), [r["slot_table"][i] for r in rs for i in range(r["new"])]),
        "from_start",
    ),
    (
        "first row + position",
        lambda rs: (
            _positions(rs),
            [r["slot_table"][0] + p for r in rs for p in range(r["cached"], r["cached"] + r["new"])],
        ),
        "contiguous",
    ),
    (
        "positions from 0",
        lambda rs: ([i for r in rs for i in range(r["new"])], ex.solution_slot_mapping(rs)[1]),
        "positions_from_zero",
    ),
    ("one token short", lambda rs: tuple(x[:-1] for x in ex.solution_slot_mapping(rs)), "wrong_length"),
    ("stub", lambda rs: None, "returned_none"),
]


@pytest.mark.parametrize("name, answer, problem", SLOT_MISTAKES, ids=[m[0] for m in SLOT_MISTAKES])
def test_slot_mapping_checker_names_the_mistake(name, answer, problem):
    ex.expect_rejection(ex.check_slot_mapping, answer, problem)


def test_slot_mapping_solution_is_what_the_engine_builds():
    engine = Engine(tiny_llama(), pool_rows=12)
    for p, n in ((list(range(5)), 3), (list(range(4)), 4), (list(range(3)), 2)):
        engine.add_request(p, n)
    assert ex.check_slot_mapping(ex.solution_slot_mapping).passed
    while not engine.done:
        engine.journal.begin()
        batch = engine.scheduler.schedule()  # what the next step will run
        step = [
            dict(slot_table=list(r.slot_table), cached=r.num_cached, new=n)
            for r, n in zip(batch.requests, batch.lengths)
        ]
        assert ex.solution_slot_mapping(step) == (batch.positions, batch.slots)
        engine.journal.rollback()  # the undo log puts the engine back as it was
        engine.step()


def _kv(config, tokens, b, heads="num_key_value_heads", two=2, layers=True, head_dim=None):
    from ropepool.models import from_config

    p = from_config(config)
    H = config["num_attention_heads"] if heads == "q" else p.num_kv_heads
    D = head_dim(config) if head_dim else p.head_dim
    return (config["num_hidden_layers"] if layers else 1) * two * H * D * b * tokens


KV_MISTAKES = [
    ("query heads", lambda c, t, b: _kv(c, t, b, heads="q"), "query_heads"),
    ("k only", lambda c, t, b: _kv(c, t, b, two=1), "k_or_v"),
    ("one layer", lambda c, t, b: _kv(c, t, b, layers=False), "one_layer"),
    ("bits", lambda c, t, b: _kv(c, t, b * 8), "bits"),
    (
        "hidden // heads",
        lambda c, t, b: _kv(c, t, b, head_dim=lambda c: c["hidden_size"] // c["num_attention_heads"]),
        "head_dim",
    ),
    ("config field read directly", lambda c, t, b: _kv(c, t, b) if c["num_key_value_heads"] else 0, "raised"),
]


@pytest.mark.parametrize("name, answer, problem", KV_MISTAKES, ids=[m[0] for m in KV_MISTAKES])
def test_kv_estimate_checker_names_the_mistake(name, answer, problem):
    err = ex.expect_rejection(ex.check_kv_estimate, answer, problem)
    if problem == "raised":
        assert "multi_query" in str(err)


def test_kv_estimate_solution_matches_mlx_lms_own_cache():
    """The estimate's formula is what mlx-lm's cache holds: one token of a tiny Llama, every layer."""
    from mlx_lm.models.cache import make_prompt_cache

    model = tiny_llama()
    cache = make_prompt_cache(model)
    mx.eval(model(mx.array([[1, 2, 3]]), cache=cache))
    held = sum(k.nbytes + v.nbytes for k, v in (c.keys_and_values() for c in cache))
    config = dict(num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, hidden_size=32)
    assert ex.solution_kv_estimate(config, 3, 4) == held
    assert ex.check_kv_estimate(ex.solution_kv_estimate).passed


def test_exercise_5_has_padding_before_real_tokens_in_a_tight_pool():
    def free_by_token_position(occupancy, needs):
        free = [r for r, o in enumerate(occupancy) if o is None]
        return [free[t] if n else -1 for t, n in enumerate(needs)]

    s = ex.slot_scenarios()["padding first, tight"]
    assert s["needs_slot"][0] is False and s["occupancy"].count(None) == sum(s["needs_slot"])
    err = ex.expect_rejection(ex.check_5, free_by_token_position, "raised")
    assert "free[t]" in str(err) and "padding first, tight" in str(err)
