"""Twins of the optree functions whose own code Dynamo cannot follow.

Most of optree is Python code over its C functions; Dynamo inlines that code, and this
package traces the C functions at Dynamo's variable level. The few functions here hand
back a C object Dynamo has no model of, or call a builtin in a way Dynamo does not
follow, so a twin gives the same values another way.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "broadcast_common_with_treespec",
    "sorted_items",
    "total_order",
    "total_order_sorted",
    "tree_broadcast_common",
    "tree_iter",
    "tree_map_",
    "tree_map_with_accessor_",
    "tree_map_with_path_",
    "tree_max",
    "tree_min",
    "tree_sum",
]

#: Emptied by each tree_iter generator as it starts: a change to an object that exists
#: outside the graph, so that Dynamo, which would read a generator leaving the graph to
#: its end into a look-alike (a tuple_iterator), ends the graph there instead, and the
#: call runs optree's own iterator. Module-level: it must exist before any graph does.
_STARTED: list[None] = []


def tree_iter(
    tree: Any,
    /,
    is_leaf: Callable[[Any], bool] | None = None,
    *,
    none_is_leaf: bool = False,
    namespace: str = "",
) -> Iterator[Any]:
    """The leaves of ``tree``, in optree's order, read lazily as optree's iterator reads
    them: each ``next()`` expands the nodes up to the next leaf, so a tree changed between
    two calls is seen as changed, and ``is_leaf`` and a custom node's flatten function run
    when optree's would. A generator: one that leaves a compiled function ends the graph,
    and the call runs optree's own, so what the caller gets is optree's iterator.

    >>> list(tree_iter({"b": 2, "a": (1, None)}))
    [1, 2]
    >>> tree = {"a": 1, "b": {"c": 2}}; leaves = tree_iter(tree)
    >>> next(leaves), tree["b"].update(d=3), list(leaves)
    (1, None, [2, 3])
    """
    import optree

    _STARTED.clear()
    options = {"none_is_leaf": none_is_leaf, "namespace": namespace}
    agenda = [(tree, 0)]
    while agenda:
        node, depth = agenda.pop()
        if depth > optree.MAX_RECURSION_DEPTH:
            raise RecursionError("Maximum recursion depth exceeded during flattening the tree.")
        if (is_leaf is not None and is_leaf(node)) or optree.tree_is_leaf(node, **options):
            yield node
            continue
        children = _children(node, options)
        agenda.extend((child, depth + 1) for child in reversed(children))


#: optree's own sequence kinds: their children are their items, in order.
_SEQUENCES = (list, tuple, collections.deque)
#: optree's own mapping kinds.
_MAPPINGS = (dict, collections.OrderedDict, collections.defaultdict)


def _children(node: Any, options: dict[str, Any]) -> list[Any]:
    """A node's children, in the order optree's iterator reads them. A mapping's come by
    its keys as optree's flatten orders them, one level down: sorted, or in the order of
    the dict beneath an OrderedDict, which ``move_to_end`` does not change (optree's
    ``tree_flatten_one_level`` reads the OrderedDict's own order).

    >>> node = collections.OrderedDict(a=1, b=2); node.move_to_end("a")
    >>> _children(node, {}), list(node.values()), _children({"b": 1, "a": [2, None]}, {})
    ([1, 2], [2, 1], [[2, None], 1])
    """
    import optree

    cls = type(node)
    if node is None:
        return []
    # a namedtuple's or a structseq's entry is its kind's, unless its class is registered
    entry = optree.register_pytree_node.get(cls, namespace=options.get("namespace", ""))
    if cls in _SEQUENCES or entry is None or entry.type is not cls:
        return list(node)
    if cls in _MAPPINGS:  # the node itself is the first that is_leaf is asked about
        asked: list[None] = []
        return optree.tree_leaves(
            node, lambda _: bool(asked.append(None) or len(asked) > 1), **options
        )
    return list(optree.tree_flatten_one_level(node, **options)[0])


class _Placeholder:
    """Marks where a broadcast subtree goes: a leaf to optree, made once, not per call."""

    def __repr__(self) -> str:
        return "<placeholder>"


_PLACEHOLDER = _Placeholder()


def _broadcast(
    trees: tuple[Any, ...], is_leaf: Any, options: dict[str, Any], subtree_is_leaf: Any
) -> tuple[tuple[Any, ...], Any]:
    import optree

    flattened = [optree.tree_flatten(t, is_leaf, **options) for t in trees]
    common = flattened[0][1]
    for _, spec in flattened[1:]:
        common = common.broadcast_to_common_suffix(spec)
    marked = common.unflatten([_PLACEHOLDER] * common.num_leaves)
    broadcasted = []
    for leaves, spec in flattened:
        expanded = []
        for leaf, subtree in zip(leaves, spec.flatten_up_to(marked)):
            shape = optree.tree_structure(subtree, subtree_is_leaf, **options)
            expanded.append(shape.unflatten([leaf] * shape.num_leaves))
        broadcasted.append(spec.unflatten(expanded))
    return tuple(broadcasted), common


def broadcast_common_with_treespec(
    tree: Any,
    /,
    *rests: Any,
    is_leaf: Callable[[Any], bool] | None = None,
    none_is_leaf: bool = False,
    namespace: str = "",
) -> tuple[tuple[Any, ...], Any]:
    """Each tree broadcast to the common suffix structure of all; and that structure.

    Stands in for optree's private helper of ``tree_broadcast_common`` and the
    ``tree_broadcast_map`` family (optree 0.20), whose placeholder ``object()`` Dynamo
    cannot make.

    >>> trees, spec = broadcast_common_with_treespec([1, 2], [(3, 4), 5])
    >>> trees
    ([(1, 1), 2], [(3, 4), 5])
    """
    import optree

    options = {"none_is_leaf": none_is_leaf, "namespace": namespace}
    if not rests:
        return (tree,), optree.tree_structure(tree, is_leaf, **options)
    return _broadcast((tree, *rests), is_leaf, options, None)


def tree_broadcast_common(
    tree: Any,
    other_tree: Any,
    is_leaf: Callable[[Any], bool] | None = None,
    *,
    none_is_leaf: bool = False,
    namespace: str = "",
) -> tuple[Any, Any]:
    """Both trees broadcast to their common suffix structure (optree before 0.20).

    Those versions make the placeholder ``object()`` in this function itself, and the
    rest of the broadcast family calls it; they also hand ``is_leaf`` on to each subtree.

    >>> tree_broadcast_common([1, 2], [(3, 4), 5])
    ([(1, 1), 2], [(3, 4), 5])
    """
    options = {"none_is_leaf": none_is_leaf, "namespace": namespace}
    broadcasted, _ = _broadcast((tree, other_tree), is_leaf, options, is_leaf)
    return broadcasted[0], broadcasted[1]


class _MISSING:
    """Marks that no ``default`` was given (a class: Dynamo can take it as a default)."""


def _extreme(
    builtin: Callable[..., Any],
    tree: Any,
    default: Any,
    key: Callable[[Any], Any] | None,
    options: dict[str, Any],
) -> Any:
    """``builtin(leaves, default=..., key=...)`` as a loop, with the builtin's order of
    ``key`` calls and comparisons (the new value on the left), and the first extreme kept.
    """
    import optree

    leaves = optree.tree_leaves(tree, **options)
    if not leaves:
        if default is _MISSING:
            return builtin(leaves, key=key)  # the builtin's own error, in this Python's words
        return default
    best = leaves[0]
    best_key = best if key is None else key(best)
    for leaf in leaves[1:]:
        leaf_key = leaf if key is None else key(leaf)
        if (leaf_key > best_key) if builtin is max else (leaf_key < best_key):
            best, best_key = leaf, leaf_key
    return best


#: The numbers Python's ``sum`` adds by itself (and, from 3.12, floats with compensation).
_NUMBERS = (bool, int, float, complex)


def tree_sum(
    tree: Any,
    /,
    start: Any = 0,
    is_leaf: Callable[[Any], bool] | None = None,
    *,
    none_is_leaf: bool = False,
    namespace: str = "",
) -> Any:
    """``start`` and the leaves of ``tree`` added, as optree's ``tree_sum``.

    Over numbers alone, ``sum`` itself; else the same additions one by one, in ``sum``'s
    order: Dynamo's ``sum`` of values known while tracing fails inside Dynamo (an
    internal error) where one addition raises, where ``+`` raises the user's error.

    >>> tree_sum({"x": 1, "y": (2, None)})
    3
    >>> tree_sum({"b": [1], "a": [2]}, start=[], is_leaf=lambda v: type(v) is list)
    [2, 1]
    >>> tree_sum([1, None], none_is_leaf=True)
    Traceback (most recent call last):
    ...
    TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'
    """
    import optree

    leaves = optree.tree_leaves(tree, is_leaf, none_is_leaf=none_is_leaf, namespace=namespace)
    if isinstance(start, str):
        return "".join([start, *leaves])
    if isinstance(start, bytes):
        return b"".join([start, *leaves])
    if isinstance(start, bytearray):
        return bytearray().join([start, *leaves])
    if all(type(value) in _NUMBERS for value in (start, *leaves)):
        return sum(leaves, start)
    total = start
    for leaf in leaves:
        total = total + leaf
    return total


def tree_max(
    tree: Any,
    /,
    *,
    default: Any = _MISSING,
    key: Callable[[Any], Any] | None = None,
    is_leaf: Callable[[Any], bool] | None = None,
    none_is_leaf: bool = False,
    namespace: str = "",
) -> Any:
    """The largest leaf of ``tree``, as ``max`` over its leaves.

    Dynamo's ``max`` takes a ``key`` only over constants; this loop traces over any leaf.

    >>> tree_max({"b": [1, -7], "a": 3}, key=abs)
    -7
    >>> tree_max({}, default=0)
    0
    """
    options = {"is_leaf": is_leaf, "none_is_leaf": none_is_leaf, "namespace": namespace}
    return _extreme(max, tree, default, key, options)


def tree_min(
    tree: Any,
    /,
    *,
    default: Any = _MISSING,
    key: Callable[[Any], Any] | None = None,
    is_leaf: Callable[[Any], bool] | None = None,
    none_is_leaf: bool = False,
    namespace: str = "",
) -> Any:
    """The smallest leaf of ``tree``, as ``min`` over its leaves.

    >>> tree_min({"b": [1, -7], "a": 3}, key=abs)
    1
    >>> tree_min([None, 2], none_is_leaf=False)
    2
    """
    options = {"is_leaf": is_leaf, "none_is_leaf": none_is_leaf, "namespace": namespace}
    return _extreme(min, tree, default, key, options)


def total_order(keys: list[Any], reverse: bool = False) -> list[int]:
    """The positions of ``keys`` in the order optree's ``total_order_sorted`` gives them.

    While tracing, Dynamo runs this eagerly when the keys are constants (it folds the
    call); otherwise the installer has a graph break stand in.

    >>> total_order(["b", 1, "a"])
    [1, 2, 0]
    """
    from optree.utils import total_order_sorted

    return total_order_sorted(range(len(keys)), key=keys.__getitem__, reverse=reverse)


def total_order_sorted(
    iterable: Any, /, *, key: Callable[[Any], Any] | None = None, reverse: bool = False
) -> list[Any]:
    """optree's ``total_order_sorted``, as Dynamos whose sort lets a comparison's
    TypeError escape (torch 2.10 and earlier) trace it: the order is found by
    :func:`total_order`, folded on constant keys.

    >>> total_order_sorted([("b", 2), (1, 0)], key=lambda pair: pair[0])
    [(1, 0), ('b', 2)]
    """
    sequence = list(iterable)
    keys = sequence if key is None else [key(item) for item in sequence]
    return [sequence[index] for index in total_order(keys, reverse)]


def sorted_items(items: Any, /) -> list[Any]:
    """optree's registry ``_sorted_items``: the items in their keys' total order, by a
    key function Dynamo 2.5 can call (optree's own passes an ``operator.itemgetter``).

    >>> sorted_items({"b": 2, 1: 0}.items())
    [(1, 0), ('b', 2)]
    """
    return total_order_sorted(items, key=_first)


def _first(pair: Any) -> Any:
    return pair[0]


def _map_in_place(
    func: Callable[..., Any], tree: Any, rests: tuple[Any, ...], before: str, **options: Any
) -> Any:
    """``func`` on each leaf of ``tree`` and the matching nodes of ``rests``, after the
    leaf's path or accessor where ``before`` says so ("paths", "accessors" or ""), in
    order, for its side effects; returns ``tree`` itself, as optree's in-place maps do."""
    import optree

    if before == "paths":
        paths, leaves, spec = optree.tree_flatten_with_path(tree, **options)
        columns = [paths, leaves]
    else:
        leaves, spec = optree.tree_flatten(tree, **options)
        columns = [spec.accessors(), leaves] if before == "accessors" else [leaves]
    for row in zip(*columns, *(spec.flatten_up_to(rest) for rest in rests)):
        func(*row)
    return tree


def tree_map_(func: Callable[..., Any], tree: Any, /, *rests: Any, **options: Any) -> Any:
    """``func`` on each leaf of ``tree`` (and of ``rests``) for its side effects; returns
    ``tree`` itself. ``options``: optree's ``is_leaf``, ``none_is_leaf``, ``namespace``.

    >>> seen = []
    >>> tree_map_(seen.append, {"b": 2, "a": (1, None)})
    {'b': 2, 'a': (1, None)}
    >>> seen
    [1, 2]
    """
    return _map_in_place(func, tree, rests, "", **options)


def tree_map_with_path_(func: Callable[..., Any], tree: Any, /, *rests: Any, **options: Any) -> Any:
    """``func(path, leaf, ...)`` on each leaf of ``tree`` for its side effects; returns
    ``tree`` itself.

    >>> seen = []
    >>> tree_map_with_path_(lambda p, v: seen.append((p, v)), {"a": [1]})
    {'a': [1]}
    >>> seen
    [(('a', 0), 1)]
    """
    return _map_in_place(func, tree, rests, "paths", **options)


def tree_map_with_accessor_(
    func: Callable[..., Any], tree: Any, /, *rests: Any, **options: Any
) -> Any:
    """``func(accessor, leaf, ...)`` on each leaf of ``tree`` for its side effects;
    returns ``tree`` itself.

    >>> seen = []
    >>> tree_map_with_accessor_(lambda a, v: seen.append(a.path), {"a": [1]})
    {'a': [1]}
    >>> seen
    [('a', 0)]
    """
    return _map_in_place(func, tree, rests, "accessors", **options)
