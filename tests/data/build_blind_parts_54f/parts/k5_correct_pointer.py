"""
part: 5 schedule_step
kind: correct
mistake: none: never copies or changes running; an index `end` marks where the requests still
    running stop (preemption moves it left), and each request's tokens come from np.minimum, so the
    n in each (rid, n) pair is a NumPy integer (equal to the int, but not an int). Admission walks
    the waiting list with a generator. run is a list of tuples, preempted a list.
good feedback must say: passes (part 5 right).
must not say: any mistake; that n must be an int.
"""
import numpy as np


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget, free = max_step_tokens, free_rows
    run, preempted = [], []
    end = len(running)  # running[:end] are still running
    k = 0
    while k < end:
        req = running[k]
        n = np.minimum(req["uncached"], budget)
        need = max(0, n - req["spare"])
        while need > free and end > k:
            end -= 1
            free += running[end]["held"]
            preempted.append(running[end]["rid"])
        if end == k:  # it was preempted itself
            break
        if n:
            run.append((req["rid"], n))
            budget, free = budget - n, free - need
        k += 1
    fits = (w for w in waiting if not preempted)
    for w in fits:
        if budget <= 0:
            break
        if w["tokens"] > free:
            continue
        n = np.minimum(w["tokens"], budget)
        run.append((w["rid"], n))
        budget, free = budget - n, free - w["tokens"]
    return run, preempted
