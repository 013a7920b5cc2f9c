"""A small continuous-batching engine that serves mlx-lm models through ``rope_pool_fused``.

One idea per file, in the order a step runs: :mod:`.request` (a request and its slot table),
:mod:`.allocator` (the free list over pool rows, in pages, reference-counted), :mod:`.radix` (the
prefix cache: a radix tree over token ids, beside the allocator), :mod:`.scheduler` (who runs this
step: admission, chunked prefill, preemption), :mod:`.runner` (the forward pass), :mod:`.generate`
(the loop). :mod:`.journal` is a step's undo log (a failed step is undone, not copied beforehand);
:mod:`.protocols` writes down the interfaces a part of your own must meet to plug into
``Engine(allocator=..., prefix_cache=..., scheduler=...)``. :mod:`.model_spec` reads the model's
architecture and RoPE parameters; :mod:`.arguments` checks token ids and counts. :mod:`.tiny_models` builds the small random-weight
mlx-lm models the tests and benchmarks serve. The real model it serves (SmolLM2) is loaded by
:mod:`ropepool.loaders`.
"""

from .allocator import Allocator
from .errors import EngineArgumentError, PoolTooSmallError, UnsupportedModelError, WrongThreadError
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
    "WrongThreadError",
    "generate",
    "rope_kwargs",
]
