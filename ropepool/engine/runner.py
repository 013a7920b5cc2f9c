"""One forward pass over a step's flat batch, with the model's own modules.

Every layer of an mlx-lm Llama, Qwen2 or Phi-3 model is::

    h = h + o_proj(attention(rope(q_proj(x)), rope(k_proj(x)), v_proj(x)))   x = input_layernorm(h)
    h = h + mlp(post_attention_layernorm(h))

The runner keeps every module (embedding, norms, projections, MLP, lm_head) and replaces only
``rope`` + the KV-cache write + ``attention``: the op this project is about (``rope_pool_fused``)
rotates q and k and writes k and v into the layer's pools, then one attention call serves every
request of the step, over the pool rows of its slot table.

The op is called in its two halves (:mod:`ropepool.op`): :class:`StepContext`, built once per
step, holds the step's plan (positions and slots checked, the slots read on the host once, the
write planned: :func:`ropepool.op.plan_step`, nano-vllm's ``slot_mapping``); each layer applies
it (:func:`ropepool.op.apply_plan`) with its own RoPE table and fusion settings, made once when
the runner is built. Qwen3 normalises q and k per head before ``rope`` (``q_norm``, ``k_norm``):
the layer's fusion settings do that too.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from .. import fp8, pool_write
from ..backends import resolve
from ..op import StepPlan, apply_plan, plan_step
from ..rope import rope_table
from ..validation import fusion_settings
from ..fusion import KV_SCALE_MAX, KV_SCALE_MIN
from . import model_spec
from .errors import EngineArgumentError
from .scheduler import Batch


def project_qkv(attn, x):
    """q ``[T, Hq*D]``, k and v ``[T, Hkv*D]`` from the layer's own projections."""
    if hasattr(attn, "qkv_proj"):  # Phi-3: one fused projection, split as its Attention does
        q_width, kv_width = attn.n_heads * attn.head_dim, attn.n_kv_heads * attn.head_dim
        return mx.split(attn.qkv_proj(x), [q_width, q_width + kv_width], axis=-1)
    return attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)


@dataclass
class StepContext:
    """What every layer of one step reads, built once from the Batch (nano-vllm's per-step context).

    R requests; request r has n_r new tokens at positions c_r .. c_r + n_r - 1 (c_r = its
    ``num_cached``) and attends over its first L_r = c_r + n_r slot-table rows. N = max n_r,
    L = max L_r. Query i of request r sees context row j when ``j <= c_r + min(i, n_r - 1)``: the
    new tokens causally, every cached row; padded queries (``i >= n_r``) repeat the last real one.

    Attributes
    ----------
    positions : int32 mx.array ``[T]``, slots : int32 NumPy ``[T]``  the op's inputs, request after request
    plan : StepPlan or None           the op's step half, made once (None: no pool size given)
    rows : int32 ``[R, L]``           pool rows of each request's context, padded with its first row
    mask : bool ``[R, 1, N, L]`` or None   True where query i may see row j; None: everywhere
    queries : int32 ``[R, N]`` or None     the flat token of request r's query i; None when N = 1
                                           (token r is request r's one query)
    outputs : int32 ``[T]`` or None   where flat token t's output is among the ``[R * N]``; None when N = 1
    last : int32 ``[R]``              each request's last new token in ``[T]``
    """

    positions: mx.array
    slots: np.ndarray
    plan: StepPlan | None
    rows: mx.array
    mask: mx.array | None
    queries: mx.array | None
    outputs: mx.array | None
    last: mx.array

    @classmethod
    def of(cls, batch: Batch, pool_rows: int | None = None) -> StepContext:
        """The context of ``batch``; with ``pool_rows`` (P of the pools), the op's plan too (checks the values)."""
        n = np.array(batch.lengths)  # [R]
        cached = np.array([r.num_cached for r in batch.requests])  # [R]
        R, N, L = len(n), int(n.max()), int((cached + n).max())
        rows = np.empty((R, L), np.int32)
        for r, (req, length) in enumerate(zip(batch.requests, cached + n)):
            rows[r, :length] = req.slot_table[:length]
            rows[r, length:] = req.slot_table[0]  # any row the request holds; masked out
        i = np.minimum(np.arange(N)[None, :], n[:, None] - 1)  # [R, N], padded queries repeat the last
        mask = np.arange(L)[None, None, :] <= (cached[:, None] + i)[:, :, None]  # [R, N, L]
        start = np.cumsum(n) - n  # [R], each request's first token in [T]
        flat = np.concatenate([r * N + np.arange(k) for r, k in enumerate(n)])  # [T]
        positions, slots = mx.array(batch.positions, mx.int32), np.array(batch.slots, np.int32)
        return cls(
            positions=positions,
            slots=slots,  # on the host: the plan reads them there, and no device array is read back
            plan=None if pool_rows is None else plan_step(positions, slots, pool_rows),
            rows=mx.array(rows),
            mask=None if mask.all() else mx.array(mask[:, None]),
            queries=None if N == 1 else mx.array((start[:, None] + i).astype(np.int32)),
            outputs=None if N == 1 else mx.array(flat.astype(np.int32)),
            last=mx.array((start + n - 1).astype(np.int32)),
        )


def _kv_scales(kv_scales, kv_dtype, layers: int) -> list | None:
    """``kv_scales`` as a list of ``(k_scale, v_scale)`` floats, one per layer, each in the op's range."""
    if kv_scales is None:
        return None
    if kv_dtype != "fp8":
        raise EngineArgumentError(
            f"kv_scales scale an FP8 cache: pass kv_dtype='fp8' with them, got kv_dtype={kv_dtype!r:.60}"
        )
    if isinstance(kv_scales, (str, bytes, dict)) or not hasattr(kv_scales, "__iter__"):
        raise EngineArgumentError(
            f"kv_scales must be one (k_scale, v_scale) per layer, got {type(kv_scales).__name__} {kv_scales!r:.60}"
        )
    pairs = list(kv_scales)
    if len(pairs) != layers:
        raise EngineArgumentError(f"kv_scales must be one (k_scale, v_scale) per layer ({layers}), got {len(pairs)}")
    for i, pair in enumerate(pairs):
        ok = (
            isinstance(pair, (tuple, list))
            and len(pair) == 2
            and all(
                isinstance(x, (int, float, np.floating, np.integer))
                and not isinstance(x, bool)
                and KV_SCALE_MIN <= float(x) <= KV_SCALE_MAX
                for x in pair
            )
        )
        if not ok:
            raise EngineArgumentError(
                f"kv_scales[{i}] must be a pair (k_scale, v_scale) of numbers from 2**-126 to 2**126, got {pair!r:.60}"
            )
    return [(float(k), float(v)) for k, v in pairs]


class ModelRunner:
    """The model, its per-layer KV pools ``[P, Hkv, D]`` and the forward pass over a Batch.

    ``kv_dtype="fp8"``: uint8 pools of e4m3 codes (:mod:`ropepool.fp8`), which the op writes and
    attention reads back dequantised; None: pools in the activations' dtype. ``kv_scales``: one
    ``(k_scale, v_scale)`` per layer for FP8 pools (:func:`ropepool.engine.kv_scales.calibrate`), or
    None for 1.0 everywhere, vLLM's default without calibrated scales.
    """

    def __init__(self, model, pool_rows: int, backend: str = "auto", kv_dtype: str | None = None, kv_scales=None):
        if not (kv_dtype is None or (isinstance(kv_dtype, str) and kv_dtype == "fp8")):
            raise EngineArgumentError(f"kv_dtype must be None (the activations' dtype) or 'fp8', got {kv_dtype!r:.60}")
        layers = len(model.model.layers)
        kv_scales = _kv_scales(kv_scales, kv_dtype, layers)
        self.arch = model_spec.architecture(model)
        self.rope_kwargs = model_spec.rope_kwargs(model)
        self.backend, _ = resolve(backend)  # an unknown or unavailable backend fails here, not mid-run
        if backend == "auto" and self.backend == "cpu":
            # The cpu backend runs the kernel on the host, so each layer's graph is evaluated before
            # its call: 30 waits a step. The mlx backend keeps the step one lazy graph, which serves
            # more tokens per second (benchmarks/engine_bench.py --smollm2 --backend cpu,mlx).
            self.backend = "mlx"
        self.model = model
        self.inner = model.model  # embed_tokens, layers, norm
        Hkv, D = self.rope_kwargs["num_kv_heads"], self.rope_kwargs["head_dim"]
        self.fp8 = kv_dtype == "fp8"
        pairs = kv_scales if kv_scales is not None else [(1.0, 1.0)] * layers
        self.scales = [dict(k_scale=float(k), v_scale=float(v)) if self.fp8 else {} for k, v in pairs]
        kw = self.rope_kwargs
        self.rope = rope_table(
            kw["head_dim"],
            kw["rope_base"],
            rotary_dim=kw.get("rotary_dim"),
            is_neox=kw.get("is_neox", True),
            rope_scaling=kw.get("rope_scaling"),
            max_position_embeddings=kw.get("max_position_embeddings"),
        )
        # Each layer's QK-norm (Qwen3) and FP8 settings, checked once: the layer half of the op reads them.
        self.fusions = [
            fusion_settings(
                head_dim=kw["head_dim"], fp8=self.fp8, **self.scales[i], **model_spec.qk_norm_kwargs(layer.self_attn)
            )
            for i, layer in enumerate(self.inner.layers)
        ]
        dtype = mx.uint8 if self.fp8 else self.activation_dtype()
        self.k_pools = [mx.zeros((pool_rows, Hkv, D), dtype) for _ in self.inner.layers]  # [P, Hkv, D] each
        self.v_pools = [mx.zeros((pool_rows, Hkv, D), dtype) for _ in self.inner.layers]

    def activation_dtype(self) -> mx.Dtype:
        """The dtype of k and v as layer 0 computes them: the pools' dtype.

        Not the embedding's: a quantized embedding gives float16 rows, which a float32 norm
        weight promotes to float32 before the projections.
        """
        layer = self.inner.layers[0]
        x = layer.input_layernorm(self.inner.embed_tokens(mx.array([0])))  # [1, hidden]
        return project_qkv(layer.self_attn, x)[1].dtype

    def run(self, batch: Batch) -> mx.array:
        """The float32 logits ``[len(batch.requests), vocab]`` at each request's last new token."""
        ctx = StepContext.of(batch, self.k_pools[0].shape[0])  # the op's plan: once for every layer
        h = self.inner.embed_tokens(mx.array(batch.tokens))  # [T, hidden]
        for i, layer in enumerate(self.inner.layers):
            x = layer.input_layernorm(h)
            h = h + self.attention(i, layer.self_attn, x, ctx)
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        h = self.inner.norm(h[ctx.last])  # [R, hidden]
        if self.model.args.tie_word_embeddings:
            logits = self.inner.embed_tokens.as_linear(h)
        else:
            logits = self.model.lm_head(h)
        return logits.astype(mx.float32)  # [R, vocab]

    def attention(self, i, attn, x, ctx: StepContext):
        """Layer ``i``'s attention output ``[T, hidden]`` for the step's tokens ``x [T, hidden]``."""
        T = x.shape[0]
        Hq, Hkv, D = attn.n_heads, attn.n_kv_heads, self.rope_kwargs["head_dim"]
        q, k, v = project_qkv(attn, x)
        q, k, v = q.reshape(T, Hq, D), k.reshape(T, Hkv, D), v.reshape(T, Hkv, D)  # [T, Hq, D], [T, Hkv, D]
        # RoPE on q and k, and k and v written to pool rows `slots`: the op this project is about, its
        # layer half. The step's half (positions and slots checked, the write planned) ran once, in ctx.
        # Qwen3: q and k RMS-normalised per head first, in the same call (self.fusions[i]).
        q, _, self.k_pools[i], self.v_pools[i] = apply_plan(
            q,
            k,
            v,
            self.k_pools[i],
            self.v_pools[i],
            ctx.plan,
            rope=self.rope,
            fusion=self.fusions[i],
            backend=self.backend,
        )
        q = q[:, None] if ctx.queries is None else q[ctx.queries]  # [R, N, Hq, D]
        o = mx.fast.scaled_dot_product_attention(
            q.transpose(0, 2, 1, 3),
            self.read_rows(i, "k", ctx.rows, q.dtype),
            self.read_rows(i, "v", ctx.rows, q.dtype),
            scale=attn.scale,
            mask=ctx.mask,
        )  # [R, Hq, N, D]
        o = o.transpose(0, 2, 1, 3).reshape(-1, Hq * D)  # [R * N, Hq*D]
        return attn.o_proj(o if ctx.outputs is None else o[ctx.outputs])  # [T, hidden]

    def save_rows(self, rows: list[int]) -> list[tuple[mx.array, mx.array]]:
        """Every layer's k and v at pool ``rows`` (``[n, Hkv, D]`` each), copied (evaluated now)."""
        index = mx.array(rows, mx.int32)
        saved = [(k[index], v[index]) for k, v in zip(self.k_pools, self.v_pools)]
        mx.eval(saved)
        return saved

    def restore_rows(self, rows: list[int], saved: list[tuple[mx.array, mx.array]]) -> None:
        """Write :meth:`save_rows`' copies back into pool ``rows``, through the one pool writer."""
        p = pool_write.plan(np.array(rows, np.int64), self.k_pools[0].shape[0], checked=True)
        for i, (k, v) in enumerate(saved):
            self.k_pools[i], self.v_pools[i] = pool_write.write(p, self.k_pools[i], self.v_pools[i], k, v)
        mx.eval(self.k_pools, self.v_pools)

    def read_rows(self, i: int, which: str, rows: mx.array, dtype: mx.Dtype) -> mx.array:
        """The read side of layer ``i``'s ``which`` ("k" or "v") pool at ``rows [R, L]``: ``[R, Hkv, L, D]``.

        FP8 pools give their e4m3 codes back as values of ``dtype``, only for the rows read.
        """
        out = (self.k_pools if which == "k" else self.v_pools)[i][rows]  # [R, L, Hkv, D]
        if self.fp8:
            out = fp8.decode(out, self.scales[i][f"{which}_scale"], dtype)
        return out.transpose(0, 2, 1, 3)  # [R, Hkv, L, D]
