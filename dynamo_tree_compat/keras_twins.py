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

Dynamo (2.13 at least) builds a set subclass made in the graph empty, so a Keras
``TrackedSet`` rebuilt in the graph would come back empty. Where a set subclass is in
the structure, a twin calls the original untraced instead: the graph ends there and the
call runs in plain Python (:func:`connect` hands the twins the originals, wrapped so).
``map_structure`` and ``map_structure_up_to`` have twins for that check alone. (Keras's
layer over dm-tree, ``dmtree_impl``, which Keras never uses on the torch backend, is
left to Dynamo: there a TrackedSet rebuilt in the graph still comes back empty.)

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
    "SET_SUBCLASS_UNTRACED",
    "WRITTEN_FOR",
    "connect",
    "fingerprint",
    "optree_traverse",
    "torchtree_dict_to_ordered_dict",
    "torchtree_map_structure",
    "torchtree_map_structure_up_to",
    "torchtree_traverse",
]

#: Why a call over a structure holding a set subclass runs untraced.
SET_SUBCLASS_UNTRACED = (
    "dynamo-tree-compat runs this keras.tree call untraced: the structure holds a set "
    "subclass (such as Keras's TrackedSet), which Dynamo would rebuild empty"
)

_TORCHTREE = "keras.src.tree.torchtree_impl"

#: Each original, by its import path, wrapped to run untraced (see :func:`connect`).
_UNTRACED: dict[str, Callable[..., Any]] = {}


def connect(untraced: dict[str, Callable[..., Any]]) -> None:
    """Hands the twins their originals, each wrapped so that Dynamo never traces into it
    (``_dynamo.run_untraced``), by import path; the installer calls it as it registers
    them. Until then (the twins run eagerly only in tests) a twin runs its own code."""
    _UNTRACED.update(untraced)


def _has_set_subclass(structure: Any) -> bool:
    """Whether a set subclass (Keras's TrackedSet) is anywhere in ``structure``'s lists,
    tuples, dicts and sets: what any of Keras's tree layers may rebuild.

    >>> class Tracked(set): ...
    >>> _has_set_subclass({"a": [1, {2}]}), _has_set_subclass({"a": (Tracked(),)})
    (False, True)
    """
    if isinstance(structure, (set, frozenset)):
        return type(structure) is not set and type(structure) is not frozenset
    if isinstance(structure, dict):
        return any(_has_set_subclass(value) for value in structure.values())
    if isinstance(structure, (list, tuple)):
        return any(_has_set_subclass(item) for item in structure)
    return False


def _untraced_if_sets(name: str, structures: tuple[Any, ...]) -> Callable[..., Any] | None:
    """The original named, to run untraced, if a set subclass is in ``structures``."""
    if name in _UNTRACED and any(map(_has_set_subclass, structures)):
        return _UNTRACED[name]
    return None


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
    untraced = _untraced_if_sets(f"{_TORCHTREE}._dict_to_ordered_dict", (structure,))
    return untraced(structure) if untraced is not None else _ordered(structure)


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
    untraced = _untraced_if_sets(f"{_TORCHTREE}.traverse", (structure,))
    if untraced is not None:
        return untraced(func, structure, top_down=top_down)
    return _traverse(func, structure, top_down)


def torchtree_map_structure(
    func: Callable[..., Any], *structures: Any, none_is_leaf: bool = True
) -> Any:
    """Keras's ``torchtree_impl.map_structure``.

    >>> torchtree_map_structure(lambda x, y: x + y, {"b": 1, "a": [2]}, {"b": 3, "a": [4]})
    {'b': 4, 'a': [6]}
    """
    from torch.utils import _pytree as torch_tree

    untraced = _untraced_if_sets(f"{_TORCHTREE}.map_structure", structures)
    if untraced is not None:
        return untraced(func, *structures, none_is_leaf=none_is_leaf)
    if not structures:
        raise ValueError("Must provide at least one structure")
    map_func = func
    if not none_is_leaf:

        def func_skipping_none(*args: Any) -> Any:
            if args[0] is None:
                if not all(s is None for s in args):
                    raise ValueError(
                        "Structure mismatch: some arguments are None, others "
                        f"are not. Received arguments: {args}."
                    )
                return None
            return func(*args)

        map_func = func_skipping_none
    return torch_tree.tree_map(map_func, *structures)


def torchtree_map_structure_up_to(
    shallow_structure: Any, func: Callable[..., Any], *structures: Any
) -> Any:
    """Keras's ``torchtree_impl.map_structure_up_to``.

    >>> torchtree_map_structure_up_to((1, 2), lambda x: x * 10, (3, 4))
    (30, 40)
    """
    from torch.utils import _pytree as torch_tree

    name = f"{_TORCHTREE}.map_structure_up_to"
    untraced = _untraced_if_sets(name, (shallow_structure, *structures))
    if untraced is not None:
        return untraced(shallow_structure, func, *structures)
    if not structures:
        raise ValueError("Must provide at least one structure")

    def func_with_check_without_shallow_structure(shallow: Any, *args: Any) -> Any:
        if torch_tree._get_node_type(shallow) in torch_tree.SUPPORTED_NODES:  # not a leaf
            raise ValueError("Structures don't have the same nested structure.")
        return func(*args)

    return torch_tree.tree_map(
        func_with_check_without_shallow_structure, shallow_structure, *structures
    )


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
    "torchtree_map_structure": frozenset({"ef4ce80aabd0198a"}),
    "torchtree_map_structure_up_to": frozenset({"c738a91b9bb73cda"}),
    # Keras 3.8.0 to 3.15.1 (3.3 to 3.6 test a sentinel object instead).
    "optree_traverse": frozenset({"c866d5c06a74e0d1"}),
}
