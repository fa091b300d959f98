"""A representative call of every public optree function, on tensors, for compiled tests.

Each call takes two tensors and a list that callbacks append to, so that the order in
which optree calls a user's function is compared too. The trees mix every container
kind optree knows and custom nodes registered in each of optree's three ways.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import optree
import optree.dataclasses
import torch

from tests.helpers.dynamo_support import dynamo_traces, new_defaultdict

#: The namespace the custom nodes below are registered in.
NS = "dtc-test"
Point = collections.namedtuple("Point", "x y")


class Pair:
    """Registered with optree.register_pytree_node."""

    FIELDS = ("left", "right")

    def __init__(self, left: Any, right: Any) -> None:
        self.left, self.right = left, right

    def __repr__(self) -> str:
        return f"Pair({self.left!r}, {self.right!r})"


optree.register_pytree_node(
    Pair,
    lambda p: ((p.left, p.right), None, ("left", "right")),
    lambda _, children: Pair(*children),
    namespace=NS,
)


@optree.register_pytree_node_class(namespace=NS)
class Box:
    """Registered with optree.register_pytree_node_class."""

    FIELDS = ("items", "tag")

    def __init__(self, items: list[Any], tag: str) -> None:
        self.items, self.tag = items, tag

    def tree_flatten(self) -> tuple[list[Any], str]:
        return self.items, self.tag

    @classmethod
    def tree_unflatten(cls, tag: str, items: Any) -> Box:
        return cls(list(items), tag)

    def __repr__(self) -> str:
        return f"Box({self.items!r}, {self.tag!r})"


@optree.dataclasses.dataclass(namespace=NS)
class Cfg:
    """Registered with optree.dataclasses.dataclass."""

    w: Any
    b: Any
    name: str = dataclasses.field(default="c", metadata={"pytree_node": False})


def every_kind(x: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
    """A tree with every container kind of optree's own and the three custom nodes (a
    structseq, a deque with a maxlen and a defaultdict where Dynamo makes them in the
    graph)."""
    tree = {
        "d": {"z": x, "a": [y, None, ()], "m": {}},
        "o": collections.OrderedDict(z=y, a=(x,)),
        "p": Point(x, y),
        "c": [Pair(x, (y,)), Box([y, {"u": x}], "t"), Cfg(x, y)],
    }
    if _STRUCTSEQ:
        tree["s"] = torch.return_types.max((x, 3))
    if _DEQUE_MAXLEN:
        tree["q"] = collections.deque([x, y], maxlen=4)
    if _DEFAULTDICTS_RETURNED:
        tree["dd"] = new_defaultdict(list, {"k": x, "j": y}.items())
    return tree


_DEFAULTDICTS_RETURNED = dynamo_traces("defaultdict leaves the graph")
_DEQUE_MAXLEN = dynamo_traces("deque maxlen")
_STRUCTSEQ = dynamo_traces("structseq made in the graph")
#: Whether Dynamo builds and reads a tuple subclass (optree's PyTreeAccessor).
_TUPLE_SUBCLASS = dynamo_traces("tuple subclass")
#: Whether Dynamo traces ``tuple.__repr__``, which an accessor's ``repr`` calls, and
#: ``repr`` of its entries (frozen dataclasses).
_TUPLE_REPR = dynamo_traces("tuple.__repr__")
_ENTRY_REPR = dynamo_traces("frozen dataclass repr")


#: Calls and spec methods that need a Dynamo feature some supported torch lacks (see
#: dynamo_support).
NEEDS: dict[str, str | tuple[str, ...]] = {
    "treespec_defaultdict": "defaultdict(factory, items)",
    "prefix_errors": "tuple subclass",  # optree's PyTreeAccessor
    "treespec_accessors": "tuple subclass",
    "accessors": "tuple subclass",
    "hash": "hash",
    # optree's FlattenOneLevelOutputEx, and on a dict its DictMetaData
    "tree_flatten_one_level": ("namedtuple subclass", "list subclass"),
    # the twin reads a custom node one level at a time, as optree's iterator does
    "tree_iter": ("namedtuple subclass", "list subclass", "a generator read lazily"),
    "tree_all": "a generator read lazily",  # optree's code reads tree_iter
    "tree_any": "a generator read lazily",
    "treespec_deque": "deque maxlen",
    "treespec_structseq": "structseq made in the graph",
}


def accessor_text(accessor: Any) -> Any:
    """An accessor's ``repr``, or where Dynamo cannot trace ``tuple.__repr__`` (which
    that calls), the same facts: its class, its code and its entries' ``repr`` (or,
    where Dynamo cannot trace that either, their class and fields). Where Dynamo cannot
    read a tuple subclass at all (2.7: not its length, items or methods), its class."""
    if not _TUPLE_SUBCLASS:
        return type(accessor).__name__
    if _TUPLE_REPR:
        return repr(accessor)
    if _ENTRY_REPR:
        entries = [repr(e) for e in accessor]
    else:
        entries = [
            f"{type(e).__name__}({e.entry!r}, {e.type.__name__}, {e.kind!r})" for e in accessor
        ]
    return " ".join([type(accessor).__name__, accessor.codify(), *entries])


def _record(seen: list[Any]) -> Callable[..., Any]:
    def record(*args: Any) -> Any:
        seen.append(len(args))
        *_, last = args
        return last * 2 if isinstance(last, torch.Tensor) else last

    return record


def _plain(x: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
    return {"b": [x, None], "a": (y, {"c": x})}


SPEC = optree.tree_structure({"b": [0, None], "a": (0, {"c": 0})})
TWO = optree.tree_structure([0, 0])


def _leaf_lists(x: torch.Tensor, y: torch.Tensor) -> Any:
    return [[x, y], [y, x]]


Call = Callable[[torch.Tensor, torch.Tensor, list[Any]], Any]
_T = every_kind
#: How many leaves every_kind has here (two fewer without its defaultdict).
_LEAVES = optree.tree_structure(_T(1, 2), namespace=NS).num_leaves
CALLS: dict[str, Call] = {
    "tree_flatten": lambda x, y, s: optree.tree_flatten(_T(x, y), namespace=NS),
    "tree_flatten_with_path": lambda x, y, s: optree.tree_flatten_with_path(_T(x, y), namespace=NS),
    "tree_flatten_with_accessor": lambda x, y, s: optree.tree_flatten_with_accessor(_plain(x, y))[
        1:
    ],
    "tree_unflatten": lambda x, y, s: (
        optree.tree_unflatten(optree.tree_structure(_T(x, y), namespace=NS), [x] * _LEAVES),
        optree.tree_unflatten(optree.tree_structure({"a": x}), [1]),
    ),
    "tree_iter": lambda x, y, s: list(optree.tree_iter(_T(x, y), namespace=NS)),
    "tree_leaves": lambda x, y, s: optree.tree_leaves(_T(x, y), none_is_leaf=True, namespace=NS),
    "tree_structure": lambda x, y, s: optree.tree_structure(_T(x, y), namespace=NS),
    "tree_paths": lambda x, y, s: optree.tree_paths(_T(x, y), namespace=NS),
    "tree_accessors": lambda x, y, s: len(optree.tree_accessors(_plain(x, y))),
    "tree_is_leaf": lambda x, y, s: [
        optree.tree_is_leaf(v, namespace=NS) for v in (x, None, Point(x, y), Pair(x, y))
    ],
    "all_leaves": lambda x, y, s: (optree.all_leaves([x, y]), optree.all_leaves([[x]])),
    "tree_map": lambda x, y, s: optree.tree_map(_record(s), _T(x, y), _T(y, x), namespace=NS),
    "tree_map_": lambda x, y, s: optree.tree_map_(_record(s), _T(x, y), namespace=NS),
    "tree_map_with_path": lambda x, y, s: optree.tree_map_with_path(
        _record(s), _T(x, y), namespace=NS
    ),
    "tree_map_with_path_": lambda x, y, s: optree.tree_map_with_path_(
        _record(s), _T(x, y), namespace=NS
    ),
    "tree_map_with_accessor": lambda x, y, s: optree.tree_map_with_accessor(
        lambda a, v: v + 1, _plain(x, y)
    ),
    "tree_map_with_accessor_": lambda x, y, s: (
        optree.tree_map_with_accessor_(lambda a, v: s.append(1), _plain(x, y)) and None
    ),
    "tree_replace_nones": lambda x, y, s: optree.tree_replace_nones(x, _T(x, y), namespace=NS),
    "tree_partition": lambda x, y, s: optree.tree_partition(
        lambda v: v is x, _plain(x, y), none_is_leaf=True
    ),
    "tree_transpose": lambda x, y, s: optree.tree_transpose(TWO, TWO, _leaf_lists(x, y)),
    "tree_transpose_map": lambda x, y, s: optree.tree_transpose_map(
        lambda v: [v, v + 1], _plain(x, y)
    ),
    "tree_transpose_map_with_path": lambda x, y, s: optree.tree_transpose_map_with_path(
        lambda p, v: [len(p), v], _plain(x, y)
    ),
    "tree_transpose_map_with_accessor": lambda x, y, s: optree.tree_transpose_map_with_accessor(
        lambda a, v: [v, v], _plain(x, y)
    ),
    "tree_broadcast_prefix": lambda x, y, s: optree.tree_broadcast_prefix([x, y], [[x], (y, x)]),
    "broadcast_prefix": lambda x, y, s: optree.broadcast_prefix([x, y], [[x], (y, x)]),
    "tree_broadcast_common": lambda x, y, s: optree.tree_broadcast_common(
        {"a": x, "b": [y]}, {"a": [x, y], "b": y}
    ),
    "broadcast_common": lambda x, y, s: optree.broadcast_common(
        {"a": x, "b": [y]}, {"a": [x, y], "b": y}
    ),
    "tree_broadcast_map": lambda x, y, s: optree.tree_broadcast_map(
        _record(s), {"a": x, "b": [y]}, {"a": [x, y], "b": y}
    ),
    "tree_broadcast_map_with_path": lambda x, y, s: optree.tree_broadcast_map_with_path(
        _record(s), {"a": x, "b": [y]}, {"a": [x, y], "b": y}
    ),
    "tree_broadcast_map_with_accessor": lambda x, y, s: optree.tree_broadcast_map_with_accessor(
        lambda a, u, v: u + v, {"a": x, "b": [y]}, {"a": [x, y], "b": y}
    ),
    "tree_reduce": lambda x, y, s: optree.tree_reduce(lambda a, b: a + b, _T(x, y), namespace=NS),
    "tree_sum": lambda x, y, s: optree.tree_sum([x, (y, {"a": x})]),
    "tree_max": lambda x, y, s: (
        optree.tree_max({"a": 3, "b": [1, 5]}),
        optree.tree_max([1, -7], key=abs),
    ),
    "tree_min": lambda x, y, s: (
        optree.tree_min({"a": 3, "b": [1, 5]}),
        optree.tree_min([], default=9),
    ),
    "tree_all": lambda x, y, s: (optree.tree_all({"a": True, "b": [1, 2]}), optree.tree_all([])),
    "tree_any": lambda x, y, s: (optree.tree_any([0, None, (0,)]), optree.tree_any([0, [1]])),
    "tree_flatten_one_level": lambda x, y, s: [
        # tuple() first: Dynamo 2.9 slices a namedtuple into the namedtuple's class.
        tuple(optree.tree_flatten_one_level(v, namespace=NS))[:3]
        for v in (_plain(x, y), Pair(x, y), Point(x, y), Box([x], "b"), Cfg(x, y))
    ],
    "prefix_errors": lambda x, y, s: len(optree.prefix_errors([x, y], [[x], (y, x)])),
    "treespec_paths": lambda x, y, s: optree.treespec_paths(SPEC),
    "treespec_accessors": lambda x, y, s: [
        accessor_text(a) for a in optree.treespec_accessors(SPEC)
    ],
    "treespec_entries": lambda x, y, s: optree.treespec_entries(SPEC),
    "treespec_entry": lambda x, y, s: optree.treespec_entry(SPEC, 1),
    "treespec_children": lambda x, y, s: optree.treespec_children(SPEC),
    "treespec_child": lambda x, y, s: optree.treespec_child(SPEC, 0),
    "treespec_one_level": lambda x, y, s: optree.treespec_one_level(SPEC),
    "treespec_transform": lambda x, y, s: optree.treespec_transform(
        SPEC, None, lambda leaf: optree.treespec_tuple([leaf, leaf])
    ),
    "treespec_is_leaf": lambda x, y, s: (
        optree.treespec_is_leaf(SPEC),
        optree.treespec_is_leaf(optree.treespec_none(), strict=False),
    ),
    "treespec_is_strict_leaf": lambda x, y, s: optree.treespec_is_strict_leaf(SPEC),
    "treespec_is_one_level": lambda x, y, s: optree.treespec_is_one_level(TWO),
    "treespec_is_prefix": lambda x, y, s: optree.treespec_is_prefix(TWO, SPEC),
    "treespec_is_suffix": lambda x, y, s: optree.treespec_is_suffix(TWO, SPEC, strict=False),
    "treespec_leaf": lambda x, y, s: optree.treespec_leaf(none_is_leaf=True),
    "treespec_none": lambda x, y, s: optree.treespec_none(namespace=NS),
    "treespec_tuple": lambda x, y, s: optree.treespec_tuple([SPEC, TWO]),
    "treespec_list": lambda x, y, s: optree.treespec_list([SPEC, TWO]),
    "treespec_dict": lambda x, y, s: optree.treespec_dict({"b": SPEC, "a": TWO}),
    "treespec_namedtuple": lambda x, y, s: optree.treespec_namedtuple(Point(SPEC, TWO)),
    "treespec_ordereddict": lambda x, y, s: optree.treespec_ordereddict(
        collections.OrderedDict(b=SPEC, a=TWO)
    ),
    "treespec_defaultdict": lambda x, y, s: optree.treespec_defaultdict(int, {"b": SPEC}),
    "treespec_deque": lambda x, y, s: optree.treespec_deque([SPEC, TWO], maxlen=3),
    "treespec_structseq": lambda x, y, s: optree.treespec_structseq(
        torch.return_types.max([TWO, TWO])
    ),
    "treespec_from_collection": lambda x, y, s: optree.treespec_from_collection(
        {"b": SPEC, "a": TWO}
    ),
    "is_namedtuple": lambda x, y, s: (optree.is_namedtuple(Point), optree.is_namedtuple(x)),
    "is_namedtuple_class": lambda x, y, s: optree.is_namedtuple_class(Point),
    "is_namedtuple_instance": lambda x, y, s: optree.is_namedtuple_instance(Point(x, y)),
    "namedtuple_fields": lambda x, y, s: optree.namedtuple_fields(Point(x, y)),
    "is_structseq": lambda x, y, s: optree.is_structseq(time.struct_time),
    "is_structseq_class": lambda x, y, s: optree.is_structseq_class(time.struct_time),
    "is_structseq_instance": lambda x, y, s: optree.is_structseq_instance(Point(x, y)),
    "structseq_fields": lambda x, y, s: optree.structseq_fields(torch.return_types.max((x, y))),
}

#: Calls that change optree's global state: inside a compiled region they may break the
#: graph (the issue allows it); they are checked with fullgraph=False.
STATEFUL: dict[str, Call] = {
    "register_pytree_node": lambda x, y, s: (
        optree.register_pytree_node(
            type("Local", (), {}), lambda o: ((), None), lambda m, c: None, namespace="dtc-local"
        )
        and x + 1
    ),
    "register_pytree_node_class": lambda x, y, s: (
        optree.register_pytree_node_class(namespace="dtc-local") and x + 1
    ),
    "unregister_pytree_node": lambda x, y, s: _register_and_unregister(x),
    "dict_insertion_ordered": lambda x, y, s: _with_insertion_order(x, y),
}


def _with_insertion_order(x: torch.Tensor, y: torch.Tensor) -> Any:
    with optree.dict_insertion_ordered(True, namespace=NS):
        return optree.tree_leaves({"b": x, "a": y}, namespace=NS)


#: Calls that raise in eager optree here (frozendict needs Python 3.15), and with the
#: package: the same error.
RAISES: dict[str, Call] = {
    "treespec_frozendict": lambda x, y, s: optree.treespec_frozendict({"a": SPEC}),
}


def _register_and_unregister(x: torch.Tensor) -> Any:
    local = type("Local", (), {})
    optree.register_pytree_node(local, lambda o: ((), None), lambda m, c: local(), namespace="dl")
    optree.unregister_pytree_node(local, namespace="dl")
    return x + 1


def _leaf(v: Any) -> Any:
    return v * 3 if isinstance(v, torch.Tensor) else v


#: Every PyTreeSpec method and attribute, and the accessors a spec gives.
METHODS: dict[str, Call] = {
    "attributes": lambda x, y, s: [
        (t.num_leaves, t.num_nodes, t.num_children, t.kind, t.type, t.namespace, t.none_is_leaf)
        for t in (SPEC, TWO, optree.tree_structure(every_kind(x, y), namespace=NS))
    ],
    "structure": lambda x, y, s: (
        SPEC.paths(),
        SPEC.entries(),
        SPEC.entry(0),
        SPEC.children(),
        SPEC.child(1),
        SPEC.one_level(),
        SPEC.is_leaf(),
        SPEC.is_leaf(strict=False),
        SPEC.is_one_level(),
        len(SPEC),
        str(SPEC),
        repr(SPEC),
    ),
    "relations": lambda x, y, s: (
        TWO.is_prefix(SPEC),
        SPEC.is_suffix(TWO),
        TWO.compose(SPEC),
        TWO.broadcast_to_common_suffix(optree.tree_structure([(0, 0), 0])),
        SPEC == TWO,
        SPEC != TWO,
        TWO < TWO.compose(TWO),
        TWO <= TWO,
        TWO > optree.tree_structure(0),
        TWO >= TWO,
        SPEC != 1,
    ),
    "hash": lambda x, y, s: (
        hash(SPEC) == hash(optree.tree_structure({"b": [0, None], "a": (0, {"c": 0})}))
    ),
    "unflatten": lambda x, y, s: (SPEC.unflatten([x, y, x]), SPEC.flatten_up_to(_plain(x, y))),
    "walk": lambda x, y, s: (
        SPEC.walk([x, y, x], lambda t, d, c: (t, d, c), _leaf),
        SPEC.walk([x, y, x], None, _leaf),
    ),
    "traverse": lambda x, y, s: (
        SPEC.traverse([x, y, x], lambda n: (type(n).__name__, n), _leaf),
        SPEC.traverse([x, y, x]),
    ),
    "transform": lambda x, y, s: SPEC.transform(
        lambda n: n, lambda leaf: optree.treespec_list([leaf, leaf])
    ),
    "accessors": lambda x, y, s: [
        (a(_plain(x, y)), a.path, accessor_text(a), a.codify("t")) for a in SPEC.accessors()
    ],
}
