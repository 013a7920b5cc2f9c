"""What an FP8 (e4m3) KV cache costs and saves: logits and greedy tokens against float pools, pool bytes.

    .venv/bin/python benchmarks/fp8_kv.py             # the tiny random-weight models
    .venv/bin/python benchmarks/fp8_kv.py --smollm2   # also SmolLM2-135M-Instruct's three questions

For each model the engine serves the same prompts three times: with float pools (the activations'
dtype), and with ``kv_dtype="fp8"`` (uint8 pools of e4m3 codes, dequantised where attention reads
them) at scales 1.0 and at per-layer scales calibrated on the prompts
(:func:`ropepool.engine.kv_scales.calibrate`). Prints the largest logit difference from float pools
(over the steps whose context is still the same in both runs), whether any greedy token changed, and
the pools' bytes against float16 and float32 pools of the same shape. Asserts nothing
(``tests/test_engine_fusions.py`` does).
"""

from __future__ import annotations

import argparse

import mlx.core as mx

from ropepool.engine import Engine, generate
from ropepool.engine.kv_scales import calibrate
from ropepool.loaders.tiny import ARCHS, build

PROMPTS = [[1, 5, 9, 3], [2, 4], [8, 7, 6, 5, 4, 3, 2, 1, 0], [100]]
NEW, POOL_ROWS = 4, 12


def pool_bytes(model, pool_rows: int) -> dict:
    """Bytes of every layer's two pools: fp8 (as the engine allocates them), float16 and float32."""
    pools = Engine(model, pool_rows=pool_rows, kv_dtype="fp8").runner.k_pools
    n = 2 * sum(p.size for p in pools)  # k and v: elements
    return {"fp8": n * mx.uint8.size, "float16": n * mx.float16.size, "float32": n * mx.float32.size}


def comparable(a: list, b: list) -> int:
    """How many leading logits of two runs see the same context: up to and including the first token
    where they differ (after it the two requests continue different texts)."""
    n = min(len(a), len(b))
    return next((i + 1 for i in range(n) if a[i] != b[i]), n)


def compare(model, prompts, new, pool_rows, stop=None) -> dict:
    """Float pools against FP8 pools (scales 1.0, and calibrated per layer) on the same requests."""
    scales = calibrate(model, prompts)
    kws = {"float": {}, "fp8": dict(kv_dtype="fp8"), "fp8 calibrated": dict(kv_dtype="fp8", kv_scales=scales)}
    runs = {name: generate(model, prompts, new, pool_rows=pool_rows, stop=stop, **kw) for name, kw in kws.items()}
    out = dict(
        runs=runs, bytes=pool_bytes(model, pool_rows), largest=max(float(mx.abs(a.logits).max()) for a in runs["float"])
    )
    for name in ("fp8", "fp8 calibrated"):
        pairs = list(zip(runs["float"], runs[name]))
        out[name] = (
            max(
                float(mx.abs(a.logits[:n] - b.logits[:n]).max())
                for a, b in pairs
                for n in [comparable(a.tokens, b.tokens)]
            ),
            all(a.tokens == b.tokens for a, b in pairs),
        )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smollm2", action="store_true", help="also the real model (fetched by make setup)")
    args = ap.parse_args(argv)
    print(f"FP8 pools against float pools: max |logit difference| and greedy tokens (device {mx.default_device()})")
    print(f"  {'model':30}{'max |logit|':>12}{'fp8, scale 1':>22}{'fp8, calibrated':>22}{'fp8 / f16 / f32 bytes':>30}")
    rows = [(label, build(name), PROMPTS, NEW, POOL_ROWS, None) for name, (label, _, _) in ARCHS.items()]
    if args.smollm2:
        from ropepool.loaders.smollm2 import QUESTIONS, load_smollm2

        model, tokenizer, _ = load_smollm2(pairs="gptj")
        prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in QUESTIONS]
        rows.append(("SmolLM2-135M (Q4_1)", model, prompts, 10, 96, tokenizer.eos_token_id))
    for label, model, prompts, new, pool_rows, stop in rows:
        r = compare(model, prompts, new, pool_rows, stop)
        b = r["bytes"]
        cells = "".join(f"{d:>12.3g} {'same' if same else 'CHANGED':>9}" for d, same in (r["fp8"], r["fp8 calibrated"]))
        print(f"  {label:30}{r['largest']:>12.3g}{cells}{b['fp8']:>14,} / {b['float16']:,} / {b['float32']:,}")
        if stop is not None:
            for name, run in r["runs"].items():
                print(
                    f"    {name:>15}: "
                    + " | ".join(repr(tokenizer.decode(x.tokens, skip_special_tokens=True)) for x in run)
                )


if __name__ == "__main__":
    main()
