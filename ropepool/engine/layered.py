"""Models served through their own decoder layers: MLA (``deepseek_v3``), sliding windows (``gemma3_text``)
and sliding windows with attention sinks (``gpt_oss``).

These models differ from Llama in more than attention: Gemma-3 scales its embedding and norms around
each block, GPT-OSS routes its MLP to experts. So :class:`LayeredRunner` keeps the whole model, its
own ``__call__`` included, and for one forward pass puts an :class:`EngineAttention` in place of each
layer's ``self_attn``: the model's projections, then the op (the layer half of :func:`ropepool.rope_pool_fused`,
:func:`ropepool.op.apply_plan`, with the step's plan; for MLA's latent pool
:func:`ropepool.mla.apply_mla_plan`, the layer half of :func:`ropepool.rope_pool_fused_mla`) and one attention call over the pool rows
of every request's slot table. The step's context (:class:`~ropepool.engine.runner.StepContext`) is
built once, and the window masks once per window size.

=============  ========================================  =================================================
model          pool of one layer                         attention
=============  ========================================  =================================================
deepseek_v3    latent ``[P, 1, kv_lora_rank + rope_dim]``  q_nope absorbed into the latent (``embed_q``),
                                                         plus ``q_pe . k_pe``; output ``unembed_out``
gemma3_text    k, v ``[P, Hkv, D]``                      QK-norm ``(1 + w)``; 5 of 6 layers see only the
                                                         last ``sliding_window`` positions, with their own
                                                         RoPE base
gpt_oss        k, v ``[P, Hkv, D]``                      every other layer slides; a learned sink logit
                                                         per head joins every softmax
=============  ========================================  =================================================

With ``ring=True`` (the engine's ``prefix_cache=False``) the sliding layers keep only ``window`` rows
per request, as a ring (:mod:`.window`); otherwise they keep the rows of every position, as the full
layers do, and mask those older than the window (so that a cached prefix's window is there for
whoever shares it).
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from ..mla import apply_mla_plan
from ..models import from_config
from ..op import apply_plan, plan_step
from ..rope import rope_table
from ..validation import fusion_settings
from ..backends import resolve
from . import model_spec
from .runner import ModelRunner, StepContext
from .scheduler import Batch
from .window import Rings

LAYERED = model_spec.LAYERED  # the mlx-lm modules served here


def _is_sliding(arch: str, args, i: int) -> bool:
    if arch == "gemma3_text":
        return (i + 1) % args.sliding_window_pattern != 0
    if arch == "gpt_oss":
        kinds = args.layer_types or ["sliding_attention", "full_attention"] * (args.num_hidden_layers // 2)
        return kinds[i] == "sliding_attention"
    return False


def _rope(arch: str, args, sliding: bool) -> dict:
    """The op's RoPE keywords of one layer (Gemma-3's sliding layers turn with their own base, unscaled)."""
    if arch == "deepseek_v3":
        kw = dict(rope_base=float(args.rope_theta), is_neox=False)  # mlx-lm: traditional=True
        if args.rope_scaling:
            kw.update(rope_scaling=args.rope_scaling, max_position_embeddings=args.max_position_embeddings)
        return kw
    config = dict(
        num_attention_heads=args.num_attention_heads,
        num_key_value_heads=args.num_key_value_heads,
        head_dim=args.head_dim,
        hidden_size=args.hidden_size,
        rope_theta=float(args.rope_theta),
    )
    if arch == "gemma3_text" and sliding:
        config["rope_theta"] = float(args.rope_local_base_freq)
    elif getattr(args, "rope_scaling", None):
        config.update(
            rope_scaling=args.rope_scaling, max_position_embeddings=getattr(args, "max_position_embeddings", None)
        )
    kw = from_config(config).op_kwargs()
    return {k: v for k, v in kw.items() if k not in ("head_dim", "num_qo_heads", "num_kv_heads")}


def _qk_norm(attn) -> dict:
    """Gemma-3's QK-norm as the op takes it: its RMSNorm scales by ``(1 + w)``; ``{}`` without one."""
    if not hasattr(attn, "q_norm"):
        return {}
    return dict(
        q_norm_weight=1.0 + attn.q_norm.weight, k_norm_weight=1.0 + attn.k_norm.weight, norm_eps=float(attn.q_norm.eps)
    )


def window_mask(batch: Batch, window: int) -> mx.array:
    """bool ``[R, 1, N, L]``: query i of request r sees context row j when ``j <= c_r + i`` and
    ``j > c_r + i - window`` (mlx-lm's sliding mask: the last ``window`` positions, itself included)."""
    n = np.array(batch.lengths)  # [R]
    cached = np.array([r.num_cached for r in batch.requests])  # [R]
    N, L = int(n.max()), int((cached + n).max())
    i = np.minimum(np.arange(N)[None, :], n[:, None] - 1)  # [R, N]
    at = (cached[:, None] + i)[:, :, None]  # [R, N, 1], each query's position
    j = np.arange(L)[None, None, :]
    return mx.array(((j <= at) & (j > at - window))[:, None])


class EngineAttention(nn.Module):
    """In place of one layer's ``self_attn`` for one forward pass: ``(x [1, T, hidden], mask, cache)`` ->
    ``[1, T, hidden]``; the model's mask and cache are ignored (the step's context says who sees what)."""

    def __init__(self, runner: LayeredRunner, i: int, attn):
        super().__init__()
        self.runner, self.i, self.attn = runner, i, attn

    def __call__(self, x, mask=None, cache=None):
        r = self.runner
        out = (r.mla if r.arch == "deepseek_v3" else r.gqa)(self.i, self.attn, x[0], r.ctx)
        return out[None]


class LayeredRunner:
    """The model, its per-layer pools and the forward pass over a Batch, for :data:`LAYERED` models."""

    def __init__(self, model, pool_rows: int, backend: str, arch: str, ring: bool = False):
        self.model, self.arch, self.backend = model, arch, backend
        self.inner = model.model
        args = self.args = model.args
        self.sliding = [_is_sliding(arch, args, i) for i in range(len(self.inner.layers))]
        self.window = getattr(args, "sliding_window", None) if any(self.sliding) else None
        dtype = self.inner.embed_tokens.weight.dtype
        if arch == "deepseek_v3":
            width = args.kv_lora_rank + args.qk_rope_head_dim
            self.pools = [[mx.zeros((pool_rows, 1, width), dtype)] for _ in self.inner.layers]  # [P, 1, R + rd]
        else:
            Hkv, D = args.num_key_value_heads, args.head_dim
            self.pools = [
                [mx.zeros((pool_rows, Hkv, D), dtype), mx.zeros((pool_rows, Hkv, D), dtype)] for _ in self.inner.layers
            ]  # k, v [P, Hkv, D] each
        self.rings = (
            Rings(self.window, max(self.window, min(pool_rows, 4 * self.window))) if (ring and self.window) else None
        )
        if self.rings is not None:  # the sliding layer group's pools: ring rows, not slots
            for i in np.flatnonzero(self.sliding):
                self.pools[i] = [mx.zeros((self.rings.capacity, *p.shape[1:]), p.dtype) for p in self.pools[i]]
        self.ring_layers = [bool(s and self.rings is not None) for s in self.sliding]
        # each layer's RoPE table and QK-norm, made once (the plan is the step's)
        rotary = args.qk_rope_head_dim if arch == "deepseek_v3" else args.head_dim
        self.ropes = [rope_table(rotary, **_rope(arch, args, s)) for s in self.sliding]
        if arch != "deepseek_v3":
            self.fusions = [
                fusion_settings(head_dim=args.head_dim, fp8=False, **_qk_norm(layer.self_attn))
                for layer in self.inner.layers
            ]
        self.journal = None  # the engine's undo log (set by the Engine)
        self.ctx = self.window_mask = self.wstep = self.ring_plan = None

    @property
    def k_pools(self) -> list:
        """The first pool of every layer: k, or MLA's latent pool."""
        return [p[0] for p in self.pools]

    @property
    def v_pools(self) -> list:
        return [p[1] for p in self.pools if len(p) > 1]

    def run(self, batch: Batch) -> mx.array:
        """The float32 logits ``[len(batch.requests), vocab]`` at each request's last new token."""
        slot_layer = self.slot_layers()[0]
        ctx = self.ctx = StepContext.of(batch, self.pools[slot_layer][0].shape[0])  # the op's plan, checked once
        self.window_mask = window_mask(batch, self.window) if self.window else None
        if self.rings is not None:
            self.rings.journal = self.journal
            self.wstep = self.rings.plan(batch)
            self._fit_ring_pools()
            self._save_ring_rows(self.wstep.slots)
            self.ring_plan = plan_step(ctx.positions, self.wstep.slots, self.rings.capacity)
        layers = self.inner.layers
        originals = [layer.self_attn for layer in layers]
        try:
            for i, layer in enumerate(layers):
                layer.self_attn = EngineAttention(self, i, originals[i])
            logits = self.model(mx.array(batch.tokens)[None])[0]  # [T, vocab], the model's own forward
        finally:
            for layer, attn in zip(layers, originals):
                layer.self_attn = attn
            self.ctx = self.window_mask = self.wstep = self.ring_plan = None
        return logits[ctx.last].astype(mx.float32)  # [R, vocab]

    def gqa(self, i: int, attn, x, ctx: StepContext):
        """Gemma-3 and GPT-OSS: ``[T, hidden]`` -> ``[T, hidden]``."""
        T, Hq, Hkv, D = x.shape[0], self.args.num_attention_heads, self.args.num_key_value_heads, self.args.head_dim
        q = attn.q_proj(x).reshape(T, Hq, D)
        k, v = attn.k_proj(x).reshape(T, Hkv, D), attn.v_proj(x).reshape(T, Hkv, D)
        old_k, old_v = self.pools[i]
        ring = self.ring_layers[i]
        # RoPE (after QK-norm) and the pool write: the step's plan, this layer's table (the ring's plan for its group)
        q, k_rot, k_pool, v_pool = apply_plan(
            q,
            k,
            v,
            old_k,
            old_v,
            self.ring_plan if ring else ctx.plan,
            rope=self.ropes[i],
            fusion=self.fusions[i],
            backend=self.backend,
        )
        self.pools[i] = [k_pool, v_pool]
        q = q[:, None] if ctx.queries is None else q[ctx.queries]  # [R, N, Hq, D]
        if ring:  # the ring before this step's write (old positions), then this step's own k and v
            ws = self.wstep
            keys = mx.concatenate([old_k[ws.old], k_rot[ws.new]], axis=1)  # [R, W - 1 + N, Hkv, D]
            values = mx.concatenate([old_v[ws.old], v[ws.new]], axis=1)
            mask = ws.mask
        else:
            keys, values = k_pool[ctx.rows], v_pool[ctx.rows]  # [R, L, Hkv, D]
            mask = self.window_mask if self.sliding[i] else ctx.mask
        keys, values = keys.transpose(0, 2, 1, 3), values.transpose(0, 2, 1, 3)  # [R, Hkv, L, D]
        scale = getattr(attn, "scale", None) or attn.sm_scale
        o = mx.fast.scaled_dot_product_attention(
            q.transpose(0, 2, 1, 3), keys, values, scale=scale, mask=mask, sinks=getattr(attn, "sinks", None)
        )  # [R, Hq, N, D]
        o = o.transpose(0, 2, 1, 3).reshape(-1, Hq * D)  # [R * N, Hq*D]
        return attn.o_proj(o if ctx.outputs is None else o[ctx.outputs])  # [T, hidden]

    def mla(self, i: int, attn, x, ctx: StepContext):
        """DeepSeek-V3's multi-head latent attention over the latent pool: ``[T, hidden]`` -> ``[T, hidden]``."""
        a = self.args
        T, Hq, R, rd, nope = x.shape[0], a.num_attention_heads, a.kv_lora_rank, a.qk_rope_head_dim, a.qk_nope_head_dim
        q = attn.q_proj(x) if a.q_lora_rank is None else attn.q_b_proj(attn.q_a_layernorm(attn.q_a_proj(x)))
        q_nope, q_pe = mx.split(q.reshape(T, Hq, nope + rd), [nope], axis=-1)  # [T, Hq, nope], [T, Hq, rd]
        c_kv, k_pe = mx.split(attn.kv_a_proj_with_mqa(x), [R], axis=-1)  # [T, R], [T, rd]
        c_kv = attn.kv_a_layernorm(c_kv)
        # RoPE on q_pe and k_pe and the latent row [c_kv ‖ k_pe_rot] written: the op's MLA layer half, the step's plan
        q_pe, _, pool = apply_mla_plan(
            q_pe, k_pe.reshape(T, 1, rd), c_kv, self.pools[i][0], ctx.plan, rope=self.ropes[i], backend=self.backend
        )
        self.pools[i] = [pool]
        rows = pool[ctx.rows][:, :, 0]  # [R_req, L, R + rd]
        latent, k_rot = rows[..., None, :, :R], rows[..., None, :, R:]  # [R_req, 1, L, R], [R_req, 1, L, rd]
        pick = (lambda y: y[:, None]) if ctx.queries is None else (lambda y: y[ctx.queries])
        q_nope = pick(q_nope).transpose(0, 2, 1, 3)  # [R_req, Hq, N, nope]
        q_pe = pick(q_pe).transpose(0, 2, 1, 3)  # [R_req, Hq, N, rd]
        scores = (q_pe * attn.scale) @ k_rot.swapaxes(-1, -2)  # [R_req, Hq, N, L]
        if ctx.mask is not None:
            scores = mx.where(ctx.mask, scores, mx.array(mx.finfo(scores.dtype).min, scores.dtype))
        o = mx.fast.scaled_dot_product_attention(
            attn.embed_q(q_nope), latent, latent, scale=attn.scale, mask=scores
        )  # [R_req, Hq, N, R]
        o = attn.unembed_out(o).transpose(0, 2, 1, 3).reshape(-1, Hq * a.v_head_dim)  # [R_req * N, Hq*v]
        return attn.o_proj(o if ctx.outputs is None else o[ctx.outputs])  # [T, hidden]

    def release(self, finished) -> None:
        """Give back the rings of the requests that finished this step."""
        if self.rings is not None:
            self.rings.release(finished)

    def slot_layers(self) -> list[int]:
        """The layers whose pools the engine's slots index (every layer but the ring group's)."""
        return [i for i, r in enumerate(self.ring_layers) if not r]

    def save_rows(self, rows: list[int], layers=None) -> list[list[mx.array]]:
        """The pools of ``layers`` (default: :meth:`slot_layers`) at ``rows``, copied (evaluated now)."""
        index = mx.array(rows, mx.int32)
        saved = [[p[index] for p in self.pools[i]] for i in (self.slot_layers() if layers is None else layers)]
        mx.eval(saved)
        return saved

    def restore_rows(self, rows: list[int], saved, layers=None) -> None:
        """Write :meth:`save_rows`' copies back into pool ``rows``, through the one pool writer."""
        from .. import pool_write

        layers = self.slot_layers() if layers is None else layers
        p = pool_write.plan(np.array(rows, np.int64), self.pools[layers[0]][0].shape[0], checked=True)
        for i, layer in zip(layers, saved):
            self.pools[i] = [pool_write.write_one(p, pool, rows_) for pool, rows_ in zip(self.pools[i], layer)]
        mx.eval(self.pools)

    def _fit_ring_pools(self) -> None:
        """Grow the ring group's pools to the rings' capacity (rows kept, new rows zero)."""
        for i in np.flatnonzero(self.ring_layers):
            self.pools[i] = [
                p
                if p.shape[0] == self.rings.capacity
                else mx.concatenate([p, mx.zeros((self.rings.capacity - p.shape[0], *p.shape[1:]), p.dtype)])
                for p in self.pools[i]
            ]

    def _save_ring_rows(self, slots: mx.array) -> None:
        """The ring rows this step writes, copied into the undo log (their old k and v matter again if the
        step is undone)."""
        if self.journal is None or not self.journal.active:
            return
        rows = sorted(set(np.array(slots).tolist()) - {-1})
        if rows:
            layers = [int(i) for i in np.flatnonzero(self.ring_layers)]
            self.journal.record(self.restore_rows, rows, self.save_rows(rows, layers), layers)


def make_runner(
    model, pool_rows: int, backend: str = "auto", kv_dtype: str | None = None, kv_scales=None, ring: bool = False
):
    """The runner of ``model``: :class:`LayeredRunner` for :data:`LAYERED` models (sliding layers on rings
    with ``ring``), else :class:`~ropepool.engine.runner.ModelRunner`."""
    arch = model_spec.architecture(model)
    if arch not in LAYERED:
        return ModelRunner(model, pool_rows, backend, kv_dtype, kv_scales)
    if kv_dtype is not None or kv_scales is not None:
        raise ValueError(f"kv_dtype='fp8' is served for {', '.join(model_spec.SUPPORTED)} models, not {arch}")
    name, _ = resolve(backend)  # an unknown or unavailable backend fails here, not mid-run
    return LayeredRunner(model, pool_rows, "mlx" if backend == "auto" and name == "cpu" else name, arch, ring)
