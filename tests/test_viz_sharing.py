"""ropepool.teaching.viz.sharing: the radix tree, shared slot tables and page waste, read back from the figures."""

import numpy as np

from ropepool.engine import Engine
from ropepool.engine.tiny_models import tiny
from ropepool.teaching.viz import sharing as V

SYSTEM = list(range(20, 30))


def served():
    """Two prompts on one 10-token prefix, both still running; one finished earlier on another prefix."""
    engine = Engine(tiny("llama", num_attention_heads=4, num_key_value_heads=2), pool_rows=64)
    old = engine.add_request([5, 6, 7], 1)
    engine.step()
    a = engine.add_request(SYSTEM + [40, 41], 3)
    engine.step()
    b = engine.add_request(SYSTEM + [50], 3)
    engine.step()
    return engine, old, a, b


def test_the_tree_has_one_branch_per_divergence():
    engine, old, a, b = served()
    layout = V.tree_layout(engine.scheduler.cache)
    tokens = [V._tokens(n) for n, _, _, _ in layout[1:]]
    assert [5, 6, 7] in tokens and SYSTEM in tokens  # old's sequence; the shared prefix, split off
    assert sorted(len(t) for t in tokens) == [1, 3, 3, 10]  # b's [50]; a's [40, 41] and its first token
    text = V.tree_text(engine.scheduler.cache)
    assert text.splitlines()[0].startswith("   3 tokens, rows 0-2:") and "  10 tokens, rows" in text
    assert V.row_runs([0, 1, 2, 7, 9, 10]) == "0-2, 7, 9-10"


def test_plot_radix_tree_colours_what_running_requests_hold():
    engine, old, a, b = served()
    fig = V.plot_radix_tree(engine.scheduler.cache, decode=lambda ids: "-".join(map(str, ids)), width=60)
    boxes = {t.get_gid(): t for t in fig.axes[0].texts if t.get_gid() and t.get_gid().startswith("node")}
    assert len(boxes) == len(engine.scheduler.cache.nodes()) == 4
    colours = {t.get_text().splitlines()[0]: t.get_bbox_patch().get_facecolor() for t in boxes.values()}
    held = {k for k, c in colours.items() if np.allclose(c[:3], [1.0, 127 / 255, 14 / 255])}
    assert held == {"-".join(map(str, SYSTEM)), "50", "40-41-" + str(a.tokens[0])}  # old's branch: only cached


def test_slot_tables_show_the_rows_two_requests_share():
    engine, old, a, b = served()
    tables = [a.slot_table[:a.num_cached], b.slot_table[:b.num_cached]]
    mask = V.shared_mask(tables)
    assert mask[0, :10].all() and mask[1, :10].all() and not mask[0, 10:].any() and not mask[1, 10:11].any()
    fig = V.plot_slot_tables(tables)
    (im,) = fig.axes[0].images
    assert im.get_gid() == "slot tables"
    np.testing.assert_array_equal(np.asarray(im.get_array()), np.where(V.slot_table_image(tables) < 0, 0,
                                                                        np.where(mask, 2, 1)))
    np.testing.assert_array_equal(V.slot_table_image([[3, 4], [5]]), [[3, 4], [5, -1]])


def test_plot_page_waste_bars():
    fig = V.plot_page_waste([1, 4, 16], wasted=[0, 9, 60], used=[100, 108, 160])
    bars = {gid: [p.get_height() for p in fig.axes[0].patches if p.get_gid() == gid] for gid in ("used", "wasted")}
    assert bars == {"used": [100, 108, 160], "wasted": [0, 9, 60]}
