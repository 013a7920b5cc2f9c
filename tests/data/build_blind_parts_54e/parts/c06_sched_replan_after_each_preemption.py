"""Part: 5 schedule_step.  Kind: correct (unusual).

An unusual but correct scheduler: instead of preempting in the middle of one pass, it plans the
running requests from scratch, and whenever one of them needs more new rows than are free it drops
the newest still running (adding its held rows to the free rows) and plans again from the start,
until a plan goes through (the requests before the one that was short fit again, with at least as
many rows, the same budget). Then the waiting are admitted if nothing was preempted. It accepts any
iterables (waiting is walked once, lazily) and returns run as a list of (rid, n) tuples and
preempted as a list of rids, newest first.

A good feedback message must say: it passes.
It must not say: any mistake.
"""


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    running = list(running)
    alive, preempted, given_back = len(running), [], 0

    def plan(requests, free):
        budget, out = max_step_tokens, []
        for r in requests:
            n = min(r["uncached"], budget)
            need = max(0, n - r["spare"])
            if need > free:
                return None, budget, free
            if n:
                out.append((r["rid"], n))
            budget, free = budget - n, free - need
        return out, budget, free

    while True:
        run, budget, free = plan(running[:alive], free_rows + given_back)
        if run is not None:
            break
        alive -= 1
        preempted.append(running[alive]["rid"])
        given_back += running[alive]["held"]
    if preempted:
        return run, preempted
    for w in waiting:
        if budget <= 0:
            break
        if w["tokens"] <= free:
            take = min(w["tokens"], budget)
            run.append((w["rid"], take))
            budget, free = budget - take, free - w["tokens"]
    return run, preempted
