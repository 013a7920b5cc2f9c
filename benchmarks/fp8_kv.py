"""What an FP8 (e4m3) KV cache costs and saves: logits and greedy tokens against float pools, pool bytes.

    .venv/bin/python benchmarks/fp8_kv.py             # the tiny random-weight models
    .venv/bin/python benchmarks/fp8_kv.py --smollm2   # also SmolLM2-135M-Instruct's three questions

For each model the engine serves the same prompts twice, with float pools (the activations' dtype)
and with ``kv_dtype="fp8"`` (uint8 pools of e4m3 codes, scales 1.0, dequantised where attention
reads them). Prints the largest logit difference, whether any greedy token changed, and the pools'
bytes against float32 and float16 pools of the same shape. Asserts nothing
(``tests/test_engine_fusions.py`` does).
"""

from __future__ import annotations

import argparse

import mlx.core as mx

from ropepool.engine import Engine, generate
from ropepool.engine.tiny_models import ARCHS, build

PROMPTS = [[1, 5, 9, 3], [2, 4], [8, 7, 6, 5, 4, 3, 2, 1, 0], [100]]
NEW, POOL_ROWS = 4, 12


def pool_bytes(model, pool_rows: int) -> dict:
    """Bytes of every layer's two pools: fp8 (as the engine allocates them), float16 and float32."""
    pools = Engine(model, pool_rows=pool_rows, kv_dtype="fp8").runner.k_pools
    n = 2 * sum(p.size for p in pools)  # k and v: elements
    return {"fp8": n * mx.uint8.size, "float16": n * mx.float16.size, "float32": n * mx.float32.size}


def compare(model, prompts, new, pool_rows, stop=None) -> dict:
    """Float pools against FP8 pools on the same requests: the numbers the table prints."""
    runs = {kv: generate(model, prompts, new, pool_rows=pool_rows, kv_dtype=kv, stop=stop) for kv in (None, "fp8")}
    pairs = list(zip(runs[None], runs["fp8"]))
    common = [min(len(a.tokens), len(b.tokens)) for a, b in pairs]
    diff = max(float(mx.abs(a.logits[:n] - b.logits[:n]).max()) for (a, b), n in zip(pairs, common))
    largest = max(float(mx.abs(a.logits).max()) for a in runs[None])
    return dict(diff=diff, largest=largest, same_tokens=all(a.tokens == b.tokens for a, b in pairs),
                runs=runs, bytes=pool_bytes(model, pool_rows))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smollm2", action="store_true", help="also the real model (fetched by make setup)")
    args = ap.parse_args(argv)
    print(f"FP8 pools against float pools (device {mx.default_device()})")
    print(f"  {'model':30}{'max |dlogit|':>14}{'max |logit|':>13}{'tokens':>10}{'fp8 / f16 / f32 bytes':>26}")
    rows = [(label, build(name), PROMPTS, NEW, POOL_ROWS, None) for name, (label, _, _) in ARCHS.items()]
    if args.smollm2:
        from ropepool.engine.smollm2 import QUESTIONS, load_smollm2

        model, tokenizer, _ = load_smollm2(pairs="gptj")
        prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in QUESTIONS]
        rows.append(("SmolLM2-135M (Q4_1)", model, prompts, 10, 96, tokenizer.eos_token_id))
    for label, model, prompts, new, pool_rows, stop in rows:
        r = compare(model, prompts, new, pool_rows, stop)
        b = r["bytes"]
        print(f"  {label:30}{r['diff']:>14.3g}{r['largest']:>13.3g}{'same' if r['same_tokens'] else 'CHANGED':>10}"
              f"{b['fp8']:>10,} / {b['float16']:,} / {b['float32']:,}")
        if stop is not None:
            for kv, run in r["runs"].items():
                print(f"    {kv or 'float32'}: " + " | ".join(repr(tokenizer.decode(x.tokens, skip_special_tokens=True))
                                                    for x in run))


if __name__ == "__main__":
    main()
