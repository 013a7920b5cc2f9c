"""nbmake runs the notebooks; the ones that need the real model skip, with the loader's reason, without it.
A notebook that tests/e2e/test_lab.py runs whole in JupyterLab in the same session (Run All in Chromium,
no error output, every cell run) is not run a second time by nbmake: it says so as its skip reason.

The build-it notebooks (12-14) run with every part filled in by the reference (their demo switch,
``ROPEPOOL_TRACK=solutions``, which the kernels nbmake starts inherit), unless it is set otherwise.
"""

import importlib.util
import os
from pathlib import Path

import pytest

os.environ.setdefault("ROPEPOOL_TRACK", "solutions")

NEEDS_MODEL = {"08_a_real_model.ipynb", "09_why_slots.ipynb"}


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected theirs
def pytest_collection_modifyitems(config, items):
    _without_model(items)
    _run_in_the_lab(items)


def _without_model(items) -> None:
    """The notebooks that need the real model skip, with the loader's reason, where it cannot be had."""
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


CHROMIUM = Path("/usr/bin/chromium")  # the e2e tests' browser (tests/e2e/conftest.py)


def _run_in_the_lab(items) -> None:
    """nbmake's run of a notebook that the browser test collected in this session runs whole is skipped."""
    if not CHROMIUM.exists() or importlib.util.find_spec("playwright") is None:
        return  # the browser tests will skip: nbmake runs every notebook
    in_lab = {
        item.callspec.params["path"].name: item.nodeid
        for item in items
        if getattr(item, "originalname", "") == "test_notebook_in_jupyterlab"
    }
    for item in items:
        if item.path.suffix == ".ipynb" and item.path.name in in_lab:
            item.add_marker(pytest.mark.skip(reason=f"run whole in JupyterLab by {in_lab[item.path.name]}"))
