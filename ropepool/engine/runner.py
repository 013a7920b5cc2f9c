"""One forward pass over a step's flat batch, with the model's own modules.

Every layer of an mlx-lm Llama, Qwen2 or Phi-3 model is::

    h = h + o_proj(attention(rope(q_proj(x)), rope(k_proj(x)), v_proj(x)))   x = input_layernorm(h)
    h = h + mlp(post_attention_layernorm(h))

The runner keeps every module (embedding, norms, projections, MLP, lm_head) and replaces only
``rope`` + the KV-cache write + ``attention``: one call of :func:`ropepool.rope_pool_fused`
rotates q and k and writes k and v into the layer's pools, then each request attends over the
pool rows of its slot table. Qwen3 normalises q and k per head before ``rope``
(``q_norm``, ``k_norm``): the same call does that too.
"""

from __future__ import annotations

from itertools import accumulate

import mlx.core as mx

from .. import fp8
from ..backends import resolve
from ..op import rope_pool_fused
from . import model_spec
from .scheduler import Batch


def project_qkv(attn, x):
    """q ``[T, Hq*D]``, k and v ``[T, Hkv*D]`` from the layer's own projections."""
    if hasattr(attn, "qkv_proj"):  # Phi-3: one fused projection, split as its Attention does
        q_width, kv_width = attn.n_heads * attn.head_dim, attn.n_kv_heads * attn.head_dim
        return mx.split(attn.qkv_proj(x), [q_width, q_width + kv_width], axis=-1)
    return attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)


class ModelRunner:
    """The model, its per-layer KV pools ``[P, Hkv, D]`` and the forward pass over a Batch.

    ``kv_dtype="fp8"``: uint8 pools of e4m3 codes (:mod:`ropepool.fp8`), which the op writes and
    attention reads back dequantised; None: pools in the activations' dtype. ``kv_scales``: one
    ``(k_scale, v_scale)`` per layer for FP8 pools (:func:`ropepool.engine.kv_scales.calibrate`), or
    None for 1.0 everywhere, vLLM's default without calibrated scales.
    """

    def __init__(self, model, pool_rows: int, backend: str = "auto", kv_dtype: str | None = None,
                 kv_scales=None):
        if kv_dtype not in (None, "fp8"):
            raise ValueError(f"kv_dtype must be None (the activations' dtype) or 'fp8', got {kv_dtype!r}")
        layers = len(model.model.layers)
        if kv_scales is not None and (kv_dtype != "fp8" or len(kv_scales) != layers):
            raise ValueError(f"kv_scales: one (k_scale, v_scale) per layer ({layers}) with kv_dtype='fp8', "
                             f"got {kv_scales!r:.80} with kv_dtype={kv_dtype!r}")
        self.arch = model_spec.architecture(model)
        self.rope_kwargs = model_spec.rope_kwargs(model)
        self.backend, _ = resolve(backend)  # an unknown or unavailable backend fails here, not mid-run
        self.model = model
        self.inner = model.model  # embed_tokens, layers, norm
        Hkv, D = self.rope_kwargs["num_kv_heads"], self.rope_kwargs["head_dim"]
        self.fp8 = kv_dtype == "fp8"
        pairs = kv_scales if kv_scales is not None else [(1.0, 1.0)] * layers
        self.scales = [dict(k_scale=float(k), v_scale=float(v)) if self.fp8 else {} for k, v in pairs]
        dtype = mx.uint8 if self.fp8 else self.kv_dtype()
        self.k_pools = [mx.zeros((pool_rows, Hkv, D), dtype) for _ in self.inner.layers]  # [P, Hkv, D] each
        self.v_pools = [mx.zeros((pool_rows, Hkv, D), dtype) for _ in self.inner.layers]

    def kv_dtype(self) -> mx.Dtype:
        """The dtype of k and v as layer 0 computes them: the pools' dtype.

        Not the embedding's: a quantized embedding gives float16 rows, which a float32 norm
        weight promotes to float32 before the projections.
        """
        layer = self.inner.layers[0]
        x = layer.input_layernorm(self.inner.embed_tokens(mx.array([0])))  # [1, hidden]
        return project_qkv(layer.self_attn, x)[1].dtype

    def run(self, batch: Batch) -> mx.array:
        """The float32 logits ``[len(batch.requests), vocab]`` at each request's last new token."""
        positions = mx.array(batch.positions, mx.int32)  # [T]
        slots = mx.array(batch.slots, mx.int32)  # [T]
        # The pool rows each request attends over: its whole context after this step.
        rows = [mx.array(r.slot_table[:r.num_cached + n], mx.int32) for r, n in zip(batch.requests, batch.lengths)]
        h = self.inner.embed_tokens(mx.array(batch.tokens))  # [T, hidden]
        for i, layer in enumerate(self.inner.layers):
            x = layer.input_layernorm(h)
            h = h + self.attention(i, layer.self_attn, x, positions, slots, rows, batch.lengths)
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        last = mx.array(list(accumulate(batch.lengths))) - 1  # [R], each request's last new token
        h = self.inner.norm(h[last])  # [R, hidden]
        if self.model.args.tie_word_embeddings:
            logits = self.inner.embed_tokens.as_linear(h)
        else:
            logits = self.model.lm_head(h)
        return logits.astype(mx.float32)  # [R, vocab]

    def attention(self, i, attn, x, positions, slots, rows, lengths):
        T = x.shape[0]
        Hq, Hkv, D = attn.n_heads, attn.n_kv_heads, self.rope_kwargs["head_dim"]
        q, k, v = project_qkv(attn, x)
        q, k, v = q.reshape(T, Hq, D), k.reshape(T, Hkv, D), v.reshape(T, Hkv, D)  # [T, Hq, D], [T, Hkv, D]
        # RoPE on q and k, and k and v written to pool rows `slots`: the op this project is about.
        # Values checked in every layer (the default): on the mlx backend the host read of slots it
        # costs is what lets the op copy a consecutive run of rows as one block, so skipping it in
        # later layers is slower there (the cpu backend reads the slots on the host either way).
        # Qwen3: q and k RMS-normalised per head first, in the same call (model_spec.qk_norm_kwargs).
        q, _, self.k_pools[i], self.v_pools[i] = rope_pool_fused(
            q, k, v, positions, slots, self.k_pools[i], self.v_pools[i], **self.rope_kwargs, backend=self.backend,
            **model_spec.qk_norm_kwargs(attn), **self.scales[i])
        out, start = [], 0
        for req_rows, n in zip(rows, lengths):
            q_r = q[start:start + n].transpose(1, 0, 2)[None]  # [1, Hq, n, D]
            k_r, v_r = self.k_pools[i][req_rows], self.v_pools[i][req_rows]  # [L, Hkv, D] each
            if self.fp8:  # e4m3 codes back to values, only the rows this request attends over
                k_r, v_r = (fp8.decode(r, self.scales[i][n], q.dtype) for r, n in ((k_r, "k_scale"), (v_r, "v_scale")))
            k_r, v_r = k_r.transpose(1, 0, 2)[None], v_r.transpose(1, 0, 2)[None]  # [1, Hkv, L, D]
            # "causal" is aligned to the last key: new token j sees every cached row and new tokens <= j.
            o = mx.fast.scaled_dot_product_attention(q_r, k_r, v_r, scale=attn.scale,
                                                     mask="causal" if n > 1 else None)  # [1, Hq, n, D]
            out.append(o[0].transpose(1, 0, 2).reshape(n, Hq * D))  # [n, Hq*D]
            start += n
        return attn.o_proj(mx.concatenate(out))  # [T, hidden]
