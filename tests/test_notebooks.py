"""The suite's notebooks are committed clean and follow the suite's shape (nbmake runs them)."""

import ast
import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
EXPECTED = [
    "00_start_here",
    "01_gqa_shapes",
    "02_error_gallery",
    "03_rotation",
    "03b_rope_in_real_models",
    "04_pool_layout",
    "05_inside_the_kernel",
    "06_workshop_exercises",
    "07_the_op_in_a_real_model",
    "08_a_real_model",
    "09_why_slots",
    "10_what_engines_fuse_today",
    "11_beyond_gqa",
    "11b_the_pool_across_ranks",
    "12_build_rotate_and_fp8",
    "13_build_allocator_and_slots",
    "14_build_tree_and_scheduler",
    "15_same_prompt_different_logits",
]
#: Notebooks after 10, apart from the build-it track: each links 10 first and the suite's map last.
APART = ("11_beyond_gqa", "11b_the_pool_across_ranks", "15_same_prompt_different_logits")
TRACK = [p for p in NOTEBOOKS if p.stem not in APART]


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
    assert re.search(r"\bcheck(_close|_equal)?\(|expect_error\(|expect_rejection\(", source)
    assert "print(np.allclose" not in source and "print(allclose" not in source


def _silent_asserts(source: str) -> list[str]:
    """Bare ``assert`` statements and ``np.testing.assert_*`` calls: they show nothing when they hold."""
    # IPython's line magics and shell escapes are not Python: blank them, keep the rest of the cell
    python = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    tree = ast.parse(python)  # a cell that still does not parse fails here, as it would in the kernel
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            found.append(ast.unparse(node))
        elif isinstance(node, ast.Call) and ast.unparse(node.func).startswith("np.testing.assert"):
            found.append(ast.unparse(node))
    return found


def test_a_silent_assert_is_found_in_a_cell_with_magics():
    cell = "%matplotlib inline\n!ls\nimport numpy as np\nassert 1 + 1 == 2\nnp.testing.assert_equal(1, 1)"
    assert _silent_asserts(cell) == ["assert 1 + 1 == 2", "np.testing.assert_equal(1, 1)"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_claim_is_visible(path):
    """A claim is checked with ropepool.teaching.checks.check (it prints what held), never a silent assert."""
    nb = nbformat.read(path, as_version=4)
    silent = {i: _silent_asserts(c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    silent = {i: s for i, s in silent.items() if s}
    assert not silent, f"bare asserts (use check/check_close/check_equal from ropepool.teaching.checks): {silent}"


# --- Navigation: every notebook says where it sits and links the next ---------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("index", range(len(NOTEBOOKS)), ids=[p.stem for p in NOTEBOOKS])
def test_says_where_it_sits_and_links_the_next(index):
    """The first cell has an "**In the suite:**" line (linking the notebook before); the last cell is
    "**Next:**" with a link to the next notebook in name order (the last one links the suite's map)."""
    path = NOTEBOOKS[index]
    nb = nbformat.read(path, as_version=4)
    first = [line for line in nb.cells[0].source.splitlines() if line.startswith("**In the suite:**")]
    assert len(first) == 1, f"{path.name}: no '**In the suite:**' line in the first cell"
    if path in TRACK:
        at = TRACK.index(path)
        before, want = TRACK[at - 1] if at else None, TRACK[at + 1].name if at + 1 < len(TRACK) else "README.md"
    else:  # an apart notebook follows the track notebook before it in name order, and leads to the map
        before, want = [p for p in TRACK if p.name < path.name][-1], "README.md"
    if before is not None:
        assert f"]({before.name})" in first[0], f"{path.name}: does not link {before.name}"
    last = nb.cells[-1]
    assert last.cell_type == "markdown" and last.source.startswith("**Next:**"), f"{path.name}: no **Next:** at the end"
    assert want in LINK.findall(last.source), f"{path.name}: the last cell does not link {want}"
    for target in LINK.findall(nb.cells[0].source + last.source):
        if "://" not in target:
            assert (path.parent / target.split("#")[0]).exists(), f"{path.name}: broken link {target}"


EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf\u2b50\u2b55\ufe0f]")


def test_no_emoji_needed():
    """Marks render in any font: no emoji in the notebooks or in what the package prints or shows."""
    root = Path(__file__).resolve().parent.parent
    files = [*NOTEBOOKS, *(root / "ropepool").rglob("*.py")]
    found = {p.name: EMOJI.findall(p.read_text(encoding="utf-8")) for p in files}
    assert not {k: v for k, v in found.items() if v}


_BOOLEAN_CALLS = ("allclose", "array_equal", "isclose", "array_equiv", "all", "any", "isinstance", "issubclass")


def _is_claim(node: ast.AST) -> bool:
    """An expression whose value is a truth about the code: a comparison, a not/and/or of claims, or a
    call such as np.allclose(...) or (x == y).all()."""
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return True
    if isinstance(node, ast.BoolOp):
        return any(_is_claim(v) for v in node.values)
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        return name in _BOOLEAN_CALLS
    return False


def _unchecked_claims(source: str) -> list[str]:
    """Claims a cell shows without checking them: a claim printed (``print(a == b)``, ``print(f"{np.allclose(x, y)}")``)
    or left as a cell's displayed value (``a == b`` on the last line shows True or False and fails nothing)."""
    python = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    tree = ast.parse(python)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "print":
            parts = []
            for arg in node.args:
                parts += (
                    [v.value for v in arg.values if isinstance(v, ast.FormattedValue)]
                    if isinstance(arg, ast.JoinedStr)
                    else [arg]
                )
            found += [ast.unparse(node) for p in parts if _is_claim(p)][:1]
    if tree.body and isinstance(tree.body[-1], ast.Expr) and _is_claim(tree.body[-1].value):
        found.append(ast.unparse(tree.body[-1]))
    return found


def test_an_unchecked_claim_is_found():
    cell = "import numpy as np\nprint(np.allclose(a, b))\nprint(f'held: {x == y}')\nprint('n =', n)\na == b"
    assert _unchecked_claims(cell) == ["print(np.allclose(a, b))", "print(f'held: {x == y}')", "a == b"]
    assert _unchecked_claims("check(a == b, 'a is b')\nprint(f'{len(x)} rows')") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_claim_is_shown_without_a_check(path):
    """A truth a cell shows (printed, or the cell's value) must be a check(...) that fails when it is false."""
    nb = nbformat.read(path, as_version=4)
    shown = {i: _unchecked_claims(c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    shown = {i: s for i, s in shown.items() if s}
    assert not shown, f"claims shown but not checked (use check(...) from ropepool.teaching.checks): {shown}"
