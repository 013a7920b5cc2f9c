"""Part: 5 schedule_step
Kind: wrong

The mistake:
    Preemption does not add the victim's held rows to the free rows: the loop keeps preempting
    (newest first, as it should) until it reaches the request that needs the rows, so one preemption
    that would have been enough becomes several, and the request itself is preempted and does not
    run.

A good feedback message must say:
    - a preempted request's held rows become free (free_rows += held)
    - yours preempted more requests than needed / the request that needed rows did not run

It must not say:
    - preempted the wrong (oldest) request
    - admitted after a preemption
    - budget
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
            if victim is req:
                runs = False
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
