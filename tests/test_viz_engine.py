"""ropepool.teaching.viz.engine: owners, written rows, slot tables and the plots, read back from the figures."""

import mlx.core as mx
import numpy as np
from mlx_lm.models import llama

from ropepool.engine import Engine
from ropepool.teaching.viz import engine as V
from ropepool.teaching.viz.pool import FREE, rows_image


def image(fig, gid):
    found = [im for ax in fig.axes for im in ax.images if im.get_gid() == gid]
    assert len(found) == 1, f"expected one image with gid {gid!r}, found {len(found)}"
    return np.asarray(found[0].get_array())


def tiny():
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
        )
    )


def engine_after_one_step():
    engine = Engine(tiny(), pool_rows=8, max_step_tokens=3, prefix_cache=False)
    engine.add_request([1, 2, 3, 4, 5], 3)  # 5 prompt rows: 0..4, 3 written in step 1, 2 in step 2
    engine.add_request([6, 7, 8, 9], 4)  # 4 rows: waits
    engine.step()
    return engine


def test_owners_written_and_slot_tables():
    e = engine_after_one_step()
    np.testing.assert_array_equal(V.pool_owners(e), [0, 0, 0, 0, 0, FREE, FREE, FREE])
    np.testing.assert_array_equal(V.pool_written(e), [1, 1, 1, 0, 0, 0, 0, 0])
    lines = V.slot_tables(e).splitlines()
    assert lines[0].startswith("request 0: running  0/3 new tokens") and lines[0].endswith("[0, 1, 2] | [3, 4]")
    assert lines[1].startswith("request 1: waiting") and lines[1].endswith("slot table -")


def test_plot_pool_shows_owners_beside_the_k_pool():
    e = engine_after_one_step()
    fig = V.plot_pool(e)
    np.testing.assert_array_equal(image(fig, "owners")[:, 0], [1, 1, 1, 1, 1, 0, 0, 0])
    np.testing.assert_allclose(image(fig, "k_pool"), rows_image(e.runner.k_pools[0]))
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert labels == ["r0", "r0", "r0", "r0·", "r0·"]
    assert "after step 1: 5 of 8 rows held" in fig._suptitle.get_text()


def test_plot_timeline_one_row_per_step():
    history = [[0, 0, FREE], [0, 1, 1], [FREE, 1, 1]]
    fig = V.plot_timeline(history)
    np.testing.assert_array_equal(image(fig, "timeline"), [[1, 1, 0], [1, 2, 2], [0, 2, 2]])
    assert [t.get_text() for t in fig.axes[0].texts] == ["0", "0", "0", "1", "1", "1", "1"]


def test_plot_pool_steps_one_panel_per_snapshot():
    e = engine_after_one_step()
    first = V.snapshot(e)
    e.step()
    second = V.snapshot(e)
    assert first.step == 1 and second.step == 2
    fig = V.plot_pool_steps([first, second])
    np.testing.assert_allclose(image(fig, "k_pool step 2"), rows_image(second.k_pool))
    np.testing.assert_array_equal(image(fig, "owners step 1")[:, 0], [1, 1, 1, 1, 1, 0, 0, 0])
    hatched = {a.get_gid() for ax in fig.axes for a in ax.patches if a.get_gid()}
    assert hatched == {"held 1 3", "held 1 4"}  # the prompt's second chunk, written in step 2
    assert not np.shares_memory(first.k_pool, second.k_pool) and not np.array_equal(first.k_pool, second.k_pool)


def test_plot_timeline_without_labels_for_a_large_pool():
    history = [[FREE] * 40, [0] * 20 + [FREE] * 20]
    fig = V.plot_timeline(history, cell=0.1, labels=False)
    assert image(fig, "timeline").shape == (2, 40) and len(fig.axes[0].texts) == 0


def test_answers_so_far_and_the_stream_table():
    e = Engine(tiny(), pool_rows=8)
    reqs = [
        e.add_request([1, 2, 3, 4], 2),  # 4 prompt rows
        e.add_request([5, 6], 2),  # 2 rows: fits beside it
        e.add_request([7, 8, 9], 1),
    ]  # 3 rows: waits
    e.step()
    decode = lambda tokens: "".join(f"<{t}>" for t in tokens)  # noqa: E731
    now = V.answers_so_far(e, decode)
    assert now[:2] == [decode(r.tokens) for r in reqs[:2]] and now[2] == "(waiting)"
    e.step()
    after = V.answers_so_far(e, decode)
    assert after[0].endswith(" [done]") and after[1].endswith(" [done]")
    table = V.stream_table([now, after], width=12)
    lines = table.splitlines()
    assert len(lines) == 3 and lines[0].startswith("step | request 0") and "(waiting)" in lines[1]
    assert all(len(cell) <= 14 for line in lines[1:] for cell in line.split("|")[1:])
    assert V.stream_table([["a\nb" * 10]], width=5).splitlines()[1].endswith("| …ba⏎b")
