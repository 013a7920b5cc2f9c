"""Part 5 schedule_step -- kind: wrong.

Mistake: a running request's new rows are taken as n (every token it runs), not
max(0, n - spare): the rows it already holds but has not written (spare) are ignored. A request
admitted with its whole prompt's rows that runs it in chunks (spare = the rest of its prompt)
then seems to need n free rows for each chunk, so when free_rows < n the scheduler preempts
requests (or the request itself) although nothing needs a new row, and otherwise it counts rows as
taken that are not -- so a waiting request that fits is not admitted. Differs from a correct part
ONLY when a running request has spare > 0 and that changes a decision (a preemption, an
admission): running [r0: uncached 20, spare 20, held 20], budget 16, free_rows 0 -> correct
([(0, 16)], []); this part ([], [0]). With spare 0 everywhere (plain decodes), always right.

A good feedback message must say: a running request needs only max(0, n - spare) new rows / its
spare rows are already held; it preempted (or did not admit) although the rows were there.
It must not say: preempts the oldest, admits after a preemption, budget exceeded, decodes not first.
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
        need = n
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
            if w["tokens"] <= free:
                n = min(w["tokens"], budget)
                run.append((w["rid"], n))
                free -= w["tokens"]
                budget -= n
    return run, preempted
