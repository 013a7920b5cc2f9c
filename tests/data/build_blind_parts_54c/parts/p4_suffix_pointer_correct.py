"""Part 5 schedule_step -- kind: correct (unusual).

None: preemption always takes the newest request still running, so the preempted requests are
always a suffix of `running`; this part keeps one index, `end` (running[:end] still run), walks
the running requests with an index, and preempts by moving `end` down (its held rows come back).
When `end` reaches the request being planned, that request was preempted itself and the walk
stops. The preempted rids are running[end:] read newest first (the order they were preempted).
Admission is a single pass over `waiting` only when end == len(running) (nothing preempted).

A good feedback message must say: passed / correct.
It must not say: any mistake.
"""


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    end = len(running)  # running[:end] still run; running[end:] were preempted, newest first
    budget, free, run = max_step_tokens, free_rows, []
    i = 0
    while i < end:
        req = running[i]
        n = min(req["uncached"], budget)
        if n > 0:
            need = max(0, n - req["spare"])
            while need > free and end > i:
                end -= 1
                free += running[end]["held"]
            if end > i:
                run.append((req["rid"], n))
                free -= need
                budget -= n
        i += 1
    preempted = [r["rid"] for r in reversed(running[end:])]
    if end == len(running):
        for w in waiting:
            if budget <= 0:
                break
            if w["tokens"] > free:
                continue
            n = min(w["tokens"], budget)
            run.append((w["rid"], n))
            free, budget = free - w["tokens"], budget - n
    return run, preempted
