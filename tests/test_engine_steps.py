"""A step is one transaction; the engine lets go of finished requests; bad arguments and threads are refused."""

import gc
import threading
import weakref

import mlx.core as mx
import numpy as np
import pytest

import ropepool
from ropepool.engine import Engine, EngineArgumentError, Status, WrongThreadError, generate
from ropepool.engine.tiny_models import tiny


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
        rows |= set(r.slot_table[:r.num_cached])
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
    "forward, layer 1": lambda e: Patch(e.runner, "attention", lambda i, *a: i == 1, before=True),
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


def test_an_engine_made_and_stepped_in_a_worker_thread_works():
    m = model()
    (want,) = generate(m, [[1, 2, 3]], 3, pool_rows=8)
    out = in_thread(lambda: generate(m, [[1, 2, 3]], 3, pool_rows=8))
    assert "error" not in out, out.get("error")
    assert out["value"][0].tokens == want.tokens
