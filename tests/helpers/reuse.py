"""Pairs of structures that differ, and a call of every public tree function on one.

A compiled function is called many times, and Dynamo reuses a graph wherever its guards
hold: a graph built for one structure must never answer for another. :data:`CHANGES`
pairs a structure with a changed one (a key more, a key less, another order, another
container type, deeper, ...); :data:`CALLS` holds a call of every public function of
dm-tree, optree, torch's pytree and ``keras.tree`` that takes a structure.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from typing import Any, NamedTuple

import attr
import optree
import torch
import torch.utils._pytree as pytree
import tree

from tests.helpers.breadth import LONG, WIDE
from tests.helpers.dynamo_support import TORCH, dynamo_traces, new_defaultdict
from tests.helpers.structures import ReadOnlyMapping

__all__ = ["CALLS", "CHANGES", "CORE", "Change", "changes_for", "keras_tree", "leaf"]


def leaf(value: float = 1.0) -> torch.Tensor:
    """A fresh tensor leaf."""
    return torch.full((2,), float(value))


Point = collections.namedtuple("Point", "a b")
Other = collections.namedtuple("Other", "a b")


@attr.s
class Record:
    a = attr.ib()
    b = attr.ib()


@attr.s
class OtherRecord:
    a = attr.ib()
    b = attr.ib()


class Change(NamedTuple):
    """A structure and a changed one, each made fresh by a call."""

    before: Callable[[], Any]
    after: Callable[[], Any]


def _ab() -> dict[str, Any]:
    return {"a": leaf(1), "b": leaf(2)}


def _moved_to_end(items: dict[str, Any], key: str) -> collections.OrderedDict[str, Any]:
    """An OrderedDict with ``key`` moved to its end: its own order changes, the order of
    the dict beneath it (which optree's C code reads) does not."""
    made = collections.OrderedDict(items)
    made.move_to_end(key)
    return made


def _put_back(items: dict[str, Any], key: str) -> collections.OrderedDict[str, Any]:
    """An OrderedDict with ``key`` popped and put back: both orders change."""
    made = collections.OrderedDict(items)
    made[key] = made.pop(key)
    return made


_DEFAULTDICT = dynamo_traces("defaultdict leaves the graph")
_DEQUE = dynamo_traces("deque maxlen")

#: Each change at the top of the structure, by name.
_TOP: dict[str, Change] = {
    "a dict gains a key": Change(_ab, lambda: {**_ab(), "c": leaf(3)}),
    "a dict loses a key": Change(lambda: {**_ab(), "c": leaf(3)}, _ab),
    "a dict's keys in another order": Change(_ab, lambda: {"b": leaf(2), "a": leaf(1)}),
    "a key renamed": Change(_ab, lambda: {"a": leaf(1), "c": leaf(2)}),
    "an empty dict gains a key": Change(dict, lambda: {"a": leaf(1)}),
    "a key of another type": Change(lambda: {1: leaf(1)}, lambda: {"1": leaf(1)}),
    "a dict becomes an OrderedDict": Change(_ab, lambda: collections.OrderedDict(_ab())),
    "an OrderedDict becomes a dict": Change(lambda: collections.OrderedDict(_ab()), _ab),
    "an OrderedDict's keys in another order": Change(
        lambda: collections.OrderedDict(_ab()),
        lambda: collections.OrderedDict(b=leaf(2), a=leaf(1)),
    ),
    "an OrderedDict's key popped and put back": Change(
        lambda: collections.OrderedDict(_ab()), lambda: _put_back(_ab(), "a")
    ),
    "a list gains an item": Change(lambda: [leaf(1), leaf(2)], lambda: [leaf(1), leaf(2), leaf(3)]),
    "a list loses an item": Change(lambda: [leaf(1), leaf(2)], lambda: [leaf(1)]),
    "a tuple gains an item": Change(lambda: (leaf(1),), lambda: (leaf(1), leaf(2))),
    "a list becomes a tuple": Change(lambda: [leaf(1), leaf(2)], lambda: (leaf(1), leaf(2))),
    "a tuple becomes a list": Change(lambda: (leaf(1), leaf(2)), lambda: [leaf(1), leaf(2)]),
    "a namedtuple of another class": Change(
        lambda: Point(leaf(1), leaf(2)), lambda: Other(leaf(1), leaf(2))
    ),
    "a namedtuple becomes a tuple": Change(
        lambda: Point(leaf(1), leaf(2)), lambda: (leaf(1), leaf(2))
    ),
    "a leaf becomes None": Change(lambda: [leaf(1), leaf(2)], lambda: [leaf(1), None]),
    "None becomes a leaf": Change(lambda: [leaf(1), None], lambda: [leaf(1), leaf(2)]),
    "a leaf becomes a list": Change(lambda: [leaf(1), leaf(2)], lambda: [leaf(1), [leaf(2)]]),
    "a list becomes a leaf": Change(lambda: [leaf(1), [leaf(2)]], lambda: [leaf(1), leaf(2)]),
    "an int leaf changes": Change(lambda: {"a": leaf(1), "n": 1}, lambda: {"a": leaf(1), "n": 2}),
    "a tensor leaf becomes an int": Change(lambda: [leaf(1), leaf(2)], lambda: [leaf(1), 2]),
    "a user Mapping gains a key": Change(
        lambda: ReadOnlyMapping(_ab()), lambda: ReadOnlyMapping({**_ab(), "c": leaf(3)})
    ),
    "an attrs class of another class": Change(
        lambda: Record(leaf(1), leaf(2)), lambda: OtherRecord(leaf(1), leaf(2))
    ),
    "a sibling dict gains a key": Change(
        lambda: [_ab(), _ab()], lambda: [_ab(), {**_ab(), "c": leaf(3)}]
    ),
}
if _DEFAULTDICT:  # where Dynamo hands a defaultdict back as one
    _TOP |= {
        "a dict becomes a defaultdict": Change(_ab, lambda: new_defaultdict(list, _ab().items())),
        "a defaultdict's factory changes": Change(
            lambda: new_defaultdict(list, _ab().items()),
            lambda: new_defaultdict(dict, _ab().items()),
        ),
        "an empty defaultdict's factory changes": Change(
            lambda: new_defaultdict(int, []), lambda: new_defaultdict(None, [])
        ),
        "a defaultdict gains a key": Change(
            lambda: new_defaultdict(list, _ab().items()),
            lambda: new_defaultdict(list, {**_ab(), "c": leaf(3)}.items()),
        ),
    }
# Guarded where a tree function builds or reads the OrderedDict. Torch 2.5 has no guard on
# a call (the order beneath is unguarded); 2.7 to 2.12 build an argument of some calls in
# the caller's frame (docs/coverage.md, "OrderedDicts reordered in place").
if TORCH >= (2, 13):
    _TOP |= {
        "an OrderedDict reordered in place": Change(
            lambda: collections.OrderedDict(_ab()), lambda: _moved_to_end(_ab(), "a")
        ),
        "an OrderedDict in its order, the dict beneath in another": Change(
            lambda: collections.OrderedDict(b=leaf(2), a=leaf(1)),
            lambda: _moved_to_end(_ab(), "a"),
        ),
    }
if _DEQUE:  # where Dynamo keeps a deque's maxlen
    _TOP |= {
        "a deque's maxlen changes": Change(
            lambda: collections.deque([leaf(1)], maxlen=3),
            lambda: collections.deque([leaf(1)], maxlen=5),
        ),
        "a deque gains an item": Change(
            lambda: collections.deque([leaf(1)]), lambda: collections.deque([leaf(1), leaf(2)])
        ),
    }


def _deeper(change: Change) -> Change:
    """The same change two levels down, beside a leaf."""

    def wrap(make: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: {"x": [make()], "y": leaf(9)}

    return Change(wrap(change.before), wrap(change.after))


#: Every change, at the top and two levels down.
CHANGES: dict[str, Change] = {
    **_TOP,
    **{f"{name}, deeper": _deeper(change) for name, change in _TOP.items()},
}

#: The changes CI runs on every call: one for each kind of read a guard must cover (a
#: dict's keys and their order, a container's type, a length, None, a namedtuple's
#: class, a deque's maxlen, a constant), at the top and deeper. The long profile
#: (DTC_FUZZ=long) runs them all.
_CORE_TOP = (
    "a dict gains a key",
    "a dict's keys in another order",
    "a dict becomes an OrderedDict",
    "an OrderedDict's keys in another order",
    "an OrderedDict reordered in place",
    "an OrderedDict in its order, the dict beneath in another",
    "a list gains an item",
    "a list becomes a tuple",
    "a namedtuple of another class",
    "a leaf becomes None",
    "an int leaf changes",
    "a defaultdict's factory changes",
    "an empty defaultdict's factory changes",
    "a deque's maxlen changes",
)
_CORE_DEEPER = (
    "an empty dict gains a key",
    "a leaf becomes a list",
    "a sibling dict gains a key",
)
CORE: tuple[str, ...] = tuple(
    name for name in (*_CORE_TOP, *(f"{name}, deeper" for name in _CORE_DEEPER)) if name in CHANGES
)
if LONG:
    CORE = tuple(CHANGES)
#: In make test's profile, each call takes every ROTATION-th change of the core, from its
#: place among its library's calls on: every change still meets every library (each has
#: at least ROTATION calls), through an eighth of its calls; the ci and long profiles run
#: every change on every call.
ROTATION = 1 if WIDE else 8


def changes_for(place: int) -> tuple[str, ...]:
    """The core changes for the call at ``place`` among its library's calls.

    >>> sorted(set().union(*map(changes_for, range(ROTATION)))) == sorted(CORE)
    True
    >>> 0 < len(changes_for(0)) <= len(CORE)
    True
    """
    return CORE[place % ROTATION :: ROTATION]


# --- The calls ------------------------------------------------------------------------


def _double(value: Any) -> Any:
    return value * 2 if isinstance(value, torch.Tensor) else value


def _add(left: Any, right: Any) -> Any:
    return left + right if isinstance(left, torch.Tensor) else left


def _with_path(path: Any, value: Any) -> Any:
    return (len(path), _double(value))


def _is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def _two(value: Any) -> list[Any]:
    return [value, _double(value)]


def _spec(structure: Any) -> Any:
    return optree.tree_structure(structure)


_DMTREE: dict[str, Callable[[Any], Any]] = {
    "is_nested": tree.is_nested,
    "flatten": tree.flatten,
    "flatten_with_path": tree.flatten_with_path,
    "flatten_up_to": lambda s: tree.flatten_up_to(s, s),
    "flatten_with_path_up_to": lambda s: tree.flatten_with_path_up_to(s, s),
    "unflatten_as": lambda s: tree.unflatten_as(s, tree.flatten(s)),
    "map_structure": lambda s: tree.map_structure(_double, s),
    "map_structure of two": lambda s: tree.map_structure(_add, s, s),
    "map_structure_with_path": lambda s: tree.map_structure_with_path(_with_path, s),
    "map_structure_up_to": lambda s: tree.map_structure_up_to(s, _double, s),
    "map_structure_with_path_up_to": lambda s: tree.map_structure_with_path_up_to(s, _with_path, s),
    "assert_same_structure": lambda s: tree.assert_same_structure(s, s),
    "traverse": lambda s: tree.traverse(lambda _: None, s),
    "traverse_with_path": lambda s: tree.traverse_with_path(lambda p, v: None, s, False),
}

_OPTREE: dict[str, Callable[[Any], Any]] = {
    "tree_flatten": optree.tree_flatten,
    "tree_flatten_with_path": optree.tree_flatten_with_path,
    "tree_flatten_with_accessor": optree.tree_flatten_with_accessor,
    "tree_unflatten": lambda s: optree.tree_unflatten(_spec(s), optree.tree_leaves(s)),
    "tree_iter": lambda s: list(optree.tree_iter(s)),
    "tree_leaves": optree.tree_leaves,
    "tree_structure": optree.tree_structure,
    "tree_paths": optree.tree_paths,
    "tree_accessors": optree.tree_accessors,
    "tree_is_leaf": optree.tree_is_leaf,
    "all_leaves": lambda s: optree.all_leaves(optree.tree_leaves(s)),
    "tree_map": lambda s: optree.tree_map(_double, s),
    "tree_map of two": lambda s: optree.tree_map(_add, s, s),
    "tree_map_": lambda s: optree.tree_map_(lambda _: None, s),
    "tree_map_with_path": lambda s: optree.tree_map_with_path(_with_path, s),
    "tree_map_with_path_": lambda s: optree.tree_map_with_path_(lambda p, v: None, s),
    "tree_map_with_accessor": lambda s: optree.tree_map_with_accessor(lambda a, v: v, s),
    "tree_map_with_accessor_": lambda s: optree.tree_map_with_accessor_(lambda a, v: None, s),
    "tree_replace_nones": lambda s: optree.tree_replace_nones(0, s),
    "tree_partition": lambda s: optree.tree_partition(_is_tensor, s),
    "tree_transpose": lambda s: optree.tree_transpose(
        _spec(s), _spec([0, 0]), optree.tree_map(_two, s)
    ),
    "tree_transpose_map": lambda s: optree.tree_transpose_map(_two, s),
    "tree_transpose_map_with_path": lambda s: optree.tree_transpose_map_with_path(
        lambda p, v: [len(p), v], s
    ),
    "tree_transpose_map_with_accessor": lambda s: optree.tree_transpose_map_with_accessor(
        lambda a, v: [v, v], s
    ),
    "tree_broadcast_prefix": lambda s: optree.tree_broadcast_prefix(s, s),
    "broadcast_prefix": lambda s: optree.broadcast_prefix(s, s),
    "tree_broadcast_common": lambda s: optree.tree_broadcast_common(s, s),
    "broadcast_common": lambda s: optree.broadcast_common(s, s),
    "tree_broadcast_map": lambda s: optree.tree_broadcast_map(_add, s, s),
    "tree_broadcast_map_with_path": lambda s: optree.tree_broadcast_map_with_path(
        lambda p, u, v: _add(u, v), s, s
    ),
    "tree_broadcast_map_with_accessor": lambda s: optree.tree_broadcast_map_with_accessor(
        lambda a, u, v: _add(u, v), s, s
    ),
    "tree_reduce": lambda s: optree.tree_reduce(_add, s),
    "tree_sum": optree.tree_sum,
    "tree_max": lambda s: optree.tree_max(optree.tree_map(lambda v: len(v.shape), s)),
    "tree_min": lambda s: optree.tree_min(optree.tree_map(lambda v: 1, s), default=0),
    "tree_all": lambda s: optree.tree_all(optree.tree_map(_is_tensor, s)),
    "tree_any": lambda s: optree.tree_any(optree.tree_map(_is_tensor, s)),
    "tree_flatten_one_level": lambda s: tuple(optree.tree_flatten_one_level(s))[:3],
    "prefix_errors": lambda s: len(optree.prefix_errors(s, s)),
    "treespec_paths": lambda s: optree.treespec_paths(_spec(s)),
    "treespec_accessors": lambda s: optree.treespec_accessors(_spec(s)),
    "treespec_entries": lambda s: optree.treespec_entries(_spec(s)),
    "treespec_entry": lambda s: optree.treespec_entry(_spec(s), 0),
    "treespec_children": lambda s: optree.treespec_children(_spec(s)),
    "treespec_child": lambda s: optree.treespec_child(_spec(s), 0),
    "treespec_one_level": lambda s: optree.treespec_one_level(_spec(s)),
    "treespec_transform": lambda s: optree.treespec_transform(_spec(s), None, None),
    "treespec_is_leaf": lambda s: optree.treespec_is_leaf(_spec(s)),
    "treespec_is_strict_leaf": lambda s: optree.treespec_is_strict_leaf(_spec(s)),
    "treespec_is_one_level": lambda s: optree.treespec_is_one_level(_spec(s)),
    "treespec_is_prefix": lambda s: optree.treespec_is_prefix(_spec(s), _spec(s)),
    "treespec_is_suffix": lambda s: optree.treespec_is_suffix(_spec(s), _spec(s)),
    "treespec_list": lambda s: optree.treespec_list([_spec(s), _spec(s)]),
    "treespec_tuple": lambda s: optree.treespec_tuple([_spec(s)]),
    "treespec_dict": lambda s: optree.treespec_dict({"k": _spec(s)}),
    "is_namedtuple": optree.is_namedtuple,
    "is_namedtuple_instance": optree.is_namedtuple_instance,
    "is_structseq_instance": optree.is_structseq_instance,
    "namedtuple_fields": optree.namedtuple_fields,
}

_PYTREE: dict[str, Callable[[Any], Any] | None] = {
    "tree_flatten": pytree.tree_flatten,
    "tree_flatten_with_path": pytree.tree_flatten_with_path,
    "tree_unflatten": lambda s: pytree.tree_unflatten(*pytree.tree_flatten(s)),
    "tree_iter": lambda s: list(pytree.tree_iter(s)),
    "tree_leaves": pytree.tree_leaves,
    "tree_leaves_with_path": pytree.tree_leaves_with_path,
    "tree_structure": pytree.tree_structure,
    "tree_map": lambda s: pytree.tree_map(_double, s),
    "tree_map of two": lambda s: pytree.tree_map(_add, s, s),
    "tree_map_with_path": lambda s: pytree.tree_map_with_path(_with_path, s),
    "tree_map_": lambda s: pytree.tree_map_(lambda _: None, s),
    "tree_map_only": lambda s: pytree.tree_map_only(torch.Tensor, _double, s),
    "tree_map_only_": lambda s: pytree.tree_map_only_(torch.Tensor, lambda _: None, s),
    "tree_all": lambda s: pytree.tree_all(_is_tensor, s),
    "tree_any": lambda s: pytree.tree_any(_is_tensor, s),
    "tree_all_only": lambda s: pytree.tree_all_only(torch.Tensor, lambda v: True, s),
    "tree_any_only": lambda s: pytree.tree_any_only(int, lambda v: True, s),
    "tree_is_leaf": getattr(pytree, "tree_is_leaf", None),  # torch 2.6 on
    "keystr": lambda s: [pytree.keystr(path) for path, _ in pytree.tree_leaves_with_path(s)],
    "is_namedtuple_instance": getattr(pytree, "is_namedtuple_instance", None),  # 2.6 on
}
_PYTREE_HERE = {name: call for name, call in _PYTREE.items() if call is not None}


def keras_tree() -> Any:
    """``keras.tree`` on the torch backend, or None where Keras is not installed."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    try:
        import keras
    except ImportError:
        return None
    return keras.tree


def _keras_calls() -> dict[str, Callable[[Any], Any]]:
    """``keras.tree``'s functions, where Keras is installed."""
    kt = keras_tree()
    if kt is None:
        return {}
    return {
        "is_nested": kt.is_nested,
        "traverse": lambda s: kt.traverse(lambda _: None, s),
        "flatten": kt.flatten,
        "flatten_with_path": kt.flatten_with_path,
        "map_structure": lambda s: kt.map_structure(_double, s),
        "map_structure_up_to": lambda s: kt.map_structure_up_to(s, _double, s),
        "assert_same_structure": lambda s: kt.assert_same_structure(s, s),
        "assert_same_paths": lambda s: kt.assert_same_paths(s, s),
        "pack_sequence_as": lambda s: kt.pack_sequence_as(s, kt.flatten(s)),
        "lists_to_tuples": kt.lists_to_tuples,
        "map_shape_structure": lambda s: kt.map_shape_structure(_double, s),
    }


#: Each library's calls, by the library's name then the call's.
CALLS: dict[str, dict[str, Callable[[Any], Any]]] = {
    "dm-tree": _DMTREE,
    "optree": _OPTREE,
    "torch pytree": _PYTREE_HERE,
    "keras.tree": _keras_calls(),
}
