"""The suite's notebooks are committed clean and follow the suite's shape (nbmake runs them)."""

from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
EXPECTED = ["00_start_here", "01_gqa_shapes", "02_error_gallery", "03_rotation", "03b_rope_in_real_models",
            "04_pool_layout", "05_inside_the_kernel", "06_workshop_exercises", "07_the_op_in_a_real_model",
            "08_a_real_model"]


def test_the_suite_is_complete():
    assert [p.stem for p in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_valid_and_clean(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"cell {i} carries outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_prose_led_structure(path):
    nb = nbformat.read(path, as_version=4)
    markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(markdown) >= len(code), f"{len(markdown)} markdown cells for {len(code)} code cells"
    text = "\n".join(markdown).lower()
    for heading in ("what you'll do", "what you'll learn", "what you need", "summary", "exercise"):
        assert heading in text.replace("’", "'"), f"no '{heading}' section"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_claims_are_asserted_not_printed(path):
    nb = nbformat.read(path, as_version=4)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "assert" in source
    assert "print(np.allclose" not in source and "print(allclose" not in source
