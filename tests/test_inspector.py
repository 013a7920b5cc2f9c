"""The inspector draws what the recording holds: each step's rows, owners, writes and evictions, its
decision in words; as a widget and as one page that needs nothing from the network."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html import unescape
from html.parser import HTMLParser

import pytest

from helpers import drawn_states

from ropepool.teaching.inspector import scenarios
from ropepool.teaching.inspector.page import page
from ropepool.teaching.inspector.painter import TREE, changes, frame, frames
from ropepool.teaching.inspector.render import sentence
from ropepool.teaching.inspector.widget import Inspector


class Squares(HTMLParser):
    """Every row square of a frame: (pool label, data-row, data-state, data-owners, classes)."""

    def __init__(self):
        super().__init__()
        self.pool, self.found = None, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "rp-pool" in (a.get("class") or ""):
            self.pool = a["aria-label"]
        elif "data-row" in a:
            owners = [int(x) for x in a["data-owners"].split()]
            self.found.append((self.pool, int(a["data-row"]), a["data-state"], owners, set(a["class"].split())))


def squares(html: str, pool: str = "pool rows") -> list:
    parser = Squares()
    parser.feed(html)
    return [s[1:] for s in parser.found if s[0] == pool]


@pytest.fixture(scope="module", params=["sharing", "preemption", "window", "mla"])
def run(request):
    return scenarios.run(request.param, "tiny")


def test_each_frame_draws_that_steps_rows_owners_writes_and_evictions(run):
    rec = run.recording
    drawn = frames(rec)
    decisions = [None, *rec.decisions]
    for k, (html, state, decision) in enumerate(zip(drawn, rec.states(), decisions)):
        assert f'data-step="{k}"' in html
        shown = squares(html)
        assert [s[0] for s in shown] == list(range(state.pool_rows))
        assert [s[1] for s in shown] == drawn_states(state), f"step {k}"
        assert [sorted(s[2]) for s in shown] == [sorted(o) for o in state.row_owners()], f"step {k}"
        written = {s[0] for s in shown if "w" in s[3]}
        evicted = {s[0] for s in shown if "e" in s[3]}
        assert written == set(decision.written if decision else [])
        assert evicted == set(decision.evicted if decision else [])
        if state.ring_rows:
            rings = squares(html, "ring rows")
            held = {row: rid for rid, rows in state.rings.items() for row in rows}
            assert [s[2] for s in rings] == [[held[r]] if r in held else [] for r in range(state.ring_rows)]


def test_the_scenarios_show_what_they_are_named_for():
    pre = scenarios.run("preemption", "tiny").recording
    assert any(d.preempted for d in pre.decisions) and any(d.evicted for d in pre.decisions)
    share = scenarios.run("sharing", "tiny").recording
    assert any(n >= 32 for d in share.decisions for n in d.shared.values())
    window = scenarios.run("window", "tiny").recording
    assert any(s.rings for s in window.states())


def test_the_sentence_says_the_decision():
    rec = scenarios.run("preemption", "tiny").recording
    states = list(rec.states())
    for k, d in enumerate(rec.decisions, 1):
        say = sentence(d, states[k - 1], states[k])
        assert say.startswith(f"Step {k}: ")
        for rid in d.preempted:
            assert f"Preempted request {rid}" in say or re.search(rf"Preempted requests [\d, ]*{rid}", say)
        for rid in d.ran:
            assert f"request {rid} " in say
        if d.evicted:
            n = len(d.evicted)
            assert f"gave back {n} {'row' if n == 1 else 'rows'} no request held" in say
    chunked = [k for k, d in enumerate(rec.decisions, 1) if any(0 < s < 20 for s in d.starts)]
    assert chunked and "prefilled a chunk" in sentence(
        rec.decisions[chunked[0] - 1], states[chunked[0] - 1], states[chunked[0]]
    )


def test_frames_drawn_step_by_step_equal_frames_drawn_whole(run):
    """Each step's frame, kept up to date from what the step changed, is the frame drawn whole from its books."""
    rec = run.recording
    states = list(rec.states())
    for k, html in enumerate(frames(rec)):
        before, decision = (states[k - 1], rec.decisions[k - 1]) if k else (states[0], None)
        assert html == frame(states[k], before, decision, None, rec.settings), f"step {k}"


def test_the_page_holds_every_frame_and_fetches_nothing():
    run = scenarios.run("sharing", "tiny")
    html = page(run.recording, run.title, about=run.about)
    assert not re.search(r"https?://|\bsrc=|<link|@import|url\(", html)
    data = re.search(r'<script type="application/json" id="rp-frames">(.*?)</script>', html, re.S).group(1)
    assert replayed(json.loads(data)) == frames(run.recording)
    assert f'max="{len(run.recording)}"' in html


def test_a_page_from_a_recording_that_missed_a_step_refuses_to_claim_exact_replay():
    from ropepool.engine import Engine
    from ropepool.engine.recording import record
    from ropepool.loaders.tiny import build

    engine = Engine(build("llama-gqa"), pool_rows=16)
    engine.add_request([1, 2, 3], 3)
    rec = record(engine)
    html = {}
    while not engine.done:
        if engine.steps == 1:
            engine.watchers.clear()  # the recorder misses steps 2 and 3
        engine.step()
        html.setdefault(engine.steps, page(rec, "run"))
    replay = re.compile(r'<p id="rp-replay"[^>]*>(.*?)</p>', re.S)
    assert "replay the run exactly" in replay.search(html[1]).group(1)  # complete so far
    said = replay.search(page(rec, "run")).group(1)
    assert "Not an exact replay" in said and "missed step(s) 2, 3" in said and "exactly" not in said


def replayed(run: dict) -> list[str]:
    """Every frame from the page's data, as its script builds them: step 0's parts, each step's changes applied."""
    parts, out = [list(p) if isinstance(p, list) else p for p in run["first"]], []
    for changed in [[], *run["steps"]]:
        for c in changed:
            if "d" in c:
                for j, html in c["d"]:
                    parts[c["i"]][j] = html
            else:
                parts[c["i"]] = list(c["a"]) if "a" in c else c["s"]
        out.append("".join(p if isinstance(p, str) else "".join(p) for p in parts))
    return out


def test_the_widget_shows_the_step_its_slider_is_on():
    rec = scenarios.run("preemption", "tiny").recording
    viewer = Inspector(rec, title="preemption")
    for k in (len(rec), 3, 0):
        viewer.show(k)
        assert f'data-step="{k}"' in viewer.view.value and viewer.slider.value == k
        assert squares(viewer.view.value) == squares(frames(rec)[k])


def test_the_command_writes_the_page(tmp_path):
    out = tmp_path / "run.html"
    done = subprocess.run(
        [sys.executable, "-m", "ropepool", "inspect", "--scenario", "window", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == str(out) and "window: 3 prompts on tiny Gemma-3" in done.stdout
    assert done.stderr.splitlines()[0].startswith("step 1: ")  # progress, a line a step in a log
    assert "ring rows" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "bad", ["--out={tmp}", "--out={tmp}/no/such/folder/x.html", "--scenario=beam", "--out={tmp}/run.txt"]
)
def test_the_command_refuses_bad_arguments_in_one_line(tmp_path, bad):
    done = subprocess.run(
        [sys.executable, "-m", "ropepool", "inspect", bad.format(tmp=tmp_path)]
        + ([] if "--out" in bad else ["--out", str(tmp_path / "x.html")]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not list(tmp_path.iterdir())


def test_a_wrong_part_is_seen_where_it_first_differs():
    """The build track's tree that matches whole edges, beside the engine's: the viewer opens on the step where
    the second request is admitted with rows of tokens it does not have, and says so."""
    from ropepool.engine import Engine
    from ropepool.engine.recording import record
    from ropepool.loaders.tiny import build
    from ropepool.track import mistakes, solutions
    from ropepool.track.tree import Cached

    model = build("llama-gqa")
    first, second = list(range(1, 45)), [*range(1, 31), 90, 91]  # the second leaves the first's edge at 30

    def serve(**parts):
        engine = Engine(model, pool_rows=128, **parts)
        rec = record(engine)
        for prompt in (first, second):  # one after the other: the first is cached when the second comes
            engine.add_request(prompt, 3)
            while not engine.done:
                engine.step()
        return rec

    engine_own = serve()
    same = Inspector(serve(prefix_cache=Cached.factory(solutions.PrefixTree)), compare_to=engine_own)
    assert same.difference is None and "agree at every step" in same.children[0].value
    wrong = serve(prefix_cache=Cached.factory(mistakes.TreeMatchesWholeEdges))
    viewer = Inspector(wrong, compare_to=engine_own, labels=("your tree", "the engine's"))
    step, what = viewer.difference
    admitted = next(d.step for d in engine_own.decisions if 1 in d.admitted)
    assert step == admitted and viewer.slider.value == step
    assert f"your tree and the engine's first differ at step {step}" in unescape(viewer.children[0].value)
    assert what == f"step {step}: the tokens each ran (requests [1]): yours [1], theirs [2]", what
    assert viewer.view.value.count('class="rp-frame"') == 2


def test_the_words_follow_the_run_preemption_readmission_and_a_cache_turned_off():
    rec = scenarios.run("preemption", "tiny").recording
    states = list(rec.states())
    said = [sentence(d, states[k - 1], states[k], rec.settings) for k, d in enumerate(rec.decisions, 1)]
    (k, victim), *_ = [(k, d.preempted[0]) for k, d in enumerate(rec.decisions, 1) if d.preempted]
    assert "its whole pages stay in the tree" in said[k - 1] and re.search(r"\d+ rows? (was|were) free", said[k - 1])
    back = next(i for i, d in enumerate(rec.decisions[k:], k + 1) if victim in d.admitted)
    assert f"request {victim} " in said[back - 1] and "found in the tree" in said[back - 1], said[back - 1]
    window = scenarios.run("window", "tiny").recording
    states = list(window.states())
    finished = [sentence(d, states[i - 1], states[i], window.settings) for i, d in enumerate(window.decisions, 1)]
    assert any("finished: rows given back." in s for s in finished) and not any("tree" in s for s in finished)
    assert "The prefix tree" not in frames(window)[-1]


def test_rows_reserved_for_positions_not_computed_yet_are_drawn_apart():
    rec = scenarios.run("preemption", "tiny").recording  # chunks of 16: a prompt's rows are held from admission
    first = squares(frames(rec)[1])
    req = rec.state(1).requests[0]
    written, held = set(req.slot_table[: req.num_cached]), set(req.slot_table)
    assert held - written and {s[0] for s in first if s[1] == "reserved"} == held - written
    assert {s[0] for s in first if s[1] == "used"} == written


def test_each_ring_row_is_labelled_with_the_position_it_holds():
    """A request's ring shows its last min(window, written) positions, one per row, each at row p mod window."""
    rec = scenarios.run("window", "tiny").recording
    window = rec.settings.window
    for html, state in zip(frames(rec), rec.states()):
        rings = html[html.index('aria-label="ring rows"') :]
        label = {int(r): t for r, t in re.findall(r'data-row="(\d+)"[^>]*>([^<]*)</div>', rings)}
        for rid, rows in state.rings.items():
            done = state.requests[rid].num_cached
            want = {p % window: str(p) for p in range(max(0, done - window), done)}
            assert {j: label[row] for j, row in enumerate(rows) if label[row]} == want, (state.step, rid)


def _served(new: int):
    from ropepool.engine import Engine
    from ropepool.engine.recording import record
    from ropepool.loaders.tiny import build

    engine = Engine(build("llama-gqa"), pool_rows=-(-(4 * (24 + new)) // 16) * 16)
    for prompt in scenarios.tiny_prompts(4, 20, 4):
        engine.add_request(prompt, new)
    rec = record(engine)
    while not engine.done:
        engine.step()
    return rec


def _without_tree(recording) -> int:
    """The size of the page's data but for the prefix tree's part."""
    first, steps = changes(recording)
    return len(json.dumps([p for i, p in enumerate(first) if i != TREE])) + sum(
        len(json.dumps(c)) for step in steps for c in step if c["i"] != TREE
    )


def test_the_page_grows_with_what_the_steps_change_not_with_the_pool():
    """8x the steps (and a pool 4x larger to hold them) make the pool, rings, queues and requests less than 8x
    larger: each step carries the squares and rows it changed, not every square of the pool again (a whole frame
    a step: 17x). The tree is drawn whole on a step that changes it: as in SGLang, an insert refreshes the last
    use of every node on its path, so a decode step changes the path."""
    short, long = _served(8), _served(64)
    assert len(long) == 8 * len(short)
    assert _without_tree(long) < 6 * _without_tree(short)
    decode_step = changes(long)[1][len(long) // 2]  # four requests each decode one token
    assert sum(len(c["d"]) for c in decode_step if "d" in c) <= 2 * 4 + 4  # rows written, rows unmarked, requests
