"""Every docstring example in the package runs (on the CPU), and the README's two commands are the real ones."""

import doctest
import importlib
import importlib.util
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


def _layout() -> str:
    """The Layout section (docs/layout.md, linked from the README)."""
    text = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    return text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]


def _named(layout: str) -> set[str]:
    """The paths the layout names in backticks, each as written and without its ``ropepool/`` prefix."""
    names = set()
    for token in re.findall(r"`([^`\s]+)`", layout):
        names |= {token, token.removeprefix("ropepool/")}
    return names


def test_the_readme_layout_names_every_subpackage_module_and_engine_module():
    """Drawn from the tree: every folder of ropepool/ (a subpackage, or presets/), every module at its top
    and every module of the engine is named in the Layout (docs/layout.md)."""
    named = _named(_layout())
    folders = [p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__" and not p.name.startswith(".")]
    want = {f"{p.relative_to(PACKAGE).as_posix()}/" for p in folders}
    want |= {p.name for p in PACKAGE.glob("*.py") if not p.name.startswith("__")}
    want |= {p.name for p in (PACKAGE / "engine").glob("*.py") if p.name != "__init__.py"}
    missing = {w for w in want if w not in named and w.rsplit("/", 2)[-2] + "/" not in named}
    assert not missing, f"docs/layout.md's Layout does not name {sorted(missing)}"


def test_the_layout_check_sees_a_missing_folder():
    named = _named("| `ropepool/engine/` | ... `runner.py` |\n| `viz/` | plots |")
    assert {"engine/", "ropepool/engine/", "runner.py", "viz/"} <= named and "track/" not in named


def test_no_tracker_words_in_code_tests_benchmarks_notebooks_or_tools():
    """A reader has no tracker to follow an issue's number to (tools/house_numbers.py prints them)."""
    numbers = _house_numbers()
    assert numbers.tracker_words() == []


def test_the_tracker_words_pattern():
    pattern = _house_numbers().TRACKER_WORDS
    issue, audit, pr = "issue", "audit", "PR"  # written apart, so that this file holds no tracker word itself
    for said in (
        f"see {issue} 28",
        f"{issue.title()} #40",
        f"as in {pr} 12",
        f"the fast-CPU {issue}",
        f"an {audit} round",
    ):
        assert pattern.search(said), said
    for prose in ("an issue with T", "the same issues here", "round 3 of the loop", "#28 tokens"):
        assert not pattern.search(prose), prose


def _house_numbers():
    spec = importlib.util.spec_from_file_location("house_numbers", ROOT / "tools" / "house_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_engine_package_names_every_module_it_holds():
    """ropepool.engine's docstring is the map of its files: each module is named there (``:mod:`.name```)."""
    import ropepool.engine

    named = set(re.findall(r":mod:`\.(\w+)`", ropepool.engine.__doc__))
    modules = {p.stem for p in (PACKAGE / "engine").glob("*.py") if p.name != "__init__.py"}
    assert modules - named == set()


def test_pytest_collects_the_tracks_doctests():
    """``pytest --doctest-modules ropepool`` reaches ropepool/track/ (no folder name a tool takes for build output)."""
    total, track = _house_numbers().doctests()
    examples = [m for m in WITH_EXAMPLES if m.startswith("ropepool.track")]
    assert examples and track >= len(examples) and total >= len(WITH_EXAMPLES), (total, track)
