"""``python -m dynamo_tree_compat``: see :mod:`dynamo_tree_compat.cli`."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
