"""One forward pass over a step's flat batch: the model's own decoder layers, the engine's attention.

For every architecture the engine serves (:mod:`.model_spec`) a step is::

    h = embed(tokens)                  # [T, hidden]; Gemma-3 scales it by sqrt(hidden)
    h = layer(h) for every layer       # the model's own block: norms, residuals, MLP or experts
    logits = head(norm(h[last]))       # [R, vocab]: only at each request's last new token

Each decoder layer runs as the model wrote it, with one part replaced: its ``self_attn`` becomes
:class:`Attention`, which calls the model's projections, then the op this project is about (RoPE on q
and k, k and v written to the layer's pools: :func:`ropepool.op.apply_plan`, or for MLA's latent pool
:func:`ropepool.mla.apply_mla_plan`), then one attention call over the pool rows of every request.

**The caller's model is never changed.** The runner keeps a *view* of each decoder layer: a shallow
copy (``copy.copy``) that holds the very same modules as the model's layer, with the engine's
attention in its ``self_attn`` entry. Nothing is assigned into the model, so a Ctrl-C anywhere, a
second engine on the same model in another thread, or mlx-lm's own ``model(tokens)`` meanwhile all see
the model as it was. The step's :class:`Step` reaches the attention as the layer's ``cache`` argument.

Pools: ``[P, Hkv, D]`` k and v per layer (MLA: one latent ``[P, 1, R + rd]``), in the activations' dtype
or, with ``kv_dtype="fp8"``, uint8 e4m3 codes read back dequantised. Sliding layers (Gemma-3, GPT-OSS)
see the last ``window`` positions; with ``ring=True`` (the engine's ``prefix_cache=False``) they keep
at most that many rows per request, as a ring (:mod:`.window`), never more than ``P`` rows together.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from .. import fp8, pool_write
from ..backends import resolve
from ..fusion import KV_SCALE_MAX, KV_SCALE_MIN
from ..mla import apply_mla_plan
from ..op import StepPlan, apply_plan, plan_step
from ..validation import fusion_settings
from . import model_spec, parallel
from .context import StepContext, window_mask
from .errors import EngineArgumentError, UnsupportedModelError
from .journal import bookkeeping
from .protocols import RunnerParts
from .scheduler import Batch
from .window import Rings, WindowStep


@dataclass
class Step:
    """What the layers of one step read: the step's context, the sliding layers' mask (rows kept) or ring."""

    ctx: StepContext
    window_mask: mx.array | None = None  # bool [R, 1, N, L]
    ring: WindowStep | None = None
    ring_plan: StepPlan | None = None


def project_qkv(attn, x):
    """q ``[T, Hq*D]``, k and v ``[T, Hkv*D]`` from the layer's own projections."""
    if hasattr(attn, "qkv_proj"):  # Phi-3: one fused projection, split as its Attention does
        q_width, kv_width = attn.n_heads * attn.head_dim, attn.n_kv_heads * attn.head_dim
        return mx.split(attn.qkv_proj(x), [q_width, q_width + kv_width], axis=-1)
    return attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)


class Attention(nn.Module):
    """In a layer's view, in place of ``self_attn``: ``(x [1, T, hidden], mask, step)`` -> ``[1, T, hidden]``.

    ``attn`` is the model's own attention module (its projections, norms, scale and sinks are read,
    never changed); the model's mask argument is ignored (the step says who sees what)."""

    def __init__(self, runner: Runner, i: int, attn):
        super().__init__()
        self.attn = attn
        self._runner, self._i = runner, i

    def __call__(self, x, mask=None, cache=None):
        r = self._runner
        return (r.mla if r.spec.mla else r.gqa)(self._i, self.attn, x[0], cache)[None]


def layer_view(layer, attention: Attention):
    """A shallow copy of ``layer`` with ``attention`` as its ``self_attn``; ``layer`` itself is untouched."""
    view = copy.copy(layer)  # a new dict holding the same modules
    view.self_attn = attention
    return view


class Runner:
    """The model, its per-layer pools and the forward pass over a :class:`~.scheduler.Batch`.

    Parameters
    ----------
    model : an mlx-lm model of :data:`.model_spec.SUPPORTED`, float or quantized (``mlx.nn.quantize``)
    pool_rows : P, the rows of each layer's pool (a sliding layer's rings: at most P rows together)
    backend : the op's backend; "auto" serves the CPU with "mlx" (one lazy graph a step)
    kv_dtype : None (pools in the activations' dtype) or "fp8" (uint8 pools of e4m3 codes)
    kv_scales : with FP8, one ``(k_scale, v_scale)`` per layer (MLA: one scale, k_scale == v_scale);
        None: 1.0
    ring : sliding layers keep at most their window's rows per request (no prefix cache), P rows together
    parts : :class:`~.protocols.RunnerParts`, your own rotation, FP8 encoder or slot mapping
    group : an ``mx.distributed`` group the model was split over (:mod:`.parallel`); None: one process

    Raises
    ------
    UnsupportedModelError
        An architecture or RoPE the engine does not serve, a sliding window that is no int >= 1, or
        ``parts`` that do not fit the model (a rotation of your own on a model with QK-norm or MLA).
    EngineArgumentError
        ``kv_dtype`` or ``kv_scales`` out of range, or an unknown backend.
    """

    def __init__(
        self,
        model,
        pool_rows: int,
        backend: str = "auto",
        kv_dtype: str | None = None,
        kv_scales=None,
        ring: bool = False,
        parts: RunnerParts | None = None,
        group=None,
    ):
        if not (kv_dtype is None or (isinstance(kv_dtype, str) and kv_dtype == "fp8")):
            raise EngineArgumentError(f"kv_dtype must be None (the activations' dtype) or 'fp8', got {kv_dtype!r:.60}")
        self.spec = spec = model_spec.read(model)
        if group is not None:  # this rank's share of the heads; refused on every rank before any collective
            parallel.check_sharded(model, group, spec.kv_heads)
        self.model, self.inner = model, model.model
        layers = self.inner.layers
        self.fp8 = kv_dtype == "fp8"
        pairs = _kv_scales(kv_scales, kv_dtype, len(layers)) or [(1.0, 1.0)] * len(layers)
        if spec.mla and any(k != v for k, v in pairs):
            raise EngineArgumentError("kv_scales: MLA's latent pool has one scale per layer: pass k_scale == v_scale")
        self.scales = [dict(k_scale=k, v_scale=v) if self.fp8 else {} for k, v in pairs]
        self.parts = parts if parts is not None else RunnerParts()
        if self.parts.rotate is not None and (spec.mla or any(spec.qk_norms)):
            raise UnsupportedModelError(
                f"parts.rotate turns q and k of models without QK-norm or MLA; {spec.arch} has "
                f"{'MLA' if spec.mla else 'QK-norm'}: leave rotate=None (the op rotates)"
            )
        if spec.mla and self.parts.encode_e4m3 is not None:
            raise UnsupportedModelError(f"parts.encode_e4m3 writes k and v pools; {spec.arch}'s pool is MLA's latent")
        name, _ = resolve(backend)  # an unknown or unavailable backend fails here, not mid-run
        # The cpu backend runs the kernel on the host, each layer's graph evaluated before its call; the
        # mlx backend keeps the step one lazy graph (benchmarks/engine_bench.py --smollm2 --backend cpu,mlx).
        self.backend = "mlx" if backend == "auto" and name == "cpu" else name
        self.ropes = spec.ropes
        self.fusions = [
            None if spec.mla else fusion_settings(head_dim=spec.head_dim, fp8=self.fp8, **self.scales[i], **norm)
            for i, norm in enumerate(spec.qk_norms)
        ]
        dtype = mx.uint8 if self.fp8 else spec.pool_dtype
        if spec.mla:
            row, count = (1, spec.mla.kv_lora_rank + spec.mla.rope_dim), 1  # [c_kv ‖ rope(k_pe)]
        else:
            row, count = (spec.kv_heads, spec.head_dim), 2  # k and v (a tensor-parallel rank: its share)
        self.pool_rows = pool_rows
        self.pools = [[mx.zeros((pool_rows, *row), dtype) for _ in range(count)] for _ in layers]  # lazy
        window = spec.window
        # A request never holds more than P positions, so a ring of min(window, P) rows sees all a window would;
        # a ring holds at most its request's positions, so the rings together never need more than P rows.
        self.rings = Rings(min(window, pool_rows), pool_rows) if (ring and window) else None
        self.ring_layers = [w is not None and self.rings is not None for w in spec.windows]
        for i in np.flatnonzero(self.ring_layers):  # the ring group's pools: ring rows, not slots
            self.pools[i] = [mx.zeros((self.rings.capacity, *row), dtype) for _ in range(count)]
        self.journal = None  # the engine's undo log (set by the Engine): ring rows a failed step overwrote
        self.layers = [layer_view(layer, Attention(self, i, layer.self_attn)) for i, layer in enumerate(layers)]
        self.head = model.lm_head if "lm_head" in model else self.inner.embed_tokens.as_linear

    @property
    def pool_bytes(self) -> int:
        """The bytes every layer's pools hold now (the slot pools, and the sliding layers' rings as grown)."""
        return sum(p.nbytes for layer in self.pools for p in layer)

    def most_rows(self) -> list[int]:
        """Per layer, the most rows its pools will ever hold: ``P``, or the rings' limit (also ``P``)."""
        return [self.rings.limit if ring else self.pool_rows for ring in self.ring_layers]

    @property
    def k_pools(self) -> list:
        """The first pool of every layer: k, or MLA's latent pool."""
        return [p[0] for p in self.pools]

    @property
    def v_pools(self) -> list:
        return [p[1] for p in self.pools if len(p) > 1]

    def run(self, batch: Batch) -> mx.array:
        """The float32 logits ``[len(batch.requests), vocab]`` at each request's last new token."""
        if self.parts.slot_mapping is not None:  # the caller's positions and slots in place of the scheduler's
            batch.positions, batch.slots = (list(map(int, x)) for x in self.parts.slot_mapping(batch))
        ctx = StepContext.of(batch, self.pool_rows)  # the op's plan: checked once for every layer
        step = Step(ctx, window_mask(batch, self.spec.window) if self.spec.window else None)
        if self.rings is not None:
            self.rings.journal = self.journal
            step.ring = bookkeeping(self.rings.plan, batch)  # rows taken and given, each change recorded
            self._fit_ring_pools()
            self._save_ring_rows(step.ring.slots)
            step.ring_plan = plan_step(ctx.positions, step.ring.slots, self.rings.capacity)
        h = self.inner.embed_tokens(mx.array(batch.tokens))  # [T, hidden]
        if self.spec.embed_scale is not None:
            h = h * self.spec.embed_scale.astype(h.dtype)
        h = h[None]  # [1, T, hidden]: the shape the model's layers take
        for layer in self.layers:
            h = layer(h, None, step)
        return self.head(self.inner.norm(h[0][ctx.last])).astype(mx.float32)  # [R, vocab]

    def gqa(self, i: int, attn, x, step: Step):
        """Layer ``i``'s attention over k and v pools: ``x [T, hidden]`` -> ``[T, hidden]``."""
        T, D, ctx = x.shape[0], self.spec.head_dim, step.ctx
        q, k, v = (y.reshape(T, -1, D) for y in project_qkv(attn, x))  # [T, Hq, D], [T, Hkv, D] x 2
        ring = self.ring_layers[i]
        plan = step.ring_plan if ring else ctx.plan
        old_k, old_v = self.pools[i]
        # RoPE on q and k (after QK-norm) and the pool write, as the step's plan says: the op, its layer half
        q_rot, k_rot, k_pool, v_pool = apply_plan(
            q, k, v, old_k, old_v, plan, rope=self.ropes[i], fusion=self.fusions[i], backend=self.backend
        )
        if self.parts.rotate is not None or self.parts.encode_e4m3 is not None:
            q_rot, k_rot, k_pool, v_pool = self._own_parts(
                i, q, k, v, q_rot, k_rot, k_pool, v_pool, ctx.positions, plan
            )
        q = q_rot
        self.pools[i] = [k_pool, v_pool]
        q = q[:, None] if ctx.queries is None else q[ctx.queries]  # [R, N, Hq, D]
        if ring:  # the ring before this step's write (older positions), then this step's own k and v
            ws = step.ring
            keys = mx.concatenate([old_k[ws.old], self._as_pool(i, "k", k_rot[ws.new])], axis=1)  # [R, W-1+N, Hkv, D]
            values = mx.concatenate([old_v[ws.old], self._as_pool(i, "v", v[ws.new])], axis=1)
            mask = ws.mask
        else:
            keys, values = k_pool[ctx.rows], v_pool[ctx.rows]  # [R, L, Hkv, D]
            mask = step.window_mask if self.spec.windows[i] is not None else ctx.mask
        keys, values = self._read(i, "k", keys, q.dtype), self._read(i, "v", values, q.dtype)  # [R, Hkv, L, D]
        scale = attn.scale if hasattr(attn, "scale") else attn.sm_scale
        o = mx.fast.scaled_dot_product_attention(
            q.transpose(0, 2, 1, 3), keys, values, scale=scale, mask=mask, sinks=getattr(attn, "sinks", None)
        )  # [R, Hq, N, D]
        o = o.transpose(0, 2, 1, 3).reshape(o.shape[0] * o.shape[2], -1)  # [R * N, Hq*D]
        return attn.o_proj(o if ctx.outputs is None else o[ctx.outputs])  # [T, hidden]

    def mla(self, i: int, attn, x, step: Step):
        """DeepSeek-V3's multi-head latent attention over the latent pool: ``x [T, hidden]`` -> ``[T, hidden]``."""
        m, ctx = self.spec.mla, step.ctx
        T, R = x.shape[0], m.kv_lora_rank
        q = attn.q_proj(x) if not hasattr(attn, "q_a_proj") else attn.q_b_proj(attn.q_a_layernorm(attn.q_a_proj(x)))
        q_nope, q_pe = mx.split(q.reshape(T, -1, m.nope + m.rope_dim), [m.nope], axis=-1)  # [T, Hq, nope], [T, Hq, rd]
        c_kv, k_pe = mx.split(attn.kv_a_proj_with_mqa(x), [R], axis=-1)  # [T, R], [T, rd]
        c_kv = attn.kv_a_layernorm(c_kv)
        kv_scale = self.scales[i]["k_scale"] if self.fp8 else None
        # RoPE on q_pe and k_pe and the latent row [c_kv ‖ k_pe_rot] written: the op's MLA layer half
        q_pe, _, pool = apply_mla_plan(
            q_pe, k_pe.reshape(T, 1, -1), c_kv, self.pools[i][0], ctx.plan, rope=self.ropes[i], kv_scale=kv_scale,
            backend=self.backend,
        )  # fmt: skip
        self.pools[i] = [pool]
        rows = pool[ctx.rows][:, :, 0]  # [R_req, L, R + rd]
        if self.fp8:
            rows = fp8.decode(rows, kv_scale, q_pe.dtype)
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
        o = attn.unembed_out(o).transpose(0, 2, 1, 3)  # [R_req, N, Hq, v]
        o = o.reshape(o.shape[0] * o.shape[1], -1)  # [R_req * N, Hq*v]
        return attn.o_proj(o if ctx.outputs is None else o[ctx.outputs])  # [T, hidden]

    def _read(self, i: int, which: str, rows: mx.array, dtype: mx.Dtype) -> mx.array:
        """Pool rows ``[R, L, Hkv, D]`` as attention reads them: ``[R, Hkv, L, D]`` in ``dtype`` (FP8 decoded)."""
        if self.fp8:
            rows = fp8.decode(rows, self.scales[i][f"{which}_scale"], dtype)
        return rows.transpose(0, 2, 1, 3)

    def _as_pool(self, i: int, which: str, rows: mx.array) -> mx.array:
        """This step's k_rot or v rows as the pool holds them (FP8: their e4m3 codes)."""
        if not self.fp8:
            return rows
        return fp8.encode(rows.astype(mx.float32) / mx.array(np.float32(self.scales[i][f"{which}_scale"])))

    def _own_parts(self, i, q, k, v, q_rot, k_rot, k_pool, v_pool, positions, plan: StepPlan):
        """The caller's rotation and FP8 encoder (:class:`~.protocols.RunnerParts`) in place of the op's:
        q and k turned by ``parts.rotate``, and the rows the op wrote written over, through the one pool
        writer, with k_rot (or its codes from ``parts.encode_e4m3``) and v."""
        p = self.parts
        if p.rotate is not None:
            q_rot, k_rot = p.rotate(q, positions, self.ropes[i]), p.rotate(k, positions, self.ropes[i])
        k_rows, v_rows = k_rot, v
        if self.fp8:
            encode = p.encode_e4m3 or fp8.encode
            k_rows, v_rows = (
                encode(y.astype(mx.float32) / mx.array(np.float32(self.scales[i][f"{w}_scale"])))
                for y, w in ((k_rot, "k"), (v, "v"))
            )
        k_pool, v_pool = pool_write.write(
            plan.write, k_pool, v_pool, k_rows.astype(k_pool.dtype), v_rows.astype(v_pool.dtype)
        )
        return q_rot, k_rot, k_pool, v_pool

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
    number = (int, float, np.floating, np.integer)
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2) or not all(
            isinstance(x, number) and not isinstance(x, bool) and KV_SCALE_MIN <= float(x) <= KV_SCALE_MAX for x in pair
        ):
            raise EngineArgumentError(
                f"kv_scales[{i}] must be a pair (k_scale, v_scale) of numbers from 2**-126 to 2**126, got {pair!r:.60}"
            )
    return [(float(k), float(v)) for k, v in pairs]
