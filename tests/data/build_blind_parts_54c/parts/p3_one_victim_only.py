"""Part 5 schedule_step -- kind: wrong.

Mistake: preemption is an `if`, not a `while`: when a running request needs more rows than are
free, the most recently admitted request is preempted ONCE, and the request then runs whether or
not that victim's held rows were enough (free goes negative: the plan uses rows that are not free).
Rule 2 says "WHILE those rows are more than free_rows, preempt". Differs from a correct part ONLY
when one victim's held rows are not enough (the correct part preempts a second, or the request
itself, and the plan differs: running [r0: uncached 10, spare 0, held 5; r1: decode, held 4],
free_rows 3, budget 16 -> correct ([], [1, 0]); this part ([(0, 10)], [1])). One victim that frees
enough, or no preemption, is right; a later request that then needs a row is often preempted
anyway, which can hide it.

A good feedback message must say: keep preempting (newest first) until the rows fit / one
preemption was not enough; the plan runs request R on rows that are not free.
It must not say: preempts the oldest / wrong victim, admits after a preemption, spare ignored,
budget.
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
        if need > free:
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
            if w["tokens"] <= free:
                n = min(w["tokens"], budget)
                run.append((w["rid"], n))
                free -= w["tokens"]
                budget -= n
    return run, preempted
