"""Part: 5 schedule_step
Kind: wrong

The mistake:
    When the request that needs rows is itself the most recently admitted still running, it is
    preempted but still put in run (with its n): it is both in run and in preempted, and its rows
    counted as used after it gave them back.

A good feedback message must say:
    - a request preempted to make room for itself does not run this step
    - it appears in both run and preempted

It must not say:
    - preempted the oldest / wrong victim
    - admitted after a preemption
    - rows not freed
"""

def schedule_step(running, waiting, max_step_tokens, free_rows):
    budget, free = max_step_tokens, free_rows
    still = list(running)  # running and not preempted, admission order
    run, preempted = [], []
    i = 0
    while i < len(still):
        req = still[i]
        n = min(req["uncached"], budget)
        if n == 0:
            i += 1
            continue
        need = max(0, n - req["spare"])
        runs = True
        while need > free:
            victim = still.pop()  # the most recently admitted still running
            preempted.append(victim["rid"])
            free += victim["held"]
            if victim is req:
                break
        if not runs:
            break
        run.append((req["rid"], n))
        budget -= n
        free -= need
        i += 1
    if not preempted:
        for w in waiting:
            if budget == 0:
                break
            if w["tokens"] <= free:
                n = min(w["tokens"], budget)
                run.append((w["rid"], n))
                budget -= n
                free -= w["tokens"]
    return run, preempted
