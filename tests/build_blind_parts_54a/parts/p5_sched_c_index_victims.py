"""
part: notebook 14, part 5 `schedule_step`
kind: correct
unusual: never pops a list: keeps an index `end` (running[:end] are still running) that moves left
  as the newest requests are preempted, checks the budget with a for/else over the running ones,
  and admits the waiting with a generator over those that fit while `left` budget remains.
good feedback must say: passes / correct.
wrong feedback: any named mistake (wrong victim, budget, admission after preemption, 0-token chunk).
"""


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    left, free = max_step_tokens, free_rows
    end = len(running)  # running[:end] are still running
    plan, victims = [], []
    k = 0
    while k < end and left > 0:
        req = running[k]
        n = min(req["uncached"], left)
        if n == 0:
            k += 1
            continue
        rows = n - req["spare"] if n > req["spare"] else 0
        while rows > free and end > k:
            end -= 1
            victims.append(running[end]["rid"])
            free += running[end]["held"]
        if end == k:  # it preempted itself
            break
        free, left = free - rows, left - n
        plan.append((req["rid"], n))
        k += 1
    if victims:
        return plan, victims
    for w in waiting:
        if left == 0:
            break
        if w["tokens"] > free:
            continue
        take = min(w["tokens"], left)
        plan.append((w["rid"], take))
        left -= take
        free -= w["tokens"]
    return plan, victims
