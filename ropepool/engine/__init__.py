"""A small continuous-batching engine that serves mlx-lm models through ``rope_pool_fused``.

One idea per file, in the order a step runs: :mod:`.request` (a request and its slot table),
:mod:`.allocator` (the free list over pool rows, in pages, reference-counted), :mod:`.radix` (the
prefix cache: a radix tree over token ids, beside the allocator), :mod:`.scheduler` (who runs this
step: admission, chunked prefill, preemption), :mod:`.context` (what every layer of a step reads),
:mod:`.runner` (the forward pass: the model's own layers, the engine's attention), :mod:`.generate`
(the loop). :mod:`.journal` is a step's undo log (a failed step is undone, not copied beforehand);
:mod:`.protocols` writes down the interfaces a part of your own must meet to plug into
``Engine(allocator=..., prefix_cache=..., scheduler=..., parts=...)``. :mod:`.model_spec` reads
what the engine needs of a model (RoPE per layer, QK-norm, windows, MLA, the pools' dtype);
:mod:`.window` keeps sliding layers' rings; :mod:`.kv_scales` measures FP8 scales; :mod:`.parallel`
splits a model over tensor-parallel ranks; :mod:`.arguments` checks token ids and counts and :mod:`.errors`
names the engine's refusals; :mod:`.mlx_lm_loop` is mlx-lm's own greedy loop, the reference results are
checked against; :mod:`.recording` keeps a run's steps, read from their undo logs, to replay and draw. The models
it serves come from :mod:`ropepool.loaders` (SmolLM2, and the tiny random-weight ones of
:mod:`ropepool.loaders.tiny`).
"""

from .allocator import Allocator
from .errors import EngineArgumentError, PoolTooSmallError, UnsupportedModelError, WatcherError, WrongThreadError
from .generate import Engine, Result, generate
from .model_spec import SUPPORTED, rope_kwargs
from .radix import RadixCache
from .request import Request, Status
from .scheduler import Batch, Scheduler, Stats

__all__ = [
    "SUPPORTED",
    "Allocator",
    "Batch",
    "Engine",
    "EngineArgumentError",
    "PoolTooSmallError",
    "RadixCache",
    "Request",
    "Result",
    "Scheduler",
    "Stats",
    "Status",
    "UnsupportedModelError",
    "WatcherError",
    "WrongThreadError",
    "generate",
    "rope_kwargs",
]
