"""
part: 5 (schedule_step)
kind: wrong
mistake: When a running request needs more new rows than are free, the learner sends THAT request
    back to the queue (it gives its held rows back and does not run) instead of preempting the most
    recently admitted request still running, and goes on with the next one. With the newest request
    itself short of rows it is right; with an older request short of rows it preempts the wrong one
    (an older request that has done more work) and the newer ones keep running.
good feedback must say: the wrong request was preempted: the victim must be the most recently
    admitted still running (the newest, from the end of running), repeatedly until the rows suffice,
    not the request that needs the rows; the older request should have run this step.
must NOT say: that it preempts the oldest request (it preempts the one short of rows, which can be any);
    that admission after a preemption is wrong; a budget mistake.
"""


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget, free = max_step_tokens, free_rows
    run, preempted = [], []
    for r in running:
        n = min(r["uncached"], budget)
        if n == 0:
            continue
        need = max(0, n - r["spare"])
        if need > free:                  # no room for it: it goes back to the queue
            preempted.append(r["rid"])
            free += r["held"]
            continue
        run.append((r["rid"], n))
        budget -= n
        free -= need
    if not preempted:
        for w in waiting:
            if budget <= 0:
                break
            if w["tokens"] > free:
                continue
            n = min(w["tokens"], budget)
            run.append((w["rid"], n))
            budget -= n
            free -= w["tokens"]
    return run, preempted
