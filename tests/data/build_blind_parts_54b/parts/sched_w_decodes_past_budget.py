"""
part: 5 (schedule_step)
kind: wrong
mistake: The learner believes "decodes never wait": a running request that is decoding (uncached == 1)
    always runs its token, even when the step's budget is already spent by older running requests'
    prompt chunks; only prompt chunks are cut to min(uncached, budget). A step can then run more than
    max_step_tokens tokens (one more per decode after the budget ran out).
good feedback must say: the step ran more tokens than max_step_tokens (the total of run exceeds the
    budget, e.g. by 1); a decode behind a prompt chunk that used the whole budget must not run this
    step (n = min(uncached, budget) = 0 for it); decodes come first only by admission order.
must NOT say: that the chunk size is wrong; a preemption mistake; an admission mistake (skipping, or
    admitting after preemption); that decodes should run before older prompt chunks.
"""


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget, free = max_step_tokens, free_rows
    still = [r["rid"] for r in running]
    held = {r["rid"]: r["held"] for r in running}
    run, preempted = [], []
    for r in running:
        if r["rid"] in preempted:
            continue
        if r["uncached"] == 1:
            n = 1                                  # a decode never waits
        else:
            n = min(r["uncached"], budget)         # a prompt: a chunk of what is left
        if n <= 0:
            continue
        need = max(0, n - r["spare"])
        while need > free:
            victim = still.pop()
            preempted.append(victim)
            free += held[victim]
            if victim == r["rid"]:
                break
        if r["rid"] in preempted:
            continue
        run.append((r["rid"], n))
        budget -= n
        free -= need
    if not preempted:
        for w in waiting:
            if budget <= 0:
                break
            if w["tokens"] > free:
                continue
            n = min(w["tokens"], budget)
            run.append((w["rid"], n))
            budget -= n
            free -= w["tokens"]
    return run, preempted
