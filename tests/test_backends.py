"""available_backends, backend choice, and the doctor telling the truth about this machine."""

import subprocess
import sys

import mlx.core as mx
import pytest

import ropepool
from ropepool import CATALOG, rope_pool_fused
from ropepool.teaching.checks import expect_error


def test_backends_listed_in_preference_order():
    assert list(ropepool.available_backends()) == ["metal", "cuda", "cpu", "mlx"]


def test_cpu_status_matches_the_compiler():
    from ropepool.kernels import emulator

    status = ropepool.available_backends()["cpu"]
    if emulator.compiler() is None:
        assert not status.available and "no C++ compiler" in status.reason
    elif mx.default_device() == mx.cpu:
        assert status.available, status.reason
        assert status.reason == "fused kernel compiled by g++ for this CPU, run on MLX's buffers"
    else:  # a GPU is MLX's default device: the host build would read GPU memory
        assert not status.available and status.reason.startswith("MLX's default device is")


def test_mlx_runs_everywhere():
    status = ropepool.available_backends()["mlx"]
    assert status.available and str(mx.default_device()) in status.reason


def test_metal_status_matches_mlx():
    status = ropepool.available_backends()["metal"]
    if not mx.metal.is_available():
        assert not status.available and status.reason.startswith("no Metal back-end on this machine")
        assert str(status).startswith("metal: no Metal back-end on this machine")
    elif status.available:
        assert status.reason.startswith("fused kernel through mx.fast.metal_kernel on")
    else:  # Metal is there: only the kernel's build or self-check can have failed, and it says so
        assert status.reason.startswith("the fused kernel"), status.reason


def test_cuda_status_matches_mlx():
    status = ropepool.available_backends()["cuda"]
    if not mx.cuda.is_available():
        assert not status.available and "no CUDA back-end" in status.reason
    elif status.available:
        assert status.reason.startswith("fused kernel through mx.fast.cuda_kernel on")
    else:  # CUDA is there: only the kernel's build or self-check can have failed, and it says so
        assert status.reason.startswith("the fused kernel"), status.reason


def test_auto_is_best_available():
    statuses = ropepool.available_backends()
    best = ropepool.best_backend()
    assert statuses[best].available
    assert all(not statuses[n].available for n in list(statuses)[: list(statuses).index(best)])


@pytest.mark.parametrize("backend", ["metal", "cuda"])
def test_unavailable_backend_is_a_clear_error(backend):
    if ropepool.available_backends()[backend].available:
        pytest.skip(f"{backend} runs here")
    kw = CATALOG["backend_unavailable"].fixed()
    kw["backend"] = backend
    err = expect_error("backend_unavailable", rope_pool_fused, **kw)
    assert ropepool.available_backends()[backend].reason in err.hint


def test_doctor_tells_the_truth():
    out = subprocess.run([sys.executable, "-m", "ropepool", "doctor"], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert any(line.startswith("mlx ") and mx.__version__ in line for line in lines)
    for name, status in ropepool.available_backends().items():
        verdict = "runs: " if status.available else "does not run: "
        assert f"backend {name}" in out.stdout and f"{verdict}{status.reason}" in out.stdout
    assert any(line.startswith("backend='auto' picks") and line.endswith(ropepool.best_backend()) for line in lines)


def test_doctor_names_the_compiler_for_the_kernel_cpu_check():
    from ropepool.kernels import emulator

    out = subprocess.run([sys.executable, "-m", "ropepool", "doctor"], capture_output=True, text=True, check=True)
    line = next(line for line in out.stdout.splitlines() if line.startswith("kernel CPU check"))
    cxx = emulator.compiler()
    assert (cxx in line) if cxx else ("no C++ compiler" in line)
