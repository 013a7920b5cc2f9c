"""
part: 5 schedule_step
kind: wrong
mistake: preempting a request does not add its held rows to the free rows. The victims are the
    right ones in the right order (newest first), but since free never grows the loop goes on
    preempting until it reaches the request that needed the rows, which then does not run: where
    preempting one newer request would have freed enough rows, the learner preempts every request
    newer than it and the request itself.
good feedback must say: a preempted request's held rows become free (free_rows += held): count them
    before preempting another; here too many were preempted (the request itself / requests whose
    rows were not needed).
must not say: preempts the oldest instead of the newest (wrong victim); admits after a
    preemption; the spare rows; the token budget.
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
