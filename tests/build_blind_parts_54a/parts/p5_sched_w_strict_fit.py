"""
part: notebook 14, part 5 `schedule_step`
kind: wrong
mistake: a waiting request is admitted only if its rows are strictly fewer than the free rows
  (tokens < free instead of tokens <= free), so a request that exactly fits the free rows is skipped
  (and a smaller one behind it may be admitted in its place).
good feedback must say: a waiting request whose tokens exactly equal the free rows is not admitted
  (skipped) although it fits: the comparison must be tokens <= free (off by one); everything else
  (running first, budget, preemption) is right.
wrong feedback: "budget off by one" (the budget is right), "preemption wrong", "admits a request
  that does not fit" (it admits fewer, not more), "0-token chunk".
"""


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget, free = max_step_tokens, free_rows
    active = list(running)
    run, preempted = [], []
    i = 0
    while i < len(active):
        r = active[i]
        n = min(r["uncached"], budget)
        if n <= 0:
            i += 1
            continue
        need = max(0, n - r["spare"])
        stopped = False
        while need > free:
            victim = active.pop()  # the most recently admitted still running
            free += victim["held"]
            preempted.append(victim["rid"])
            if victim is r:
                stopped = True
                break
        if stopped:
            break
        free -= need
        budget -= n
        run.append((r["rid"], n))
        i += 1
    if not preempted:
        for w in waiting:
            if budget <= 0:
                break
            if w["tokens"] < free:  # room for it
                n = min(w["tokens"], budget)
                run.append((w["rid"], n))
                free -= w["tokens"]
                budget -= n
    return run, preempted
