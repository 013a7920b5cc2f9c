"""Which implementations run here, and the choice ``backend="auto"`` makes.

=======  ==============================================================
metal    the fused kernel through ``mx.fast.metal_kernel`` (Apple Silicon)
cuda     the fused kernel through ``mx.fast.cuda_kernel`` (NVIDIA, mlx[cuda13])
cpu      the fused kernel compiled for this CPU by g++, on MLX's buffers (needs a C++ compiler)
mlx      MLX ops, any MLX device, the CPU included
=======  ==============================================================

``auto`` takes the first that runs, in that order.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import mlx.core as mx

from . import kernels
from .errors import fail
from .inplace import INPLACE_BACKENDS
from .mlx_ops import rotate_mlx

PREFERENCE = ("metal", "cuda", "cpu", "mlx")


@dataclass(frozen=True)
class BackendStatus:
    name: str
    available: bool
    reason: str  # where it runs, or why it does not

    def __str__(self) -> str:
        return f"{self.name}: {'runs: ' if self.available else ''}{self.reason}"


def _kernel_statuses() -> dict[str, tuple[BackendStatus, Callable | None]]:
    return {
        name: (BackendStatus(name, runs, reason), impl) for name, (runs, reason, impl) in kernels.statuses().items()
    }


@lru_cache(maxsize=1)
def _registry() -> dict[str, tuple[BackendStatus, Callable | None]]:
    """Worked out once per process: the back-ends a process has do not change."""
    reg = dict(_kernel_statuses())
    reg["mlx"] = (BackendStatus("mlx", True, f"MLX ops on {mx.default_device()}"), rotate_mlx)
    return {name: reg[name] for name in PREFERENCE}


def available_backends() -> dict[str, BackendStatus]:
    """Each backend's status, in ``auto``'s order of preference.

    Example
    -------
    >>> import ropepool
    >>> ropepool.available_backends()["mlx"].available
    True
    """
    return {name: status for name, (status, _) in _registry().items()}


def best_backend() -> str:
    """The backend ``auto`` picks here."""
    return next(name for name, s in available_backends().items() if s.available)


_RESOLVED: dict = {}  # (backend, inplace) -> (the registry it was resolved in, (name, rotate))


def resolve(backend: str, inplace: bool = False) -> tuple[str, Callable]:
    """``(name, rotate)`` for ``backend``, or a RopePoolError saying why not.

    ``rotate(q, k, v, positions, *, rope, fusion)`` gives ``(q_rot, k_rot, k_rows, v_rows)``: the
    rotated rows and the rows the pools take (:mod:`ropepool.pool_write` writes them).

    With ``inplace``, ``auto`` picks among the backends that write pools in place
    (:data:`ropepool.inplace.INPLACE_BACKENDS`), and naming another one is an error.
    """
    reg = _registry()
    key = (backend, inplace) if type(backend) is str and type(inplace) is bool else None
    hit = _RESOLVED.get(key) if key is not None else None
    if hit is not None and hit[0] is reg:
        return hit[1]
    if not isinstance(backend, str):
        raise fail(
            "unknown_backend",
            expected=f"a string: 'auto' or one of {list(reg)}",
            got=f"{backend!r} ({type(backend).__name__})",
            hint="Name one backend, as a string.",
        )
    if backend == "auto":
        backend = next(
            name for name, (status, _) in reg.items() if status.available and (name in INPLACE_BACKENDS or not inplace)
        )
    if backend not in reg:
        raise fail(
            "unknown_backend",
            expected=f"'auto' or one of {list(reg)}",
            got=repr(backend),
            hint="See ropepool.available_backends().",
        )
    status, impl = reg[backend]
    if not status.available:
        raise fail(
            "backend_unavailable",
            expected=f"a backend that runs here: {best_backend()!r} or 'auto'",
            got=repr(backend),
            hint=f"{status}.",
        )
    if inplace and backend not in INPLACE_BACKENDS:
        raise fail(
            "inplace_unsupported",
            got=f"backend {backend!r}",
            expected=f"one of {list(INPLACE_BACKENDS)}",
            hint="The fused GPU kernels produce new rows for a scatter, not host writes: "
            "use backend='auto', or call without inplace=True.",
        )
    if key is not None:
        _RESOLVED[key] = reg, (backend, impl)
    return backend, impl
