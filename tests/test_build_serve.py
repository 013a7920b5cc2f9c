"""ropepool.track.serve: the engine with learner parts plugged in gives mlx-lm's tokens and logits (on a
tiny model here; the notebooks do it on SmolLM2), and a wrong part changes the answer."""

import numpy as np
import pytest

from ropepool.track import mistakes, serve
from ropepool.track import solutions as S
from ropepool.track.allocator import Paged
from ropepool.track.schedule import Planned
from ropepool.track.tree import Cached
from ropepool.engine import Engine
from ropepool.engine.errors import ContractError
from ropepool.loaders.tiny import build
from ropepool.tolerance import ENGINE_LOGITS_FLOAT32

pytest.importorskip("mlx_lm")

PROMPTS = [[1, 5, 9, 14, 2, 7, 30, 3, 11], [1, 5, 9, 14, 2, 8, 4], [90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101]]
NEW = 4


@pytest.fixture(scope="module")
def model_and_reference():
    from ropepool.engine.mlx_lm_loop import greedy

    model = build("llama-gptj")
    return model, greedy(model, PROMPTS, NEW)


def _same(results, reference) -> bool:
    return all(
        tokens == want.tokens and np.allclose(np.array(logits), np.array(want.logits), **ENGINE_LOGITS_FLOAT32)
        for (tokens, logits), want in zip(results, reference)
    )


def test_all_five_engine_parts_together_serve_mlx_lm_s_tokens_and_logits(model_and_reference):
    model, reference = model_and_reference
    history = []
    eng = serve.engine(
        model,
        rotate=S.rotate,
        allocator=Paged.factory(S.Allocator),
        slot_mapping=S.slot_mapping,
        prefix_cache=Cached.factory(S.PrefixTree),
        scheduler=Planned.factory(S.schedule_step),
        pool_rows=24,
        max_step_tokens=6,
    )
    out = serve.run(eng, PROMPTS, NEW, history)
    assert _same(out, reference)
    assert serve.pool_is_clean(eng) and eng.stats.cached_tokens > 0  # request 1 shared request 0's first rows
    assert max(sum(n for _, n in step) for step in history) <= 6


@pytest.mark.parametrize("page_size", [1, 4])
def test_the_slot_mapping_and_the_allocator_with_pages(model_and_reference, page_size):
    model, reference = model_and_reference
    eng = serve.engine(
        model,
        slot_mapping=S.slot_mapping,
        allocator=Paged.factory(S.Allocator),
        prefix_cache=Cached.factory(S.PrefixTree),
        pool_rows=32,
        page_size=page_size,
    )
    assert _same(serve.run(eng, PROMPTS, NEW), reference) and serve.pool_is_clean(eng)


def test_the_learner_fp8_encoder_writes_the_engine_s_own_fp8_pool(model_and_reference):
    model, _ = model_and_reference
    own = serve.run(serve.engine(model, kv_dtype="fp8", pool_rows=48), PROMPTS, NEW)
    mine = serve.run(serve.engine(model, encode_e4m3=S.encode_e4m3, pool_rows=48), PROMPTS, NEW)
    for (tokens, logits), (want_tokens, want_logits) in zip(mine, own):
        assert tokens == want_tokens
        np.testing.assert_array_equal(np.array(logits), np.array(want_logits))


def test_wrong_parts_change_the_answer(model_and_reference):
    model, reference = model_and_reference
    rotated = serve.run(serve.engine(model, rotate=mistakes.rotate_pairs_swapped, pool_rows=48), PROMPTS[:1], NEW)
    assert not _same(rotated, reference[:1])
    mapped = serve.run(serve.engine(model, slot_mapping=mistakes.slots_from_start, pool_rows=48), PROMPTS[:1], NEW)
    assert not _same(mapped, reference[:1])


def test_a_leaky_allocator_leaves_rows_taken(model_and_reference):
    model, reference = model_and_reference
    eng = serve.engine(model, allocator=Paged.factory(mistakes.AllocatorLeak), pool_rows=48, prefix_cache=False)
    assert _same(serve.run(eng, PROMPTS[:1], NEW), reference[:1]) and not serve.pool_is_clean(eng)


def test_paged_refuses_a_page_size_that_does_not_divide_the_pool():
    with pytest.raises(ValueError, match="must divide"):
        Paged(S.Allocator, 10, 4)


def test_the_learner_scheduler_needs_pages_of_one_row(model_and_reference):
    model, _ = model_and_reference
    with pytest.raises(ValueError, match="page_size=1"):
        Engine(model, pool_rows=32, page_size=4, scheduler=Planned.factory(S.schedule_step))


def test_trying_mistakes_names_each_and_says_what_serving_showed_or_why_not(model_and_reference, capsys):
    """A leak that exhausts a tight pool fails the run; a stack-ordered free list serves silently, with
    the reason; the correct allocator serves silently too, with the catch-all reason."""
    model, reference = model_and_reference
    wrong = {"leak": mistakes.AllocatorLeak, "wrong_order": mistakes.AllocatorStack, "fine": S.Allocator}
    rows = serve.try_mistakes(
        2, wrong, lambda part: serve.engine(model, allocator=Paged.factory(part), pool_rows=16), PROMPTS, reference, NEW
    )
    by = {r["problem"]: r for r in rows}
    assert by["leak"]["named"] == "leak" and not by["leak"]["silent"] and "run failed" in by["leak"]["served"]
    assert by["wrong_order"]["silent"] and by["wrong_order"]["why"] == serve.SILENT[(2, "wrong_order")]
    assert by["fine"]["named"] is None and by["fine"]["silent"]
    assert "serves silently" in capsys.readouterr().out


def test_serving_prints_one_progress_line_rewritten_each_step(model_and_reference, capsys):
    model, _ = model_and_reference
    eng = serve.engine(model, pool_rows=64)
    serve.run(eng, PROMPTS[:1], 2)
    out = capsys.readouterr().out
    last = out.rstrip("\n").rsplit("\r", 1)[1]
    assert out.count("\rserving: step ") == eng.steps
    assert last.startswith(f"serving: step {eng.steps}, 1 of 1 requests done, 2 tokens generated, ")


def test_a_traced_run_prints_each_step_its_batch_and_the_pool(model_and_reference, capsys):
    model, reference = model_and_reference
    eng = serve.engine(model, pool_rows=12 + 9 + 7, max_step_tokens=8)  # the third prompt waits for rows
    serve.run(eng, PROMPTS, NEW, trace=True)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == eng.steps and lines[0].startswith("step 1: r0 +8 | admitted r0")
    assert any("finished r0" in line for line in lines) and all(" rows free" in line for line in lines)
    assert "held by the cache alone" in lines[-1]


def test_a_plan_naming_an_unknown_request_is_refused_in_plain_words(model_and_reference):
    model, _ = model_and_reference
    eng = serve.engine(
        model, scheduler=Planned.factory(lambda *args: ([(99, 1)], [])), pool_rows=64, prefix_cache=False
    )
    with pytest.raises(ValueError, match="planned request 99, which is neither running nor waiting"):
        serve.run(eng, PROMPTS[:1], NEW, progress=False)


def _admits_for_nothing(running, waiting, max_step_tokens, free_rows):
    """The reference plan, then every other waiting request admitted for 0 tokens (the budget spent)."""
    run, preempted = S.schedule_step(running, waiting, max_step_tokens, free_rows)
    planned = {rid for rid, _ in run}
    return run + [(w["rid"], 0) for w in waiting if w["rid"] not in planned and not preempted], preempted


def test_the_engine_names_a_plugged_scheduler_that_admits_a_request_for_0_tokens(model_and_reference):
    model, _ = model_and_reference
    eng = serve.engine(model, scheduler=Planned.factory(_admits_for_nothing), pool_rows=64, max_step_tokens=4)
    with pytest.raises(ContractError, match=r"your scheduler admitted request \d+ for 0 tokens"):
        serve.run(eng, PROMPTS, NEW, progress=False)


def test_the_engine_s_own_batch_refuses_a_request_for_0_tokens():
    from ropepool.engine import Request
    from ropepool.engine.scheduler import Batch

    with pytest.raises(ContractError, match="request 7 put in the batch for 0 tokens"):
        Batch().add(Request(7, [1, 2, 3], 2), 0)


class _EvictsHeld(S.PrefixTree):
    """Returns, with the pages its evict freed, a page a request still holds."""

    def evict(self, n):
        freed = list(super().evict(n))
        return freed + [p for p, count in enumerate(self.allocator.refs) if count > 0][:1]


def test_the_engine_names_a_plugged_tree_whose_evict_frees_a_held_page():
    from ropepool.engine import Allocator

    a = Allocator(8)
    cache = Cached.factory(_EvictsHeld)(a)
    pages = a.allocate(4)
    cache.insert([1, 2, 3, 4], pages, None)
    a.release(pages[2:])  # a request still holds pages 0 and 1, the tree all four
    with pytest.raises(
        ContractError, match=r"your tree's evict\(4\) freed 3 pages .*page \d is still held \(refs \d\)"
    ):
        cache.evict(4)


def test_a_recording_of_a_plugged_tree_shows_its_nodes_as_the_engine_s_own_tree_would(model_and_reference):
    from ropepool.engine.recording import record

    def last_tree(prefix_cache):
        eng = serve.engine(model_and_reference[0], prefix_cache=prefix_cache, pool_rows=40)
        rec = record(eng)
        serve.run(eng, PROMPTS, NEW, progress=False)
        state = rec.state(len(rec))  # after the last step
        return sorted((n.tokens, n.pages) for n in state.nodes.values())

    plugged = last_tree(Cached.factory(S.PrefixTree))
    assert plugged and plugged == last_tree(True)
