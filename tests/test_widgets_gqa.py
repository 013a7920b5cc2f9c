"""The GQA explorer without a browser: set its controls, read its table, figure and status."""

from html.parser import HTMLParser

import pytest

from ropepool import models
from ropepool.shapes import Shapes
from ropepool.teaching.widgets.gqa import CUSTOM, GQAExplorer, presets_html, shapes_html

ARGUMENTS = ["q", "k", "v", "positions", "slots", "k_pool", "v_pool"]


class _Cells(HTMLParser):
    """The text of every <td> of an HTML table, row by row (header rows left out)."""

    def __init__(self, text):
        super().__init__()
        self.rows, self._in_td = [], False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        self._in_td = tag == "td"
        if self._in_td:
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_td = False

    def handle_data(self, data):
        if self._in_td:
            self.rows[-1][-1] += data


def cells(html_text):
    return [row for row in _Cells(html_text).rows if row]


def table_rows(html_text):
    """{argument: concrete shape text} from a ropepool-shapes table, and the arguments in order."""
    assert '<table class="ropepool-shapes">' in html_text
    rows = cells(html_text)
    return {row[0]: row[2] for row in rows}, [row[0] for row in rows]


def segments(w):
    links = next(c for c in w.figure.axes[0].collections if c.get_gid() == "links")
    return links.get_segments()


@pytest.fixture(scope="module")
def explorer():
    return GQAExplorer()


def test_picker_offers_every_preset_plus_custom(explorer):
    assert explorer.model.description == "Model"
    assert list(explorer.model.options) == models.preset_names() + [CUSTOM]


def test_table_has_one_row_per_argument_with_concrete_shapes(explorer):
    explorer.model.value = "llama-3-8b"
    explorer.tokens.value = 16
    explorer.pool_rows.value = 4096
    shapes, order = table_rows(explorer.table.value)
    assert order == ARGUMENTS
    assert shapes == {
        "q": "(16, 32, 128)",
        "k": "(16, 8, 128)",
        "v": "(16, 8, 128)",
        "positions": "(16,)",
        "slots": "(16,)",
        "k_pool": "(4096, 8, 128)",
        "v_pool": "(4096, 8, 128)",
    }


# (preset, k shape at T=16, Hq, Hkv): one row per kind of model.
PRESETS = [
    ("gemma-2-9b", "(16, 8, 256)", 16, 8),  # head_dim 256, not hidden_size // heads
    ("falcon-7b", "(16, 1, 64)", 71, 1),  # MQA
    ("phi-3-mini", "(16, 32, 96)", 32, 32),  # MHA
    ("qwen2.5-7b", "(16, 4, 128)", 28, 4),  # G = 7
    ("llama-3-8b", "(16, 8, 128)", 32, 8),  # back to the start
]


@pytest.mark.parametrize("name, k_shape, hq, hkv", PRESETS, ids=[p[0] for p in PRESETS])
def test_picking_a_model_updates_sliders_table_and_diagram(explorer, name, k_shape, hq, hkv):
    explorer.tokens.value = 16
    explorer.model.value = name
    p = models.preset(name)
    assert (explorer.num_qo_heads.value, explorer.num_kv_heads.value, explorer.head_dim.value) == (
        p.num_qo_heads,
        p.num_kv_heads,
        p.head_dim,
    )
    assert explorer.model.value == name  # the sliders following the model did not switch it to custom
    assert table_rows(explorer.table.value)[0]["k"] == k_shape
    assert explorer.shapes == p.shapes(16, explorer.pool_rows.value)
    assert len(segments(explorer)) == hq
    assert {round(s[1][0], 6) for s in segments(explorer)} == {round((j + 0.5) * (hq // hkv), 6) for j in range(hkv)}
    assert explorer.diagram.value[:4] == b"\x89PNG"
    assert p.name in explorer.status.value


def test_the_diagram_image_changes_with_the_heads():
    w = GQAExplorer("llama-3-8b")
    before = w.diagram.value
    w.model.value = "falcon-7b"
    assert w.diagram.value != before
    w.model.value = "llama-3-8b"
    assert w.diagram.value == before  # reused, not redrawn


def test_moving_a_slider_switches_to_custom_and_keeps_the_values():
    w = GQAExplorer("mistral-7b")
    w.num_kv_heads.value = 2
    assert w.model.value == CUSTOM
    assert (w.num_qo_heads.value, w.num_kv_heads.value, w.head_dim.value) == (32, 2, 128)
    assert table_rows(w.table.value)[0]["k"] == f"({w.tokens.value}, 2, 128)"
    assert "G = 32 // 2 = 16" in w.status.value
    assert len(segments(w)) == 32


def test_tokens_and_pool_rows_reach_the_table():
    w = GQAExplorer("gemma-2-9b")
    w.tokens.value = 3
    w.pool_rows.value = 77
    shapes, _ = table_rows(w.table.value)
    assert shapes["q"] == "(3, 16, 256)" and shapes["positions"] == "(3,)" and shapes["k_pool"] == "(77, 8, 256)"
    assert w.model.value == "gemma-2-9b"  # T and P are not the model's


def test_an_impossible_group_says_which_error_the_op_raises():
    w = GQAExplorer("llama-3-8b")
    w.num_kv_heads.value = 5
    assert w.problem == "group_size"
    assert "num_qo_heads must be a multiple of num_kv_heads" in w.status.value
    assert "not a whole number" in w.figure.axes[0].texts[0].get_text()
    assert table_rows(w.table.value)[0]["k"] == f"({w.tokens.value}, 5, 128)"  # the table still shows the shapes
    w.num_kv_heads.value = 4
    assert w.problem is None and len(segments(w)) == 32


def test_custom_keeps_the_slider_values():
    w = GQAExplorer("qwen2.5-7b")
    w.model.value = CUSTOM
    assert (w.num_qo_heads.value, w.num_kv_heads.value) == (28, 4)


def test_shapes_html_lists_dtypes():
    rows = cells(shapes_html(Shapes(2, 4, 2, 8, 6), "float16"))
    assert rows[0] == ["q", "[T, Hq, D]", "(2, 4, 8)", "float16"]
    assert rows[3] == ["positions", "[T]", "(2,)", "int32"]


def test_presets_html_has_a_row_per_preset():
    rows = {row[0]: row[1:] for row in cells(presets_html(tokens=4))}
    assert list(rows) == models.preset_names()
    assert rows["gemma-2-9b"][:5] == ["16", "8", "2", "256", "GQA"]
    assert rows["falcon-7b"][:5] == ["71", "1", "71", "64", "MQA"]
    assert rows["phi-3-mini"][:5] == ["32", "32", "1", "96", "MHA"]
    # llama-3-8b: 2 pools x 8 heads x 128 x 2 bytes = 4,096 bytes per token and layer in bfloat16
    assert rows["llama-3-8b"][5:] == ["(4, 32, 128)", "(4, 8, 128)", "4,096"]


# --- Head sliders are usable: meaningful stops, every preset on them ------------------------------


def test_head_sliders_stop_at_meaningful_counts():
    from ropepool import models
    from ropepool.teaching.widgets.gqa import head_count_stops, head_dim_stops

    w = GQAExplorer("llama-3-8b")
    heads = list(w.num_kv_heads.options)
    assert heads == head_count_stops() == list(w.num_qo_heads.options)
    assert heads[:8] == list(range(1, 9)) and heads[-1] == 128 and len(heads) <= 30  # ~10 px a stop
    assert all(b / a <= 1.5 for a, b in zip(heads[7:], heads[8:]))  # past 8, no jump over 1.5x
    for name in models.preset_names():
        p = models.preset(name)
        assert {p.num_qo_heads, p.num_kv_heads} <= set(heads) and p.head_dim in head_dim_stops()
    assert 5 in heads  # an uneven group (32 / 5) stays reachable: the widget shows the op's error
