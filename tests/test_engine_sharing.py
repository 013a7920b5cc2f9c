"""The prefix cache, chunked prefill, preemption and pages, against mlx-lm.

In every case: every logit equals mlx-lm's for the same sequence run alone; no row is written while
it is shared (its bits are compared before and after each step); at the end every row is free or
cached, and every page's reference count is the number of its holders.
"""

import mlx.core as mx
import numpy as np
import pytest
from test_engine import check_against_mlx_lm, mlx_lm_logits

from ropepool.engine import Engine, Status, generate
from ropepool.loaders.tiny import ARCHS, build, tiny
from ropepool.tolerance import ENGINE_LOGITS_FLOAT32

SYSTEM = list(range(20, 36))  # a 16-token "system prompt"
POOL = 30  # the architecture test's pool: the cache's rows get evicted and a request preempted


def model():
    return tiny("llama", num_attention_heads=4, num_key_value_heads=2)


def cached_pages(engine) -> list[int]:
    return [p for node in engine.scheduler.cache.nodes() for p in node.pages]


class Watch:
    """``on_step``: no row shared before a step is written by it; page references add up; rows never lost."""

    def __init__(self):
        self.shared, self.bits, self.steps = [], None, []

    def __call__(self, engine, batch):
        a = engine.allocator
        reclaimed = set(batch.reclaimed)
        kept = [row for row in self.shared if row not in reclaimed]  # shared before, not given back since
        assert not set(batch.slots) & set(kept), f"step {engine.steps} wrote a shared row"
        if kept:
            now = self.read(engine, kept)
            index = [self.shared.index(row) for row in kept]
            for before, after in zip(self.bits, now):
                np.testing.assert_array_equal(
                    before[index], after, err_msg=f"step {engine.steps}: a shared row changed"
                )
        self.steps.append((list(batch.lengths), [r.rid for r in batch.requests], list(batch.positions)))
        check_references(engine)
        pages = cached_pages(engine) + [
            p for r in engine.requests if r.status is Status.RUNNING for p in engine.scheduler.pages(r)
        ]
        counts = np.bincount(pages, minlength=a.num_pages) if pages else np.zeros(a.num_pages, int)
        self.shared = a.rows([p for p in range(a.num_pages) if counts[p] > 1 or p in set(cached_pages(engine))])
        self.bits = self.read(engine, self.shared)

    @staticmethod
    def read(engine, rows):
        index = np.array(rows, dtype=np.int64)
        return [np.array(pool)[index] for pool in engine.runner.k_pools + engine.runner.v_pools]


def check_references(engine):
    """Each page's count is its holders: the cache (once) and each running request; free pages hold nothing."""
    a = engine.allocator
    cached = cached_pages(engine)
    assert len(cached) == len(set(cached)), "a page is twice in the cache"
    holders = np.zeros(a.num_pages, int)
    holders[cached] += 1
    for r in engine.requests:
        if r.status is Status.RUNNING:
            holders[engine.scheduler.pages(r)] += 1
    assert holders.tolist() == a.refs, "page references do not add up"
    assert sorted(a.free_pages) == [p for p in range(a.num_pages) if holders[p] == 0], "free list is wrong"


def check_the_end(engine):
    """Every row is free or cached: no request holds one."""
    check_references(engine)
    assert all(n in (0, 1) for n in engine.allocator.refs)
    assert engine.allocator.num_free + len(cached_pages(engine)) == engine.allocator.num_pages


def run(engine, watch):
    while not engine.done:
        watch(engine, engine.step())


def results(reqs):
    return [type("R", (), dict(tokens=r.tokens, logits=mx.stack(r.logits)))() for r in reqs]


# --- Prefix sharing ------------------------------------------------------------------------------

# name: (prompt, the prompt tokens it finds in the pool once request A = SYSTEM + [40, 41, 42] has finished)
SHARING = {
    "system prompt + question": (SYSTEM + [50, 51], 16),
    "diverges inside the system prompt": (SYSTEM[:7] + [60, 61, 62], 7),
    "entirely a cached prefix": (SYSTEM, 15),  # the last token is computed: its logits choose the first new one
    "one shared token": (SYSTEM[:1] + [70], 1),
    "nothing shared": ([99, 98, 97], 0),
}


@pytest.mark.parametrize("prefix_cache", [True, False], ids=["cache", "no cache"])
def test_prompts_share_a_finished_requests_rows(prefix_cache):
    m = model()
    engine, watch = Engine(m, pool_rows=96, keep_logits=True, prefix_cache=prefix_cache), Watch()
    a = engine.add_request(SYSTEM + [40, 41, 42], 3)
    run(engine, watch)
    # A's prompt and its first new token, a prompt of a finished request's whole written sequence but one
    cases = {**SHARING, "a finished request's prompt and answer": (a.prompt + a.tokens[:2], 20)}
    reqs = [engine.add_request(p, 4) for p, _ in cases.values()]
    first = engine.step()
    assert first.admitted == reqs
    starts = dict(zip(first.requests, [first.positions[i] for i in np.cumsum([0] + first.lengths[:-1])]))
    for (name, (prompt, shared)), r in zip(cases.items(), reqs):
        want = shared if prefix_cache else 0
        assert starts[r] == want, f"{name}: computed from position {starts[r]}, not {want}"
        assert r.slot_table[:want] == a.slot_table[:want], f"{name}: its slot table does not point at A's rows"
    assert engine.stats.cached_tokens == (sum(s for _, s in cases.values()) if prefix_cache else 0)
    assert (
        engine.stats.prefill_tokens
        == len(a.prompt) + sum(len(p) for p, _ in cases.values()) - engine.stats.cached_tokens
    )
    watch(engine, first)
    run(engine, watch)
    check_against_mlx_lm(m, [a.prompt] + [r.prompt for r in reqs], [3] + [4] * len(reqs), results([a] + reqs))
    check_the_end(engine)


def test_a_prompt_shares_a_running_requests_rows():
    m = model()
    engine, watch = Engine(m, pool_rows=64, keep_logits=True), Watch()
    j = engine.add_request(list(range(100, 112)), 6)
    watch(engine, engine.step())  # j's prompt is in the pool, and so in the cache; j decodes on
    k = engine.add_request(j.prompt[:10] + [5], 3)
    batch = engine.step()
    assert batch.admitted == [k] and k.slot_table[:10] == j.slot_table[:10] and j.status is Status.RUNNING
    assert batch.lengths == [1, 1] and engine.stats.cached_tokens == 10  # j's decode token, k's one new token
    watch(engine, batch)
    run(engine, watch)
    check_against_mlx_lm(m, [j.prompt, k.prompt], [6, 3], results([j, k]))
    check_the_end(engine)


def test_requests_admitted_together_keep_one_copy_of_their_common_rows():
    """Two equal prompts in one step both compute; afterwards both point at one copy, the other freed."""
    m = model()
    engine, watch = Engine(m, pool_rows=32, keep_logits=True), Watch()
    a, b = engine.add_request(SYSTEM, 3), engine.add_request(SYSTEM, 3)
    watch(engine, engine.step())
    assert a.slot_table[:16] == b.slot_table[:16]
    assert engine.allocator.rows_in_use == 16
    run(engine, watch)
    assert a.tokens == b.tokens
    check_against_mlx_lm(m, [a.prompt, b.prompt], [3, 3], results([a, b]))
    check_the_end(engine)


# --- Chunked prefill ----------------------------------------------------------------------------


@pytest.mark.parametrize("prefix_cache", [True, False], ids=["cache", "no cache"])
def test_a_long_prompt_is_prefilled_in_chunks_while_others_decode(prefix_cache):
    m = model()
    engine, watch = Engine(m, pool_rows=64, keep_logits=True, max_step_tokens=4, prefix_cache=prefix_cache), Watch()
    short = engine.add_request([3, 1, 4], 8)
    watch(engine, engine.step())
    long = engine.add_request(list(range(40, 53)), 3)  # 13 tokens: 3 per step beside short's decode token
    run(engine, watch)
    assert all(sum(lengths) <= 4 for lengths, _, _ in watch.steps), "a step ran more than max_step_tokens"
    chunks = [lengths[rids.index(long.rid)] for lengths, rids, _ in watch.steps if long.rid in rids]
    assert chunks[:5] == [3, 3, 3, 3, 1] and sum(chunks[:5]) == 13, chunks  # four chunks, then its first new token
    mixed = [rids for lengths, rids, _ in watch.steps[1:6]]
    assert all(rids == [short.rid, long.rid] for rids in mixed), "short did not decode while long was prefilled"
    assert engine.stats.prefill_tokens == 16 and engine.stats.steps == len(watch.steps)
    check_against_mlx_lm(m, [short.prompt, long.prompt], [8, 3], results([short, long]))
    check_the_end(engine)


# --- Preemption and eviction --------------------------------------------------------------------


@pytest.mark.parametrize("prefix_cache", [True, False], ids=["cache", "no cache"])
def test_a_small_pool_preempts_and_evicts_and_changes_no_logit(prefix_cache):
    m = model()
    engine, watch = Engine(m, pool_rows=16, keep_logits=True, prefix_cache=prefix_cache), Watch()
    warm = engine.add_request([1, 2, 3, 4, 5, 6], 2)
    run(engine, watch)  # with the cache: 7 rows cached
    assert len(cached_pages(engine)) == (7 if prefix_cache else 0)
    prompts, new = [list(range(10, 16)), list(range(20, 25)), list(range(30, 34))], [6, 6, 5]
    reqs = [engine.add_request(p, n) for p, n in zip(prompts, new)]  # 15 prompt rows: all admitted at once
    first = engine.step()
    assert first.admitted == reqs
    # 6 rows short: the cache frees whole leaves, oldest first, until 6 are free (SGLang's evict): the decoded
    # token's leaf (1 row), then the prompt's (6 rows)
    assert first.reclaimed == ([6, 0, 1, 2, 3, 4, 5] if prefix_cache else []), (
        "the cache did not give back its oldest leaves"
    )
    preempted = []
    watch(engine, first)
    while not engine.done:
        batch = engine.step()
        preempted += batch.preempted
        assert all(r.status is Status.WAITING and r.slot_table == [] for r in batch.preempted)
        watch(engine, batch)
    assert engine.stats.preemptions == len(preempted) > 0 and reqs[0] not in preempted  # the oldest runs on
    alone = generate(m, prompts, new, pool_rows=64)  # no preemption there
    assert [r.tokens for r in reqs] == [r.tokens for r in alone]
    check_against_mlx_lm(m, [warm.prompt] + prompts, [2] + new, results([warm] + reqs))
    check_the_end(engine)


def test_a_preempted_request_resumes_with_the_same_tokens_and_logits():
    m = model()
    engine = Engine(m, pool_rows=12, keep_logits=True, prefix_cache=False)
    a, b = engine.add_request([1, 2, 3, 4], 6), engine.add_request([5, 6, 7, 8, 9], 4)  # 9 + 8 rows > 12
    seen = []
    while not engine.done:
        seen += [(r.rid, len(r.tokens)) for r in engine.step().preempted]
    assert seen and seen[0][0] == b.rid and seen[0][1] > 0, "b was not preempted after writing tokens"
    for r, want in zip((a, b), generate(m, [a.prompt, b.prompt], [6, 4], pool_rows=32)):
        assert r.tokens == want.tokens
        np.testing.assert_allclose(np.array(mx.stack(r.logits)), np.array(want.logits), **ENGINE_LOGITS_FLOAT32)
    np.testing.assert_allclose(
        np.array(mx.stack(b.logits)), mlx_lm_logits(m, b.prompt, b.tokens), **ENGINE_LOGITS_FLOAT32
    )


# --- Pages --------------------------------------------------------------------------------------


@pytest.mark.parametrize("page_size, prefix_cache", [(4, True), (4, False), (2, True)])
def test_pages_change_no_logit_and_waste_the_tails(page_size, prefix_cache):
    m = model()
    engine = Engine(m, pool_rows=96, keep_logits=True, page_size=page_size, prefix_cache=prefix_cache)
    watch = Watch()
    a = engine.add_request(SYSTEM + [40, 41, 42], 3)
    run(engine, watch)
    reqs = [engine.add_request(p, 4) for p, _ in SHARING.values()]
    first = engine.step()
    watch(engine, first)
    for r in reqs:
        table = np.array(r.slot_table).reshape(-1, page_size)  # whole pages: slot = page * page_size + offset
        assert (table[:, 0] % page_size == 0).all() and (np.diff(table, axis=1) == 1).all()
    want = [s // page_size * page_size if prefix_cache else 0 for _, s in SHARING.values()]
    assert [r.num_cached - first.lengths[first.requests.index(r)] for r in reqs] == want
    run(engine, watch)
    assert 0 < engine.stats.wasted_rows < page_size * (len(reqs) + 1)
    check_against_mlx_lm(m, [a.prompt] + [r.prompt for r in reqs], [3] + [4] * len(reqs), results([a] + reqs))
    check_the_end(engine)


def test_one_row_pages_waste_nothing():
    engine = Engine(model(), pool_rows=64, keep_logits=True)
    for p, _ in SHARING.values():
        engine.add_request(p, 4)
    run(engine, Watch())
    assert engine.stats.wasted_rows == 0 and engine.stats.peak_rows > 0


@pytest.mark.parametrize("prefix_cache", [True, False], ids=["cache", "no cache"])
def test_requests_arriving_together_compute_a_long_common_prefix_once(prefix_cache):
    """With the cache, a prompt sharing 32+ tokens with one admitted in the same step waits a step and shares them."""
    m = model()
    system = list(range(40, 80))  # 40 tokens
    prompts = [system + [1, 2], system + [3], system + [4, 5, 6], list(range(100, 140)) + [7]]
    engine, watch = Engine(m, pool_rows=256, keep_logits=True, prefix_cache=prefix_cache), Watch()
    reqs = [engine.add_request(p, 3) for p in prompts]
    first = engine.step()
    assert first.admitted == ([reqs[0], reqs[3]] if prefix_cache else reqs)  # the unrelated one is not held back
    watch(engine, first)
    run(engine, watch)
    shared = 40 * 2 if prefix_cache else 0
    assert (engine.stats.cached_tokens, engine.stats.prefill_tokens) == (shared, sum(map(len, prompts)) - shared)
    check_against_mlx_lm(m, prompts, [3] * 4, results(reqs))
    check_the_end(engine)


@pytest.mark.parametrize("name", ARCHS)
def test_every_architecture_shares_chunks_and_preempts_with_mlx_lm_logits(name):
    """Each tiny model of test_engine's list (scaled, partial and GPT-J RoPE; fused and biased qkv) on a small pool."""
    m = build(name)
    engine, watch = Engine(m, pool_rows=POOL, keep_logits=True, max_step_tokens=5), Watch()
    warm = engine.add_request(SYSTEM + [40], 3)
    run(engine, watch)
    prompts = [SYSTEM + [50, 51], SYSTEM[:7] + [60], SYSTEM, [99, 98, 97]]
    reqs = [engine.add_request(p, 6) for p in prompts]
    run(engine, watch)
    assert engine.stats.cached_tokens >= 16 + 7 + 15 and engine.stats.preemptions > 0
    assert max(sum(lengths) for lengths, _, _ in watch.steps) <= 5
    check_against_mlx_lm(m, [warm.prompt] + prompts, [3] + [6] * 4, results([warm] + reqs))
    check_the_end(engine)
