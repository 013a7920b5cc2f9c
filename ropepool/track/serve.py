"""The real thing: the engine serving a model with the learner's parts plugged in, checked against mlx-lm.

:func:`load` gives SmolLM2-135M-Instruct (GGUF rows, GPT-J pairs, float32 on a CPU) and its prompts,
or, where the model cannot be fetched, a tiny random-weight mlx-lm Llama, saying why. :func:`engine`
makes an :class:`~ropepool.engine.Engine` whose runner calls the learner's ``rotate``,
``encode_e4m3`` and ``slot_mapping`` (parts 1, 6, 3) where given. :func:`same_as` checks every token
and logit against mlx-lm's own greedy loop; :func:`pool_is_clean` that every row ended free or cached.
"""

from __future__ import annotations

import time

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from ..engine import Engine
from ..engine.protocols import RunnerParts
from ..teaching.feedback import feedback
from ..tolerance import ENGINE_LOGITS_FLOAT32, ENGINE_LOGITS_SMOLLM2
from . import allocator, e4m3, rotate, schedule, slots, tree

QUESTIONS = ("What is the capital of France?", "What is 2 + 3?")
#: A plain-text prompt that shares nothing with the chat questions: long enough to be prefilled in chunks.
LONG = (
    "The river rose in the spring, as it did every year, and the people of the valley moved their boats "
    "to higher ground. The old bridge held, the new mill did not, and by summer the"
)


@dataclass
class Served:
    """The model a notebook serves, its prompts, the bound its logits are held to, and how to read tokens."""

    model: object
    name: str
    prompts: list[list[int]]
    stop: int | None
    tolerance: dict
    decode: object  # tokens -> text
    real: bool
    long_prompt: list[int] | None = None  # shares no prefix with ``prompts``


#: The tiny stand-in's prompts start with 30 shared tokens, as SmolLM2's chat template makes its prompts do.
_COMMON = [1, *range(10, 39)]


def load() -> Served:
    """SmolLM2-135M-Instruct with two chat questions; or, where it cannot be fetched, a tiny random-weight
    Llama (``llama-gptj``, GPT-J pairs like the GGUF rows) with two made-up prompts, and a line saying why."""
    from ..loaders.fetch import ModelUnavailable
    from ..loaders.smollm2 import NAME, load_smollm2

    try:
        model, tokenizer, _ = load_smollm2(pairs="gptj")
    except ModelUnavailable as err:
        from ..loaders.tiny import build

        print(
            f"SmolLM2 is not here ({err}): serving a tiny random-weight Llama instead; "
            "its answers are noise, but every check below still compares it with mlx-lm."
        )
        model = build("llama-gptj")
        return Served(
            model,
            "a tiny random Llama (GPT-J pairs)",
            [_COMMON + list(range(50, 57)), _COMMON + list(range(60, 68))],  # 37 and 38 tokens, as SmolLM2's
            None,
            ENGINE_LOGITS_FLOAT32,
            lambda tokens: " ".join(map(str, tokens)),
            False,
            list(range(100, 141)),  # 41 tokens, no prefix in common with the others
        )
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in QUESTIONS]
    return Served(
        model,
        NAME,
        prompts,
        tokenizer.eos_token_id,
        ENGINE_LOGITS_SMOLLM2,
        lambda tokens: tokenizer.decode(tokens, skip_special_tokens=True),
        True,
        tokenizer.encode(LONG),
    )


def engine(model, *, rotate=None, encode_e4m3=None, slot_mapping=None, **engine_kwargs) -> Engine:
    """An :class:`Engine` over ``model`` whose runner calls the learner's parts given (None: the engine's own),
    through the runner's plug points (:class:`~ropepool.engine.protocols.RunnerParts`), NumPy in and out."""
    if encode_e4m3 is not None:
        engine_kwargs.setdefault("kv_dtype", "fp8")
    engine_kwargs.setdefault("keep_logits", True)
    page_size = engine_kwargs.get("page_size", 1)
    parts = RunnerParts(
        rotate=None if rotate is None else lambda x, positions, rope: _rotate(rotate, x, positions, rope),
        encode_e4m3=None if encode_e4m3 is None else lambda x: _encode(encode_e4m3, x),
        slot_mapping=None if slot_mapping is None else lambda batch: _slot_mapping(slot_mapping, batch, page_size),
    )
    return Engine(model, parts=parts, **engine_kwargs)


def _rotate(rotate, x: mx.array, positions: mx.array, rope) -> mx.array:
    """``x [T, H, D]`` turned by the learner's ``rotate(rows, positions, inv_freq, is_neox)``, in x's dtype:
    every head in one call, as one head of ``T * H`` rows (a row turns by its own position only)."""
    T, H, D = x.shape
    rows = np.array(x.astype(mx.float32)).reshape(T * H, D)  # [T*H, D], token-major
    out = np.asarray(rotate(rows, np.repeat(np.array(positions), H), np.array(rope.inv_freq), rope.is_neox), np.float64)
    return mx.array(out.reshape(T, H, D).astype(np.float32)).astype(x.dtype)


def _encode(encode, x: mx.array) -> mx.array:
    """The learner's e4m3 codes of ``x`` (any shape), given as one flat row of float32 values."""
    flat = np.array(x.astype(mx.float32)).reshape(-1)
    codes = np.asarray(encode(flat.copy()))
    if codes.dtype != np.uint8 or codes.shape != flat.shape:
        raise ValueError(
            f"encode_e4m3 returned {codes.dtype} {list(codes.shape)} for a row of {flat.size} "
            "float32 values: one uint8 code per value"
        )
    return mx.array(codes).reshape(x.shape)


def _slot_mapping(slot_mapping, batch, page_size: int):
    """The learner's ``slot_mapping(requests, page_size)`` of a step: each request's pages, cached and new counts."""
    requests = [
        dict(pages=[row // page_size for row in r.slot_table[::page_size]], cached=r.num_cached, new=n)
        for r, n in zip(batch.requests, batch.lengths)
    ]
    return slot_mapping(requests, page_size)


def run(
    eng: Engine, prompts, max_new_tokens: int, history: list | None = None, progress: bool = True, trace: bool = False
) -> list:
    """Serve ``prompts`` on ``eng`` to the end; each request's tokens and logits ``[len(tokens), vocab]``.

    ``history``, if given, gets each step's ``[(request index, tokens run)]``. ``progress``: one line,
    rewritten after every step (the step, requests done, tokens generated, seconds so far). ``trace``:
    instead, one line per step: who ran how many tokens, who was admitted, preempted or finished, and
    the pool's free rows and the rows only the prefix cache holds (:func:`step_line`)."""
    if not eng.keep_logits:
        raise ValueError("run: make the engine with keep_logits=True")
    requests = [eng.add_request(p, max_new_tokens) for p in prompts]
    first, start, steps = requests[0].rid, time.perf_counter(), 0
    while not eng.done:
        batch = eng.step()
        steps += 1
        if history is not None:
            history.append([(r.rid - first, n) for r, n in zip(batch.requests, batch.lengths)])
        if trace:
            print(step_line(eng, batch, steps, first))
        elif progress:
            print("\r" + _progress(requests, steps, time.perf_counter() - start), end="", flush=True)
    if progress and not trace:
        print()
    return [(r.tokens, mx.stack(r.logits)) for r in requests]


def step_line(eng: Engine, batch, step: int, first: int = 0) -> str:
    """One step as a line: ``step 3: r0 +1, r1 +16 | admitted r1 | pool 40 free, 12 cached`` (requests
    numbered from ``first``); what the learner's scheduler, allocator and tree did, step by step."""
    ran = ", ".join(f"r{r.rid - first} +{n}" for r, n in zip(batch.requests, batch.lengths)) or "nothing"
    events = [
        f"{what} {' '.join(f'r{r.rid - first}' for r in who)}"
        for what, who in (("admitted", batch.admitted), ("preempted", batch.preempted), ("finished", batch.finished))
        if who
    ]
    cache = eng.scheduler.cache
    pool = f"pool {eng.allocator.num_free * eng.allocator.page_size} rows free"
    pool += f", {cache.num_evictable() * eng.allocator.page_size} held by the cache alone" if cache.enabled else ""
    return f"step {step}: {ran} | " + " | ".join([*events, pool])


def _progress(requests, steps: int, seconds: float) -> str:
    done, out = sum(bool(r.done) for r in requests), sum(len(r.tokens) for r in requests)
    return f"serving: step {steps}, {done} of {len(requests)} requests done, {out} tokens generated, {seconds:.1f} s"


def pool_is_clean(eng: Engine) -> bool:
    """Every page is free or held by the prefix cache alone: no request kept a row, none leaked."""
    allocator, cache = eng.allocator, eng.scheduler.cache
    return allocator.num_free + cache.num_evictable() == allocator.num_pages


def largest_difference(results, reference) -> float:
    """The largest ``|logit - mlx-lm's logit|`` over every token of every request (inf where tokens differ)."""
    worst = 0.0
    for (tokens, logits), want in zip(results, reference):
        if tokens != want.tokens:
            return float("inf")
        worst = max(worst, float(mx.abs(logits - want.logits).max()))
    return worst


#: Said after a claim that a wrong part changed the answer, when the tiny stand-in served it.
STAND_IN = " (the tiny stand-in: its logits; its greedy tokens barely move)"


def changed(result, want, served: Served) -> bool:
    """Whether ``result`` (tokens, logits) is not mlx-lm's ``want``: other tokens, or (how the tiny
    random stand-in shows a wrong part, its greedy tokens repeating one id) logits beyond ``served.tolerance``."""
    tokens, logits = result
    if tokens != want.tokens:
        return True
    return not np.allclose(np.array(logits), np.array(want.logits), **served.tolerance)


def check_same(results, reference, served: Served, who: str) -> None:
    """Check, visibly, that every request's tokens are mlx-lm's and every logit within ``served.tolerance``."""
    from ..teaching.checks import check_close, check_equal

    for i, ((tokens, logits), want) in enumerate(zip(results, reference)):
        check_equal(tokens, want.tokens, claim=f"request {i} through {who}: mlx-lm's tokens, {served.decode(tokens)!r}")
        check_close(np.array(logits), np.array(want.logits), claim=f"request {i}: every logit", **served.tolerance)


#: (part, problem) -> why that mistake serves the notebooks' requests with the right answers and a clean pool
SILENT = {
    (2, "no_double_free_error"): "the engine never releases a free page, so the refusal is never needed here; "
    "it guards against a bug elsewhere (a request finished twice), which would hand one page to two requests",
    (2, "wrong_order"): "any free page holds a request's rows as well as another, so which comes next changes no "
    "answer; the checker holds you to the engine's queue so that every answer can be compared with its own",
    (2, "outside_pool"): "the engine never hands the allocator a page outside the pool; the refusal guards "
    "against a bug elsewhere (a page number computed wrongly), which would change another page's count",
    (2, "freed_twice"): "the engine releases a request's pages once each per holder, never one page twice in one "
    "call; a caller that did would find that page handed to two requests",
    (4, "eviction_tie"): "a tie needs two leaves given one clock (an insert that splits an edge and adds a "
    "leaf); breaking it the other way changes which prefix is kept, not what a request reads",
    (4, "eviction_order"): "evicting the newest leaf changes which prefix is kept, not what a request reads: it "
    "costs recomputing a prompt that comes back, and none of these prompts came back after an eviction",
    (4, "match"): "a match that stops early is never wrong, only wasteful: the request computes rows the tree "
    "had (the prompt tokens shared, below, are fewer than with the engine's tree)",
    (5, "wrong_victim"): "which request is preempted changes who waits, not an answer: preempting the oldest "
    "throws away the most work, all recomputed later",
    (5, "over_budget"): "a step over the budget computes the same tokens in fewer, bigger steps: the budget "
    "bounds a step's time, which this run does not measure",
    (5, "blocked_queue"): "a blocked queue only delays the requests behind it: the same answers, later",
    (5, "admitted_after_preemption"): "admitting in a step that preempted risks handing the freed rows to a "
    "newcomer while the preempted request waits again; here only the order of steps changed",
    (5, "ignores_spare"): "asking again for rows a request holds matters only when the pool is short at that "
    "moment: here the rows it asked for were free, so nobody was preempted for them",
    (5, "waiting_first"): "the batch order changes when a token is computed, not its value: decodes behind a "
    "prompt's chunk only wait longer",
}


def try_mistakes(n: int, wrong: dict, make_engine, prompts, reference, new: int) -> list[dict]:
    """Check and serve each of ``wrong`` (problem -> wrong part ``n``) on ``make_engine(part)``; print one
    line each: what the checker named, and what serving showed (an error, a changed answer, a pool not
    clean) or, where it served silently, why. ``reference``: mlx-lm's answers, at least ``new`` tokens
    each. Returns the rows: problem, named, case, served, silent, why."""
    check = {1: rotate.check, 2: allocator.check, 3: slots.check, 4: tree.check, 5: schedule.check, 6: e4m3.check}[n]
    rows = []
    for problem, part in wrong.items():
        verdict = feedback(check, part)
        case = verdict.message.splitlines()[0]
        eng = make_engine(part)
        try:
            got = run(eng, prompts, new, progress=False)
            changed = sum(list(g[0]) != list(r.tokens)[: len(g[0])] for g, r in zip(got, reference))
            clean = pool_is_clean(eng)
            served = (f"{changed} of {len(got)} answers changed" if changed else "the same answers") + (
                "" if clean else ", pages lost from the pool"
            )
            silent = not changed and clean
        except Exception as e:  # the wrong part broke the run: that is what it shows
            served, silent = f"the run failed: {type(e).__name__}: {str(e).strip().splitlines()[0][:90]}", False
        why = SILENT.get((n, problem), "this run never reached the case the checker names") if silent else ""
        rows.append(dict(problem=problem, named=verdict.problem, case=case, served=served, silent=silent, why=why))
        print(f"- {problem}: the check names {verdict.problem!r} ({case[:70]})\n    serving: {served}")
        if silent:
            print(f"    serves silently: {why}")
    return rows
