"""The README's picture: the op in one picture, as notebook 00 draws it (``ropepool.teaching.viz.gqa.op_overview``).

.venv/bin/python tools/readme_picture.py docs/op_overview.png
"""

from __future__ import annotations

import sys

from ropepool.teaching.viz.gqa import op_overview


def main(out: str) -> None:
    op_overview().savefig(out, dpi=80, metadata={"Software": None})


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/op_overview.png")
