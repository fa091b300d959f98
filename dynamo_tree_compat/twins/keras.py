"""Twins of the functions of Keras's own tree layer that Dynamo cannot follow.

From Keras 3.1 on, ``keras.tree`` calls a layer of Keras's own over optree
(``keras/src/tree/optree_impl.py``) or, from Keras 3.12 on the torch backend, over
torch's pytree (``torchtree_impl.py``). Two of its functions walk one level down with
``is_leaf=lambda x: x is not structure``; Dynamo cannot answer ``is not`` between two
tuples (nor two dicts, on torch 2.5), so every call that reaches a tuple breaks the
graph. The twins here are Keras's code with that one test replaced: the flatten asks
``is_leaf`` about the root first and about each child after, so an ``is_leaf`` that says
no once and yes after it splits the root from its children without comparing
identities. Every other function of the layer calls these through its module, so the
twins of these two cover the whole layer.

A Keras ``TrackedSet`` rebuilt in the graph comes back empty from Dynamo 2.13; the
package's seam makes each call that fills one end the graph there instead
(``_dynamo/seam/sets.py``), under these twins and Keras's own code alike.

Each twin written here names the source of the Keras function it mirrors
(:data:`WRITTEN_FOR`); a Keras whose function reads otherwise keeps its own code.
"""

from __future__ import annotations

import hashlib
import inspect
from collections import defaultdict
from collections.abc import Callable
from typing import Any

__all__ = [
    "WRITTEN_FOR",
    "fingerprint",
    "optree_traverse",
    "torchtree_dict_to_ordered_dict",
    "torchtree_traverse",
]


def fingerprint(function: Callable[..., Any]) -> str:
    """The first 16 hex digits of the SHA-256 of ``function``'s source, or "" where
    Python cannot read it.

    >>> len(fingerprint(fingerprint)), fingerprint(len)
    (16, '')
    """
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return ""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def _root_only() -> Callable[[Any], bool]:
    """An ``is_leaf`` that says no to its first question, the root, and yes after.

    >>> is_leaf = _root_only()
    >>> [is_leaf(x) for x in ((1, 2), 1, 2)]
    [False, True, True]
    """
    asked: list[bool] = []

    def is_leaf(_: Any) -> bool:
        if asked:
            return True
        asked.append(True)
        return False

    return is_leaf


def _visit(
    func: Callable[[Any], Any], structure: Any, children: Callable[[], Any], top_down: bool
) -> Any:
    """One step of Keras's traverse: ``func`` on the node before ``children()`` rebuilds
    it (top down: only where ``func`` says None) or after. MAP_TO_NONE, which Keras tells
    by its name (the layer does not import the API's class), becomes None.

    >>> _visit(lambda x: None, (1,), lambda: "rebuilt", top_down=False)
    'rebuilt'
    """
    if top_down:
        ret = func(structure)
        if ret is None:
            return children()
    else:
        rebuilt = children()
        ret = func(rebuilt)
        if ret is None:
            return rebuilt
    return None if isinstance(ret, type) and ret.__name__ == "MAP_TO_NONE" else ret


# --- Over torch's pytree (Keras 3.12 on) -----------------------------------------------


def _torch_one_level(structure: Any) -> Any:
    """``(children, treedef)`` one level down, or None for a leaf: what Keras's flatten
    with ``is_leaf=lambda x: x is not structure`` gives."""
    from torch.utils import _pytree as torch_tree

    children, treedef = torch_tree.tree_flatten(structure, is_leaf=_root_only())
    if treedef.num_nodes == 1 and treedef.num_leaves == 1:
        return None
    return children, treedef


def _ordered(structure: Any) -> Any:
    from torch.utils import _pytree as torch_tree

    if type(structure) is dict:
        return {k: structure[k] for k in sorted(structure.keys())}
    if type(structure) is defaultdict:
        return defaultdict(
            structure.default_factory, {k: structure[k] for k in sorted(structure.keys())}
        )
    level = _torch_one_level(structure)
    if level is None:
        return structure
    children, treedef = level
    return torch_tree.tree_unflatten([_ordered(c) for c in children], treedef)


def torchtree_dict_to_ordered_dict(structure: Any) -> Any:
    """Keras's ``torchtree_impl._dict_to_ordered_dict``: the structure with the keys of
    its dicts and defaultdicts sorted (a dict's values are left as they are).

    >>> torchtree_dict_to_ordered_dict(({"b": 1, "a": [2]},))
    ({'a': [2], 'b': 1},)
    """
    return _ordered(structure)


def _traverse(func: Callable[[Any], Any], structure: Any, top_down: bool) -> Any:
    from torch.utils import _pytree as torch_tree

    def traverse_children() -> Any:
        level = _torch_one_level(structure)
        if level is None:
            return structure
        children, treedef = level
        return torch_tree.tree_unflatten([_traverse(func, c, top_down) for c in children], treedef)

    structure = _ordered(structure)
    return _visit(func, structure, traverse_children, top_down)


def torchtree_traverse(func: Callable[[Any], Any], structure: Any, top_down: bool = True) -> Any:
    """Keras's ``torchtree_impl.traverse``.

    >>> seen = []
    >>> torchtree_traverse(lambda x: seen.append(x), (1, [2]), top_down=False), seen
    ((1, [2]), [1, 2, [2], (1, [2])])
    """
    return _traverse(func, structure, top_down)


# --- Over optree (Keras 3.1 to 3.11 on torch) ------------------------------------------


def optree_traverse(func: Callable[[Any], Any], structure: Any, top_down: bool = True) -> Any:
    """Keras's ``optree_impl.traverse`` (Keras 3.8 to 3.15). This package's optree layer
    rebuilds a set subclass right, so this twin needs no check for one.

    >>> seen = []
    >>> optree_traverse(lambda x: seen.append(x), {"b": (1,), "a": None}), seen
    ({'b': (1,), 'a': None}, [{'b': (1,), 'a': None}, None, (1,), 1])
    """
    import optree

    def traverse_children() -> Any:
        children, treedef = optree.tree_flatten(
            structure, is_leaf=_root_only(), none_is_leaf=True, namespace="keras"
        )
        if treedef.num_nodes == 1 and treedef.num_leaves == 1:
            return structure
        return optree.tree_unflatten(
            treedef, [optree_traverse(func, c, top_down=top_down) for c in children]
        )

    return _visit(func, structure, traverse_children, top_down)


#: For each twin written here, the fingerprints (:func:`fingerprint`) of the Keras
#: function it mirrors, by the Keras releases that ship it.
WRITTEN_FOR: dict[str, frozenset[str]] = {
    # Keras 3.12.0 to 3.15.1: one torchtree_impl.py.
    "torchtree_dict_to_ordered_dict": frozenset({"b44636bf215b5df7"}),
    "torchtree_traverse": frozenset({"036055f935463ede"}),
    # Keras 3.8.0 to 3.15.1 (3.3 to 3.6 test a sentinel object instead).
    "optree_traverse": frozenset({"c866d5c06a74e0d1"}),
}
