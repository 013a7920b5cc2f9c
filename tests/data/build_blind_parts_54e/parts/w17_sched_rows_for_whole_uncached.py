"""Part: 5 schedule_step.  Kind: wrong.

The mistake: a running request's new rows are counted from all its uncached tokens,
max(0, uncached - spare), not from the n it runs this step, max(0, n - spare). For a chunked prompt
(spare covers its uncached tokens) and for a decode that runs, it is the same. It differs for a
decode behind a spent budget (n = 0): it runs nothing and needs no row this step, yet here it counts
1 row, and when no row is free it preempts (itself, or a newer request). E.g. running
[dict(rid=0, uncached=30, spare=30, held=30), dict(rid=1, uncached=1, spare=0, held=10)], waiting
[], max_step_tokens 16, free_rows 0: must be ([(0, 16)], []); this gives ([(0, 16)], [1]).

A good feedback message must say: a request that runs no token this step (budget spent) needs no new
row and must not cause a preemption / rows needed are max(0, n - spare) with n = min(uncached,
budget).
It must not say: preempts the oldest / the wrong victim, the budget order, decodes must go first,
admission after a preemption.
"""


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget, free = max_step_tokens, free_rows
    last = len(running)  # running[:last] are still running; the newest of them is running[last - 1]
    run, preempted = [], []
    i = 0
    while i < last:
        r = running[i]
        n = min(r["uncached"], budget)
        need = max(0, r["uncached"] - r["spare"])  # new rows it needs
        while need > free and i < last:  # preempt the newest still running (maybe r itself)
            last -= 1
            preempted.append(running[last]["rid"])
            free += running[last]["held"]
        if i == last:  # r was preempted: it does not run
            break
        if n > 0:
            run.append((r["rid"], n))
            budget -= n
            free -= need
        i += 1
    if not preempted:
        for w in waiting:
            if budget <= 0:
                break
            n = min(w["tokens"], budget)
            rows = w["tokens"]  # its whole sequence's rows, taken at admission
            if rows <= free:
                run.append((w["rid"], n))
                budget -= n
                free -= rows
    return run, preempted
