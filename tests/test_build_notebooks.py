"""The build-it notebooks (12-14) start each part from the package's stub, unchanged, and plug it in with build.use."""

import inspect
from pathlib import Path

import nbformat
import pytest

from ropepool.build import stubs

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
# notebook -> the parts whose stub it shows
SHOWN = {
    "12_build_rotate_and_fp8": {"rotate": 1, "encode_e4m3": 6},
    "13_build_allocator_and_slots": {"Allocator": 2, "slot_mapping": 3},
    "14_build_tree_and_scheduler": {"PrefixTree": 4, "plan_step": 5, "rotate": 1, "Allocator": 2, "slot_mapping": 3},
}


@pytest.mark.parametrize("name", sorted(SHOWN))
def test_each_part_starts_from_the_package_stub(name):
    source = "\n".join(
        c.source for c in nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells if c.cell_type == "code"
    )
    for part, n in SHOWN[name].items():
        assert inspect.getsource(getattr(stubs, part)) in source + "\n", f"{name}: the stub of {part} drifted"
        assert f"{part} = build.use({n}, {part})" in source, f"{name}: {part} is not plugged in with build.use"
