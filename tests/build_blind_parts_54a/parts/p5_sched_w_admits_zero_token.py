"""
part: notebook 14, part 5 `schedule_step`
kind: wrong
mistake: admission of waiting requests checks only the free rows, not the budget: once the step's
  token budget is spent, every waiting request that still fits is admitted with n = min(tokens, 0)
  = 0, i.e. a (rid, 0) entry in run, and its rows are taken from free_rows, so a later request
  that would have fitted is skipped this step.
good feedback must say: admits waiting requests with 0 tokens (a (rid, 0) entry) when the budget is
  already spent, reserving their rows: admission must stop when the budget is 0 ("while the budget
  lasts"). Running requests, chunks and preemption are right.
wrong feedback: "runs more tokens than max_step_tokens" (the sum of n stays within budget),
  "preemption wrong", "skips a request that fits", "decodes not first".
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
            if w["tokens"] <= free:
                n = min(w["tokens"], budget)
                run.append((w["rid"], n))
                free -= w["tokens"]
                budget -= n
    return run, preempted
