"""
part: 5 (schedule_step)
kind: wrong
mistake: The learner checks each running request's new rows against free_rows (preempting when they
    are more) but never subtracts them once the request is planned: every running request sees the
    step's whole free_rows. Two running requests that each fit alone but not together are both
    planned (no preemption where one is needed), and a waiting request is admitted on rows the
    running requests already took (the engine then refuses the plan: its rows are not free).
good feedback must say: the free rows were counted twice: rows taken by the running requests planned
    earlier in the step (n - spare each) must be subtracted before the next request / before admitting
    from the queue; yours planned more new rows than free_rows (it should have preempted the newest /
    not admitted the waiting request).
must NOT say: a budget (token count) mistake; a wrong victim (oldest vs newest); that skipping a
    waiting request is wrong; a chunk-size mistake.
"""


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget, free = max_step_tokens, free_rows
    order = [r["rid"] for r in running]
    held = {r["rid"]: r["held"] for r in running}
    run, preempted = [], []
    for r in running:
        if r["rid"] in preempted:
            continue
        n = min(r["uncached"], budget)
        if n == 0:
            continue
        need = max(0, n - r["spare"])
        while need > free:
            victim = order.pop()
            preempted.append(victim)
            free += held[victim]
            if victim == r["rid"]:
                break
        if r["rid"] in preempted:
            continue
        run.append((r["rid"], n))
        budget -= n
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
