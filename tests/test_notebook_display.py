"""Every figure or widget a notebook builds is shown: Jupyter displays only a cell's last top-level
expression, so a plotting call inside an ``if``/``for``/``with`` block, or followed by another statement,
draws nothing unless it is wrapped in ``display(...)``."""

import ast
import importlib
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
SHOWING = ("ropepool.teaching.viz", "ropepool.teaching.widgets")  # modules whose calls return what a cell shows


def _python(source: str) -> str:
    """The cell without IPython's line magics and shell escapes (blanked, so line numbers stay)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def _showing_names(tree: ast.AST, names: dict[str, str]) -> None:
    """Add to ``names`` each alias this cell binds to a viz/widgets module or to one of their functions."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full.startswith(SHOWING) or node.module.startswith(SHOWING):
                    names[alias.asname or alias.name] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(SHOWING) and alias.asname:
                    names[alias.asname] = alias.name


def _returns_something(dotted: str) -> bool:
    """Whether ``dotted`` (module.function or module) names a function that returns a value to show."""
    module, _, attr = dotted.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return True  # a module alias (viz.f resolved by the caller) or a name we cannot check: count it
    ret = getattr(obj, "__annotations__", {}).get("return")
    return ret not in (None, "None")


def hidden_displays(cells: list[str]) -> list[str]:
    """``cell N, line L: call`` for each call of a viz/widgets function whose result Jupyter would not show."""
    names: dict[str, str] = {}
    found = []
    for index, source in enumerate(cells):
        tree = ast.parse(_python(source))
        _showing_names(tree, names)
        last = tree.body[-1] if tree.body else None
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)) or node is last:
                continue
            func = node.value.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in names:
                target = f"{names[func.value.id]}.{func.attr}"
            elif isinstance(func, ast.Name) and func.id in names:
                target = names[func.id]
            else:
                continue
            if _returns_something(target):
                found.append(f"cell {index}, line {node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_the_scan_finds_a_plot_inside_an_if():
    cells = [
        "from ropepool.teaching.viz import fusions as viz",
        "if True:\n    viz.e4m3_grid()",
        "viz.e4m3_grid()\nx = 1",
        "for _ in range(1):\n    display(viz.e4m3_grid())",
        "viz.e4m3_grid()",
    ]
    assert hidden_displays(cells) == ["cell 1, line 2: viz.e4m3_grid()", "cell 2, line 1: viz.e4m3_grid()"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_is_displayed(path):
    nb = nbformat.read(path, as_version=4)
    hidden = hidden_displays([c.source for c in nb.cells if c.cell_type == "code"])
    assert not hidden, f"{path.name}: Jupyter shows none of these (wrap each in display(...)): {hidden}"
