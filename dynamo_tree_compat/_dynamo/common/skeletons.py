"""Skeletons: a structure of Dynamo's variables read into plain dicts, lists and tuples
whose leaves are their numbers, and variables made back from a skeleton. A library's own
code, run on the skeleton while tracing, then says the order of the leaves and the
result's containers (optree's and torch pytree's fast paths)."""

from __future__ import annotations

from typing import Any

from ..seam import internals, making, reads
from ..seam.types import Variable
from .reading import FAST_PATH_MAX_DEPTH, LEAF, LIST, TUPLE, Cycle, Fallback, node

__all__ = ["skeleton_of", "variable_of"]


def skeleton_of(
    variable: Variable,
    none_is_leaf: bool,
    leaves: list[Any],
    above: list[Any],
    cycle: type[Exception] = Cycle,
    keys: dict[tuple[type, Any], Any] | None = None,
) -> Any:
    """Plain containers like the structure's, with leaf numbers for leaves.

    ``above`` holds the containers on the way down, to tell a structure that contains
    itself (torch's own handling would loop on it; ``cycle`` is raised) from one that is
    merely deep. ``keys``, if given, receives the dict keys' trackers, by key, for
    :func:`variable_of` to reuse.
    """
    kind, first, dict_keys, children = node(variable, sort=False)
    if kind == LEAF:
        is_constant = type(first) is internals.kinds().Constant
        if not none_is_leaf and is_constant and reads.constant_value(first) is None:
            return None
        leaves.append(first)
        return len(leaves) - 1
    for container in above:  # a loop, not any(): no generator made per node
        if first is container:
            raise cycle
    if len(above) >= FAST_PATH_MAX_DEPTH:
        raise Fallback
    above.append(first)
    parts = [skeleton_of(child, none_is_leaf, leaves, above, cycle, keys) for child in children]
    above.pop()
    if kind == LIST:
        return parts
    if kind == TUPLE:
        return tuple(parts)
    if keys is not None:
        for key in dict_keys or []:
            keys.setdefault((type(key.key), key.key), key.tracker)
    return {key.key: part for key, part in zip(dict_keys or [], parts)}


def variable_of(
    skeleton: Any, values: list[Any], keys: dict[tuple[type, Any], Any] | None = None
) -> Any:
    """Dynamo's variable for a skeleton, leaf numbers replaced by ``values``; dict keys
    from the trackers in ``keys`` where read (a key's hash is then not taken again)."""
    cls = type(skeleton)
    if cls is int:
        return values[skeleton]
    if skeleton is None:
        return making.constant(None)
    if cls is list:
        return making.new_list([variable_of(item, values, keys) for item in skeleton])
    if cls is tuple:
        return making.new_tuple([variable_of(item, values, keys) for item in skeleton])
    known = keys or {}
    return making.new_dict(
        [
            (known.get((type(key), key)) or making.constant(key), variable_of(item, values, keys))
            for key, item in skeleton.items()
        ]
    )
