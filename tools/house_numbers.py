"""The house's numbers: what a maintainer reading the package meets, measured.

    python tools/house_numbers.py            all of them
    python tools/house_numbers.py --quick    without the two that run other programs (duplicates, pytest)

Prints, one line each:

- functions in ``ropepool/`` over 120 lines, their docstrings not counted (each named, with its length);
- pairs of places inside ``ropepool/`` that the ``duplicates`` tool finds (its first line), where that
  tool is on the PATH; else says it is not;
- tracker words (:data:`TRACKER_WORDS`: a number in a tracker, a review's round, a problem named by
  its ticket's title) in the code, tests, benchmarks, notebooks and tools, each with its file and line;
- the doctests ``pytest --doctest-modules ropepool`` collects, and how many of them are the track's
  (``ropepool/track/``).

``tests/test_architecture.py`` and ``tests/test_docs.py`` check the first and the third with the functions here.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 120

#: Where tracker words may not stand: what a reader has no tracker to follow them to from.
TRACKED_FOLDERS = ("ropepool", "tests", "benchmarks", "notebooks", "tools")
TRACKER_WORDS = re.compile(
    r"\b(?:issue|issues|ticket|PR|pull request)\s*#?\s*\d+"  # a number in a tracker
    r"|#\d{2,}\b(?=[^\n]*\b(?:issue|fixed|closes)\b)"  # a number with "fixed" after it
    r"|\baudit\s+round\b|\bround\s+\d+\s+of\s+(?:review|audit)"  # a review's round
    r"|\bthe\s+[\w-]+\s+issue\b",  # a problem named by its ticket's title
    re.IGNORECASE,
)
_SUFFIXES = (".py", ".ipynb", ".md", ".h", ".cpp", ".inc", ".sh", ".toml", ".cfg", ".txt")


def function_lengths(root: Path = ROOT / "ropepool") -> list[tuple[str, int]]:
    """``(path:line name, lines)`` of every function and method under ``root``, its docstring not counted."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lines = node.end_lineno - node.lineno + 1
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines -= first.end_lineno - first.lineno + 1
            out.append((f"{path.relative_to(root.parent)}:{node.lineno} {node.name}", lines))
    return out


def long_functions(limit: int = LIMIT) -> list[tuple[str, int]]:
    """The functions of ``ropepool/`` over ``limit`` lines without their docstrings, longest first."""
    return sorted(((name, n) for name, n in function_lengths() if n > limit), key=lambda x: -x[1])


def tracker_words(folders=TRACKED_FOLDERS) -> list[str]:
    """``path:line: words`` for each tracker word in the files of ``folders``."""
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if not path.is_file() or path.suffix not in _SUFFIXES or ".ipynb_checkpoints" in path.parts:
                continue
            for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                for m in TRACKER_WORDS.finditer(line):
                    found.append(f"{path.relative_to(ROOT)}:{i}: {m.group(0)!r}")
    return found


def duplicate_pairs() -> str:
    """The ``duplicates`` tool's first line over ``ropepool/``, or a line saying it is not on the PATH."""
    tool = shutil.which("duplicates")
    if tool is None:
        return "the duplicates tool is not on the PATH here: pairs not counted"
    out = subprocess.run(
        [tool, "--repo", str(ROOT / "ropepool"), "--most", "200", "--seconds", "120"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out.stdout.strip()


def doctests() -> tuple[int, int]:
    """``(doctests collected by pytest --doctest-modules ropepool, of them in ropepool/track/)``."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--doctest-modules", "-p", "no:randomly", "ropepool"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    items = [line for line in out.stdout.splitlines() if "::" in line]
    return len(items), sum(line.startswith("ropepool/track/") for line in items)


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    long = long_functions()
    print(f"functions in ropepool/ over {LIMIT} lines without their docstring: {len(long)}")
    for name, n in long:
        print(f"  {name}: {n} lines")
    if not quick:
        lines = duplicate_pairs().splitlines()
        print(f"duplicates inside ropepool/: {lines[0] if lines else 'no answer'}")
        for line in lines[1:]:
            print(f"  {line}")
    words = tracker_words()
    print(f"tracker words in {', '.join(TRACKED_FOLDERS)}: {len(words)}")
    for w in words:
        print(f"  {w}")
    if not quick:
        total, track = doctests()
        print(f"pytest --doctest-modules ropepool collects {total} doctests, {track} of them the track's")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
