"""``%ropepool ...`` in a notebook: the command line, run by the kernel's own interpreter.

``!python -m ropepool ...`` runs the first ``python`` on the PATH the lab was started with: the
learner's, not the venv's, and it answers ``No module named ropepool``. ``%ropepool explain "..."``
runs ``sys.executable -m ropepool explain "..."`` instead: the Python this kernel runs, with this
ropepool. Load it once with ``%load_ext ropepool``. (For another script, the same rule:
``!{sys.executable} ../benchmarks/fp8_kv.py`` after ``import sys``.)

Example
-------
>>> command('explain "k shape must be [num_tokens, num_kv_heads, head_dim], got (6, 32, 128)"')[1:4]
['-m', 'ropepool', 'explain']
"""

from __future__ import annotations

import shlex
import subprocess
import sys


def command(line: str) -> list[str]:
    """argv of ``python -m ropepool LINE`` with this interpreter; ``line`` is split as a shell would."""
    return [sys.executable, "-m", "ropepool", *shlex.split(line)]


def ropepool_magic(line: str) -> None:
    """``%ropepool ARGS``: run ``python -m ropepool ARGS`` in this kernel's interpreter, its output
    (stdout and stderr, in order) shown in the cell as it comes; a failure's exit status on stderr."""
    with subprocess.Popen(
        command(line), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
    ) as proc:
        for text in proc.stdout:
            print(text, end="", flush=True)
    if proc.returncode:
        print(f"%ropepool {line}: exit status {proc.returncode}", file=sys.stderr)


def load_ipython_extension(ipython) -> None:
    """Register ``%ropepool`` (``%load_ext ropepool`` calls this)."""
    ipython.register_magic_function(ropepool_magic, magic_kind="line", magic_name="ropepool")
