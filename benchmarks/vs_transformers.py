"""SmolLM2 in ropepool's engine against Hugging Face transformers on torch's CPU build: logits and tokens/s.

    pip install torch transformers gguf accelerate   # not test dependencies: this script's only
    .venv/bin/python benchmarks/vs_transformers.py --new 16

Both load the same GGUF (``python -m ropepool fetch-model``): transformers dequantizes it to
float32 torch tensors; ropepool loads it as ``load_smollm2`` does (float32 on the CPU). The same
chat prompt's token ids go to both. Prints the largest logit difference at the first new token
and along the greedy answer, whether the tokens agree, then tokens/s of each (one request, prefill
included; the two alternate for ``--repeats`` rounds after a warm-up; medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import mlx.core as mx
import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--new", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads (default: torch's own)")
    args = ap.parse_args(argv)
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError as err:
        raise SystemExit(f"needs torch and transformers (and gguf, accelerate): {err}") from None

    from ropepool.engine import generate
    from ropepool.loaders.smollm2 import QUESTIONS, fetch_smollm2, load_smollm2

    path = fetch_smollm2()
    model, tokenizer, _ = load_smollm2(pairs="gptj")
    hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    hf.eval()
    hf.generation_config.eos_token_id = None  # as the engine here: every token asked for, no stop
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": QUESTIONS[0]}])
    print(
        f"SmolLM2-135M-Instruct, one prompt of {len(prompt)} tokens, {args.new} new tokens; torch "
        f"{torch.__version__} ({torch.get_num_threads()} threads), MLX {mx.__version__}; load {os.getloadavg()[0]:.1f}"
    )

    def ours():
        (r,) = generate(model, [prompt], args.new, pool_rows=len(prompt) + args.new)
        return r

    def theirs():
        with torch.no_grad():
            ids = torch.tensor([prompt])  # every token attended: the prompt holds <|im_end|>, the pad id
            out = hf.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=args.new,
                do_sample=False,
                output_logits=True,
                return_dict_in_generate=True,
                pad_token_id=tokenizer.eos_token_id,
            )
        return out.sequences[0, len(prompt) :].tolist(), torch.stack(out.logits)[:, 0].float().numpy()

    r = ours()
    tokens, logits = theirs()
    same = next((i for i, (a, b) in enumerate(zip(r.tokens, tokens)) if a != b), len(tokens))
    ours_logits = np.array(mx.stack(r.logits))  # [new, vocab]
    first = float(np.abs(ours_logits[0] - logits[0]).max())
    along = float(np.abs(ours_logits[:same] - logits[:same]).max()) if same else float("nan")
    print(
        f"  logits: largest difference {first:.1e} at the first new token, {along:.1e} over the {same} tokens "
        f"both chose alike; tokens {'identical' if same == len(tokens) else f'differ from token {same}'}"
    )
    times = {"ropepool.engine": [], "transformers": []}
    for _ in range(args.repeats):
        for name, run in (("ropepool.engine", ours), ("transformers", theirs)):
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    rate = {k: args.new / statistics.median(v) for k, v in times.items()}
    print(
        f"  ropepool.engine {rate['ropepool.engine']:.1f} tok/s, transformers {rate['transformers']:.1f} tok/s "
        f"({rate['ropepool.engine'] / rate['transformers']:.2f}x transformers; target >= 1.0x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
