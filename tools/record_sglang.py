"""Record what SGLang's own radix cache and KV allocators answer on seeded random traces.

Writes ``tests/data/sglang_radix.json`` and ``tests/data/sglang_allocator.json``; the test
``tests/test_sglang_replay.py`` runs the same traces through :mod:`ropepool.engine.radix` and
:mod:`ropepool.engine.allocator` (no SGLang needed) and asserts the same answers.

Runs only in a scratch venv that holds SGLang (never the project's venv)::

    python -m venv /tmp/sglang-venv
    /tmp/sglang-venv/bin/pip install torch==2.13.0        # the CPU wheel; never a CUDA torch
    /tmp/sglang-venv/bin/pip install --no-deps sglang==0.5.23
    /tmp/sglang-venv/bin/pip install -c <(echo torch==2.13.0+cpu) <its imports>   # see below
    /tmp/sglang-venv/bin/python tools/record_sglang.py [--traces 2000] [--alloc-traces 1000]

``<its imports>``: what importing ``sglang.srt.mem_cache.radix_cache``,
``sglang.srt.mem_cache.allocator`` and ``sglang.srt.managers.schedule_policy`` reports missing,
installed one at a time (the PyPI name of ``tvm_ffi`` is ``apache-tvm-ffi``); past the usual ones
(numpy, transformers, pydantic, msgspec, triton, ...) these were sentencepiece, compressed-tensors,
gguf, openai and partial-json-parser. ``tools/record_sglang_freeze.txt`` is the whole venv the
committed files were recorded in. torchvision is not installed (its wheels want another torch): the
two SGLang modules that import it, ``sglang.srt.multimodal.internvl_utils`` and
``sglang.srt.configs.deepseek_ocr`` (image preprocessing, never reached here), are replaced in
``sys.modules`` by stand-ins before SGLang is imported.

``time.monotonic`` in SGLang's radix module is replaced by a counter, so the last-use times
(and so the LRU order) are the same on every run. The traces are a function of their seeds
(``random.Random(seed)``): rerunning the recorder reproduces the files byte for byte.

Conventions of the files: a token sequence is ``[unit ids, n]``, the first ``n`` tokens of the
trace's units laid end to end; indices are SGLang's pages (index // page_size; at page size 1
the indices themselves), which start at 1 (SGLang keeps index 0 for padded tokens).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import itertools
import json
import random
import sys
import types
from array import array
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
PAGE_SIZES = (1, 16)
RADIX_POOL_PAGES = 24
ALLOC_POOL_PAGES = 16


class _StandIn(type):
    """A stubbed module's class: any attribute it is asked for is its name (dunders are absent)."""

    def __getattr__(cls, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return attr


def _stand_in(attr: str):
    """What a stubbed module gives for a name it is asked for: a :class:`_StandIn` class."""
    if attr.startswith("__"):
        raise AttributeError(attr)
    return _StandIn(attr, (), {})


def import_sglang():
    """SGLang's modules this recorder drives, with the two image modules stubbed (see the docstring)."""
    for name in ("sglang.srt.multimodal.internvl_utils", "sglang.srt.configs.deepseek_ocr"):
        stub = types.ModuleType(name)
        stub.__spec__ = importlib.machinery.ModuleSpec(name, None)
        stub.__getattr__ = _stand_in
        sys.modules[name] = stub
    import sglang
    import torch
    from sglang.srt.mem_cache import radix_cache
    from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator
    from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams

    return types.SimpleNamespace(
        version=sglang.__version__,
        torch=torch,
        radix_cache=radix_cache,
        allocators={1: TokenToKVPoolAllocator, 16: PagedTokenToKVPoolAllocator},
        EvictParams=EvictParams,
        InsertParams=InsertParams,
        MatchPrefixParams=MatchPrefixParams,
        CacheInitParams=CacheInitParams,
    )


def make_allocator(sg, page_size: int, pages: int):
    cls = sg.allocators[page_size]
    if page_size == 1:
        return cls(pages, sg.torch.float16, "cpu", None, False)
    return cls(pages * page_size, page_size, sg.torch.float16, "cpu", None, False)


def tokens_of(units: list, seq: list) -> list[int]:
    ids, n = seq
    return [t for u in ids for t in units[u]][:n]


# --- Traces: a function of the seed only ---------------------------------------------------------


def radix_trace(seed: int, page_size: int) -> dict:
    """Units (pages of tokens) and ops: insert, match, lock (the node the op before found), unlock, evict."""
    rng = random.Random(seed)
    if page_size == 1:
        units = [[1], [2], [3]]
        most = 8
    else:
        units = [[rng.randrange(10) for _ in range(page_size)] for _ in range(3)]
        most = 6
    bases = [[rng.randrange(len(units)) for _ in range(most)] for _ in range(2)]
    ops = []
    for _ in range(rng.randint(6, 16)):
        kind = rng.choices("imlue", weights=(5, 3, 2, 2, 2))[0]
        if kind == "l" and (not ops or ops[-1][0] not in "im"):
            kind = "m"
        if kind in "im":
            keep = rng.randint(0, most)
            ids = rng.choice(bases)[:keep] + [rng.randrange(len(units)) for _ in range(rng.randint(0, 2))]
            n = len(ids) * page_size - (rng.randrange(page_size) if ids and rng.random() < 0.3 else 0)
            ops.append([kind, [ids, n]])
        elif kind == "u":
            ops.append(["u", rng.randrange(8)])
        elif kind == "e":
            ops.append(["e", rng.randint(1, 3 * page_size)])
        else:
            ops.append(["l"])
    return {"seed": seed, "units": units, "ops": ops}


def alloc_trace(seed: int) -> dict:
    """Ops: alloc n pages, or free some held pages (a random subset, in a random order)."""
    rng = random.Random(seed)
    ops = []
    for _ in range(rng.randint(4, 20)):
        if rng.random() < 0.55:
            ops.append(["a", rng.randint(0, 7)])
        else:
            ops.append(["f", rng.randrange(1 << 16)])  # which held pages: see run_alloc
    return {"seed": seed, "ops": ops}


def pick_freed(held: list[int], choice: int) -> list[int]:
    """The held pages one free op gives back (and their order): from its number, the same on both sides."""
    rng = random.Random(choice)
    out = [p for p in held if rng.random() < 0.5]
    rng.shuffle(out)
    return out


# --- SGLang's answers ------------------------------------------------------------------------------


def pages_of(indices, page_size: int) -> list[int]:
    """The pages of page-aligned, whole-page indices (checked)."""
    idx = [int(i) for i in indices]
    pages = idx[::page_size]
    if idx != [p + o for p in pages for o in range(page_size)] or any(p % page_size for p in pages):
        raise RuntimeError(f"indices are not whole pages: {idx}")
    return [p // page_size for p in pages]


def run_radix(sg, trace: dict, page_size: int) -> list:
    """SGLang's answer to each op, then its evictable, protected and total sizes (tokens)."""
    torch, rc = sg.torch, sg.radix_cache
    clock = itertools.count(1)
    rc.time = types.SimpleNamespace(monotonic=lambda: float(next(clock)), perf_counter=lambda: 0.0)
    alloc = make_allocator(sg, page_size, RADIX_POOL_PAGES)
    freed_log = []
    free_segment = alloc.free_segment

    def logged_free_segment(free_index, *, start_pos):
        freed_log.extend(pages_of(free_index, page_size))
        free_segment(free_index, start_pos=start_pos)

    alloc.free_segment = logged_free_segment
    cache = rc.RadixCache(sg.CacheInitParams(False, None, alloc, page_size))
    held, last, answers = [], None, []

    def evict(n_tokens):
        freed_log.clear()
        cache.evict(sg.EvictParams(num_tokens=n_tokens))
        return list(freed_log)

    for op in trace["ops"]:
        kind, answer = op[0], None
        if kind in "im":
            key = rc.RadixKey(array("q", tokens_of(trace["units"], op[1])))
            n = len(key) // page_size * page_size
            if kind == "m":
                found = cache.match_prefix(sg.MatchPrefixParams(key=key))
                last = found.last_device_node
                answer = pages_of(cache.path_device_indices(last), page_size)
            else:
                evicted = evict(n - alloc.available_size()) if n > alloc.available_size() else []
                values = alloc.alloc(n) if n else torch.empty((0,), dtype=torch.int64)
                if values is None:
                    last, answer = None, [None, [], [], evicted]
                else:
                    got = cache.insert(sg.InsertParams(key=key, value=values))
                    free_segment(values[: got.prefix_len], start_pos=0)
                    last = got.last_device_node
                    path = pages_of(cache.path_device_indices(last), page_size)
                    answer = [got.prefix_len // page_size, pages_of(values, page_size), path, evicted]
        elif kind == "l":
            if last is not None:
                cache.inc_lock_ref(last)
                held.append(last)
            last = None
        elif kind == "u":
            if held:
                cache.dec_lock_ref(held.pop(op[1] % len(held)))
        else:
            answer = evict(op[1])
        if kind not in "im":
            last = None
        answers.append([answer, cache.evictable_size(), cache.protected_size(), cache.total_size()])
    return answers


def run_alloc(sg, trace: dict, page_size: int) -> list:
    """SGLang's allocator: each alloc's pages (None when short); frees give back the chosen held pages."""
    torch = sg.torch
    alloc = make_allocator(sg, page_size, ALLOC_POOL_PAGES)
    held, answers = [], []
    for kind, n in trace["ops"]:
        if kind == "a":
            got = alloc.alloc(n * page_size)
            pages = None if got is None else pages_of(got, page_size)
            held += pages or []
            answers.append([pages, alloc.available_size() // page_size])
        else:
            gone = pick_freed(held, n)
            held = [p for p in held if p not in gone]
            rows = torch.tensor([p * page_size + o for p in gone for o in range(page_size)], dtype=torch.int64)
            alloc.free_segment(rows, start_pos=0)
            answers.append([gone, alloc.available_size() // page_size])
    return answers


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=2000, help="radix traces per page size")
    parser.add_argument("--alloc-traces", type=int, default=1000, help="allocator traces per page size")
    args = parser.parse_args(argv)
    sg = import_sglang()
    radix = {"sglang": sg.version, "pool_pages": RADIX_POOL_PAGES, "page_sizes": {}}
    allocs = {"sglang": sg.version, "pool_pages": ALLOC_POOL_PAGES, "page_sizes": {}}
    for ps in PAGE_SIZES:
        traces = [radix_trace(seed, ps) for seed in range(args.traces)]
        for t in traces:
            t["answers"] = run_radix(sg, t, ps)
        radix["page_sizes"][str(ps)] = traces
        traces = [alloc_trace(seed) for seed in range(args.alloc_traces)]
        for t in traces:
            t["answers"] = run_alloc(sg, t, ps)
        allocs["page_sizes"][str(ps)] = traces
    DATA.mkdir(exist_ok=True)
    for name, data in (("sglang_radix.json", radix), ("sglang_allocator.json", allocs)):
        (DATA / name).write_text(json.dumps(data, separators=(",", ":")) + "\n")
        print(f"{DATA / name}: {(DATA / name).stat().st_size} bytes")


if __name__ == "__main__":
    main()
