#!/usr/bin/env python
"""`specviz train-head`, as this script was called before the command existed: every
argument goes to the command (`specviz train-head --help` lists them).

    python scripts/train_head.py --target builtin:smollm2 --data /tmp/chat --out /tmp/head
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    if str(REPO) not in sys.path:  # run from a checkout without installing
        sys.path.insert(0, str(REPO))
    from specviz.cli.main import main as specviz

    return specviz(["train-head", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
