"""Shared test settings.

Under CI (``CI`` set, as ``.ci/run`` runs), hypothesis draws the same examples every run, so a
submission's result does not depend on luck; locally it explores new examples each run.
"""

import os

import pytest
from hypothesis import settings

# The 'cpu' kernel queues a background build of a library specialised to each new shape (same bits,
# faster rows). Hundreds of short processes here (nbmake kernels, CLI runs) would each compile a few
# (~40 shapes, ~100 s of a fresh machine's two cores) and wait at exit for the one running.
# tests/test_kernel_host.py specialises on purpose (host.specialise, or MAX_SPECIALISED patched).
os.environ.setdefault("ROPEPOOL_MAX_SPECIALISED", "0")
# No speed claim is asserted in a timed test: the notebooks' ratios of medians are printed under nbmake
# (ropepool.teaching.checks.check_timing) and asserted over five runs by `-m claims` (test_speed_claims.py).
os.environ.setdefault("ROPEPOOL_TIMING_CLAIMS", "report")

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


# Notebooks 08 and 09 run the real model, the longest notebooks (about 20 s each on a quiet machine). Collected last, one of them would end
# the run alone on one worker while the other sat idle; started first (then the other notebooks), the short
# tests fill in around them.
SLOWEST = ("08_a_real_model.ipynb", "09_why_slots.ipynb")


def pytest_collection_modifyitems(config, items):
    # stable: otherwise as collected; the notebooks (seconds each) before the short tests, so that the run does
    # not end with one worker on a notebook while the other has nothing left
    items.sort(key=lambda item: (not any(s in item.nodeid for s in SLOWEST), item.path.suffix != ".ipynb"))
    if "claims" not in (config.getoption("markexpr") or ""):  # the five-run claim checks: only with -m claims
        skip = pytest.mark.skip(reason="reruns a speed measurement five times (minutes): run with -m claims")
        for item in items:
            if "claims" in item.keywords:
                item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "claims: reruns a notebook's speed measurement five times and checks the "
        "claimed range (minutes; outside the timed suite: run with -m claims)",
    )


#: Places whose tests run on one worker, by group: the SmolLM2 load (a session fixture) happens once;
#: launches of ranks (each takes both cores) never overlap (but for the stranger's, whose ranks sleep in MLX's retries:
#: tests/test_tensor_parallel.py starts it in the background); the module's kernel cache is built once.
ONE_WORKER = {
    "tests/test_smollm2.py": "smollm2",
    "tests/test_tensor_parallel.py": "ranks",
    "notebooks/11b_the_pool_across_ranks.ipynb": "ranks",
    "tests/test_bad_inputs_and_caches.py::test_a_library_that_fails_to_load_falls_back_to_mlx": "host-cache",
}


@pytest.hookimpl(optionalhook=True)  # xdist's hook: absent under -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` (make test) with the group by place: the browser tests on one worker (one
    JupyterLab and one Chromium per run, not one per worker), each group of :data:`ONE_WORKER` on one
    worker, the other tests one by one.

    xdist's own groups come from ``xdist_group`` marks, which do not reach its scheduler under
    pytest 9.2 (the group rides in the node id, which pytest no longer lets a plugin change).
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ByPlace(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith("tests/e2e/"):
                return "e2e"
            group = next((g for place, g in ONE_WORKER.items() if nodeid.startswith(place)), None)
            return group or super()._split_scope(nodeid)

    return ByPlace(config, log)
