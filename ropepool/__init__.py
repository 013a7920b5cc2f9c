"""ropepool: learn and explore ``rope_pool_fused``, NeoX RoPE fused with the KV-pool write.

Shapes use one vocabulary (:mod:`ropepool.shapes`): q ``[T, Hq, D]``, k and v ``[T, Hkv, D]``,
positions and slots ``[T]``, pools ``[P, Hkv, D]``.
"""

import _ropepool_blas

_ropepool_blas.load()  # OpenBLAS before MLX on Linux x86-64, also where ropepool-blas.pth did not run

from .backends import available_backends, best_backend
from .errors import RopePoolError
from .inputs import make_inputs
from .mla import rope_pool_fused_mla
from .op import rope_pool_fused
from .reference import rope_pool_reference
from .shapes import Shapes
from .teaching.catalog import CATALOG

__version__ = "0.1.0"


def load_ipython_extension(ipython) -> None:
    """``%load_ext ropepool`` in a notebook: ``%ropepool ARGS`` runs the command line with the kernel's own
    interpreter (:mod:`ropepool.teaching.magic`)."""
    from .teaching.magic import load_ipython_extension as load

    load(ipython)


__all__ = [
    "CATALOG",
    "RopePoolError",
    "Shapes",
    "available_backends",
    "best_backend",
    "make_inputs",
    "rope_pool_fused",
    "rope_pool_fused_mla",
    "rope_pool_reference",
]
