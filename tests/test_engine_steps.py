"""A step is one transaction; the engine lets go of finished requests; bad arguments and threads are refused."""

import gc
import inspect
import signal
import sys
import threading
import weakref
from contextlib import contextmanager
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

import ropepool
from ropepool.engine import Engine, EngineArgumentError, Status, WrongThreadError, generate
from ropepool.engine.radix import RadixCache
from ropepool.engine.scheduler import Scheduler
from ropepool.loaders.tiny import ARCHS, tiny


def build(name, **fields):
    """A tiny model of :data:`ARCHS` with ``fields`` on top."""
    _, module, base = ARCHS[name]
    return tiny(module, **{**base, **fields})


def model():
    return tiny("llama", num_attention_heads=4, num_key_value_heads=2)


def tree(node):
    return [(k, list(c.key), list(c.pages), c.last_used, tree(c)) for k, c in sorted(node.children.items())]


def engine_state(engine):
    """Everything a step may change, as plain values."""
    s = engine.scheduler
    reqs = [(r.rid, r.status, list(r.slot_table), r.num_cached, list(r.tokens), len(r.logits)) for r in engine.requests]
    queues = [[r.rid for r in q] for q in (s.waiting, s.running)]
    books = list(engine.allocator.free_pages), list(engine.allocator.refs), tree(s.cache.root), s.cache.clock
    return reqs, queues, books, vars(engine.stats).copy()


def valuable_rows(engine):
    """Rows whose k and v matter: cached, or written by a running request."""
    rows = {row for node in engine.scheduler.cache.nodes() for row in engine.allocator.rows(node.pages)}
    for r in engine.scheduler.running:
        rows |= set(r.slot_table[: r.num_cached])
    return sorted(rows)


def pool_rows(engine, rows):
    index = np.array(rows, dtype=np.int64)
    return [np.array(p)[index] for p in engine.runner.k_pools + engine.runner.v_pools]


# A warm request fills the cache, then three requests on 16 rows: steps that evict cached rows and
# write them, steps that preempt, chunks (max_step_tokens 8) and finishes.
WARM = ([1, 2, 3, 4, 5, 6], 2)
REQUESTS = [(list(range(10, 16)), 6), (list(range(20, 25)), 6), (list(range(30, 34)), 5)]


def served(inject=None):
    """The workload, step by step; ``inject(engine)`` (a context) makes one attempt of every step fail first."""
    engine = Engine(model(), pool_rows=16, keep_logits=True, max_step_tokens=8)
    reqs = [engine.add_request(*WARM)]
    while not engine.done:
        engine.step()
    reqs += [engine.add_request(p, n) for p, n in REQUESTS]
    failures = 0
    while not engine.done:
        if inject is not None:
            before, rows = engine_state(engine), valuable_rows(engine)
            bits = pool_rows(engine, rows)
            with inject(engine) as raised:
                with pytest.raises(BaseException) as info:
                    engine.step()
            if info.value is raised.get("error"):
                failures += 1
                assert engine_state(engine) == before, "a failed step changed the engine"
                for b, a in zip(bits, pool_rows(engine, rows)):
                    np.testing.assert_array_equal(b, a, err_msg="a failed step changed a row that mattered")
            else:
                assert "error" not in raised, f"the step raised {info.value!r}, not the injected error"
                raise AssertionError(f"nothing was injected into step {engine.steps + 1}")
        engine.step()
    return reqs, engine, failures


class Patch:
    """Replace ``obj.name`` by a wrapper calling the original, then raising KeyboardInterrupt when ``when(*args)``."""

    def __init__(self, obj, name, when, before=False):
        self.obj, self.name, self.when, self.before = obj, name, when, before

    def __enter__(self):
        original, raised = getattr(self.obj, self.name), {}

        def wrapper(*args, **kwargs):
            if self.before and self.when(*args):
                raised["error"] = KeyboardInterrupt(self.name)
                raise raised["error"]
            out = original(*args, **kwargs)
            if not self.before and self.when(*args):
                raised["error"] = KeyboardInterrupt(self.name)
                raise raised["error"]
            return out

        setattr(self.obj, self.name, wrapper)
        return raised

    def __exit__(self, *exc):
        delattr(self.obj, self.name)  # the instance attribute goes; the class's method is back


def calls(n):
    count = [0]

    def when(*args):
        count[0] += 1
        return count[0] == n

    return when


PHASES = {
    # schedule: after its first change of the pages (an eviction, a preemption or an allocation)
    "schedule": lambda e: Patch(e.scheduler, "reclaim", calls(1)),
    "schedule, all of it": lambda e: Patch(e.scheduler, "schedule", lambda: True),
    "forward, layer 1": lambda e: Patch(e.runner, "gqa", lambda i, *a: i == 1, before=True),
    "forward, every pool written": lambda e: Patch(e.runner, "run", lambda *a: True),
    "postprocess, first request": lambda e: Patch(e.scheduler, "share", calls(1)),
    "postprocess, all of it": lambda e: Patch(e.scheduler, "postprocess", lambda *a, **k: True),
}


@pytest.mark.parametrize("phase", PHASES)
def test_an_interrupted_step_leaves_the_engine_as_it_was(phase):
    want, plain, _ = served()
    got, engine, failures = served(PHASES[phase])
    assert failures > 0 and engine.steps == plain.steps
    assert plain.stats.preemptions > 0 and engine_state(engine)[2:] == engine_state(plain)[2:]
    for r, w in zip(got, want):
        assert r.tokens == w.tokens
        np.testing.assert_array_equal(np.array(mx.stack(r.logits)), np.array(mx.stack(w.logits)))


def test_a_bad_slot_is_refused_before_any_pool_is_written():
    engine = Engine(model(), pool_rows=12, max_step_tokens=2)
    a = engine.add_request([1, 2, 3, 4, 5], 2)
    engine.step()  # positions 0 and 1 written; a holds rows for all 5 prompt tokens
    a.slot_table[3] = a.slot_table[2]  # the next step writes positions 2 and 3: one row twice
    pools = [np.array(p) for p in engine.runner.k_pools + engine.runner.v_pools]
    before = engine_state(engine)
    with pytest.raises(ropepool.RopePoolError) as info:
        engine.step()
    assert info.value.code == "duplicate_slot"
    for p, q in zip(pools, engine.runner.k_pools + engine.runner.v_pools):
        np.testing.assert_array_equal(p, np.array(q))
    assert engine_state(engine) == before


# --- A long-lived engine holds only what it serves ------------------------------------------------


def test_finished_requests_go_to_the_caller_and_are_let_go():
    engine = Engine(model(), pool_rows=64)
    finished, gone = [], []
    for i in range(30):
        r = engine.add_request([1 + i % 7, 2, 3], 4)
        gone.append(weakref.ref(r))
        del r
        while not engine.done:
            finished += engine.step().finished
    assert [r.rid for r in finished] == list(range(30)) and all(r.tokens and r.logits == [] for r in finished)
    assert len(engine.requests) == 30  # the caller holds them
    del finished
    gc.collect()
    assert engine.requests == [] and all(ref() is None for ref in gone), "the engine kept finished requests"


def test_logits_are_kept_only_when_asked():
    m = model()
    (kept,) = generate(m, [[1, 2, 3]], 3, pool_rows=8)
    (dropped,) = generate(m, [[1, 2, 3]], 3, pool_rows=8, keep_logits=False)
    assert kept.logits.shape == (3, 160) and dropped.logits is None and dropped.tokens == kept.tokens


# --- Arguments --------------------------------------------------------------------------------------

BAD_PROMPTS = [
    ("a float token", [1, 3.9], r"prompt 0\[1\] must be a token id \(an int\), got float 3.9"),
    ("a string", "37", "prompt 0 must be a list of token ids \\(ints\\), got str '37'"),
    ("bytes", b"37", "prompt 0 must be a list of token ids \\(ints\\), got bytes"),
    ("a dict", {1: 2}, "prompt 0 must be a list of token ids \\(ints\\), got dict"),
    ("a bool token", [True, 2], r"prompt 0\[0\] must be a token id \(an int\), got bool True"),
    ("a NumPy float", [np.float32(3)], r"prompt 0\[0\] must be a token id \(an int\), got float32"),
    ("a float array", np.array([1.0, 2.0]), r"prompt 0\[0\] must be a token id \(an int\), got float 1.0"),
    ("a NumPy int outside the vocab", [np.int64(160)], r"prompt 0\[0\]: token id 160 outside \[0, 160\)"),
]


@pytest.mark.parametrize("name, prompt, message", BAD_PROMPTS, ids=[b[0] for b in BAD_PROMPTS])
def test_a_prompt_of_anything_but_int_ids_is_refused(name, prompt, message):
    engine = Engine(model(), pool_rows=8)
    with pytest.raises(EngineArgumentError, match=message):
        engine.add_request(prompt, 2)
    assert engine.requests == [] and engine.done


def test_numpy_ints_are_token_ids_and_counts():
    m = model()
    (want,) = generate(m, [[1, 2, 3]], 3, pool_rows=8)
    (a,) = generate(m, [[np.int64(1), np.int32(2), 3]], np.int64(3), pool_rows=np.int32(8), stop=None)
    (b,) = generate(m, [np.array([1, 2, 3], np.uint16)], [np.int8(3)], pool_rows=8, max_step_tokens=np.int64(2))
    assert a.tokens == b.tokens == want.tokens


BAD_ARGUMENTS = [
    ("pool_rows 2**33", dict(pool_rows=2**33), r"pool_rows must be an int in \[1, 2147483647\], got 8589934592"),
    ("pool_rows beyond memory", dict(pool_rows=2**31 - 1), r"pool_rows = 2147483647 needs 1024.0 GiB of KV pools"),
    ("pool_rows a float", dict(pool_rows=8.0), "pool_rows must be an int, got float 8.0"),
    ("max_new_tokens a float", dict(max_new_tokens=2.5), "max_new_tokens of prompt 0 must be an int, got float 2.5"),
    ("max_new_tokens a bool", dict(max_new_tokens=True), "max_new_tokens of prompt 0 must be an int, got bool"),
    ("stop a string", dict(stop="2"), "stop must be an int, got str '2'"),
    ("max_step_tokens zero", dict(max_step_tokens=0), r"max_step_tokens must be an int >= 1, got 0"),
    ("prefix_cache a string", dict(prefix_cache="no"), "prefix_cache must be True or False, got 'no'"),
]


@pytest.mark.parametrize("name, change, message", BAD_ARGUMENTS, ids=[b[0] for b in BAD_ARGUMENTS])
def test_a_bad_argument_is_refused_naming_it(name, change, message):
    call = dict(prompts=[[1, 2]], max_new_tokens=2, pool_rows=8) | change
    with pytest.raises(EngineArgumentError, match=message):
        generate(model(), call.pop("prompts"), call.pop("max_new_tokens"), **call)


# --- Threads ------------------------------------------------------------------------------------------


def in_thread(f):
    out = {}

    def target():
        try:
            out["value"] = f()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            out["error"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join()
    return out


def test_an_engine_stepped_from_another_thread_is_refused():
    engine = Engine(model(), pool_rows=8)
    engine.add_request([1, 2], 2)
    out = in_thread(engine.step)
    assert isinstance(out.get("error"), WrongThreadError)
    assert "MLX's streams are per thread" in str(out["error"])
    assert engine.steps == 0 and engine.requests[0].status is Status.WAITING
    engine.step()  # its own thread steps it
    assert engine.steps == 1


def test_a_request_added_from_another_thread_is_refused():
    """Added from a worker while the engine's thread steps, a request could land in the undo log of a step
    that fails, be rolled back with it and never run: refused, nothing queued."""
    engine = Engine(model(), pool_rows=8)
    out = in_thread(lambda: engine.add_request([1, 2], 2))
    assert isinstance(out.get("error"), WrongThreadError) and "add_request:" in str(out["error"])
    assert engine.requests == [] and engine.done


def test_an_engine_made_and_stepped_in_a_worker_thread_works():
    m = model()
    (want,) = generate(m, [[1, 2, 3]], 3, pool_rows=8)
    out = in_thread(lambda: generate(m, [[1, 2, 3]], 3, pool_rows=8))
    assert "error" not in out, out.get("error")
    assert out["value"][0].tokens == want.tokens


# --- The undo log: a second Ctrl-C, a Ctrl-C after the commit, the cache's books -----------------------


def books_recounted(engine):
    """The radix tree's counts, recounted from scratch: they must equal what it keeps up to date."""
    cache, refs = engine.scheduler.cache, engine.allocator.refs
    nodes = cache.nodes()
    evictable = sum(refs[p] == 1 for node in nodes for p in node.pages)
    leaves = {node for node in nodes if not node.children and refs[node.pages[-1]] == 1}
    assert cache.num_evictable() == evictable, "the evictable count drifted"
    assert cache.leaves == leaves, "the evictable leaves drifted"
    assert cache.tails == {node.pages[-1]: node for node in nodes}
    assert [p for p in range(engine.allocator.num_pages) if cache.in_tree[p]] == sorted(
        p for node in nodes for p in node.pages
    )


@contextmanager
def interrupted_twice(engine, k):
    """KeyboardInterrupt in the first ``share`` of a step, then a real SIGINT while undoing record ``k`` from the end."""
    undone = [0]
    journal = engine.journal
    original = journal.record

    def record(undo, *args):
        def wrapped(*a):
            undone[0] += 1
            if undone[0] == k:
                signal.raise_signal(signal.SIGINT)  # Ctrl-C, delivered while the rollback runs
            return undo(*a)

        original(wrapped, *args)

    journal.record = record
    try:
        with Patch(engine.scheduler, "share", calls(1)) as raised:
            yield raised
    finally:
        del journal.record


@pytest.mark.parametrize("k", [1, 2, 5, 12])
def test_a_second_interrupt_during_the_rollback_is_held_until_it_ends(k):
    want, plain, _ = served()
    got, engine, failures = served(lambda e: interrupted_twice(e, k))  # checks each failed step changed nothing
    assert failures > 0 and engine.steps == plain.steps
    assert engine_state(engine)[2:] == engine_state(plain)[2:]
    books_recounted(engine)
    for r, w in zip(got, want):
        assert r.tokens == w.tokens


def test_a_rollback_cut_short_before_its_hold_is_finished_by_the_next_step():
    """A Ctrl-C in the instant between a failure and the rollback's hold: the KeyboardInterrupt leaves the
    undo log behind; the next step finishes the rollback before it changes anything, and nothing is lost."""
    want, _, _ = served()
    engine = Engine(model(), pool_rows=16, keep_logits=True, max_step_tokens=8)
    reqs = [engine.add_request(*WARM)]
    while not engine.done:
        engine.step()
    reqs += [engine.add_request(p, n) for p, n in REQUESTS]
    engine.step()
    before = engine_state(engine)
    rollback = engine.journal.rollback

    def cut_short():
        engine.journal.rollback = rollback  # the next call is a real one
        raise KeyboardInterrupt("landed before the rollback's hold")

    engine.journal.rollback = cut_short
    with Patch(engine.scheduler, "share", calls(1)), pytest.raises(KeyboardInterrupt, match="before the rollback"):
        engine.step()
    assert len(engine.journal) > 0 and engine_state(engine) != before  # half done: the log is still there
    engine.journal.begin()  # what the next step does first
    assert len(engine.journal) == 0 and engine_state(engine) == before
    while not engine.done:
        engine.step()
    assert [r.tokens for r in reqs] == [r.tokens for r in want]
    books_recounted(engine)


def test_a_ctrl_c_during_bookkeeping_that_fails_is_raised_with_the_error():
    engine = Engine(model(), pool_rows=16, keep_logits=True, max_step_tokens=8)
    engine.add_request(*WARM)
    engine.step()
    before = engine_state(engine)
    postprocess = engine.scheduler.postprocess

    def failing(*args, **kwargs):
        postprocess(*args, **kwargs)
        signal.raise_signal(signal.SIGINT)  # held by the bookkeeping
        raise ValueError("the bookkeeping failed")

    engine.scheduler.postprocess = failing
    with pytest.raises(KeyboardInterrupt) as info:
        engine.step()
    del engine.scheduler.postprocess
    assert isinstance(info.value.__context__, ValueError)  # the error is not dropped for the Ctrl-C
    assert engine_state(engine) == before


def step_lines_after_the_commit():
    lines, first = inspect.getsourcelines(Engine.step)
    start = next(i for i, line in enumerate(lines) if "self.journal.commit()" in line)
    end = next((i for i in range(start, len(lines)) if lines[i].strip().startswith("except")), len(lines))
    code = [i for i in range(start, end) if lines[i].strip() and not lines[i].strip().startswith("#")]
    return [first + i for i in code if lines[i].strip() != "finally:"]


@pytest.fixture
def python_s_handler():
    """Python's own SIGINT handler (KeyboardInterrupt) for the test, whatever the runner installed."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("line", step_lines_after_the_commit())
def test_an_interrupt_after_the_commit_does_not_lose_the_step(line, python_s_handler):
    """A Ctrl-C at each line from the commit to the return of every step, Python's handler in force: the
    batch comes back, finished requests included; the next step raises it before changing anything, and
    after the last step ``done`` does."""
    m = model()
    (want,) = generate(m, [[1, 2, 3]], 4, pool_rows=8)
    engine = Engine(m, pool_rows=8)
    engine.add_request([1, 2, 3], 4)

    def tracer(frame, event, arg):
        if frame.f_code is not Engine.step.__code__:
            return None

        def local(frame, event, arg):
            if event == "line" and frame.f_lineno == line:
                signal.raise_signal(signal.SIGINT)
            return local

        return local

    finished, interrupts, steps = [], 0, 0
    sys.settrace(tracer)
    try:
        while True:
            try:
                if engine.done:
                    break
                batch = engine.step()
            except KeyboardInterrupt:
                interrupts += 1
                continue
            steps += 1
            finished += batch.finished
    finally:
        sys.settrace(None)
    assert [r.tokens for r in finished] == [want.tokens], "a committed step's finished request was lost"
    assert steps == engine.steps == 4 and interrupts == 4 and not engine.held_interrupt
    assert engine.allocator.num_free + engine.scheduler.cache.num_evictable() == engine.allocator.num_pages


def serve_with_sigint_at(points, first_only=False):
    """Serve one request (4 steps), Python's handler in force, a SIGINT raised at each ``(code, line)`` of
    ``points`` whenever it runs (Engine.step's code: after the commit; SigintHold.stop: the commit hold's
    own, called from Engine._hand_back); a recorder watches. Returns the finished requests, the steps that
    returned, the KeyboardInterrupts caught, the engine, the recording and the wanted tokens."""
    from ropepool.engine.journal import SigintHold
    from ropepool.engine.recording import record

    m = model()
    (want,) = generate(m, [[1, 2, 3]], 4, pool_rows=8)
    engine = Engine(m, pool_rows=8)
    engine.add_request([1, 2, 3], 4)
    rec = record(engine)
    codes, stop = {code for code, _ in points}, SigintHold.stop.__code__

    def tracer(frame, event, arg):
        code = frame.f_code
        if code not in codes or (code is stop and frame.f_back.f_code is not Engine._hand_back.__code__):
            return None

        def local(fr, ev, a):
            if ev == "line" and (fr.f_code, fr.f_lineno) in points:
                signal.raise_signal(signal.SIGINT)
            return local

        return local

    finished, interrupts, steps = [], 0, 0
    try:
        while True:
            sys.settrace(tracer)  # again: a trace function that raises (here, Python's handler) is unset
            try:
                if engine.done:
                    break
                batch = engine.step()
            except KeyboardInterrupt:
                interrupts += 1
                continue
            steps += 1
            finished += batch.finished
    finally:
        sys.settrace(None)
    return finished, steps, interrupts, engine, rec, want


def lines_run_after_the_commit():
    """Every ``(code, line)`` a usual step runs from its commit to its return: the rest of Engine.step, the
    hand-back, the watcher calls, the commit hold's stop() and the recorder's call."""
    from ropepool.engine.journal import SigintHold
    from ropepool.engine.recording import Recording, record

    after = min(step_lines_after_the_commit())
    codes = {Engine._hand_back.__code__, Engine._tell_watchers.__code__, Recording.__call__.__code__}
    stop, seen = SigintHold.stop.__code__, []
    engine = Engine(model(), pool_rows=8)
    engine.add_request([1, 2, 3], 4)
    record(engine)

    def tracer(frame, event, arg):
        code = frame.f_code
        watched = code in codes or code is Engine.step.__code__
        if not watched and not (code is stop and frame.f_back.f_code is Engine._hand_back.__code__):
            return None

        def local(fr, ev, a):
            if ev == "line" and (fr.f_code is not Engine.step.__code__ or fr.f_lineno >= after):
                seen.append((fr.f_code, fr.f_lineno))
            return local

        return local

    sys.settrace(tracer)
    try:
        engine.step()
    finally:
        sys.settrace(None)
    return list(dict.fromkeys(seen))


def test_a_ctrl_c_anywhere_after_the_commit_loses_no_batch_and_no_recorded_step_silently(python_s_handler):
    """A Ctrl-C at each line from the commit to the return (the hold's own stop() after Python's handler is
    back, the watchers' calls, the recorder's own lines): every committed batch comes back, each Ctrl-C is
    raised by the next step (or done), and every step is either recorded or named as missed."""
    points = lines_run_after_the_commit()
    names = {p[0].co_name for p in points}
    assert {"step", "_hand_back", "stop", "_tell_watchers", "__call__"} <= names, names
    for point in points:
        where = f"{point[0].co_name} line {point[1]}"
        finished, steps, interrupts, engine, rec, want = serve_with_sigint_at({point})
        assert [r.tokens for r in finished] == [want.tokens], f"{where}: a committed step's batch was lost"
        assert steps == engine.steps == 4 and interrupts == 4 and not engine.held_interrupt, where
        recorded = [d.step for d in rec.decisions]
        assert sorted(recorded + rec.missed) == [1, 2, 3, 4], f"{where}: recorded {recorded}, missed {rec.missed}"
        assert rec.complete == (not rec.missed), where


def test_a_ctrl_c_inside_the_commit_hold_s_own_stop_is_held_for_the_next_step(python_s_handler):
    """The landing the issue counted (5 of 300 on a sweep): SIGINT after stop() has put Python's handler back."""
    from ropepool.engine.journal import SigintHold

    lines, first = inspect.getsourcelines(SigintHold.stop)
    body = [first + i for i, line in enumerate(lines) if line.strip().startswith(("self._installed = False", "return"))]
    finished, steps, interrupts, engine, rec, want = serve_with_sigint_at({(SigintHold.stop.__code__, n) for n in body})
    assert [r.tokens for r in finished] == [want.tokens], "a committed step's finished request was lost"
    assert steps == engine.steps == 4 and interrupts == 4 and rec.complete


def test_a_stuck_watcher_can_be_interrupted_and_the_batch_still_comes_back(python_s_handler):
    """A watcher that spins: a Ctrl-C stops it (it runs under the program's handler, not the engine's hold);
    the step's batch is returned, the watchers after it are told, the next step raises the Ctrl-C."""
    from ropepool.engine.recording import record

    engine = Engine(model(), pool_rows=8)
    engine.add_request([1, 2, 3], 1)
    spun = []

    def stuck(engine, batch, records):
        for i in range(100_000):
            if i == 1000:
                signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C while it spins
        spun.append(i)  # reached only if the Ctrl-C did not stop it

    engine.watch(stuck)
    rec = record(engine)
    batch = engine.step()
    assert spun == [], "the Ctrl-C did not reach the stuck watcher"
    assert [r.rid for r in batch.finished] == [0] and len(rec) == 1 and rec.complete
    assert engine.held_interrupt and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt, match="held"):
        engine.done


def test_the_cache_books_hold_through_failed_steps():
    _, engine, failures = served(PHASES["schedule"])
    assert failures > 0
    books_recounted(engine)


# --- A radix tree 100,000 levels deep ---------------------------------------------------------------


def test_a_tree_100000_levels_deep_works():
    levels = 100_000
    engine = Engine(model(), pool_rows=2 * levels + 64, max_step_tokens=64)
    cache, a = engine.scheduler.cache, engine.allocator
    # Level d: a node [1] with two children, [2] (a leaf) and the next level, built with one insert each
    # from the cursor one page into the edge [1, 2] the last insert made: O(1) a level.
    gc.disable()  # 200,000 new nodes: the cyclic collector's passes over them would be most of the test's time
    try:
        pages = a.allocate(2)
        _, (node, depth) = cache.insert([1, 2], pages, None)
        a.release(pages)
        for _ in range(levels - 1):
            pages = a.allocate(2)
            _, (node, depth) = cache.insert([1, 2], pages, (node, depth - 1))
            a.release(pages)
    finally:
        gc.enable()
    deepest = [1] * levels + [2]
    assert len(cache.match(deepest)[0]) == levels + 1
    assert len(cache.nodes()) == 2 * levels - 1 and cache.num_evictable() == 2 * levels
    # A step on top of it: a prompt down the deepest path shares its rows; a new one evicts.
    r = engine.add_request(deepest[:64] + [3], 2)
    engine.step()
    assert r.num_cached == 65 and engine.stats.cached_tokens == 64
    with Patch(engine.scheduler, "share", calls(1)):
        with pytest.raises(KeyboardInterrupt):
            engine.step()  # the rollback of a step over a deep tree
    while not engine.done:
        engine.step()
    # Evicting the whole tree, leaf after leaf up 100,000 levels, and undoing it.
    books_recounted(engine)
    cached = cache.num_evictable()
    assert cached == a.num_pages - a.num_free > 2 * levels
    assert len(cache.evict(10**9)) == cached and cache.nodes() == [] and a.num_free == a.num_pages


# --- The op's step half runs once per step --------------------------------------------------------------


STEP_HALF_MODELS = {
    "llama x1": lambda: tiny("llama", num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2),
    "llama x6": lambda: tiny("llama", num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2),
    "deepseek-v3 x4 (MLA)": lambda: build("deepseek-v3", num_hidden_layers=4),
    "gemma3 x4 (two RoPEs)": lambda: build("gemma3", num_hidden_layers=4),
}


def _count_calls(monkeypatch, module, name):
    calls, original = [], getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **kw: calls.append(1) or original(*a, **kw))
    return calls


@pytest.mark.parametrize("which", list(STEP_HALF_MODELS))
def test_the_slots_are_read_on_the_host_once_per_step(which, monkeypatch):
    from ropepool import validation

    reads = _count_calls(monkeypatch, validation, "read_slots")
    engine = Engine(STEP_HALF_MODELS[which](), pool_rows=64)
    assert len(engine.runner.k_pools) == int(which.split(" x")[1][0])
    for i in range(3):
        engine.add_request([i + 1, 2, 3], 3)
    while not engine.done:
        before = len(reads)
        engine.step()
        assert len(reads) - before == 1, f"{len(reads) - before} host reads of the slots in one step"


@pytest.mark.parametrize("which", list(STEP_HALF_MODELS))
def test_the_rope_table_rows_are_made_once_per_step_and_rope(which, monkeypatch):
    from ropepool import mlx_ops

    made = _count_calls(monkeypatch, mlx_ops, "_angles")  # every table made, by the plan or by a layer
    engine = Engine(STEP_HALF_MODELS[which](), pool_rows=64, backend="mlx")
    ropes = len(set(engine.runner.ropes)) if hasattr(engine.runner, "ropes") else 1  # Gemma-3: local and global
    assert ropes == (2 if "gemma3" in which else 1)
    for i in range(3):
        engine.add_request([i + 1, 2, 3], 3)
    steps = 0
    while not engine.done:
        engine.step()
        steps += 1
    assert len(made) == ropes * steps, f"{len(made)} tables made in {steps} steps of {ropes} RoPE(s)"


# --- A part of your own, without an undo log (ropepool.engine.protocols) ---------------------------------


class PlainAllocator:
    """An allocator as a learner first writes it: no journal, no watchers (so: no radix cache over it)."""

    def __init__(self, pool_rows, page_size):
        self.pool_rows, self.page_size, self.num_pages = pool_rows, page_size, pool_rows // page_size
        self.free_pages, self.refs = list(range(self.num_pages)), [0] * self.num_pages

    num_free = property(lambda self: len(self.free_pages))
    rows_in_use = property(lambda self: (self.num_pages - self.num_free) * self.page_size)

    def pages_for(self, rows):
        return -(-rows // self.page_size)

    def rows(self, pages):
        return [p * self.page_size + o for p in pages for o in range(self.page_size)]

    def allocate(self, n):
        if n > self.num_free:
            raise ValueError("not enough free pages")
        pages, self.free_pages = self.free_pages[:n], self.free_pages[n:]
        for p in pages:
            self.refs[p] = 1
        return pages

    def retain(self, pages):
        for p in pages:
            self.refs[p] += 1

    def release(self, pages):
        freed = []
        for p in pages:
            self.refs[p] -= 1
            if self.refs[p] == 0:
                freed.append(p)
        self.free_pages += freed
        return freed


def test_a_part_without_an_undo_log_is_copied_each_step_and_steps_stay_transactions():
    m = model()
    want = generate(m, [p for p, _ in REQUESTS], [n for _, n in REQUESTS], pool_rows=12, prefix_cache=False)
    engine = Engine(m, pool_rows=12, prefix_cache=False, allocator=PlainAllocator, max_step_tokens=8)
    assert engine._unjournaled == [engine.allocator]
    reqs = [engine.add_request(p, n) for p, n in REQUESTS]
    failures = 0

    def state():
        s, a = engine.scheduler, engine.allocator
        books = [(r.rid, r.status, list(r.slot_table), r.num_cached, list(r.tokens)) for r in reqs]
        return books, [[r.rid for r in q] for q in (s.waiting, s.running)], list(a.free_pages), list(a.refs)

    while not engine.done:
        before = state()
        with Patch(engine.scheduler, "share", calls(1)):
            with pytest.raises(KeyboardInterrupt):
                engine.step()
        failures += 1
        assert state() == before
        engine.step()
    assert failures > 0 and engine.stats.preemptions > 0
    assert [r.tokens for r in reqs] == [w.tokens for w in want]


BOOKKEEPING = tuple(
    str(Path(ropepool.__file__).parent / "engine" / f"{m}.py") for m in ("allocator", "radix", "scheduler", "request")
)


@pytest.mark.parametrize("n", [1, 7, 40, 150, 400])
def test_a_ctrl_c_at_any_line_of_the_bookkeeping_is_undone(n):
    """A real SIGINT at the n-th line the allocator, the tree, the scheduler or a request runs in a step:
    held until that bookkeeping has recorded its change, then raised; the step is undone."""
    want, plain, _ = served()
    engine = Engine(model(), pool_rows=16, keep_logits=True, max_step_tokens=8)
    reqs = [engine.add_request(*WARM)]
    while not engine.done:
        engine.step()
    reqs += [engine.add_request(p, k) for p, k in REQUESTS]
    lines = [0]

    def tracer(frame, event, arg):
        if frame.f_code.co_filename not in BOOKKEEPING:
            return None

        def local(frame, event, arg):
            if event == "line":
                lines[0] += 1
                if lines[0] == n:
                    signal.raise_signal(signal.SIGINT)
            return local

        return local

    interrupts = 0
    while not engine.done:
        before, rows = engine_state(engine), valuable_rows(engine)
        bits = pool_rows(engine, rows)
        lines[0] = 0
        sys.settrace(tracer)
        try:
            engine.step()
        except KeyboardInterrupt:
            interrupts += 1
            assert engine_state(engine) == before, "a Ctrl-C in the bookkeeping changed the engine"
            for b, a in zip(bits, pool_rows(engine, rows)):
                np.testing.assert_array_equal(b, a)
            engine.step()  # the same step again, with no Ctrl-C
        finally:
            sys.settrace(None)
    assert interrupts > 0 and engine.steps == plain.steps
    books_recounted(engine)
    for r, w in zip(reqs, want):
        assert r.tokens == w.tokens


class UnloggedScheduler:
    """A scheduler of your own that keeps no undo log: here the engine's, behind a wrapper without ``journal``."""

    def __init__(self, allocator, cache, *, max_step_tokens):
        self.inner = Scheduler(allocator, cache, max_step_tokens=max_step_tokens)  # its journal: its own, never begun

    allocator = property(lambda self: self.inner.allocator)
    cache = property(lambda self: self.inner.cache)
    waiting = property(lambda self: self.inner.waiting)
    running = property(lambda self: self.inner.running)
    stats = property(lambda self: self.inner.stats)
    done = property(lambda self: self.inner.done)

    def add(self, req):
        self.inner.add(req)

    def schedule(self):
        return self.inner.schedule()

    def postprocess(self, batch, logits, *, keep_logits=False):
        self.inner.postprocess(batch, logits, keep_logits=keep_logits)


@pytest.mark.parametrize("scheduler", [Scheduler, UnloggedScheduler], ids=["factory", "without a journal"])
def test_plugged_parts_serve_as_the_engines_own(scheduler):
    """The plug points of ropepool.engine.protocols: factories for the cache and the scheduler, one of them
    keeping no undo log (copied each step instead); failed steps are still undone."""
    want, plain, _ = served()
    m = model()
    engine = Engine(
        m, pool_rows=16, keep_logits=True, max_step_tokens=8, prefix_cache=lambda a: RadixCache(a), scheduler=scheduler
    )
    assert (engine._unjournaled == [engine.scheduler]) == (scheduler is UnloggedScheduler)
    reqs = [engine.add_request(*WARM)]
    while not engine.done:
        engine.step()
    reqs += [engine.add_request(p, n) for p, n in REQUESTS]
    while not engine.done:
        before, rows = engine_state(engine), valuable_rows(engine)
        bits = pool_rows(engine, rows)
        with Patch(engine.runner, "run", lambda *a: True), pytest.raises(KeyboardInterrupt):
            engine.step()
        assert engine_state(engine) == before
        for b, a in zip(bits, pool_rows(engine, rows)):
            np.testing.assert_array_equal(b, a)
        engine.step()
    assert engine_state(engine)[2:] == engine_state(plain)[2:]
    for r, w in zip(reqs, want):
        assert r.tokens == w.tokens


# --- Ctrl-C goes to the program's own handler -----------------------------------------------------


@contextmanager
def sigint_handler(handler):
    before = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def sigint_in_postprocess(engine):
    """Patch the engine's scheduler so that its next postprocess raises a real SIGINT halfway."""
    postprocess = engine.scheduler.postprocess

    def with_sigint(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)
        return postprocess(*args, **kwargs)

    engine.scheduler.postprocess = with_sigint


def test_a_handler_installed_after_a_step_chains_without_recursion():
    """The program installs its handler after a step, chaining to the one it replaced: a Ctrl-C in the
    next step's bookkeeping reaches it once, then the chain; the step completes and the handler stays."""
    calls_ = []
    with sigint_handler(lambda s, f: calls_.append("base")):
        engine = Engine(model(), pool_rows=16)
        engine.add_request([1, 2, 3], 4)
        engine.step()
        base = signal.getsignal(signal.SIGINT)

        def mine(s, f):
            calls_.append("mine")
            base(s, f)

        signal.signal(signal.SIGINT, mine)
        sigint_in_postprocess(engine)
        batch = engine.step()
        assert calls_ == ["mine", "base"] and batch.requests and engine.steps == 2
        assert signal.getsignal(signal.SIGINT) is mine


@pytest.mark.parametrize("where", ["postprocess", "after the commit"])
def test_a_graceful_stop_handler_is_called_and_the_step_returns(where):
    stop = []
    engine = Engine(model(), pool_rows=16)
    engine.add_request([1, 2, 3], 4)
    with sigint_handler(lambda s, f: stop.append(s)):
        if where == "postprocess":
            sigint_in_postprocess(engine)
            batch = engine.step()
        else:
            line = step_lines_after_the_commit()[0]

            def tracer(frame, event, arg):
                if frame.f_code is not Engine.step.__code__:
                    return None
                return lambda fr, ev, a: (
                    signal.raise_signal(signal.SIGINT) if ev == "line" and fr.f_lineno == line else None
                )

            sys.settrace(tracer)
            try:
                batch = engine.step()
            finally:
                sys.settrace(None)
    assert stop == [signal.SIGINT] and engine.steps == 1 and batch.requests and not engine.held_interrupt


def test_sig_ign_is_honoured():
    """A server or a job under nohup ignores SIGINT: a Ctrl-C in the bookkeeping changes nothing."""
    engine = Engine(model(), pool_rows=16)
    engine.add_request([1, 2, 3], 4)
    with sigint_handler(signal.SIG_IGN):
        sigint_in_postprocess(engine)
        engine.step()
        assert engine.steps == 1 and not engine.held_interrupt
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def test_sig_dfl_ends_the_process_as_the_os_would(tmp_path):
    """With SIG_DFL in force a Ctrl-C held in the bookkeeping ends the process by SIGINT, as without the engine."""
    import subprocess

    code = (
        "import signal\nfrom ropepool.engine import Engine\nfrom ropepool.loaders.tiny import tiny\n"
        "e = Engine(tiny('llama', num_attention_heads=4, num_key_value_heads=2), pool_rows=16)\n"
        "e.add_request([1, 2, 3], 4)\np = e.scheduler.postprocess\n"
        "def q(*a, **k):\n    signal.raise_signal(signal.SIGINT)\n    return p(*a, **k)\n"
        "e.scheduler.postprocess = q\nsignal.signal(signal.SIGINT, signal.SIG_DFL)\ne.step()\nprint('survived')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == -signal.SIGINT and "survived" not in done.stdout, (done.returncode, done.stderr)


def test_an_undo_record_that_raises_releases_the_hold(python_s_handler):
    """A failed step whose rollback raises: the error reaches the caller and Ctrl-C is the program's again."""
    engine = Engine(model(), pool_rows=16)
    engine.add_request([1, 2, 3], 4)

    def failing_run(batch):
        engine.journal.record(lambda: (_ for _ in ()).throw(OSError("an undo record failed")))
        raise ValueError("the forward pass failed")

    engine.runner.run = failing_run
    with pytest.raises(OSError, match="an undo record failed"):
        engine.step()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


def test_a_request_added_after_a_rollback_cut_short_runs(python_s_handler):
    """A Ctrl-C in the instant between a failure and the rollback's hold leaves the undo log behind; a
    request added right then is not recorded into it (the engine finishes that rollback first) and runs."""
    engine = Engine(model(), pool_rows=16, keep_logits=True, max_step_tokens=8)
    engine.add_request(*WARM)
    engine.step()
    rollback = engine.journal.rollback

    def cut_short():
        engine.journal.rollback = rollback
        raise KeyboardInterrupt("landed before the rollback's hold")

    engine.journal.rollback = cut_short
    with Patch(engine.scheduler, "share", calls(1)), pytest.raises(KeyboardInterrupt):
        engine.step()
    late = engine.add_request([40, 41, 42], 3)
    while not engine.done:
        engine.step()
    assert len(late.tokens) == 3 and late.status is Status.FINISHED


def test_a_part_without_an_undo_log_nested_too_deep_to_copy_is_refused_in_one_line():
    """A cache of its own without a journal, holding a chain 5,000 deep: the step says so and changes nothing."""
    from ropepool.engine.radix import NoCache

    class DeepCache(NoCache):
        def __init__(self, allocator):
            super().__init__(allocator)
            chain = None
            for i in range(5000):
                chain = {"next": chain, "i": i}
            self.chain = chain

    engine = Engine(model(), pool_rows=16, prefix_cache=DeepCache)
    if hasattr(engine.scheduler.cache, "journal"):
        del engine.scheduler.cache.journal  # make it a part without an undo log, as one of the learner's
        engine._unjournaled.append(engine.scheduler.cache)
    engine.add_request([1, 2, 3], 2)
    with pytest.raises(EngineArgumentError, match=r"DeepCache: a part without an undo log .* nested too deep"):
        engine.step()
    assert engine.steps == 0


@pytest.mark.parametrize("page_size", [1, 4])
def test_the_engine_never_asks_a_part_for_a_count_below_one(page_size):
    """A careful allocator refuses allocate(n) and a cache evict(n) for n < 1; the engine (prefix cache on,
    a tight pool, chunks, preemption) never asks, and serves as with its own parts."""
    from ropepool.engine import Allocator

    asked = []

    class Careful(Allocator):
        def allocate(self, n):
            asked.append(("allocate", n))
            if n < 1:
                raise ValueError(f"allocate({n})")
            return super().allocate(n)

    class CarefulCache(RadixCache):
        def evict(self, n):
            asked.append(("evict", n))
            if n < 1:
                raise ValueError(f"evict({n})")
            return super().evict(n)

    prompts = [list(range(10, 22)), list(range(10, 18)) + [40, 41], [7, 8, 9], list(range(10, 22)) + [5]]

    def serve(**parts):
        engine = Engine(model(), pool_rows=24, max_step_tokens=5, page_size=page_size, **parts)
        reqs = [engine.add_request(p, 6) for p in prompts]
        while not engine.done:
            engine.step()
        return [r.tokens for r in reqs], engine.stats.preemptions

    want, _ = serve()
    got, preemptions = serve(allocator=Careful, prefix_cache=CarefulCache)
    assert got == want and preemptions > 0
    assert asked and min(n for _, n in asked) >= 1


def test_a_scheduler_that_chooses_nothing_is_named_and_the_step_undone():
    """A part of one's own that never admits: a clear RuntimeError, not an error from deep in the runner."""
    from ropepool.engine import Batch, Scheduler

    class Idle(Scheduler):
        def schedule(self):
            return Batch()

    engine = Engine(model(), pool_rows=16, scheduler=Idle)
    engine.add_request([1, 2, 3], 2)
    with pytest.raises(RuntimeError, match=r"chose nothing to run while 1 request\(s\) wait and 0 run"):
        engine.step()
    assert engine.steps == 0 and [r.rid for r in engine.scheduler.waiting] == [0]
