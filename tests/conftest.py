"""Shared test settings.

Under CI (``CI`` set, as ``.ci/run`` runs), hypothesis draws the same examples every run, so a
submission's result does not depend on luck; locally it explores new examples each run.
"""

import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_sessionstart(session):
    """Build the C++ kernel libraries before any test, as ``make test``'s set-up does, so a run on an
    empty kernel cache does not print a build message into the first test that calls the op (a
    doctest would read it as output)."""
    from ropepool.cli.doctor import build_kernels

    build_kernels()


@pytest.fixture(scope="session", params=["mlx", "cpu"])
def backend(request):
    """Each backend that can run on a CPU: MLX ops, and the kernel's host build (needs g++)."""
    if request.param == "cpu":
        from ropepool.kernels import host

        if host.unavailable_reason() is not None:
            pytest.skip(host.unavailable_reason())
    return request.param


# The real model's long runs (notebooks 08 and 09 under nbmake and in the browser, and the fixture of
# tests/test_smollm2.py) each take a minute or more. Collected last, one of them would end the run
# alone on one worker while the other sat idle; started first, on different workers, the short
# tests fill in around them.
SLOWEST = ("08_a_real_model.ipynb", "09_why_slots.ipynb", "tests/test_smollm2.py::")


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: not any(s in item.nodeid for s in SLOWEST))  # stable: otherwise as collected
