"""A recorded run replays exactly: the books after step k equal a fresh engine's stopped after k steps.

The recording (:mod:`ropepool.engine.recording`) keeps, per step, what the step's undo records name; its
replay is compared with :func:`~ropepool.engine.recording.snapshot`, which reads a fresh engine's books
in full, for every step of runs that share prefixes, chunk prompts, preempt, evict, keep sliding-window
rings and serve MLA, in pages of 1 and 4 rows.
"""

from __future__ import annotations

import signal

import pytest

from ropepool.engine import Allocator, Engine
from ropepool.engine.recording import Change, record, snapshot
from ropepool.loaders.tiny import build

COMMON = [1, *range(10, 49)]  # 40 shared tokens: more than the scheduler's in-batch sharing threshold
SHARED = [COMMON + [60 + 7 * i + j for j in range(4)] for i in range(4)]
APART = [[1, 2, 3, 4] + [60 + 7 * i + j for j in range(16)] for i in range(3)]

RUNS = {
    "sharing": ("llama-gqa", SHARED, 4, dict(pool_rows=192)),
    "sharing-pages-of-4": ("llama-gqa", SHARED, 4, dict(pool_rows=192, page_size=4)),
    "preemption-chunks-eviction": ("llama-gqa", APART, 8, dict(pool_rows=48, max_step_tokens=16)),
    "preemption-pages-of-4": ("llama-gqa", APART, 8, dict(pool_rows=48, max_step_tokens=16, page_size=4)),
    "window-rings": ("gemma3", APART, 6, dict(pool_rows=64, prefix_cache=False)),
    "mla": ("deepseek-v3", SHARED[:3], 4, dict(pool_rows=160)),
}


def serve(model, prompts, new, kwargs, steps=None, recorded=True):
    engine = Engine(model, **kwargs)
    requests = [engine.add_request(p, new) for p in prompts]
    rec = record(engine) if recorded else None
    while not engine.done and (steps is None or engine.steps < steps):
        engine.step()
    return engine, requests, rec


@pytest.mark.parametrize("name", RUNS)
def test_every_step_replays_to_a_fresh_engine_stopped_there(name):
    arch, prompts, new, kwargs = RUNS[name]
    model = build(arch)
    engine, _, rec = serve(model, prompts, new, kwargs)
    states = list(rec.states())
    assert len(states) == engine.steps + 1 and all(c.full is None for c in rec.changes)
    for k, state in enumerate(states):
        fresh, requests, _ = serve(model, prompts, new, kwargs, steps=k, recorded=False)
        assert state == snapshot(fresh, requests=requests), f"{name}: step {k} replays wrong"


def test_the_runs_show_what_they_are_named_for():
    """The scenarios above do what they are for: otherwise the replay test would prove less than it says."""
    _, _, rec = serve(build("llama-gqa"), *RUNS["preemption-chunks-eviction"][1:])
    assert any(d.preempted for d in rec.decisions) and any(d.evicted for d in rec.decisions)
    assert any(0 < s < 20 for d in rec.decisions for s in d.starts)  # a later chunk of a prompt
    _, _, rec = serve(build("llama-gqa"), *RUNS["sharing"][1:])
    assert any(d.shared.get(rid, 0) >= 40 for d in rec.decisions for rid in d.admitted)
    _, _, rec = serve(build("gemma3"), *RUNS["window-rings"][1:])
    assert any(state.rings for state in rec.states())


def test_a_step_records_what_it_changed_not_the_pool():
    """A decode step's record names the pages and requests it touched: the same few at 64 and at 4096 rows."""
    model = build("llama-gqa")
    sizes = {}
    for rows in (64, 4096):
        _, _, rec = serve(model, [list(range(1, 21))], 6, dict(pool_rows=rows))
        decode = rec.changes[2]  # a decode step (the last one also gives every row back)
        sizes[rows] = (len(decode.pages), sum(len(c[2][1]) for c in decode.requests.values()))
    assert sizes[64] == sizes[4096] and sizes[64][0] <= 2, sizes


def test_a_failed_step_leaves_no_record_and_the_next_replays_right(monkeypatch):
    model = build("llama-gqa")
    prompts, new, kwargs = RUNS["preemption-chunks-eviction"][1:]
    engine = Engine(model, **kwargs)
    requests = [engine.add_request(p, new) for p in prompts]
    rec = record(engine)
    engine.step()
    run = engine.runner.run

    def interrupted(batch):
        run(batch)
        raise KeyboardInterrupt

    monkeypatch.setattr(engine.runner, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        engine.step()
    monkeypatch.undo()
    assert len(rec) == 1
    while not engine.done:
        engine.step()
    fresh, fresh_requests, _ = serve(model, prompts, new, kwargs, recorded=False)
    assert rec.state(len(rec)) == snapshot(fresh, requests=fresh_requests)
    assert [r.tokens for r in requests] == [r.tokens for r in fresh_requests]


class OwnAllocator(Allocator):
    """A part of one's own (its undo records are not the engine's to read): the recording reads the books in full."""


def test_a_part_of_ones_own_is_recorded_in_full_and_replays_right():
    model = build("llama-gqa")
    prompts, new, kwargs = RUNS["preemption-chunks-eviction"][1:]
    engine, _, rec = serve(model, prompts, new, {**kwargs, "allocator": OwnAllocator})
    assert rec.changes and all(isinstance(c, Change) and c.full is not None for c in rec.changes)
    for k, state in enumerate(rec.states()):
        fresh, requests, _ = serve(model, prompts, new, {**kwargs, "allocator": OwnAllocator}, steps=k, recorded=False)
        assert state == snapshot(fresh, requests=requests), f"step {k}"


def test_recording_changes_nothing_the_engine_serves():
    model = build("llama-gqa")
    prompts, new, kwargs = RUNS["preemption-chunks-eviction"][1:]
    _, with_rec, _ = serve(model, prompts, new, kwargs)
    _, without, _ = serve(model, prompts, new, kwargs, recorded=False)
    assert [r.tokens for r in with_rec] == [r.tokens for r in without]


def test_a_watcher_that_raises_reaches_the_caller_and_the_step_stands():
    model = build("llama-gqa")
    engine = Engine(model, pool_rows=32)
    engine.add_request([1, 2, 3], 3)
    rec = record(engine)

    def broken(engine, batch, records):
        raise RuntimeError("watcher")

    engine.watch(broken)
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(RuntimeError, match="watcher"):
        engine.step()
    assert engine.steps == 1 and len(rec) == 1  # committed, and recorded by the watcher before it
    assert signal.getsignal(signal.SIGINT) is handler  # the hold was let go: the handler in force before


def test_a_watcher_that_raises_does_not_keep_the_recorder_after_it_from_any_step():
    """A broken watcher before the recorder: every step is still recorded, and each step's error carries its
    batch (finished requests included), so the caller loses nothing by stepping on."""
    from ropepool.engine import WatcherError

    model = build("llama-gqa")
    prompts, new, kwargs = RUNS["preemption-chunks-eviction"][1:]
    engine = Engine(model, **kwargs)
    requests = [engine.add_request(p, new) for p in prompts]

    def broken(engine, batch, records):
        raise ValueError("a watcher's own bug")

    engine.watch(broken)
    rec = record(engine)
    finished = []
    while not engine.done:
        with pytest.raises(WatcherError, match="a watcher's own bug") as info:
            engine.step()
        finished += info.value.batch.finished
    assert rec.complete and len(rec) == engine.steps
    assert sorted(r.rid for r in finished) == [r.rid for r in requests]
    fresh, fresh_requests, _ = serve(model, prompts, new, kwargs, recorded=False)
    assert rec.state(len(rec)) == snapshot(fresh, requests=fresh_requests)


def test_a_step_the_recorder_missed_is_named_and_the_books_replay_right_again_after_it(monkeypatch):
    """The recorder itself cut short at step 2: the recording says step 2 is missing (not complete), and
    records step 3 in full, so that the books it replays from step 3 on are the run's."""
    model = build("llama-gqa")
    prompts, new, kwargs = RUNS["preemption-chunks-eviction"][1:]
    engine = Engine(model, **kwargs)
    for p in prompts:
        engine.add_request(p, new)
    rec = record(engine)
    engine.step()
    read = rec._read
    monkeypatch.setattr(rec, "_read", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt("Ctrl-C in the recorder")))
    try:
        batch = engine.step()  # the batch comes back; the Ctrl-C waits for the next step
    except KeyboardInterrupt:
        batch = None
    monkeypatch.setattr(rec, "_read", read)
    assert batch is not None and batch.requests and engine.held_interrupt, "the committed step's batch was lost"
    with pytest.raises(KeyboardInterrupt):
        engine.step()
    while not engine.done:
        engine.step()
    assert rec.missed == [2] and not rec.complete
    assert [d.step for d in rec.decisions] == [1, *range(3, engine.steps + 1)]
    assert rec.changes[1].full is not None and all(c.full is None for c in rec.changes[2:])
    for state in list(rec.states())[2:]:
        fresh, fresh_requests, _ = serve(model, prompts, new, kwargs, steps=state.step, recorded=False)
        assert state == snapshot(fresh, requests=fresh_requests), f"step {state.step} replays wrong"


def test_steps_after_the_last_one_recorded_are_named_missed():
    engine, _, rec = serve(build("llama-gqa"), [[1, 2, 3]], 3, dict(pool_rows=16), steps=1)
    engine.watchers.clear()  # the recorder no longer told
    while not engine.done:
        engine.step()
    assert rec.missed == [2, 3] and not rec.complete


def test_state_past_the_end_is_refused():
    _, _, rec = serve(build("llama-gqa"), [[1, 2, 3]], 2, dict(pool_rows=16))
    with pytest.raises(IndexError, match="steps 0 to 2"):
        rec.state(3)


def test_the_build_tracks_reference_parts_record_the_engines_run_step_for_step():
    """The track's reference allocator and tree (recorded in full: parts of one's own) make the same decisions
    and books as the engine's own at every step, and its reference scheduler does without the prefix cache
    (with it, the learner's plan counts a waiting request's whole sequence against the free rows, cached
    prefix included, so it may admit a step later than the engine); a tree that evicts the newest leaf is
    found at the step it first evicts, in a run where more than one leaf may be evicted then (in the run
    above only one is, each time: whole leaves go)."""
    from ropepool.engine.recording import first_difference
    from ropepool.track import mistakes, solutions
    from ropepool.track.allocator import Paged
    from ropepool.track.schedule import Planned
    from ropepool.track.tree import Cached

    model = build("llama-gqa")
    prompts, new, kwargs = RUNS["preemption-chunks-eviction"][1:]
    _, _, own = serve(model, prompts, new, kwargs)
    track = dict(allocator=Paged.factory(solutions.Allocator), prefix_cache=Cached.factory(solutions.PrefixTree))
    _, _, theirs = serve(model, prompts, new, {**kwargs, **track})
    assert not theirs.journaled and first_difference(theirs, own) is None
    uncached = {**kwargs, "prefix_cache": False}
    _, _, own_plan = serve(model, prompts, new, uncached)
    _, _, their_plan = serve(model, prompts, new, {**uncached, "scheduler": Planned.factory(solutions.schedule_step)})
    assert any(d.preempted for d in own_plan.decisions) and first_difference(their_plan, own_plan) is None
    shared = dict(pool_rows=64)  # four prompts sharing 40 tokens: their leaves compete for eviction
    _, _, own = serve(model, SHARED, 4, shared)
    _, _, theirs = serve(model, SHARED, 4, {**shared, **track})
    assert first_difference(theirs, own) is None
    _, _, newest = serve(model, SHARED, 4, {**shared, "prefix_cache": Cached.factory(mistakes.TreeEvictsNewest)})
    step, what = first_difference(newest, own)
    first_eviction = next(d.step for d in own.decisions if d.evicted)
    assert step == first_eviction, what
