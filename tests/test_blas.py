"""OpenBLAS under MLX on Linux x86-64: loaded before MLX by the start-up hook, switched off by
ROPEPOOL_BLAS=off, a failed load falls back with one line, and the products stay within float32
error of MLX's own (reference) BLAS.

Each case runs in a fresh Python of this venv: which BLAS libmlx binds is fixed once per process.
"""

import importlib.util
import json
import os
import site
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import _ropepool_blas

ROOT = Path(__file__).resolve().parent.parent
HOOK = [Path(p) / "ropepool-blas.pth" for p in site.getsitepackages()]

needs_openblas = pytest.mark.skipif(
    not (_ropepool_blas.applies() and _ropepool_blas._openblas()),
    reason="OpenBLAS is loaded on Linux x86-64 only, from ngsolve-openblas (not installed in this venv: make setup)",
)
needs_hook = pytest.mark.skipif(
    not any(p.exists() for p in HOOK), reason="ropepool-blas.pth is not installed in this venv (make setup installs it)"
)

# Seeded float32 products, transposes and a batch included (MLX passes those to sgemm as flags).
PRODUCTS = r"""
import json, sys
import numpy as np
{first}
rng = np.random.default_rng(7)
a, b = rng.standard_normal((257, 300), np.float32), rng.standard_normal((300, 129), np.float32)
c = rng.standard_normal((3, 64, 96), np.float32)
out = {{
    "a@b": np.array(mx.array(a) @ mx.array(b)).tolist(),
    "aT.T@b": np.array(mx.array(a.T.copy()).T @ mx.array(b)).tolist(),
    "c@cT": np.array(mx.array(c) @ mx.array(c).transpose(0, 2, 1)).tolist(),
}}
from ropepool import blas
import _ropepool_blas
print(json.dumps({{"products": out, "bound": blas.sgemm_library(), "state": _ropepool_blas.STATE}}))
"""


def run(first: str = "import mlx.core as mx", env: dict | None = None):
    """The products, the library libmlx bound cblas_sgemm to, the hook's state, and stderr."""
    full = {k: v for k, v in os.environ.items() if k != "ROPEPOOL_BLAS"}
    full.update(PYTHONPATH=str(ROOT), **(env or {}))
    done = subprocess.run(
        [sys.executable, "-c", PRODUCTS.format(first=first)],
        capture_output=True,
        text=True,
        env=full,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def expected():
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((257, 300), np.float32), rng.standard_normal((300, 129), np.float32)
    c = rng.standard_normal((3, 64, 96), np.float32)
    a, b, c = (x.astype(np.float64) for x in (a, b, c))  # the same float32 inputs, multiplied exactly
    return {
        "a@b": (a @ b, np.abs(a) @ np.abs(b), 300),
        "aT.T@b": (a @ b, np.abs(a) @ np.abs(b), 300),
        "c@cT": (c @ c.transpose(0, 2, 1), np.abs(c) @ np.abs(c).transpose(0, 2, 1), 96),
    }


def assert_float32_close(products):
    """Each product within the float32 bound k * eps * (|A| @ |B|) of the float64 product of the same inputs."""
    for name, (exact, magnitude, k) in expected().items():
        got = np.array(products[name])
        bound = k * np.finfo(np.float32).eps * magnitude
        assert np.all(np.abs(got - exact) <= bound), (
            f"{name}: max error {np.max(np.abs(got - exact) / bound):.2f}x the bound"
        )


@needs_openblas
@needs_hook
def test_import_mlx_alone_binds_openblas():
    """A plain `import mlx.core` (a notebook's first cell) gets OpenBLAS, through the .pth hook."""
    out, err = run()
    assert out["state"]["status"] == "loaded" and not out["state"]["after_mlx"], out["state"]
    assert "libopenblas" in os.path.basename(out["bound"]), out["bound"]
    assert err == ""
    assert_float32_close(out["products"])


@needs_openblas
def test_off_keeps_mlx_blas_and_both_agree():
    on, _ = run("import ropepool\nimport mlx.core as mx")
    off, err = run("import ropepool\nimport mlx.core as mx", env={"ROPEPOOL_BLAS": "off"})
    assert "libopenblas" in os.path.basename(on["bound"]), on["bound"]
    assert off["state"]["status"] == "off" and "libblas" in os.path.basename(off["bound"]), off["bound"]
    assert err == ""
    assert_float32_close(on["products"])
    assert_float32_close(off["products"])
    for name, (_, magnitude, k) in expected().items():  # OpenBLAS vs the reference BLAS, elementwise
        diff = np.abs(np.array(on["products"][name]) - np.array(off["products"][name]))
        assert np.all(diff <= 2 * k * np.finfo(np.float32).eps * magnitude), name


@needs_openblas
def test_failed_load_falls_back_with_one_line():
    """A library that will not load (here: a file that is not one) leaves MLX's BLAS, says why once."""
    first = (
        "import _ropepool_blas\n_ropepool_blas._openblas = lambda: '/etc/hostname'\n"
        "import ropepool\nimport mlx.core as mx"
    )
    out, err = run(first)
    assert out["state"]["status"] == "failed"
    assert "libblas" in os.path.basename(out["bound"]), out["bound"]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ropepool: OpenBLAS not loaded, MLX keeps its own BLAS ("), err
    assert_float32_close(out["products"])


def fresh_hook():
    """A second instance of the hook module, so that load() runs again in this process without effect here."""
    spec = importlib.util.spec_from_file_location("_ropepool_blas_copy", ROOT / "_ropepool_blas.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hooks():
    return [f for f in sys.meta_path if type(f).__name__ == "_RopepoolBlasHook"]


@pytest.mark.parametrize("system, machine", [("darwin", "arm64"), ("linux", "aarch64")])
def test_other_platforms_are_left_alone(monkeypatch, system, machine):
    hook = fresh_hook()
    monkeypatch.setattr(hook.sys, "platform", system)
    monkeypatch.setattr(hook.os, "uname", lambda: os.uname_result(("Linux", "host", "6", "#1", machine)))
    monkeypatch.setattr(hook, "_open", lambda library: pytest.fail("opened a library"))
    before = hooks()
    exec((ROOT / "ropepool-blas.pth").read_text(), {})
    try:
        assert hooks() == before or system == "linux"  # the .pth watches on Linux only; load() decides the rest
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if f not in hooks() or f in before]
    assert hook.load()["status"] == "not here"


def test_the_hook_waits_for_mlx_and_removes_itself(monkeypatch):
    """The .pth opens and imports nothing; the first import of mlx imports the loader and calls load() once,
    and the finder goes."""
    calls = []
    monkeypatch.setattr(_ropepool_blas, "load", lambda: calls.append(1))
    before = hooks()
    sys.meta_path[:] = [f for f in sys.meta_path if f not in before]
    try:
        exec((ROOT / "ropepool-blas.pth").read_text(), {})
        finder = hooks()[0]
        assert calls == [] and sys.meta_path[0] is finder
        assert finder.find_spec("json") is None and calls == []
        assert finder.find_spec("mlx.core") is None  # it never finds: the import goes on as usual
        assert calls == [1] and hooks() == []
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if f not in hooks()] + before


def test_an_older_pth_gets_the_same_watcher(monkeypatch):
    """An older ropepool-blas.pth (`import _ropepool_blas; _ropepool_blas.install_hook()`) keeps working."""
    before = hooks()
    sys.meta_path[:] = [f for f in sys.meta_path if f not in before]
    try:
        _ropepool_blas.install_hook()
        _ropepool_blas.install_hook()
        assert len(hooks()) == 1
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if f not in hooks()] + before
