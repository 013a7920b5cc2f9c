"""Part 5 schedule_step -- kind: wrong.

Mistake: the admission test compares a waiting request's tokens with free_rows, the argument (the
rows free when the step began), instead of the running count of rows left (`free`, which the
running requests' new rows and each earlier admission took from). So it admits a request whose
rows are no longer free: after decodes that need new rows (spare 0), or after an earlier
admission in the same step (free_rows = 10, budget 100, waiting of 6 and 6 tokens: both admitted,
12 rows for 10). Differs from a correct part ONLY in admissions, where the rows taken earlier in
the step make a waiting request not fit any more. Running requests, preemption, budget are right.

A good feedback message must say: admission must use the rows left after the running requests'
new rows and earlier admissions this step; it admitted request R though only F rows were free.
It must not say: admits everyone / ignores free rows altogether, admits after a preemption, skip
vs stop at the first that does not fit, budget exceeded.
"""

def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget, free = max_step_tokens, free_rows
    alive = list(running)  # still running, in admission order
    run, preempted = [], []
    for req in running:
        if req not in alive:
            continue  # preempted for an older request this step
        n = min(req["uncached"], budget)
        if n == 0:
            continue
        need = max(0, n - req["spare"])
        while need > free and req in alive:
            victim = alive.pop()  # the most recently admitted still running
            preempted.append(victim["rid"])
            free += victim["held"]
        if req not in alive:
            continue  # it was the victim itself: it does not run
        free -= need
        budget -= n
        run.append((req["rid"], n))
    if not preempted:
        for w in waiting:
            if budget == 0:
                break
            if w["tokens"] <= free_rows:
                n = min(w["tokens"], budget)
                run.append((w["rid"], n))
                free -= w["tokens"]
                budget -= n
    return run, preempted
