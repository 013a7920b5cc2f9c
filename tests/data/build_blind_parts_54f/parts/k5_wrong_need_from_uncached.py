"""
part: 5 schedule_step
kind: wrong
mistake: the rows a running request needs are computed from all its uncached tokens,
    max(0, uncached - spare), instead of from the n it runs this step, max(0, n - spare). Same
    whenever the budget lets it run all its uncached tokens; when the budget is short (a long
    prompt chunked with fewer spare rows than tokens, or a decode left with no budget: n = 0) it
    asks for rows it will not write this step: it preempts without need (even for a request that
    does not run) or takes free rows a later admission needed.
good feedback must say: the rows needed this step come from n = min(uncached, budget) (the tokens it
    runs this step), not from all its uncached tokens; a request the budget leaves out (n = 0)
    needs no rows and must not cause a preemption.
must not say: preempts the oldest (wrong victim); the spare rows ignored; admits after a
    preemption; the chunk size / budget of run is wrong.
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
        rows = max(0, req["uncached"] - req["spare"])
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
            if w["tokens"] <= free:
                n = min(w["tokens"], budget)
                run.append((w["rid"], n))
                budget -= n
                free -= w["tokens"]
    return run, preempted
