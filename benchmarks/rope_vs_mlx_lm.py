"""How far rope_pool_fused's q_rot is from mlx-lm's own RoPE, per scaling type, over positions < 32k.

    .venv/bin/python benchmarks/rope_vs_mlx_lm.py [--dtype float32] [--max-position 32768]

For each model (a preset, or a real config's fields) it rotates random q at every position
``0 .. max_position-1`` (in chunks) with the op on each backend that runs here and with the module
``mlx_lm.models.rope_utils.initialize_rope`` builds for that config, and prints the largest absolute
difference and the largest ratio to ropepool's tolerance bound (``ropepool.tolerance``).
"""

from __future__ import annotations

import argparse

import mlx.core as mx
import numpy as np
from mlx_lm.models.rope_utils import initialize_rope

import ropepool
from ropepool import models
from ropepool.tolerance import error_bound, pair_norms

MODELS = {
    "default (llama-3-8b)": "llama-3-8b",
    "linear x4": {
        "num_attention_heads": 8,
        "hidden_size": 1024,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "linear", "factor": 4.0},
    },
    "llama3 (llama-3.1-8b)": "llama-3.1-8b",
    "yarn (qwen2.5-7b-yarn)": "qwen2.5-7b-yarn",
    "longrope (phi-3.5-mini)": "phi-3.5-mini",
    "partial (phi-2)": "phi-2",
    "gpt-j pairs (gpt-j-6b)": {"model_type": "gptj", "n_head": 16, "n_embd": 4096, "rotary_dim": 64},
}


def measure(p: models.RopeParams, dtype: str, max_position: int, backend: str, chunk: int = 4096):
    rope = p.rope()
    module = initialize_rope(rope.rotary_dim, p.rope_base, not rope.is_neox, p.rope_scaling, p.max_position_embeddings)
    variant = {k: v for k, v in p.op_kwargs().items() if k not in ("num_qo_heads", "num_kv_heads")}
    rng = np.random.default_rng(0)
    worst_abs = worst_ratio = 0.0
    for start in range(0, max_position, chunk):
        T = min(chunk, max_position - start)
        x = mx.array(rng.standard_normal((1, 1, T, p.head_dim)).astype(np.float32)).astype(getattr(mx, dtype))
        theirs = np.array(module(x, offset=start).astype(mx.float32))[0, 0]  # [T, D]
        q = x[0].transpose(1, 0, 2)  # [T, 1, D]
        positions = mx.arange(start, start + T, dtype=mx.int32)
        pool = mx.zeros((T, 1, p.head_dim), q.dtype)
        ours = ropepool.rope_pool_fused(
            q,
            q,
            q,
            positions,
            mx.arange(T, dtype=mx.int32),
            pool,
            pool,
            num_qo_heads=1,
            num_kv_heads=1,
            backend=backend,
            **variant,
        )[0]
        ours = np.array(ours.astype(mx.float32))[:, 0]  # [T, D]
        diff = np.abs(ours - theirs).max(axis=-1)  # [T]
        r = pair_norms(np.array(q.astype(mx.float32))[:, 0], rope).max(axis=-1)  # [T]
        bound = error_bound(dtype, np.arange(start, start + T), r)
        worst_abs = max(worst_abs, float(diff.max()))
        worst_ratio = max(worst_ratio, float((diff / bound).max()))
    return worst_abs, worst_ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    ap.add_argument("--max-position", type=int, default=32768)
    args = ap.parse_args()
    backends = [b for b in ("cpu", "mlx") if ropepool.available_backends()[b].available]
    print(
        f"q_rot against mlx-lm {getattr(__import__('mlx_lm'), '__version__', '?')}, {args.dtype}, "
        f"positions 0..{args.max_position - 1}"
    )
    print(f"{'type (model)':<26}" + "".join(f"{b + ' max |diff|':>18}{'/ bound':>9}" for b in backends))
    for label, config in MODELS.items():
        p = models.preset(config) if isinstance(config, str) else models.from_config(config)
        cells = [measure(p, args.dtype, args.max_position, b) for b in backends]
        print(f"{label:<26}" + "".join(f"{a:>18.2e}{r:>9.2f}" for a, r in cells))


if __name__ == "__main__":
    main()
