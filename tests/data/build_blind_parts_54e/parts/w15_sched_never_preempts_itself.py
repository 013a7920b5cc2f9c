"""Part: 5 schedule_step.  Kind: wrong.

The mistake: a running request that needs more rows than are free preempts only requests NEWER than
itself; when none is left it simply does not run this step, and is not preempted. Rule 2 says the
most recently admitted request still running is preempted, "If that was this request, it does not
run": it is preempted too (its held rows become free, it goes back to the queue). E.g. running
[dict(rid=0, uncached=1, spare=0, held=9)], waiting [], max_step_tokens 16, free_rows 0: must be
([], [0]); this gives ([], []): the request keeps its 9 rows and waits for a row no one will give
back (in the engine: no progress, the same plan every step). And with nothing preempted, waiting
requests may then be admitted where the rule admits none. When a newer request can be preempted it
is right.

A good feedback message must say: the request that needs a row must itself be preempted when it is
the newest still running / preempted must list it; otherwise nothing progresses (livelock).
It must not say: preempts the oldest / the wrong victim among others, the budget, chunking, the
admission rules for the waiting (they are right as such).
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
        while need > free and i < last - 1:  # preempt the newest other request still running
            last -= 1
            preempted.append(running[last]["rid"])
            free += running[last]["held"]
        if need > free:  # no one newer left to preempt: r does not run this step
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
