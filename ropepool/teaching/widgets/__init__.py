"""Interactive widgets for the notebook suite (ipywidgets), one module per topic.

Each builder returns the widget box and keeps its controls as attributes, so pytest can
set a value and check what changed without a browser.
"""

from . import errors, gqa, pool, rotation, scaling  # noqa: F401
