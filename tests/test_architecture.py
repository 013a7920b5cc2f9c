"""The package's import graph: no cycle (function-level imports included), and arrows only point down.

Layers, top to bottom: the command line (``ropepool.cli``), the build-it track (``ropepool.track``: the
parts learners write, their checkers, the engine with them plugged in) and teaching (``ropepool.teaching``:
viz, widgets, exercises, checks, the error catalog) may import anything below them (the track uses
teaching, never the other way); the engine (``ropepool.engine``) and, beside it, the loaders of the real
model (``ropepool.loaders``: fetch, GGUF, tokenizer, SmolLM2) import the op and never each other;
``explain``'s recognisers (``ropepool.diagnosis``) import the op's contract; the op and its contract
(``op``, ``validation``, ``errors``, ``k_shape``, ``reference``, ``rope``, ``models``, ...), its backends
and the kernels never import teaching, the command line, the engine, the loaders or the recognisers.
Also here: no function over 120 lines without its docstring (``tools/house_numbers.py`` counts them).
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ropepool"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every ropepool module ``path`` imports, at any depth of its code (function-level too)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("ropepool")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("ropepool"):
                continue
            for alias in node.names:  # "from . import x" may name a submodule
                sub = f"{target}.{alias.name}"
                found.add(
                    sub
                    if (PACKAGE.parent / Path(*sub.split("."))).with_suffix(".py").exists()
                    or (PACKAGE.parent / Path(*sub.split(".")) / "__init__.py").exists()
                    else target
                )
    return found - {name}


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {t for t in imports_of(path) if t in modules} for name, path in modules.items()}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(g[n]):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(g):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_find_cycle_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, " -> ".join(cycle)


UPPER = (
    "ropepool.teaching",
    "ropepool.track",
    "ropepool.cli",
    "ropepool.engine",
    "ropepool.loaders",
    "ropepool.__main__",
)


def test_the_op_and_the_kernels_never_import_teaching_cli_engine_or_loaders():
    g = graph()
    lower = [n for n in g if not n.startswith(UPPER) and n != "ropepool"]
    bad = {n: sorted(t for t in g[n] if t.startswith(UPPER)) for n in lower}
    assert not {n: t for n, t in bad.items() if t}


# layer, and the layers it must not import
APART = [
    (
        "ropepool.engine",
        ("ropepool.loaders", "ropepool.teaching", "ropepool.track", "ropepool.cli", "ropepool.__main__"),
    ),
    (
        "ropepool.loaders",
        ("ropepool.engine", "ropepool.teaching", "ropepool.track", "ropepool.cli", "ropepool.__main__"),
    ),
    ("ropepool.teaching", ("ropepool.track",)),
]


def test_the_engine_and_the_loaders_never_import_each_other_or_above():
    g = graph()
    bad = {
        n: sorted(t for t in g[n] if t.startswith(banned)) for layer, banned in APART for n in g if n.startswith(layer)
    }
    assert not {n: t for n, t in bad.items() if t}


def test_the_tiny_models_import_mlx_lm_only_when_built():
    """Importing ropepool.loaders.tiny does not import mlx-lm (a runtime dependency, imported when a model is built)."""
    import subprocess
    import sys

    code = "import sys; sys.modules['mlx_lm'] = None; import ropepool.loaders.tiny as t; print(len(t.ARCHS))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=PACKAGE.parent)
    assert out.returncode == 0 and int(out.stdout) > 0, out.stderr[-1500:]


def test_the_op_never_imports_the_explain_tools_recognisers():
    """ropepool.diagnosis (explain's recognisers of six frameworks' messages) sits above the op: the op's own
    hints (ropepool.k_shape) never reach it, at any depth, and ``import ropepool`` does not load it."""
    import subprocess
    import sys

    g = graph()
    lower = [n for n in g if not n.startswith((*UPPER, "ropepool.diagnosis")) and n != "ropepool"]
    reach = set()
    todo = ["ropepool", *lower]
    while todo:
        n = todo.pop()
        for t in g.get(n, ()):
            if t not in reach and not t.startswith(UPPER):
                reach.add(t)
                todo.append(t)
    assert not {n for n in reach if n.startswith("ropepool.diagnosis")}
    code = "import sys, ropepool; print(sorted(m for m in sys.modules if m.startswith('ropepool.diagnosis')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=PACKAGE.parent)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr[-1500:]


def _house_numbers():
    import importlib.util

    spec = importlib.util.spec_from_file_location("house_numbers", PACKAGE.parent / "tools" / "house_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_function_over_120_lines_without_its_docstring():
    numbers = _house_numbers()
    long = numbers.long_functions(120)
    assert not long, long


def test_function_lengths_leave_the_docstring_out(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(5))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        f'def f():\n    """One.\n\n    Two.\n    """\n{body}\n\n\ndef g():\n{body}\n'
    )
    assert sorted(_house_numbers().function_lengths(tmp_path / "pkg")) == [("pkg/m.py:1 f", 6), ("pkg/m.py:13 g", 6)]
