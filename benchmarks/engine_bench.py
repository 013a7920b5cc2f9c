"""Tokens per second of ropepool.engine against mlx-lm's own generate loop, one request, one model.

    .venv/bin/python benchmarks/engine_bench.py                      # tiny Llama, every backend here
    .venv/bin/python benchmarks/engine_bench.py --hidden 256 --layers 4 --prompt 128 --new 64
    .venv/bin/python benchmarks/engine_bench.py --smollm2 --new 8 --repeats 3   # the real model
    .venv/bin/python benchmarks/engine_bench.py --smollm2 --new 8 --repeats 3 --dequantize  # float32 weights

The model is a seeded random-weight mlx-lm Llama built from a config (nothing downloaded), or with
``--smollm2`` SmolLM2-135M-Instruct as shipped (GGUF rows, GPT-J pairs; ``python -m ropepool
fetch-model``) on three chat prompts: one request alone, then all three at once (the engine in one
batch; mlx-lm's loop one after another). Each side generates ``--new`` tokens greedily per request,
prefill included; the time is the median over ``--repeats`` runs after one warm-up run. mlx-lm's
side is ``mlx_lm.generate.generate_step`` (its RoPE, its KVCache, its attention). Prints the
numbers; asserts nothing (it is not a test), except that both sides chose the same tokens.
"""

from __future__ import annotations

import argparse
import statistics
import time

import mlx.core as mx
from mlx_lm.generate import generate_step

import ropepool
from ropepool.backends import resolve
from ropepool.engine import generate
from ropepool.engine.tiny_models import tiny


def build(hidden: int, layers: int, vocab: int):
    return tiny("llama", hidden_size=hidden, num_hidden_layers=layers, intermediate_size=2 * hidden,
                num_attention_heads=max(hidden // 32, 2), num_key_value_heads=max(hidden // 64, 1), vocab_size=vocab)


def mlx_lm_tokens(model, prompt, new):
    return [int(t) for t, _ in generate_step(mx.array(prompt), model, max_tokens=new)]


def engine_tokens(model, prompt, new, backend):
    return generate(model, [prompt], new, pool_rows=len(prompt) + new, backend=backend)[0].tokens


def median_seconds(run, repeats, warm=True):
    if warm:
        run()  # warm-up: kernels built, MLX graphs traced
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def smollm2(args):
    from ropepool.engine.smollm2 import QUESTIONS, load_smollm2

    model, tokenizer, _ = load_smollm2(pairs="gptj", dequantize=args.dequantize)
    mx.eval(model.parameters())
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in QUESTIONS]
    weights = "dequantized to float32" if args.dequantize else "Q4_1/Q8_0 as shipped"
    print(f"SmolLM2-135M-Instruct ({weights}, GGUF rows, GPT-J pairs); prompts of {[len(p) for p in prompts]} tokens, "
          f"{args.new} new tokens each; backend {resolve(args.backend)[0]}; median of {args.repeats}; "
          f"device {mx.default_device()}")

    def mlx_lm_side(batch):
        return [mlx_lm_tokens(model, p, args.new) for p in batch]

    def engine_side(batch):
        rows = sum(len(p) + args.new for p in batch)
        return [r.tokens for r in generate(model, batch, args.new, pool_rows=rows, backend=args.backend)]

    for label, batch in (("one request", prompts[:1]), ("three at once", prompts)):
        if engine_side(batch) != mlx_lm_side(batch):  # also the warm-up of both
            raise SystemExit(f"{label}: the engine chose other tokens than mlx-lm")
        n = args.new * len(batch)
        base = median_seconds(lambda: mlx_lm_side(batch), args.repeats, warm=False)
        t = median_seconds(lambda: engine_side(batch), args.repeats, warm=False)
        print(f"  {label:14} mlx-lm generate_step {n / base:6.1f} tokens/s   ropepool.engine {n / t:6.1f} tokens/s "
              f"({base / t:.2f}x mlx-lm)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    ap.add_argument("--new", type=int, default=64, help="new tokens")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--smollm2", action="store_true", help="the real model, one request and three at once")
    ap.add_argument("--backend", default="auto", help="with --smollm2: the rope_pool_fused backend")
    ap.add_argument("--dequantize", action="store_true", help="with --smollm2: float32 weights, not as shipped")
    args = ap.parse_args(argv)
    if args.smollm2:
        return smollm2(args)

    model = build(args.hidden, args.layers, args.vocab)
    prompt = [(7 * i + 3) % args.vocab for i in range(args.prompt)]
    want = mlx_lm_tokens(model, prompt, args.new)
    backends = [name for name, s in ropepool.available_backends().items() if s.available]
    print(f"Llama hidden {args.hidden}, {args.layers} layers, vocab {args.vocab}; one request: "
          f"{args.prompt} prompt + {args.new} new tokens; median of {args.repeats}; device {mx.default_device()}")
    base = median_seconds(lambda: mlx_lm_tokens(model, prompt, args.new), args.repeats)
    print(f"  {'mlx-lm generate_step':28} {args.new / base:9.1f} tokens/s")
    for b in backends:
        got = engine_tokens(model, prompt, args.new, b)
        if got != want:
            raise SystemExit(f"engine ({b}) chose other tokens than mlx-lm: {got[:8]}... vs {want[:8]}...")
        t = median_seconds(lambda b=b: engine_tokens(model, prompt, args.new, b), args.repeats)
        print(f"  {'ropepool.engine, ' + b:28} {args.new / t:9.1f} tokens/s   ({base / t:.2f}x mlx-lm)")


if __name__ == "__main__":
    main()
