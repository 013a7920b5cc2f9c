# part: 5
# verdict: correct
# mistake: none: a moving index for the newest still-running request instead of a list of victims; a deque for the waiting
# expect: "passes"

from collections import deque


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget, rows = max_step_tokens, free_rows
    plan, preempted = [], []
    last = len(running) - 1  # running[i .. last] are still running; the newest is running[last]
    i = 0
    while i <= last and budget > 0:
        req = running[i]
        n = min(req["uncached"], budget)
        need = max(0, n - req["spare"])
        while need > rows and last >= i:
            rows += running[last]["held"]
            preempted.append(running[last]["rid"])
            last -= 1
        if last < i:  # it preempted itself
            break
        if n:
            plan.append((req["rid"], n))
            budget -= n
            rows -= need
        i += 1
    queue = deque(waiting) if not preempted else deque()
    while queue and budget > 0:
        w = queue.popleft()
        if w["tokens"] > rows:
            continue
        n = min(w["tokens"], budget)
        plan.append((w["rid"], n))
        budget -= n
        rows -= w["tokens"]
    return plan, preempted
