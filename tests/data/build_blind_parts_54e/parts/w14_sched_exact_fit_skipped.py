"""Part: 5 schedule_step.  Kind: wrong.

The mistake: a waiting request is admitted only if its rows are strictly fewer than the free rows
(rows < free instead of rows <= free). One whose sequence needs exactly the free rows is skipped
(and a smaller one behind it may be admitted in its place). E.g. running [], waiting
[dict(rid=0, tokens=10)], max_step_tokens 16, free_rows 10: must be ([(0, 10)], []); this gives
([], []). Also exactly full after running decodes took their rows. Running requests, budgets,
chunks and preemption are right.

A good feedback message must say: a request that needs exactly the free rows fits and must be
admitted / <= not < (the pool may end the step exactly full).
It must not say: the budget / chunking, preemption, admission after preemption, stopping at the
first request that does not fit, the order of the batch.
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
        need = max(0, n - r["spare"])  # new rows this step
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
            if rows < free:
                run.append((w["rid"], n))
                budget -= n
                free -= rows
    return run, preempted
