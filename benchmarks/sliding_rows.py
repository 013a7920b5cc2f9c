"""Peak pool rows of sliding-window models served with their window's rows only (``prefix_cache=False``).

For each tiny sliding-window model (Gemma-3: 1 of 2 layers slides, GPT-OSS: sinks too; window 4),
four requests generate 4 x window tokens each, prefilled in chunks of 5, on a pool small enough to
preempt. Prints the most rows the full layers held (the engine's slot tables: every position) and
the most the sliding layer group held (rings of at most ``window`` rows per running request), beside the
bound ``(window + one page) x requests running at once``, and the largest logit difference from
mlx-lm's own forward (its RotatingKVCache).

    python benchmarks/sliding_rows.py
"""

from __future__ import annotations

import numpy as np

from ropepool.engine import Engine
from ropepool.engine.mlx_lm_loop import greedy
from ropepool.loaders.tiny import build

PROMPTS = [[1, 5, 9, 3, 7, 2], [2, 4], [8, 7, 6, 5, 4, 3, 2, 1, 0], [100]]
PAGE = 1


def serve(name: str, pool_rows: int = 40):
    """(engine, requests, most requests running at once) after serving :data:`PROMPTS` for 4 x window tokens."""
    model = build(name)
    window = model.args.sliding_window
    engine = Engine(model, pool_rows=pool_rows, keep_logits=True, prefix_cache=False, max_step_tokens=5, page_size=PAGE)
    reqs = [engine.add_request(p, 4 * window) for p in PROMPTS]
    running = 0
    while not engine.done:
        batch = engine.step()
        running = max(running, len(batch.requests))
    return model, engine, reqs, running


def main(argv=None) -> list[dict]:
    rows = []
    print(
        f"{'model':<10}{'window':>7}{'full-layer peak':>17}{'sliding peak':>14}{'bound':>7}{'preempted':>11}"
        f"{'max |logit diff|':>18}"
    )
    for name in ("gemma3", "gpt-oss"):
        model, engine, reqs, running = serve(name)
        W = model.args.sliding_window
        want = greedy(model, [r.prompt for r in reqs], [len(r.tokens) for r in reqs])
        diff = max(float(np.abs(np.array(r.logits) - np.array(w.logits)).max()) for r, w in zip(reqs, want))
        row = dict(
            name=name,
            window=W,
            full=engine.stats.peak_rows,
            sliding=engine.runner.rings.peak,
            bound=(W + PAGE) * running,
            preemptions=engine.stats.preemptions,
            diff=diff,
        )
        print(
            f"{name:<10}{W:>7}{row['full']:>17}{row['sliding']:>14}{row['bound']:>7}{row['preemptions']:>11}"
            f"{diff:>18.2e}"
        )
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
