"""``python -m ropepool inspect --scenario sharing --out run.html``: a served run, every step, as one page.

Serves a scenario (:mod:`ropepool.teaching.inspector.scenarios`: sharing, preemption, window, mla) with
each step recorded (:mod:`ropepool.engine.recording`) and writes the self-contained page of
:mod:`ropepool.teaching.inspector.page`: a slider over the steps, the pool, the queues, the slot tables,
the prefix tree. Progress goes to stderr; the page's path and the run's one-line summary to stdout.
The page is written as :func:`ropepool.cache.write_file` writes (never through a link, never onto a
FIFO or another user's file), and the path is checked before the run, so a refused one fails at once.
"""

from __future__ import annotations

import sys
from pathlib import Path


def add_arguments(parser) -> None:
    from ..teaching.inspector.scenarios import MODELS, SCENARIOS

    parser.add_argument("--scenario", choices=SCENARIOS, default="sharing", help="what the run shows (default sharing)")
    parser.add_argument(
        "--model",
        choices=MODELS,
        default="tiny",
        help="smollm2 (fetched once; sharing and preemption) or tiny, a random-weight stand-in (default; offline)",
    )
    parser.add_argument("--out", required=True, metavar="FILE.html", help="where the page goes (made or replaced)")


def main(args) -> int:
    from ..cache import UnsafeFile, writable_file, write_file
    from ..teaching.inspector.page import page
    from ..teaching.inspector.scenarios import run

    out = Path(args.out)
    if out.suffix.lower() not in (".html", ".htm"):
        print(f"inspect: --out {args.out}: the page is HTML: name it FILE.html", file=sys.stderr)
        return 2
    try:
        writable_file(out, "inspect: --out")  # before the run: a refused path fails at once
    except UnsafeFile as err:
        print(err, file=sys.stderr)
        return 2
    done = run(args.scenario, args.model, progress=sys.stderr)
    try:
        write_file(out, page(done.recording, done.title, about=done.about, decode=done.decode), "inspect: --out")
    except UnsafeFile as err:
        print(err, file=sys.stderr)
        return 2
    except OSError as err:
        print(f"inspect: --out {args.out}: {err.strerror or err}", file=sys.stderr)
        return 1
    print(out)
    print(done.about)
    return 0
