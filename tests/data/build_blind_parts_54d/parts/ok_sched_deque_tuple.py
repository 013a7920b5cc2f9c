"""Part: 5 schedule_step
Kind: correct

What is unusual:
    none: running requests in a deque served from the left and preempted from the right; run is a
    list of (rid, n) tuples, preempted is returned as a TUPLE of rids (the stub says only 'rids').

A good feedback message must say:
    - passes (no mistake named)

It must not say:
    - any mistake / wrong type for preempted / wrong victim / budget
"""

from collections import deque


def schedule_step(running, waiting, max_step_tokens, free_rows):
    # the running requests as a deque: served from the left (oldest), preempted from the right (newest);
    # preempted comes back as a tuple of rids
    queue = deque(running)
    budget, free = max_step_tokens, free_rows
    run, preempted = [], []
    while queue and budget > 0:
        req = queue.popleft()
        n = min(req["uncached"], budget)
        if n == 0:
            continue
        need = max(0, n - req["spare"])
        while need > free and queue:
            victim = queue.pop()
            preempted.append(victim["rid"])
            free += victim["held"]
        if need > free:  # no newer request left to preempt: this one goes
            preempted.append(req["rid"])
            free += req["held"]
            break
        run.append((req["rid"], n))
        budget -= n
        free -= need
    if not preempted:
        for w in waiting:
            if budget <= 0:
                break
            if w["tokens"] <= free:
                run.append((w["rid"], min(w["tokens"], budget)))
                budget -= min(w["tokens"], budget)
                free -= w["tokens"]
    return run, tuple(preempted)
