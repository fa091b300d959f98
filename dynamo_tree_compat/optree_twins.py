"""Twins of the optree functions whose own code Dynamo cannot follow.

Most of optree is Python code over its C functions; Dynamo inlines that code, and this
package traces the C functions at Dynamo's variable level. The few functions here hand
back a C object Dynamo has no model of, so a twin gives the same values another way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["broadcast_common_with_treespec", "tree_iter"]


def tree_iter(
    tree: Any,
    /,
    is_leaf: Callable[[Any], bool] | None = None,
    *,
    none_is_leaf: bool = False,
    namespace: str = "",
) -> Iterator[Any]:
    """The leaves of ``tree``, in optree's order, as an iterator.

    >>> list(tree_iter({"b": 2, "a": (1, None)}))
    [1, 2]
    """
    import optree

    return iter(optree.tree_leaves(tree, is_leaf, none_is_leaf=none_is_leaf, namespace=namespace))


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
    ``tree_broadcast_map`` family, whose placeholder ``object()`` Dynamo cannot make.

    >>> trees, spec = broadcast_common_with_treespec([1, 2], [(3, 4), 5])
    >>> trees
    ([(1, 1), 2], [(3, 4), 5])
    """
    import optree

    options = {"none_is_leaf": none_is_leaf, "namespace": namespace}
    flattened = [optree.tree_flatten(t, is_leaf, **options) for t in (tree, *rests)]
    common = flattened[0][1]
    if not rests:
        return (tree,), common
    for _, spec in flattened[1:]:
        common = common.broadcast_to_common_suffix(spec)
    numbered = common.unflatten(range(common.num_leaves))  # numbers: leaves of any kind
    broadcasted = []
    for leaves, spec in flattened:
        expanded = []
        for leaf, subtree in zip(leaves, spec.flatten_up_to(numbered)):
            shape = optree.tree_structure(subtree, **options)
            expanded.append(shape.unflatten([leaf] * shape.num_leaves))
        broadcasted.append(spec.unflatten(expanded))
    return tuple(broadcasted), common
