"""pyproject and environment.yml name the same runtime packages, with MLX's platform markers; the
test tools are an extra that ``make lab`` leaves out."""

import re
from pathlib import Path

import pytest
import yaml

tomllib = pytest.importorskip("tomllib")
ROOT = Path(__file__).resolve().parent.parent


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _environment():
    deps = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    conda = [d for d in deps if isinstance(d, str)]
    pip = next(d["pip"] for d in deps if isinstance(d, dict))
    return conda, pip


def test_same_packages():
    """conda's environment is the runtime set, as ``make lab`` installs it: no test tool, nothing missing."""
    wanted = {_name(r) for r in _pyproject()["dependencies"]}
    conda, pip = _environment()
    have = {_name(r) for r in conda + pip if not r.startswith("-e")} - {"python", "pip"}
    assert have == wanted


def test_the_lab_installs_no_test_tool():
    """``make lab`` installs the dependencies only: the test runners, the browser driver, the linter and
    NVIDIA's compiler wheels are the test extra's; what the notebooks import (mlx-lm) is the runtime's."""
    project = _pyproject()
    runtime = {_name(r) for r in project["dependencies"]}
    test = {_name(r) for r in project["optional-dependencies"]["test"]}
    assert "mlx-lm" in runtime
    assert {"pytest", "nbmake", "playwright", "ruff", "nvidia-cuda-nvrtc"} <= test
    assert not runtime & test


def test_mlx_markers_identical():
    mlx = lambda reqs: sorted(r.replace(" ", "") for r in reqs if _name(r) == "mlx")  # noqa: E731
    _, pip = _environment()
    assert mlx(_pyproject()["dependencies"]) == mlx(pip)
    assert any("mlx[cpu]" in r and "sys_platform=='linux'" in r for r in mlx(pip))
    assert any(r.startswith("mlx>=") and "sys_platform=='darwin'" in r for r in mlx(pip))


def test_cuda_is_opt_in():
    extras = _pyproject()["optional-dependencies"]
    assert any("mlx[cuda13]" in r for r in extras["cuda"])
    assert not any("cuda" in r for r in _pyproject()["dependencies"])


def test_environment_installs_the_package():
    _, pip = _environment()
    assert "-e ." in pip
