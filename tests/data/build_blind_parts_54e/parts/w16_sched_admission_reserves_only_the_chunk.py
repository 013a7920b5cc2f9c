"""Part: 5 schedule_step.  Kind: wrong.

The mistake: a waiting request is admitted if the rows of the chunk it runs this step
(min(tokens, budget)) are free, and only those rows are taken off free_rows; rule 3 says it is
admitted only if its whole sequence's rows (tokens) are free, and those are the rows it takes. So
with a budget smaller than a prompt, a prompt longer than the free rows is admitted (the engine then
refuses the plan: its rows are not free), and after a chunked admission too many rows look free for
the next one in line. E.g. running [], waiting [dict(rid=0, tokens=40)], max_step_tokens 16,
free_rows 20: must be ([], []) (40 rows are not free); this gives ([(0, 16)], []). A prompt that
fits the budget whole is right.

A good feedback message must say: admission needs the request's whole sequence of rows (tokens)
free, not only this step's chunk / rows taken at admission are all its tokens.
It must not say: the budget (n = min(tokens, budget) is right), skipping a request that does not
fit, preemption, the running requests' rows.
"""


def schedule_step(running, waiting, max_step_tokens, free_rows):
    """One step's plan: (run, preempted). run: (rid, n) pairs in batch order; preempted: rids.

    running: in admission order, dicts of rid, uncached (tokens not in the pool yet: 1 when
    decoding), spare (rows held but not written yet) and held (all rows it holds).
    waiting: first in line first, dicts of rid and tokens (its sequence: the rows it needs).
    """
    budget, free = max_step_tokens, free_rows
    last = len(running)  # running[:last] are still running; the newest of them is running[last - 1]
    run, preempted = [], []
    i = 0
    while i < last:
        r = running[i]
        n = min(r["uncached"], budget)
        need = max(0, n - r["spare"])  # new rows this step
        while need > free and i < last:  # preempt the newest still running (maybe r itself)
            last -= 1
            preempted.append(running[last]["rid"])
            free += running[last]["held"]
        if i == last:  # r was preempted: it does not run
            break
        if n > 0:
            run.append((r["rid"], n))
            budget -= n
            free -= need
        i += 1
    if not preempted:
        for w in waiting:
            if budget <= 0:
                break
            n = min(w["tokens"], budget)
            rows = n  # the rows of the tokens it runs this step
            if rows <= free:
                run.append((w["rid"], n))
                budget -= n
                free -= rows
    return run, preempted
