"""Tokens per second of ropepool.engine: against mlx-lm on a tiny model, and on SmolLM2 against the targets.

    .venv/bin/python benchmarks/engine_bench.py                      # tiny Llama, every backend here
    .venv/bin/python benchmarks/engine_bench.py --hidden 256 --layers 4 --prompt 128 --new 64
    .venv/bin/python benchmarks/engine_bench.py --smollm2            # the real model: every target, met or MISS
    .venv/bin/python benchmarks/engine_bench.py --smollm2 --quantized   # Q4_1/Q8_0 weights as shipped

The tiny model is a seeded random-weight mlx-lm Llama built from a config (nothing downloaded):
one request, the engine on every backend against ``mlx_lm.generate.generate_step``.

``--smollm2`` serves SmolLM2-135M-Instruct (GGUF rows, GPT-J pairs; ``python -m ropepool
fetch-model``) as ``load_smollm2`` loads it (float32 on the CPU), on four chat prompts with
``--new`` tokens each and no stop token, and measures in one process, the methods taking turns in
each of ``--repeats`` rounds after a warm-up: prefill (one prompt, one step), one request, four
requests at once, and mlx-lm's ``batch_generate`` on the same four (its own cache and attention).
Throughput counts new tokens over the whole call, prefill included; medians. It also races MLX's
float32 1024^3 matmul against NumPy's. Each target (a fast CPU engine) is printed met or MISS.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time

import mlx.core as mx
from mlx_lm.generate import generate_step

import ropepool
from ropepool.engine import Engine, generate


def build(hidden: int, layers: int, vocab: int):
    """A seeded random-weight mlx-lm Llama of these sizes (:func:`ropepool.loaders.tiny.tiny`)."""
    try:
        from ropepool.loaders.tiny import tiny
    except ImportError:  # a ropepool from before the loaders package held it (benchmarks/compare.py)
        from ropepool.engine.tiny_models import tiny
    return tiny(
        "llama",
        hidden_size=hidden,
        num_hidden_layers=layers,
        intermediate_size=2 * hidden,
        num_attention_heads=max(hidden // 32, 2),
        num_key_value_heads=max(hidden // 64, 1),
        vocab_size=vocab,
    )


def mlx_lm_tokens(model, prompt, new):
    return [int(t) for t, _ in generate_step(mx.array(prompt), model, max_tokens=new)]


def engine_tokens(model, prompt, new, backend):
    return generate(model, [prompt], new, pool_rows=len(prompt) + new, backend=backend)[0].tokens


def decode_steps(model, prompt, steps: int, pool_rows: int = 4096) -> list[float]:
    """Seconds of each of ``steps`` decode steps (one new token) of one request, after its prefill step."""
    engine = Engine(model, pool_rows=pool_rows)
    engine.add_request(prompt, steps + 1)
    engine.step()  # the prompt, and the first new token
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        engine.step()
        times.append(time.perf_counter() - t0)
    return times


def smollm2_model(quantized: bool = False):
    """SmolLM2-135M-Instruct as the engine serves it (GGUF rows, GPT-J pairs; float32 on the CPU unless
    ``quantized``), its tokenizer and the four chat prompts' token ids."""
    from ropepool.loaders.smollm2 import QUESTIONS, load_smollm2

    model, tokenizer, _ = load_smollm2(pairs="gptj", **({"dequantize": False} if quantized else {}))
    mx.eval(model.parameters())
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in (*QUESTIONS, EXTRA_QUESTION)]
    return model, tokenizer, prompts


def median_seconds(run, repeats, warm=True):
    if warm:
        run()  # warm-up: kernels built, MLX graphs traced
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


TARGET_PREFILL = 100.0  # tok/s, one 37-token-class chat prompt
TARGET_ONE = 15.0  # tok/s, one request
TARGET_BATCH_GAIN = 2.5  # four requests' throughput over one request's
TARGET_VS_MLX_LM = 1.0  # four requests against mlx-lm's batch_generate on the same four
TARGET_MATMUL = 0.5  # MLX's float32 1024^3 matmul against NumPy's
EXTRA_QUESTION = "What color is the sky on a clear day?"


class _NoStop:
    """What ``batch_generate`` reads of a tokenizer: no stop token, so that it makes every token asked for."""

    eos_token_ids: list = []

    def __init__(self, tokenizer):
        self.decode = tokenizer.decode


def blas_line() -> str:
    try:
        from ropepool.blas import blas_line as line
    except ImportError:  # a ropepool from before the BLAS loader
        import numpy as np

        a = np.random.default_rng(0).standard_normal((1024, 1024), np.float32)
        m = mx.array(a)
        mx.eval(m @ m)
        t0 = time.perf_counter()
        mx.eval(m @ m)
        t1 = time.perf_counter()
        a @ a
        t2 = time.perf_counter()
        return (
            f"BLAS under MLX: MLX's own; float32 1024^3 matmul {2 / (t1 - t0):.1f} GF/s, NumPy {2 / (t2 - t1):.1f} GF/s"
        )
    return line(repeats=5)


def smollm2(args):
    import random

    from mlx_lm import batch_generate

    model, tokenizer, prompts = smollm2_model(args.quantized)
    float32 = not hasattr(model.model.layers[0].self_attn.q_proj, "scales")
    line = blas_line()
    print(
        f"SmolLM2-135M-Instruct ({'float32' if float32 else 'Q4_1/Q8_0 as shipped'}, GGUF rows, GPT-J pairs); "
        f"prompts of {[len(p) for p in prompts]} tokens, {args.new} new tokens each, no stop token; backend "
        f"{Engine(model, pool_rows=1, backend=args.backend.split(',')[0]).runner.backend}; device {mx.default_device()}; medians of {args.repeats} rounds; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(line)

    backends = args.backend.split(",")  # the first one's numbers meet the targets; the others are raced beside

    def engine(batch, new, backend=backends[0]):
        rows = sum(len(p) + new for p in batch)
        return [r.tokens for r in generate(model, batch, new, pool_rows=rows, backend=backend)]

    def mlx_lm(batch, new):
        return batch_generate(model, _NoStop(tokenizer), batch, max_tokens=new, return_token_ids=True).token_ids

    runs = {  # name: (call, tokens it makes or reads)
        "prefill": (lambda: engine(prompts[:1], 1), len(prompts[0])),
        "engine, 1 request": (lambda: engine(prompts[:1], args.new), args.new),
        "engine, 4 requests": (lambda: engine(prompts, args.new), 4 * args.new),
        "mlx-lm batch_generate, 4": (lambda: mlx_lm(prompts, args.new), 4 * args.new),
    }
    for b in backends[1:]:
        runs[f"engine, 4 requests, {b}"] = (lambda b=b: engine(prompts, args.new, b), 4 * args.new)
    if engine(prompts, args.new) != mlx_lm(prompts, args.new):  # also the warm-up of both
        print("  note: the engine and batch_generate chose different tokens (float32 ties can differ)")
    engine(prompts[:1], 1)
    times = {name: [] for name in runs}
    order = random.Random(0)
    for _ in range(args.repeats):
        for name in order.sample(list(runs), len(runs)):
            t0 = time.perf_counter()
            runs[name][0]()
            times[name].append(time.perf_counter() - t0)
    rate = {name: runs[name][1] / statistics.median(ts) for name, ts in times.items()}
    for name, r in rate.items():
        print(f"  {name:26} {r:7.1f} tok/s" + ("  (prompt tokens)" if name == "prefill" else ""))
    gf = [float(x) for x in re.findall(r"([\d.]+) GF/s", line)]
    one, four, base = rate["engine, 1 request"], rate["engine, 4 requests"], rate["mlx-lm batch_generate, 4"]
    checks = [
        (f"prefill {rate['prefill']:.0f} tok/s >= {TARGET_PREFILL:.0f}", rate["prefill"] >= TARGET_PREFILL),
        (f"one request {one:.1f} tok/s >= {TARGET_ONE:.0f}", one >= TARGET_ONE),
        (f"four requests {four / one:.2f}x one request >= {TARGET_BATCH_GAIN}x", four / one >= TARGET_BATCH_GAIN),
        (
            f"four requests {four / base:.2f}x mlx-lm's batch_generate >= {TARGET_VS_MLX_LM}x",
            four / base >= TARGET_VS_MLX_LM,
        ),
    ]
    if len(gf) == 2:
        checks.append(
            (
                f"MLX float32 1024^3 matmul {gf[0] / gf[1]:.2f}x NumPy's >= {TARGET_MATMUL}x",
                gf[0] / gf[1] >= TARGET_MATMUL,
            )
        )
    print("Targets (a fast CPU engine; notebook 08's Run All and make test are timed apart)")
    print("\n".join(f"  {'met ' if ok else 'MISS'}  {text}" for text, ok in checks))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    ap.add_argument("--new", type=int, default=None, help="new tokens (default 64; --smollm2 24)")
    ap.add_argument("--repeats", type=int, default=None, help="timed runs (default 5; --smollm2 3 rounds)")
    ap.add_argument(
        "--smollm2",
        action="store_true",
        help="the real model: prefill, one and four requests, batch_generate; the targets",
    )
    ap.add_argument(
        "--backend",
        default="auto",
        help="with --smollm2: the engine's rope_pool_fused backend; "
        "a comma list races the others' four requests beside",
    )
    ap.add_argument("--quantized", action="store_true", help="with --smollm2: Q4_1/Q8_0 weights as shipped")
    args = ap.parse_args(argv)
    if args.smollm2:
        args.new, args.repeats = args.new or 24, args.repeats or 3
        return smollm2(args)
    args.new, args.repeats = args.new or 64, args.repeats or 5

    model = build(args.hidden, args.layers, args.vocab)
    prompt = [(7 * i + 3) % args.vocab for i in range(args.prompt)]
    want = mlx_lm_tokens(model, prompt, args.new)
    backends = [name for name, s in ropepool.available_backends().items() if s.available]
    print(
        f"Llama hidden {args.hidden}, {args.layers} layers, vocab {args.vocab}; one request: "
        f"{args.prompt} prompt + {args.new} new tokens; median of {args.repeats}; device {mx.default_device()}"
    )
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
