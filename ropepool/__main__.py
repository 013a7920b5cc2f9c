"""``python -m ropepool``: the command line (:mod:`ropepool.cli`)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
