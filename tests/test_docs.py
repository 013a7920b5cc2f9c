"""Docstring examples run (on the CPU), and the README's two commands are the real ones."""

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = ["ropepool.reference", "ropepool.inputs", "ropepool.op", "ropepool.backends", "ropepool.teaching.checks",
           "ropepool._scalars", "ropepool.tolerance", "ropepool.pool_write"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def test_readme_commands_exist_in_makefile():
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "make lab" in readme and "make test" in readme
    assert "\nlab: setup" in makefile and "\ntest: setup" in makefile


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
