"""nbmake runs the notebooks; the ones that need the real model skip, with the loader's reason, without it.

The build-it notebooks (12-14) run with every part filled in by the reference (their demo switch,
``ROPEPOOL_TRACK=solutions``, which the kernels nbmake starts inherit), unless it is set otherwise.
"""

import os

import pytest

os.environ.setdefault("ROPEPOOL_TRACK", "solutions")

NEEDS_MODEL = {"08_a_real_model.ipynb", "09_why_slots.ipynb"}


def pytest_collection_modifyitems(config, items):
    wanted = [item for item in items if item.path.name in NEEDS_MODEL]
    if not wanted:
        return
    from ropepool.loaders.fetch import ModelUnavailable
    from ropepool.loaders.smollm2 import fetch_smollm2

    try:
        fetch_smollm2()  # cached after `make setup`; a download otherwise
    except ModelUnavailable as err:
        for item in wanted:
            item.add_marker(pytest.mark.skip(reason=str(err)))
