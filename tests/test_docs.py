"""Every docstring example in the package runs (on the CPU), and the README's two commands are the real ones."""

import doctest
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ropepool"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


WITH_EXAMPLES = sorted(_module(p) for p in PACKAGE.rglob("*.py") if ">>>" in p.read_text(encoding="utf-8"))
# An example that is skipped says, in its docstring, what it needs that a test run lacks.
SKIP_REASON = re.compile(r"needs (the|a) (real )?(model|GPU|Metal|NVIDIA)", re.I)


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_docstring_examples_run(name):
    """Every ``>>>`` in the module runs as a doctest and holds; a skipped one says why."""
    module = importlib.import_module(name)
    found = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    assert found, f"{name} has '>>>' outside the docstrings doctest finds"
    for test in found:
        if any(e.options.get(doctest.SKIP) for e in test.examples):
            assert SKIP_REASON.search(test.docstring), f"{test.name}: a skipped example does not say what it needs"
    assert doctest.testmod(module).failed == 0


def test_the_doctests_cover_the_package():
    assert {"ropepool.op", "ropepool.reference", "ropepool.teaching.widgets.errors"} <= set(WITH_EXAMPLES)


def test_readme_commands_exist_in_makefile():
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "make lab" in readme and "make test" in readme
    rules = {
        line.split(":")[0]: line.split(":", 1)[1].split()
        for line in makefile.splitlines()
        if re.match(r"^[a-z-]+:", line)
    }
    assert rules["lab"][0] == "venv" and "venv-test" not in rules["lab"]  # the runtime only
    assert rules["test"][0] == "venv-test" and "lint" in rules["test"]  # the test extra, the linter


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
