"""The loop: add requests, step until every one has finished, return tokens and logits."""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx

from .allocator import Allocator
from .request import Request
from .runner import ModelRunner
from .scheduler import Batch, Scheduler


@dataclass
class Result:
    """One request's output: ``tokens`` (the new token ids, greedy) and ``logits`` ``[len(tokens), vocab]`` float32."""

    tokens: list[int]
    logits: mx.array


class Engine:
    """A continuous-batching engine over one mlx-lm model and one pool of ``pool_rows`` rows per layer.

    Each :meth:`step` is one forward pass: :meth:`Scheduler.schedule`, :meth:`ModelRunner.run`,
    :meth:`Scheduler.postprocess`. ``stop``: a token id (e.g. a chat model's end-of-turn) that
    finishes a request as soon as it is chosen; its rows are freed in that same step.
    """

    def __init__(self, model, *, pool_rows: int, backend: str = "auto", stop: int | None = None,
                 kv_dtype: str | None = None, kv_scales=None):
        if isinstance(pool_rows, bool) or not isinstance(pool_rows, int) or pool_rows <= 0:
            raise ValueError(f"pool_rows must be a positive int, got {pool_rows!r}")
        vocab = model.args.vocab_size
        if stop is not None and (isinstance(stop, bool) or not isinstance(stop, int) or not 0 <= stop < vocab):
            raise ValueError(f"stop must be None or a token id in [0, {vocab}) (the model's vocab), got {stop!r}")
        self.runner = ModelRunner(model, pool_rows, backend, kv_dtype, kv_scales)
        self.allocator = Allocator(pool_rows)
        self.scheduler = Scheduler(self.allocator)
        self.vocab_size = vocab
        self.stop = stop
        self.requests: list[Request] = []
        self.steps = 0

    def add_request(self, prompt, max_new_tokens: int) -> Request:
        """Queue one prompt (a non-empty list of token ids).

        Raises
        ------
        ValueError
            An empty prompt, a token id outside ``[0, vocab)``, or ``max_new_tokens < 1``.
        PoolTooSmallError
            The request needs more rows than the pool has.
        """
        rid = len(self.requests)
        prompt = [int(t) for t in prompt]
        if not prompt:
            raise ValueError(f"prompt {rid} is empty: a request needs at least one token")
        bad = [t for t in prompt if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(f"prompt {rid}: token id {bad[0]} outside [0, {self.vocab_size}) (the model's vocab)")
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens of prompt {rid} must be an int >= 1, got {max_new_tokens!r}")
        req = Request(rid, prompt, max_new_tokens, stop=self.stop)
        self.scheduler.add(req)
        self.requests.append(req)
        return req

    def step(self) -> Batch:
        """Run one forward pass and append one token to each request in it.

        If the pass raises (an error, or a KeyboardInterrupt), the engine is left as it was
        before the step and the exception is raised again: stepping on loses nothing.
        """
        batch = self.scheduler.schedule()
        if not batch.requests:
            raise RuntimeError("step: nothing to run (no request waiting or running)")
        try:
            logits = self.runner.run(batch)  # [len(batch.requests), vocab]
            mx.eval(logits)  # the lazy pass runs here, inside the try
        except BaseException:
            self.scheduler.unschedule(batch)
            raise
        self.scheduler.postprocess(batch, logits)
        self.steps += 1
        return batch

    @property
    def done(self) -> bool:
        return self.scheduler.done


def generate(model, prompts, max_new_tokens, *, pool_rows: int, backend: str = "auto", on_step=None,
             stop: int | None = None, kv_dtype: str | None = None, kv_scales=None) -> list:
    """Serve ``prompts`` together on ``model`` and return one :class:`Result` per prompt, in order.

    Parameters
    ----------
    model : an mlx-lm model of ``llama`` (Llama, Mistral), ``qwen2``, ``phi3`` or ``qwen3``
    prompts : list of lists of token ids
    max_new_tokens : int, or one int per prompt: the most new tokens each may write
    pool_rows : int, P, the rows of each layer's KV pool; may be far fewer than all requests'
        tokens together (then requests wait, and finished requests' rows are reused)
    backend : the ``rope_pool_fused`` backend ("auto", "cpu", "mlx", "metal", "cuda")
    on_step : optional ``f(engine, batch)``, called after every step
    stop : optional token id (e.g. ``<|im_end|>``): a request that chooses it finishes there, that
        token its last, and frees its rows at once
    kv_dtype : None (pools in the activations' dtype) or "fp8" (uint8 pools of e4m3 codes, read back
        dequantised; :class:`ModelRunner`)
    kv_scales : with "fp8", one ``(k_scale, v_scale)`` per layer
        (:func:`ropepool.engine.kv_scales.calibrate`); None: 1.0 everywhere

    Returns
    -------
    list of Result: ``.tokens`` (greedy new tokens, ending at ``stop`` if chosen) and ``.logits``
    ``[len(tokens), vocab]`` float32

    Raises
    ------
    UnsupportedModelError
        Not a supported architecture, or RoPE the op does not compute.
    PoolTooSmallError
        A request needs more rows than ``pool_rows``; raised before any step runs.
    ValueError
        An empty prompt, a token id outside the vocab, ``max_new_tokens`` < 1 or of the wrong
        length, ``pool_rows`` not a positive int, ``stop`` not a token id.

    Example
    -------
    >>> import mlx.core as mx
    >>> from mlx_lm.models import llama
    >>> mx.random.seed(0)
    >>> model = llama.Model(llama.ModelArgs(model_type="llama", hidden_size=32, num_hidden_layers=1,
    ...     intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, vocab_size=64))
    >>> out = generate(model, [[1, 2, 3], [4, 5]], max_new_tokens=[2, 3], pool_rows=8)
    >>> [len(r.tokens) for r in out], out[1].logits.shape
    ([2, 3], (3, 64))
    """
    counts = [max_new_tokens] * len(prompts) if isinstance(max_new_tokens, int) else list(max_new_tokens)
    if len(counts) != len(prompts):
        raise ValueError(f"max_new_tokens: {len(counts)} counts for {len(prompts)} prompts")
    engine = Engine(model, pool_rows=pool_rows, backend=backend, stop=stop, kv_dtype=kv_dtype, kv_scales=kv_scales)
    requests = [engine.add_request(p, n) for p, n in zip(prompts, counts)]  # every refusal before a step
    while not engine.done:
        batch = engine.step()
        if on_step is not None:
            on_step(engine, batch)
    return [Result(r.tokens, mx.stack(r.logits)) for r in requests]
