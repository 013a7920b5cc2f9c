"""
part: 5 schedule_step
kind: wrong
mistake: a waiting request is admitted only if its tokens are strictly fewer than the free rows
    (`<` instead of `<=`): one whose rows fit exactly (tokens == free rows) is skipped (a later,
    smaller one may be admitted instead).
good feedback must say: a waiting request whose tokens equal the free rows fits and must be
    admitted (<=, not <); the boundary case where rows fit exactly.
must not say: admission stops at the first request that does not fit / a smaller one skipped
    wrongly in general; admits after a preemption; admits one whose rows are not free; the budget.
"""


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget, free = max_step_tokens, free_rows
    still_running = list(running)  # admission order; preemption takes from the end
    run, preempted = [], []
    i = 0
    while i < len(still_running):
        req = still_running[i]
        n = min(req["uncached"], budget)
        rows = max(0, n - req["spare"])
        while rows > free:
            victim = still_running.pop()  # the most recently admitted still running
            free += victim["held"]
            preempted.append(victim["rid"])
            if victim is req:
                break
        if req["rid"] in preempted:
            break  # it gave its own rows back: it does not run, and nobody after it is left
        if n > 0:
            run.append((req["rid"], n))
            budget -= n
            free -= rows
        i += 1
    if not preempted:
        for w in waiting:
            if budget <= 0:
                break
            if w["tokens"] < free:
                n = min(w["tokens"], budget)
                run.append((w["rid"], n))
                budget -= n
                free -= w["tokens"]
    return run, preempted
