"""The engine's radix cache and allocator answer as SGLang's own did, on the traces SGLang answered.

``tests/data/sglang_radix.json`` and ``tests/data/sglang_allocator.json`` hold seeded random
traces and what SGLang's ``RadixCache``, ``TokenToKVPoolAllocator`` and
``PagedTokenToKVPoolAllocator`` answered to each op (``tools/record_sglang.py`` wrote them, in a
scratch venv with SGLang; SGLang is not needed here). Each trace is run through
:class:`ropepool.engine.radix.RadixCache` and :class:`ropepool.engine.allocator.Allocator` and
every answer compared. SGLang numbers pages from 1 (page 0 is its padding page): its page ``p``
is the engine's ``p - 1``. Where SGLang's ``alloc`` returns None, the engine raises ValueError
(the table in docs/engine.md says so).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ropepool.engine.allocator import Allocator
from ropepool.engine.radix import RadixCache

DATA = Path(__file__).parent / "data"
_spec = importlib.util.spec_from_file_location(
    "record_sglang", Path(__file__).parent.parent / "tools" / "record_sglang.py"
)
RECORDER = importlib.util.module_from_spec(_spec)  # its trace conventions; SGLang itself is imported only by its main()
_spec.loader.exec_module(RECORDER)


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def _sg(pages) -> list[int]:
    """Engine pages as SGLang numbers them."""
    return [p + 1 for p in pages]


def replay_radix(trace: dict, page_size: int, pool_pages: int) -> list:
    """The engine's answers to a radix trace, in the recorder's form (see tools/record_sglang.py)."""
    a = Allocator(pool_pages * page_size, page_size)
    cache = RadixCache(a)
    held, last, answers = [], None, []
    for op in trace["ops"]:
        kind, answer = op[0], None
        if kind in "im":
            tokens = RECORDER.tokens_of(trace["units"], op[1])
            if kind == "m":
                last, _ = cache.match(tokens)
                answer = _sg(last)
            else:
                need = len(tokens) // page_size
                evicted = _sg(cache.evict(need - a.num_free)) if need > a.num_free else []
                if need > a.num_free:
                    last, answer = None, [None, [], [], evicted]
                else:
                    pages = a.allocate(need)
                    last, _ = cache.insert(tokens, pages, None)
                    prefix = sum(own != cached for own, cached in zip(pages, last))
                    a.release(pages)  # the caller's hold: its duplicates go back to the free list
                    answer = [prefix, _sg(pages), _sg(last), evicted]
        elif kind == "l":
            if last is not None:
                a.retain(last)  # SGLang's inc_lock_ref on the path's last node: a hold on every page of the path
                held.append(last)
            last = None
        elif kind == "u":
            if held:
                a.release(held.pop(op[1] % len(held)))
        else:
            answer = _sg(cache.evict(-(-op[1] // page_size)))  # SGLang counts tokens, the engine pages
        if kind not in "im":
            last = None
        answers.append(
            [
                answer,
                cache.num_evictable() * page_size,
                cache.num_protected() * page_size,
                cache.num_cached() * page_size,
            ]
        )
    return answers


def replay_alloc(trace: dict, page_size: int, pool_pages: int) -> list:
    """The engine allocator's answers to an allocator trace (None where it raised for want of pages)."""
    a = Allocator(pool_pages * page_size, page_size)
    held, answers = [], []
    for kind, n in trace["ops"]:
        if kind == "a":
            try:
                pages = _sg(a.allocate(n))
            except ValueError:
                pages = None
            held += pages or []
            answers.append([pages, a.num_free])
        else:
            gone = RECORDER.pick_freed(held, n)
            held = [p for p in held if p not in gone]
            a.release([p - 1 for p in gone])
            answers.append([gone, a.num_free])
    return answers


def _first_difference(got: list, want: list, trace: dict) -> str | None:
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return (
                f"seed {trace['seed']}, op {i} {trace['ops'][i]}: engine {g}, SGLang {w}; ops {trace['ops'][: i + 1]}"
            )
    return None


def _differences(name: str, page_size: str, replay) -> tuple[int, str]:
    """How many of the file's traces at ``page_size`` the engine answers otherwise, and the first of them."""
    data = _load(name)
    traces, differ = data["page_sizes"][page_size], []
    for trace in traces:
        why = _first_difference(replay(trace, int(page_size), data["pool_pages"]), trace["answers"], trace)
        if why:
            differ.append(why)
    return len(traces), f"{len(differ)} differ from SGLang {data['sglang']}" + (
        f"; first: {differ[0]}" if differ else ""
    )


@pytest.mark.parametrize("page_size", ["1", "16"])
def test_radix_cache_answers_as_sglang(page_size):
    n, differ = _differences("sglang_radix.json", page_size, replay_radix)
    assert n >= 2000 and differ.startswith("0 differ"), differ


@pytest.mark.parametrize("page_size", ["1", "16"])
def test_allocator_answers_as_sglang(page_size):
    n, differ = _differences("sglang_allocator.json", page_size, replay_alloc)
    assert n >= 1000 and differ.startswith("0 differ"), differ


def test_the_smallest_case_of_lru_order_across_a_split():
    """insert [1]; insert [1, 1]; insert [2]; insert [1]; evict 1: SGLang frees index 3 (the engine's page 2).

    The second insert leaves [1] as a node and adds [1] below it; inserting [1] again marks only that
    node used, so the leaf [2] (page 2) is the oldest."""
    a = Allocator(8)
    cache = RadixCache(a)
    for tokens in ([1], [1, 1], [2], [1]):
        pages = a.allocate(len(tokens))
        cache.insert(tokens, pages, None)
        a.release(pages)
    assert cache.evict(1) == [2]
