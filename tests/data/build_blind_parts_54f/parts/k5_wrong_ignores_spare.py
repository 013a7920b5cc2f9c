"""
part: 5 schedule_step
kind: wrong
mistake: a running request is charged n new rows for its n tokens, ignoring the rows it already
    holds unwritten (spare): rows = n instead of max(0, n - spare). A prompt chunk whose rows were
    all handed out at admission (spare >= n) then looks as if it needed n free rows: with few rows
    free the learner preempts (itself or newer requests) where nothing had to go, and even with
    enough rows free it uses up free rows that later requests or admissions needed.
good feedback must say: a running request needs only max(0, n - spare) new rows: its spare rows
    (held, not written yet) cover the chunk; here it was charged n rows, so it preempted / refused
    without need.
must not say: preempts the oldest / wrong victim; admits after a preemption; the budget / chunk
    size n is wrong; decodes must go first.
"""


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget, free = max_step_tokens, free_rows
    still_running = list(running)  # admission order; preemption takes from the end
    run, preempted = [], []
    i = 0
    while i < len(still_running):
        req = still_running[i]
        n = min(req["uncached"], budget)
        rows = n
        while rows > free:
            victim = still_running.pop()  # the most recently admitted still running
            free += victim["held"]
            preempted.append(victim["rid"])
            if victim is req:
                break
        if req["rid"] in preempted:
            break  # it gave its own rows back: it does not run, and nobody after it is left
        if n > 0:
            run.append((req["rid"], n))
            budget -= n
            free -= rows
        i += 1
    if not preempted:
        for w in waiting:
            if budget <= 0:
                break
            if w["tokens"] <= free:
                n = min(w["tokens"], budget)
                run.append((w["rid"], n))
                budget -= n
                free -= w["tokens"]
    return run, preempted
