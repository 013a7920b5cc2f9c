"""ropepool.teaching.viz.sharing: the radix tree, shared slot tables and page waste, read back from the figures."""

import numpy as np

from ropepool.engine import Engine
from ropepool.loaders.tiny import tiny
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
    spans = {tuple(V._tokens(n)): (start, stop, top, bottom) for n, _, start, stop, top, bottom in layout[1:]}
    assert spans[(5, 6, 7)] == (0, 3, 0, 1)  # old's sequence: one leaf
    assert spans[tuple(SYSTEM)] == (0, 10, 1, 3)  # the shared prefix: over both leaves below it
    assert sorted((stop - start, bottom - top) for start, stop, top, bottom in spans.values()) == [
        (1, 1),
        (1, 1),
        (2, 1),
        (3, 1),
        (10, 2),
    ]  # b's [50]; a's first token, a leaf of its own below a's [40, 41] (an insert adds a leaf, as SGLang's)
    text = V.tree_text(engine.scheduler.cache)
    assert text.splitlines()[0].startswith("   3 tokens, rows 0-2:") and "  10 tokens, rows" in text
    assert V.row_runs([0, 1, 2, 7, 9, 10]) == "0-2, 7, 9-10"


def test_plot_radix_tree_colours_what_running_requests_hold():
    engine, old, a, b = served()
    fig = V.plot_radix_tree(engine.scheduler.cache, decode=lambda ids: "-".join(map(str, ids)))
    layout = V.tree_layout(engine.scheduler.cache)[1:]
    bars = {p.get_gid(): p for p in fig.axes[0].patches if (p.get_gid() or "").startswith("node")}
    assert len(bars) == len(engine.scheduler.cache.nodes()) == 5
    orange = {
        tuple(V._tokens(layout[int(g.split()[1])][0]))
        for g, p in bars.items()
        if np.allclose(p.get_facecolor()[:3], [1.0, 127 / 255, 14 / 255])
    }
    assert orange == {tuple(SYSTEM), (50,), (40, 41), (a.tokens[0],)}  # old's sequence: only cached
    for g, p in bars.items():
        node, _, start, stop, top, bottom = layout[int(g.split()[1])]
        assert (p.get_x(), p.get_width(), p.get_y(), p.get_height()) == (start, stop - start, top, bottom - top)
    labels = [t.get_text() for t in fig.axes[0].texts if (t.get_gid() or "").startswith("label")]
    assert any(t.startswith("10 tokens, rows 3-12: 20-21-22") for t in labels) and "50 (1 token, row 16)" in labels


def test_slot_tables_show_the_rows_two_requests_share():
    engine, old, a, b = served()
    tables = [a.slot_table[: a.num_cached], b.slot_table[: b.num_cached]]
    mask = V.shared_mask(tables)
    assert mask[0, :10].all() and mask[1, :10].all() and not mask[0, 10:].any() and not mask[1, 10:11].any()
    fig = V.plot_slot_tables(tables)
    (im,) = fig.axes[0].images
    assert im.get_gid() == "slot tables"
    np.testing.assert_array_equal(
        np.asarray(im.get_array()), np.where(V.slot_table_image(tables) < 0, 0, np.where(mask, 2, 1))
    )
    np.testing.assert_array_equal(V.slot_table_image([[3, 4], [5]]), [[3, 4], [5, -1]])


def test_plot_page_waste_bars():
    fig = V.plot_page_waste([1, 4, 16], wasted=[0, 9, 60], used=[100, 108, 160])
    bars = {gid: [p.get_height() for p in fig.axes[0].patches if p.get_gid() == gid] for gid in ("used", "wasted")}
    assert bars == {"used": [100, 108, 160], "wasted": [0, 9, 60]}


def test_every_radix_node_is_labelled_even_a_one_token_branch_point():
    """Branches that part after one shared token make 1-token nodes: their label runs up the bar."""
    from ropepool.engine import generate

    system = list(range(3, 40))
    prompts = [system + [50, 70 + i, 5] for i in range(2)] + [system + [51, 80 + i, 6] for i in range(2)]
    seen = {}
    generate(
        tiny("llama", num_attention_heads=4, num_key_value_heads=2),
        prompts,
        2,
        pool_rows=200,
        on_step=lambda engine, batch: seen.update(engine=engine),
    )
    cache = seen["engine"].scheduler.cache
    fig = V.plot_radix_tree(cache)
    nodes = {a.get_gid() for a in fig.axes[0].patches if (a.get_gid() or "").startswith("node ")}
    labels = {t.get_gid(): t.get_text() for t in fig.axes[0].texts if (t.get_gid() or "").startswith("label ")}
    assert {n.replace("node", "label") for n in nodes} == set(labels)
    assert {"'50'", "'51'"} <= {t.split(",")[0] for t in labels.values()}
