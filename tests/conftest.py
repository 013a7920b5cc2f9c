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


@pytest.fixture(scope="session", params=["mlx", "cpu"])
def backend(request):
    """Each backend that can run on a CPU: MLX ops, and the kernel's host build (needs g++)."""
    if request.param == "cpu":
        from ropepool.kernels import host

        if host.unavailable_reason() is not None:
            pytest.skip(host.unavailable_reason())
    return request.param
