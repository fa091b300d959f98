"""The user's functions as a tree library calls them: a log of each call, and the calls
made for real while tracing.

Every callback here (a mapped function, ``is_leaf``, a visitor, a custom node's flatten
and unflatten functions) notes its name and what it was given, in its order, into a log.
Compiled, a traced call notes into the log through Dynamo, which replays the log's
change after the graph; a call the package would make for real while tracing (on its
placeholders, which no eager call ever sees) also notes itself in :data:`STRAYS`, which
no traced call touches.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable
from typing import Any

import optree
import torch
import torch.utils._pytree as pytree

import dynamo_tree_compat

__all__ = ["NODE_LOG", "NS", "STRAYS", "Node", "describe", "noted", "package_types"]

#: The namespace :class:`Node` is registered in with optree.
NS = "dtc-callbacks"
#: Every callback's call, the custom nodes' flatten and unflatten functions' too, in one
#: order: how they interleave.
NODE_LOG: list[Any] = []
#: The callbacks called for real while tracing, on the package's own objects.
STRAYS: list[str] = []


_TWINS = "dynamo_tree_compat.twins"


def package_types() -> frozenset[type]:
    """Every class the package's modules define (each imported), but the twins': what a
    placeholder is. (A twin is traced code: its objects, such as the placeholder that
    stands for optree's own ``object()`` in a broadcast, reach the user's functions only
    where eager optree's do.)

    >>> from dynamo_tree_compat._dynamo.optree.records import Slot
    >>> Slot in package_types(), Node in package_types()
    (True, False)
    """
    for found in pkgutil.walk_packages(dynamo_tree_compat.__path__, "dynamo_tree_compat."):
        if not found.name.endswith("__main__"):
            importlib.import_module(found.name)
    return frozenset(
        value
        for name, module in list(sys.modules.items())
        if name.startswith("dynamo_tree_compat")
        and not name.startswith(_TWINS)
        and module is not None
        for value in list(vars(module).values())
        if isinstance(value, type) and value.__module__ == name
    )


_PACKAGE_TYPES = package_types()


def _placeholder(values: tuple[Any, ...]) -> bool:
    """Whether any value, or any item of a list or tuple among them, is the package's."""
    for value in values:
        if type(value) in _PACKAGE_TYPES:
            return True
        if type(value) in (list, tuple) and any(type(item) in _PACKAGE_TYPES for item in value):
            return True
        if type(value) is Node and _placeholder((value.meta, *value.kids)):
            return True
    return False


def describe(value: Any) -> Any:
    """What the log keeps of a value: a tensor's shape, a constant itself, else a
    container's type and length or an object's type."""
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape))
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) in (list, tuple, dict):
        return (type(value).__name__, len(value))
    return type(value).__name__


def noted(name: str, log: list[Any], result: Callable[..., Any]) -> Callable[..., Any]:
    """A callback that notes ``(name, what it was given...)`` in ``log``, and its name in
    :data:`NODE_LOG`, and returns ``result`` of its arguments.

    >>> log = []; double = noted("double", log, lambda v: v * 2)
    >>> double(3), log, NODE_LOG[-1]
    (6, [('double', 3)], 'double')
    """

    def callback(*args: Any) -> Any:
        if _placeholder(args):
            STRAYS.append(name)
        log.append((name, *map(describe, args)))
        NODE_LOG.append(name)
        return result(*args)

    return callback


class Node:
    """A custom node of optree (namespace :data:`NS`) and torch's pytree: its kids are
    its children, its meta the node's data."""

    def __init__(self, kids: list[Any], meta: str) -> None:
        self.kids, self.meta = list(kids), meta

    def __eq__(self, other: object) -> bool:
        if type(other) is not Node or self.meta != other.meta:
            return False
        return len(self.kids) == len(other.kids) and all(map(_same, self.kids, other.kids))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Node({self.kids!r}, {self.meta!r})"


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, torch.Tensor):
        return isinstance(right, torch.Tensor) and torch.equal(left, right)
    return bool(left == right)


def _flatten(node: Node) -> tuple[list[Any], str]:
    if _placeholder((node,)):
        STRAYS.append("flatten")
    NODE_LOG.append(("flatten", node.meta, len(node.kids)))
    return node.kids, node.meta


def _unflatten(meta: str, kids: Any) -> Node:
    if _placeholder((meta, kids)):
        STRAYS.append("unflatten")
    NODE_LOG.append(("unflatten", meta, describe(kids)))
    return Node(list(kids), meta)


optree.register_pytree_node(Node, _flatten, _unflatten, namespace=NS)


def _flatten_with_keys(node: Node) -> tuple[list[Any], str]:
    kids, meta = _flatten(node)
    return [(pytree.SequenceKey(index), kid) for index, kid in enumerate(kids)], meta


pytree.register_pytree_node(
    Node,
    _flatten,
    lambda kids, meta: _unflatten(meta, kids),
    serialized_type_name="dtc.Node",
    flatten_with_keys_fn=_flatten_with_keys,
)
