"""Part: 5 schedule_step
Kind: wrong

The mistake:
    Admission checks that the rows of this step's chunk (min(tokens, budget)) are free, not the rows
    of the request's whole sequence (tokens): with a small budget left it admits a long prompt whose
    rows are not free.

A good feedback message must say:
    - a waiting request is admitted only if all its tokens rows are free (its whole sequence)
    - not just the rows of the chunk it runs this step (min(tokens, budget))

It must not say:
    - budget exceeded
    - skipped for a smaller one / stops at the first that does not fit
    - admitted after a preemption
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
            if min(w["tokens"], budget) <= free:
                n = min(w["tokens"], budget)
                run.append((w["rid"], n))
                budget -= n
                free -= w["tokens"]
    return run, preempted
