"""dm-tree's calls that have a fast path, one per function, each taking a structure:
the table the fast-path tests and RLlib's leaves share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

tree = pytest.importorskip("tree")

#: One call per dm-tree function with a fast path (``_dynamo.FAST_PATHS``), by its name.
FAST_CALLS: dict[str, Callable[[Any], Any]] = {
    "tree.is_nested": tree.is_nested,
    "tree.flatten": tree.flatten,
    "tree.flatten_with_path": tree.flatten_with_path,
    "tree.assert_same_structure": lambda s: tree.assert_same_structure(s, s),
    "tree.map_structure": lambda s: tree.map_structure(
        lambda a, b: (b, a), s, s, check_types=False
    ),
    "tree.map_structure_with_path": lambda s: tree.map_structure_with_path(
        lambda path, v: (path, v), s
    ),
    "tree.flatten_up_to": lambda s: tree.flatten_up_to({key: None for key in s}, s),
    "tree.flatten_with_path_up_to": lambda s: tree.flatten_with_path_up_to(s, s, False),
    "tree.map_structure_up_to": lambda s: tree.map_structure_up_to(
        {key: None for key in s}, lambda a, b: (b, a), s, s, check_types=True
    ),
    "tree.map_structure_with_path_up_to": lambda s: tree.map_structure_with_path_up_to(
        s, lambda path, v: (path, v), s
    ),
    "tree.unflatten_as": lambda s: tree.unflatten_as(s, tuple(range(len(tree.flatten(s))))),
    "tree.traverse": lambda s: tree.traverse(lambda v: "list" if type(v) is list else None, s),
    "tree.traverse_with_path": lambda s: tree.traverse_with_path(
        lambda path, v: (path, v) if len(path) == 2 else None, s, top_down=False
    ),
}
