"""Plots for the notebook suite: importable, tested by pytest on the figure's data.

One module per topic; each function returns a matplotlib Figure.
"""

from . import beyond, determinism, engine, fusions, gqa, kernel, pool, real_model, rotation, scaling, sharing  # noqa: F401
