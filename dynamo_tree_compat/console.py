"""What the command line prints: progress lines (to stderr) and plain-text tables.

>>> print(table([["tree.flatten", "registered"]], ["function", "state"]))
function      state
------------  ----------
tree.flatten  registered
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["progress", "table"]


def progress(message: str) -> None:
    """Prints one progress line to stderr, at once."""
    print(f"... {message}", file=sys.stderr, flush=True)


def table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """The rows as aligned columns under ``header``, with a rule under it."""
    cells = [[str(cell) for cell in row] for row in [header, *rows]]
    widths = [max(len(row[column]) for row in cells) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)
