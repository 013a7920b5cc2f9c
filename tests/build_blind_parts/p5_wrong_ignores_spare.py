# part: 5
# verdict: wrong
# mistake: a running request needs n new rows; I forgot it already holds spare rows it has not written
# expect: "spare", "rows", "n - spare"


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget = max_step_tokens
    run, preempted = [], []
    still_running = list(running)  # admission order: the newest at the end
    for r in running:
        if r["rid"] in preempted or budget <= 0:
            break
        n = min(r["uncached"], budget)
        need = n
        runs = True
        while need > free_rows:
            victim = still_running.pop()
            free_rows += victim["held"]
            preempted.append(victim["rid"])
            if victim["rid"] == r["rid"]:
                runs = False
                break
        if not runs:
            break
        if n > 0:
            run.append((r["rid"], n))
            budget -= n
            free_rows -= need
    if not preempted:
        for w in waiting:
            if budget <= 0:
                break
            if w["tokens"] <= free_rows:
                n = min(w["tokens"], budget)
                run.append((w["rid"], n))
                budget -= n
                free_rows -= w["tokens"]
    return run, preempted
