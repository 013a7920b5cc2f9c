"""
part: notebook 14, part 5 `schedule_step`
kind: wrong
mistake: when a request is preempted, only the rows it had written (held - spare) are counted as
  freed, not all its held rows, so whenever the victim had spare rows the step believes fewer rows
  are free: it can preempt one request more than needed (possibly the request being scheduled
  itself), and later admissions see too few free rows.
good feedback must say: preempts more requests than needed (too many victims) because a preempted
  request's spare rows are not counted as freed (all its held rows become free, not held - spare);
  the victim order (newest first) is right.
wrong feedback: "preempts the oldest / wrong victim order" (wrong_victim), "budget wrong",
  "admits after a preemption", "does not preempt at all", "0-token chunks".
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
            free += victim["held"] - victim["spare"]  # the rows it had written
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
            if w["tokens"] <= free:
                n = min(w["tokens"], budget)
                run.append((w["rid"], n))
                free -= w["tokens"]
                budget -= n
    return run, preempted
