"""``python -m ropepool inspect --scenario sharing --out run.html``: a served run, every step, as one page.

Serves a scenario (:mod:`ropepool.teaching.inspector.scenarios`: sharing, preemption, window, mla) with
each step recorded (:mod:`ropepool.engine.recording`) and writes the self-contained page of
:mod:`ropepool.teaching.inspector.page`: a slider over the steps, the pool, the queues, the slot tables,
the prefix tree. Progress goes to stderr; the page's path and the run's one-line summary to stdout.
"""

from __future__ import annotations

import os
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
    from ..teaching.inspector.page import page
    from ..teaching.inspector.scenarios import run

    out = Path(args.out)
    if out.suffix.lower() not in (".html", ".htm"):
        print(f"inspect: --out {args.out}: the page is HTML: name it FILE.html", file=sys.stderr)
        return 2
    if out.is_dir() or not out.parent.is_dir():
        print(f"inspect: --out {args.out}: not a file in an existing folder", file=sys.stderr)
        return 2
    if not os.access(out.parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        print(f"inspect: --out {args.out}: not writable here", file=sys.stderr)
        return 2
    done = run(args.scenario, args.model, progress=sys.stderr)
    try:
        out.write_text(page(done.recording, done.title, about=done.about, decode=done.decode), encoding="utf-8")
    except OSError as err:
        print(f"inspect: --out {args.out}: {err.strerror or err}", file=sys.stderr)
        return 1
    print(out)
    print(done.about)
    return 0
