"""A small continuous-batching engine that serves mlx-lm models through ``rope_pool_fused``.

One idea per file, in the order a step runs: :mod:`.request` (a request and its slot table),
:mod:`.allocator` (the free list over pool rows), :mod:`.scheduler` (who runs this step),
:mod:`.runner` (the forward pass), :mod:`.generate` (the loop). :mod:`.model_spec` reads the
model's architecture and RoPE parameters.
"""

from .allocator import Allocator
from .errors import PoolTooSmallError, UnsupportedModelError
from .generate import Engine, Result, generate
from .model_spec import SUPPORTED, rope_kwargs
from .request import Request, Status
from .scheduler import Batch, Scheduler

__all__ = ["SUPPORTED", "Allocator", "Batch", "Engine", "PoolTooSmallError", "Request", "Result", "Scheduler",
           "Status", "UnsupportedModelError", "generate", "rope_kwargs"]
