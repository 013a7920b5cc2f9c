"""Part 5: the scheduler's step: a token budget, chunked prefill after the running decodes, preemption.

The learner writes ``schedule_step(running, waiting, max_step_tokens, free_rows) -> (run, preempted)``, the
decision :meth:`ropepool.engine.Scheduler.schedule` makes each step (pages of one row, no prefix
cache): ``running`` in admission order, each ``dict(rid, uncached, spare, held)``; ``waiting`` first in
line first, each ``dict(rid, tokens)``. ``run`` lists ``(rid, n)`` in batch order, ``preempted`` the
rids sent back to the queue. The checker drives the engine's own scheduler step by step on table
cases and random workloads and compares its batch with the learner's plan before every step.
:class:`Planned` is the engine's scheduler with its decision replaced by the learner's, for
``Engine(scheduler=Planned.factory(schedule_step))``.
"""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx
import numpy as np

from ..engine import Allocator as EngineAllocator
from ..engine import Request, Scheduler, Status
from ..engine.errors import ContractError
from ..engine.radix import NoCache
from ..engine.scheduler import Batch
from ..teaching.feedback import plural
from .feedback import call, int_list, passed, rejected, showing, wrong_case
from .shrink import smallest, without_each
from .solutions import schedule_step as reference_plan

PART = 5
FIRST = (
    "budget = max_step_tokens; for each running request, oldest first, n = min(uncached, budget) tokens "
    "need max(0, n - spare) new rows; if they are free, take them, spend n of the budget and add (rid, n) to run."
)


def views(scheduler) -> tuple[list[dict], list[dict]]:
    """What ``schedule_step`` is given about the scheduler's running and waiting requests."""
    running = [
        dict(rid=r.rid, uncached=r.num_uncached, spare=len(r.slot_table) - r.num_cached, held=len(r.slot_table))
        for r in scheduler.running
    ]
    waiting = [dict(rid=r.rid, tokens=r.seq_len) for r in scheduler.waiting]
    return running, waiting


class Planned(Scheduler):
    """The engine's scheduler deciding each step by the learner's ``schedule_step`` (page_size 1); admission,
    growth, preemption and the rest are the engine's own.

    With a prefix cache, ``free_rows`` counts the rows the cache could give back too, and a request
    admitted on a cached prefix runs only its uncached tokens; the engine may still hold back one whose
    prompt a request admitted in the same step is computing (it shares those rows next step)."""

    plan = None

    @classmethod
    def factory(cls, plan: Callable) -> Callable:
        def make(allocator, cache, *, max_step_tokens: int = 256):
            if allocator.page_size != 1:
                raise ValueError("the learner's scheduler plans with rows, not pages: use page_size=1")
            s = cls(allocator, cache, max_step_tokens=max_step_tokens)
            s.plan = plan
            return s

        return make

    def schedule(self) -> Batch:
        self._touch_stats()
        running, waiting = views(self)
        free = self.allocator.num_free + self.cache.num_evictable()
        run, preempted = self.plan(running, waiting, self.max_step_tokens, free)
        batch, by_rid = Batch(), {r.rid: r for r in (*self.running, *self.waiting)}
        strange = [rid for rid in [*preempted, *(rid for rid, _ in run)] if rid not in by_rid]
        if strange:
            raise ValueError(f"schedule_step planned request {strange[0]}, which is neither running nor waiting")
        self._judge(run, preempted, by_rid)
        for rid in preempted:
            self.preempt(by_rid[rid], batch)
        for rid, n in run:
            req = by_rid[rid]
            if req.status is Status.RUNNING:
                if not self.grow(req, req.num_cached + n, batch):
                    continue
            elif not self.admit(req, batch):
                if self.cache.enabled:
                    continue  # held back to share a prefix computed this step
                raise ValueError(f"schedule_step admitted request {rid}, whose {req.seq_len} rows are not free")
            batch.add(req, min(int(n), req.num_uncached))  # admitted on a cached prefix: only the rest runs
        self.stats.peak_rows = max(self.stats.peak_rows, self.allocator.rows_in_use)
        return batch

    def _judge(self, run, preempted, by_rid) -> None:
        """Refuse a plan the engine cannot carry out, naming the request and the answer (ContractError)."""
        said = f"your scheduler (schedule_step) planned run {list(run)!r:.120}, preempted {list(preempted)!r:.60}"
        total = 0
        for rid, n in run:
            req = by_rid[rid]
            verb = "ran" if req.status is Status.RUNNING else "admitted"
            if rid in preempted:
                raise ContractError(f"your scheduler preempted request {rid} and {verb} it in the same step ({said})")
            most = req.num_uncached if req.status is Status.RUNNING else req.seq_len  # the tokens it was shown
            if not 1 <= n <= most:
                raise ContractError(
                    f"your scheduler {verb} request {rid} for {plural(n, 'token')}: a request runs 1 to its "
                    f"{most} tokens not computed yet ({said})"
                )
            total += n
        if total > self.max_step_tokens:
            raise ContractError(
                f"your scheduler's step runs {total} tokens, more than max_step_tokens = {self.max_step_tokens} ({said})"
            )


# A case: (name, pool rows, max_step_tokens, [(prompt length, max_new_tokens)]); every request arrives at once.
def cases() -> list[tuple[str, int, int, list]]:
    return [
        ("one prompt within the budget", 16, 16, [(5, 3)]),
        ("a prompt longer than the budget is prefilled in chunks", 32, 4, [(10, 2)]),
        ("running requests first, then a new prompt's chunk from what is left", 32, 4, [(3, 6), (9, 2)]),
        ("the budget spent by decodes: the waiting prompt waits", 32, 2, [(1, 4), (1, 4), (4, 2)]),
        ("a request that does not fit yet does not hold back a smaller one", 10, 16, [(4, 4), (8, 1), (2, 2)]),
        ("no free row: the most recently admitted is preempted", 8, 16, [(3, 5), (3, 5)]),
        ("nothing is admitted in a step that preempted", 8, 16, [(3, 5), (3, 5), (3, 1)]),
        ("a prompt preempted mid-prefill gives back all its rows, spare ones too", 6, 4, [(2, 2), (1, 2), (3, 1)]),
    ]


def workload(n: int = 30, seed: int = 0) -> list[tuple[str, int, int, list]]:
    """``n`` random runs: pools of 8-32 rows, budgets of 1-16 tokens, 2-5 requests."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        P, budget = int(rng.integers(8, 33)), int(rng.integers(1, 17))
        reqs = []
        for _ in range(int(rng.integers(2, 6))):
            prompt = int(rng.integers(1, min(12, P)))
            reqs.append((prompt, int(rng.integers(1, min(7, P - prompt + 2)))))
        out.append((f"random run {i}", P, budget, reqs))
    return out


def states(n: int = 400, seed: int = 1) -> list[tuple[list[dict], list[dict], int, int]]:
    """``n`` random states of the stub's inputs: 0-3 running requests in any mix of mid-prefill (rows held
    for all their tokens: spare = uncached, as a prefix cache makes them behind a decode too), decoding
    (uncached 1, spare 0) and any other (0 <= spare <= uncached <= 10, held >= spare: a request that needs
    many new rows, so that one victim may not be enough), 0-2 waiting ones, budgets of 1-12 tokens, 0-12
    free rows; each ``(running, waiting, budget, free)``."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        running = []
        for rid in range(int(rng.integers(0, 4))):
            kind = rng.random()
            if kind < 0.4:
                u = int(rng.integers(1, 9))
                running.append(dict(rid=rid, uncached=u, spare=u, held=u + int(rng.integers(0, 6))))
            elif kind < 0.7:
                running.append(dict(rid=rid, uncached=1, spare=0, held=int(rng.integers(1, 10))))
            else:
                u = int(rng.integers(1, 11))
                spare = int(rng.integers(0, u + 1))
                running.append(dict(rid=rid, uncached=u, spare=spare, held=max(spare, 1) + int(rng.integers(0, 6))))
        first = len(running)
        waiting = [dict(rid=first + i, tokens=int(rng.integers(1, 10))) for i in range(int(rng.integers(0, 3)))]
        out.append((running, waiting, int(rng.integers(1, 13)), int(rng.integers(0, 13))))
    return out


def _smaller(state) -> list[tuple]:
    """The states one step smaller than ``state`` and still ones a scheduler meets: a request fewer, a
    smaller budget or pool, a request with a token or a held row fewer."""
    running, waiting, budget, free = state
    out = [(r, waiting, budget, free) for r in without_each(running)]
    out += [(running, w, budget, free) for w in without_each(waiting)]
    for i, w in enumerate(waiting):  # a request gone with the rows and budget it would have taken
        if free >= w["tokens"] and budget > w["tokens"]:
            out.append((running, waiting[:i] + waiting[i + 1 :], budget - w["tokens"], free - w["tokens"]))
    out += [(running, waiting, budget - 1, free)] if budget > 1 else []
    out += [(running, waiting, budget, free - 1)] if free > 0 else []
    for i, r in enumerate(running):
        fewer = []
        if r["spare"] > 1 and r["spare"] == r["uncached"]:  # mid-prefill: a token fewer to compute, and its row
            fewer.append(dict(r, uncached=r["uncached"] - 1, spare=r["spare"] - 1, held=r["held"] - 1))
        if r["uncached"] > max(r["spare"], 1):
            fewer.append(dict(r, uncached=r["uncached"] - 1))
        if r["spare"] > 0 and r["spare"] < r["uncached"]:
            fewer.append(dict(r, spare=r["spare"] - 1))
        if r["held"] > max(r["spare"], 1):
            fewer.append(dict(r, held=r["held"] - 1))
        out += [([*running[:i], x, *running[i + 1 :]], waiting, budget, free) for x in fewer]
    for i, w in enumerate(waiting):
        if w["tokens"] > 1:
            out.append((running, [*waiting[:i], dict(w, tokens=w["tokens"] - 1), *waiting[i + 1 :]], budget, free))
    return out


def _answer(schedule_step: Callable, state) -> tuple[list[tuple[int, int]], list[int]] | None:
    """The learner's plan for ``state`` as ints, or None where it raises or returns something else."""
    try:
        run, pre = schedule_step(*(copy_views(a) for a in state))
        return [(int(rid), int(n)) for rid, n in run], [int(rid) for rid in pre]
    except Exception:  # a state it cannot plan is no smaller difference; the checker's own call reports it
        return None


def _reference(state) -> tuple[list[tuple[int, int]], list[int]]:
    run, pre = reference_plan(*(copy_views(a) for a in state))
    return [tuple(x) for x in run], list(pre)


def _agreed(schedule_step: Callable, pool: list) -> list:
    """The states of ``pool`` the learner plans as the reference, as ``(state, plan)`` evidence."""
    out = []
    for state in pool:
        want = _reference(state)
        if _answer(schedule_step, state) == want:
            out.append((state, want))
    return out


def _wrong(schedule_step: Callable, case: str, state, want, got, history: list):
    """The failure for a plan that differs on ``state``: the state shrunk to the smallest one on which the
    plan still differs, and the mistake diagnosed from every state it was checked on."""
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's

    def kind(s, want, got) -> str:
        problem = _hint(*s[:3], want, got, s[3])[0]
        return problem if problem in FACTS else _difference(*s, want, got)[0]

    first = kind(state, want, got)

    def differs(s) -> bool:  # differs the same way: the shrunk case shows the same mistake
        g, w = _answer(schedule_step, s), _reference(s)
        return g is not None and g != w and kind(s, w, g) == first

    if differs(state) and _reference(state) == want:
        small = smallest(state, _smaller, differs)
        if small != state:
            case = f"{case}, made smallest (the fewest requests and smallest numbers on which your plan still differs)"
            state, want, got = small, _reference(small), _answer(schedule_step, small)
    problem, hint = _diagnose(history + _agreed(schedule_step, states()), state, want, got)
    if problem == "not_admitted":
        hint = hint.replace(" In the engine", f"{_admission_probe(schedule_step, state, want, got)} In the engine", 1)
    return wrong_case(
        PART,
        problem,
        case,
        _describe(*state),
        f"run {want[0]}, preempted {want[1]}",
        f"run {got[0]}, preempted {got[1]}",
        hint,
    )


def _admission_probe(schedule_step: Callable, state, want, got) -> str:
    """What changes the plan's mind about the first request it left waiting: one free row more (it admits
    only when tokens < free rows) or a budget for all its tokens (it waits instead of running a chunk)."""
    running, waiting, budget, free = state
    rid = next(r for r, _ in want[0] if r not in dict(got[0]))
    tokens = next(w["tokens"] for w in waiting if w["rid"] == rid)

    def admits(s) -> bool:
        answer = _answer(schedule_step, s)
        return answer is not None and rid in dict(answer[0])

    roomy, rich = admits((running, waiting, budget, free + 1)), admits((running, waiting, budget + tokens, free))
    if roomy and not rich:
        return " With one row more free your plan admits it: a request fits when tokens <= free rows, not <."
    if rich and not roomy:
        return (
            " With a budget for all its tokens your plan admits it: more tokens than the budget left is no reason "
            "to wait, it runs a chunk of min(tokens, budget left) now and the rest in the next steps."
        )
    return ""


def _describe(running, waiting, budget, free) -> str:
    run = ", ".join(f"{r['rid']}: uncached {r['uncached']}, spare {r['spare']}, held {r['held']}" for r in running)
    wait = ", ".join(f"{r['rid']}: {plural(r['tokens'], 'token')}" for r in waiting)
    return f"running [{run}]; waiting [{wait}]; max_step_tokens {budget}; free_rows {free}"


IGNORES_SPARE = (
    "a running request already holds rows it has not written yet (spare: a prompt is admitted with rows for "
    "all its tokens, then run in chunks): it needs only max(0, n - spare) new rows, not n. In the engine a "
    "chunked prompt would ask again for rows it holds, and with a tight pool requests that fit are preempted "
    "(or the prompt stalls) and their work recomputed."
)


def _plan(running, waiting, budget, free) -> tuple[list[tuple[int, int]], list[int]]:
    """The plan of a scheduler that ignores each running request's spare rows (recognised by its answer)."""
    run, pre = reference_plan([dict(r, spare=0) for r in running], [dict(w) for w in waiting], budget, free)
    return [tuple(x) for x in run], list(pre)


def _hint(running, waiting, budget, want, got, free=None) -> tuple[str, str]:
    """(problem, hint) of the catalogued mistake a plan looks like at this step: said only where the plan
    agrees with that mistake's on every step checked (:func:`_diagnose`), or where it states a fact."""
    (w_run, w_pre), (g_run, g_pre) = want, got
    uncached = {r["rid"]: r["uncached"] for r in running} | {r["rid"]: r["tokens"] for r in waiting}
    if sum(n for _, n in g_run) > budget:
        left = budget
        for rid, n in g_run:
            if n > left:
                break
            left -= n
        decode = uncached.get(rid) == 1 and rid in {r["rid"] for r in running}
        return "over_budget", (
            f"the step runs {sum(n for _, n in g_run)} tokens: at most max_step_tokens ({budget}). Request {rid} "
            f"runs {plural(n, 'token')} when {left} of the budget {'was' if left == 1 else 'were'} left"
            + (": a decode too is skipped once the budget is spent" if decode else "")
            + " (n = min(uncached, budget left); n = 0 runs nothing). In the engine a step would compute more "
            "than its budget: every decode waits behind it."
        )
    both = sorted(set(g_pre) & {rid for rid, _ in g_run})
    if both:
        return "preempted_runs", (
            f"request {both[0]} is both preempted and in run: a request preempted in a step does not run in it. "
            "When the request you preempt to make room is the one you are scheduling, stop: it goes back to the "
            "queue and is left out of run. In the engine it would run on rows it just gave back, which another "
            "request may be handed."
        )
    if (
        free is not None
        and any(r["spare"] for r in running)
        and (list(g_run), list(g_pre)) == _plan(running, waiting, budget, free)
    ):
        return "ignores_spare", IGNORES_SPARE
    if g_pre != w_pre:
        if set(g_pre) != set(w_pre) and w_pre and g_pre:
            return "wrong_victim", (
                "preempt the most recently admitted request (the end of running), not the oldest. In the engine "
                "the request with the most work done would be thrown away and recomputed."
            )
        return "wrong_plan", "preemption differs"
    if any(n < uncached[rid] and rid not in dict(g_run) for rid, n in w_run):
        return "no_chunking", (
            "a prompt longer than what is left of the budget still runs: a chunk of "
            "min(uncached, budget) tokens, the rest in the next steps; a waiting one is admitted when its "
            "rows are free (tokens <= free_rows), whatever the budget. In the engine a long prompt would "
            "wait for ever, or until a step with nothing else to run."
        )
    running_ids = [r["rid"] for r in running]
    g_order = [rid for rid, _ in g_run]
    if any(
        rid in running_ids
        for rid in g_order[next((i for i, x in enumerate(g_order) if x not in running_ids), len(g_order)) :]
    ):
        return "waiting_first", (
            "running requests go first (their decodes never wait), then the waiting ones. In the engine every "
            "decode would wait behind each new prompt: tokens come out slowly while prompts arrive."
        )
    if any(n == uncached[rid] and n > dict(w_run).get(rid, n) for rid, n in g_run):
        return "no_chunking", "a prompt longer than what is left of the budget runs a chunk: n = min(uncached, budget)."
    if w_pre and any(rid not in running_ids for rid in g_order):
        return "admitted_after_preemption", (
            "in a step that preempted, admit nobody: the freed rows are for the running. In the engine a "
            "newcomer would take the rows just freed, and the next step preempts again (thrashing)."
        )
    if [x for x in w_run if x[0] not in running_ids] != [x for x in g_run if x[0] not in running_ids]:
        if len(g_run) < len(w_run):
            return "blocked_queue", (
                "a waiting request whose rows are not free is skipped, not a wall: try the ones "
                "behind it, while the budget lasts. In the engine one long prompt would hold up every short one behind it."
            )
        return "wrong_plan", "admission differs"
    return "wrong_plan", "compare with the rules: running first, the budget, chunks, preemption, admission."


#: problem codes whose hint states only what the plan itself shows (no guess at the mistake behind it)
FACTS = ("over_budget", "preempted_runs")
#: problem codes of :func:`_difference`: where a plan first differs from the engine's, said with its numbers
DIFFERENCES = (
    "too_many_preempted",
    "too_few_preempted",
    "other_victims",
    "not_admitted",
    "not_run",
    "tokens",
    "zero_tokens",
    "admitted_after_preemption",
    "admitted_without_rows",
    "admitted",
    "order",
)


def _short_of_rows(running, budget, free) -> int | None:
    """The running request whose new rows first do not fit (the one whose turn starts a preemption), or None."""
    for r in running:
        n = min(r["uncached"], budget)
        if n == 0:
            continue
        need = max(0, n - r["spare"])
        if need > free:
            return r["rid"]
        free, budget = free - need, budget - n
    return None


def _freed_rows(running, preempted) -> int:
    return sum(r["held"] for r in running if r["rid"] in preempted)


def _difference(running, waiting, budget, free, want, got) -> tuple[str, str]:
    """(problem, the first place the plan ``got`` differs from ``want``, said with its direction and numbers)."""
    (w_run, w_pre), (g_run, g_pre) = want, got
    by_rid = {r["rid"]: r for r in running}
    spare = "spare ones included" if any(by_rid[v]["spare"] for v in w_pre) else "all of them"
    if g_pre != w_pre:
        freed = free + _freed_rows(running, w_pre)
        need = sum(max(0, n - by_rid[rid]["spare"]) for rid, n in w_run if rid in by_rid)
        spent = sum(n for _, n in w_run) == budget
        if (
            len(g_pre) > len(w_pre)
            and g_pre[: len(w_pre)] == w_pre
            and spent
            and not set(g_pre[len(w_pre) :]) & set(dict(w_run))
        ):
            return "too_many_preempted", (
                f"you preempted {g_pre}, want {w_pre}: the budget ({budget} tokens) is spent by {w_run}, so the "
                "requests after them run nothing this step, need no new rows, and nobody is preempted for them. "
                "Compute n = min(uncached, budget left) first; a request with n = 0 is skipped. In the engine a "
                "request preempted for nothing is recomputed from its first token."
            )
        if not w_pre and g_pre:
            rows = ", ".join(
                f"request {rid}: n = {n}, {plural(max(0, n - by_rid[rid]['spare']), 'new row')}"
                for rid, n in w_run
                if rid in by_rid
            )
            return "too_many_preempted", (
                f"you preempted {g_pre} where nobody needs to go: this step's new rows ({rows}; n = min(uncached, "
                f"budget left), less the spare rows) are {need} and {free} are free. In the engine a request "
                "preempted for nothing is recomputed from its first token."
            )
        if len(g_pre) > len(w_pre) and g_pre[: len(w_pre)] == w_pre:
            return "too_many_preempted", (
                f"you preempted {len(g_pre) - len(w_pre)} request{'s' if len(g_pre) - len(w_pre) > 1 else ''} too "
                f"many ({g_pre}, want {w_pre}): once {w_pre} are preempted their held rows are free ({spare}), "
                f"{free} + {_freed_rows(running, w_pre)} = {freed} rows, enough for the {need} new rows the running "
                "requests need. In the engine a request preempted for nothing is recomputed from its first token."
            )
        if len(g_pre) < len(w_pre) and w_pre[: len(g_pre)] == g_pre:
            return "too_few_preempted", (
                f"you preempted {g_pre}, want {w_pre}: too few. With {free} free rows and "
                f"{_freed_rows(running, g_pre)} freed, the running requests' new rows do not fit; preempt the "
                "newest (the end of running) until they do. In the engine a full pool would stall: no request can "
                "grow, none gives rows back."
            )
        order = [r["rid"] for r in running]
        short = _short_of_rows(running, budget, free)
        why = (
            f"request {short} was short of rows and you preempted it, while {sorted(set(w_pre) - set(g_pre))} "
            f"admitted after it kept running"
            if short in g_pre and short not in w_pre
            else f"you preempted {g_pre[0]}, admitted before {w_pre[0]}"
            if g_pre and w_pre and g_pre[0] in order and order.index(g_pre[0]) < order.index(w_pre[0])
            else "the victims differ"
        )
        return "other_victims", (
            f"you preempted {g_pre}, want {w_pre}: {why}. Preempt from the end of running (admission order "
            f"{order}: the newest first) until the rows fit; the request short of rows goes only when it is the "
            "newest left. In the engine the request with more work done would be recomputed."
        )
    left_rows, left_budget = free + _freed_rows(running, w_pre), budget
    got_n, want_n = dict(g_run), dict(w_run)
    tokens = {w["rid"]: w["tokens"] for w in waiting}
    for rid, n in w_run:
        if rid not in got_n:
            if rid in tokens:
                fit = "exactly enough" if tokens[rid] == left_rows else "enough"
                return "not_admitted", (
                    f"request {rid} ({plural(tokens[rid], 'token')}) was left waiting, but when its turn came {left_rows} "
                    f"rows were free ({fit}: tokens <= free rows admits it) and {plural(left_budget, 'token')} of the budget "
                    f"{'was' if left_budget == 1 else 'were'} left. In the engine it would wait while its rows sit free."
                )
            return "not_run", f"running request {rid} does not run in your plan; want {n} tokens of it."
        if got_n[rid] != n:
            way = "too many" if got_n[rid] > n else "too few"
            u = by_rid[rid]["uncached"] if rid in by_rid else tokens[rid]
            return "tokens", (
                f"request {rid} runs {plural(got_n[rid], 'token')}, want {n} ({way}): min(its {plural(u, 'token')} to compute, the "
                f"{left_budget} left of the budget)."
            )
        left_rows -= tokens[rid] if rid in tokens else max(0, n - by_rid[rid]["spare"])
        left_budget -= n
    extra = next((rid, n) for rid, n in g_run if rid not in want_n) if set(got_n) - set(want_n) else None
    if extra is not None:
        rid, n = extra
        if n == 0:
            return "zero_tokens", (
                f"request {rid} was admitted for 0 tokens: the budget was spent ({plural(budget, 'token')}, all run by "
                f"{[x for x, _ in w_run]}). When the budget left is 0, admission stops; a request runs at least one "
                "token. In the engine it would take its rows and compute nothing."
            )
        if w_pre:
            return "admitted_after_preemption", (
                f"request {rid} was admitted in a step that preempted {w_pre}: admit nobody then, the freed "
                "rows are for the running."
            )
        if rid in tokens and tokens[rid] > left_rows:
            taken = [
                (r, max(0, n - by_rid[r]["spare"]) if r in by_rid else tokens[r], "new" if r in by_rid else "admitted")
                for r, n in w_run
            ]
            used = sum(k for _, k, _ in taken)
            said = ", ".join(
                f"request {r}: {plural(k, 'new row') if how == 'new' else plural(k, 'row') + ', admitted'}"
                for r, k, how in taken
                if k
            )
            return "admitted_without_rows", (
                f"request {rid} was admitted with {plural(tokens[rid], 'token')} while {plural(left_rows, 'row')} were free: "
                "too few"
                + (
                    f" (free_rows {free} minus the {plural(used, 'row')} taken this step before its turn: {said};"
                    " subtract each request's rows as you plan it)"
                    if used
                    else ""
                )
                + ". In the engine a request admitted without its rows runs out of them in the middle of its prompt."
            )
        return "admitted", f"request {rid} runs {plural(n, 'token')} in your plan; the engine's step leaves it out."
    return "order", f"the same requests in another order: {[x for x, _ in g_run]}, want {[x for x, _ in w_run]}."


def _diagnose(history, step, want, got) -> tuple[str, str]:
    """(problem, hint): a catalogued mistake's hint where the plan agrees with that mistake's on every step
    checked so far (``history``: (step, want) pairs) and on this one, else the difference itself."""
    from .mistakes import BY_PART

    problem, hint = _hint(*step[:3], want, got, step[3])
    if problem in FACTS:
        return problem, hint

    def same(plan, args, answer) -> bool:  # a catalogued plan that fails here is not this one
        return _answer(plan, args) == answer

    matches = [c for c, plan in BY_PART[PART].items() if same(plan, step, got) and all(same(plan, *h) for h in history)]
    if problem in matches:
        return problem, hint
    if matches:
        return (
            matches[0],
            f"your plan is that of a scheduler that {BY_PART[PART][matches[0]].__doc__.strip()[0].lower()}{BY_PART[PART][matches[0]].__doc__.strip()[1:]}",
        )
    return _difference(*step, want, got)


def copy_views(a):
    """A copy of one argument of ``schedule_step`` (lists of dicts copied; numbers as they are)."""
    return [dict(x) for x in a] if isinstance(a, list) else a


def _plan_of(got, what: str, running, waiting) -> tuple[list[tuple[int, int]], list[int]]:
    """The learner's plan as (run, preempted) of ints; anything else, or a rid no request has, is a verdict."""
    try:
        run, pre = got
        pairs = [tuple(x) for x in run]
    except (TypeError, ValueError):
        pairs = None
    if pairs is None or any(len(x) != 2 for x in pairs):
        raise rejected(
            PART,
            "not_a_plan",
            f"{what}: return (run, preempted): a list of (rid, n) and a list of rids; got {got!r:.200}",
        )
    plan = [int_list(PART, x, what, "a (rid, n) pair's rid and n") for x in pairs], int_list(PART, pre, what, "rids")
    known = {r["rid"] for r in running} | {w["rid"] for w in waiting}
    strange = [rid for rid in [x[0] for x in plan[0]] + plan[1] if rid not in known]
    if strange:
        raise rejected(
            PART,
            "unknown_rid",
            f"{what} named request {strange[0]}, which is neither running nor waiting "
            f"(rids {sorted(known)}); got {got!r:.200}",
        )
    return [tuple(x) for x in plan[0]], plan[1]


def _drive(name, P, budget, reqs, schedule_step, history: list):
    """Run the engine's scheduler over the case, comparing the learner's plan before every step; each step
    the plan agreed on is added to ``history`` ((running, waiting, budget, free), want)."""
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's
    allocator = EngineAllocator(P)
    s = Scheduler(allocator, NoCache(allocator), max_step_tokens=budget)
    for rid, (prompt, new) in enumerate(reqs):
        s.add(Request(rid, [1 + (rid + j) % 7 for j in range(prompt)], new))
    step = 1  # the engine's numbering: its first step is step 1
    while not s.done and step <= 200:
        running, waiting = views(s)
        free = s.allocator.num_free
        with showing(lambda: _describe(running, waiting, budget, free)):
            got = call(
                PART,
                schedule_step,
                [dict(r) for r in running],
                [dict(r) for r in waiting],
                budget,
                free,
                what=f"schedule_step(...) on '{name}', step {step}",
                first=FIRST,
            )
            batch = s.schedule()
            want = ([(r.rid, n) for r, n in zip(batch.requests, batch.lengths)], [r.rid for r in batch.preempted])
            got = _plan_of(got, f"schedule_step(...) on '{name}', step {step}", running, waiting)
        if got != want:
            raise _wrong(schedule_step, f"{name}, step {step}", (running, waiting, budget, free), want, got, history)
        history.append(((running, waiting, budget, free), want))
        s.postprocess(batch, mx.zeros((len(batch.requests), 8)))
        step += 1


def check(schedule_step: Callable) -> object:
    """Compare ``schedule_step`` with the engine's scheduler before every step of the table cases and random runs.

    Raises :class:`~ropepool.teaching.feedback.ExerciseFailed` naming the first step planned otherwise: the
    running and waiting requests, the budget and free rows, the engine's batch and the learner's plan.
    """
    __tracebackhide__ = True  # a failing check shows the learner's frames, not the checker's
    table, runs, history, pool = cases(), workload(), [], states()
    for name, P, budget, reqs in table + runs:
        _drive(name, P, budget, reqs, schedule_step, history)
    for i, state in enumerate(pool):
        what = f"schedule_step(...) on random state {i}"
        with showing(lambda: _describe(*state)):
            got = _plan_of(
                call(PART, schedule_step, *(copy_views(a) for a in state), what=what, first=FIRST), what, *state[:2]
            )
        want = _reference(state)
        if got != want:
            raise _wrong(schedule_step, f"random state {i}", state, want, got, history)
    return passed(
        PART,
        f"schedule_step plans every step as the engine's scheduler on {len(table)} table cases and "
        f"{len(runs)} random runs, and as the reference on {len(pool)} random states (decodes behind a prompt's "
        "chunk, as a prefix cache makes them, and requests that need more rows than one victim frees, included): "
        "the budget, chunks after the decodes, preemption of the newest.",
    )
