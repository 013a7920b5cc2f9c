"""
part: 5 (schedule_step)
kind: correct
mistake: none. Written unusually: the running list is walked with two indices, `i` (the next request
    to plan, oldest first) and `last` (the newest request still running); preempting is `last -= 1`,
    so the victims are running[last], running[last - 1], ... and the walk ends when i passes last.
    Requests with n = 0 (budget spent) are left out of run. Admission uses a generator over the
    waiting list and stops as soon as the budget is spent.
good feedback must say: passed / correct.
must NOT say: a budget, chunk, preemption-victim or admission mistake.
"""


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget, free = max_step_tokens, free_rows
    run, preempted = [], []
    i, last = 0, len(running) - 1
    while i <= last:
        req = running[i]
        n = min(req["uncached"], budget)
        rows = max(0, n - req["spare"])
        while rows > free and last >= i:       # free rows by preempting the newest still running
            free += running[last]["held"]
            preempted.append(running[last]["rid"])
            last -= 1
        if last < i:                           # it preempted itself: it does not run
            break
        if n > 0:
            run.append((req["rid"], n))
            budget -= n
            free -= rows
        i += 1
    if not preempted:
        for w in (w for w in waiting if w["tokens"] <= free or budget <= 0):
            if budget <= 0:
                break
            if w["tokens"] > free:             # it fitted before an earlier admission took rows
                continue
            n = min(w["tokens"], budget)
            run.append((w["rid"], n))
            budget -= n
            free -= w["tokens"]
    return run, preempted
