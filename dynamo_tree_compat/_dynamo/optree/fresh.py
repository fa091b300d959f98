"""A spec made while tracing, as it leaves the graph: a new one each call, as eager optree
makes it, holding the classes it names weakly until then.

A spec returned from a graph was one object, kept by the compiled code for as long as it
lives, and with it every class it names (a custom node's, a namedtuple's): a class made
in a function's scope was never freed, and each call returned the same spec. Here the
compiled code keeps the spec's state with each class replaced by a weak reference, and
builds the spec from it at each call (``PyTreeSpec.__setstate__``, optree's own C code).
"""

from __future__ import annotations

import weakref
from typing import Any

from ..common.guards import state_class_paths

__all__ = ["FreshSpec", "fresh_spec"]


def _replaced(value: Any, path: tuple[int, ...], new: Any) -> Any:
    """``value`` with the item at ``path`` (indices through tuples and lists) ``new``.

    >>> _replaced((1, [2, (3, 4)]), (1, 1, 0), "x")
    (1, [2, ('x', 4)])
    """
    if not path:
        return new
    items = list(value)
    items[path[0]] = _replaced(items[path[0]], path[1:], new)
    return type(value)(items)


class FreshSpec:
    """Called, a new PyTreeSpec equal to the one it was made from (same state)."""

    __slots__ = ("paths", "state")

    def __init__(self, state: Any, paths: list[tuple[int, ...]]) -> None:
        for path in paths:
            state = _replaced(state, path, weakref.ref(_at(state, path)))
        self.state, self.paths = state, paths

    def __call__(self) -> Any:
        import optree

        state = self.state
        for path in self.paths:
            cls = _at(state, path)()
            if cls is None:  # its guards make a graph for a freed class unreachable
                raise ReferenceError("a class of a tree spec was freed")
            state = _replaced(state, path, cls)
        made = optree.PyTreeSpec.__new__(optree.PyTreeSpec)
        made.__setstate__(state)
        return made


def _at(value: Any, path: tuple[int, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def fresh_spec(spec: Any) -> FreshSpec | None:
    """The maker of new specs like ``spec``, where it names a class; None where it names
    none (nothing to free: the one spec is returned) or optree cannot rebuild it.

    >>> import collections, optree
    >>> Pair = collections.namedtuple("Pair", "a b")
    >>> spec = optree.tree_structure(Pair(1, 2))
    >>> made = fresh_spec(spec)
    >>> new = made()
    >>> new == spec and new is not spec and repr(new) == repr(spec)
    True
    >>> fresh_spec(optree.tree_structure([1, (2, 3)])) is None
    True
    """
    import optree

    if not hasattr(optree.PyTreeSpec, "__getstate__") or not hasattr(
        optree.PyTreeSpec, "__setstate__"
    ):
        return None
    try:
        state = spec.__getstate__()
        paths = state_class_paths(state)
        if not paths:
            return None
        made = FreshSpec(state, paths)
        if made() != spec:  # optree would not rebuild it as it was
            return None
    except Exception:  # noqa: BLE001 - a state optree does not take back: the one spec
        return None
    return made
