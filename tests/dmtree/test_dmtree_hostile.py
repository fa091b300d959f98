"""Hostile input: each case ends as in the C library (or better, where the C library
crashes or overflows), eagerly and, where Dynamo can take the input, compiled."""

from __future__ import annotations

import collections
import sys
import types
from collections import abc
from collections.abc import Callable, Iterator
from typing import Any

import attr
import pytest
import torch
import wrapt

import dynamo_tree_compat
from dynamo_tree_compat import dmtree
from tests.helpers.dynamo_support import needs_dynamo
from tests.helpers.structures import (
    ReadOnlyMapping,
    assert_identical,
    assert_same_outcome,
    outcome,
)

tree = pytest.importorskip("tree")

ONE_STRUCTURE: dict[str, Callable[[Any, Any], Any]] = {
    "flatten": lambda lib, s: lib.flatten(s),
    "flatten_with_path": lambda lib, s: lib.flatten_with_path(s),
    "is_nested": lambda lib, s: lib.is_nested(s),
    "map_structure": lambda lib, s: lib.map_structure(lambda v: v, s),
    "assert_same_structure": lambda lib, s: lib.assert_same_structure(s, s),
    "unflatten_as": lambda lib, s: lib.unflatten_as(s, lib.flatten(s)),
    "traverse": lambda lib, s: lib.traverse(lambda v: None, s),
}


def assert_parity(make: Callable[[], Any], skip: tuple[str, ...] = ()) -> None:
    """Every one-structure function gives the C library's outcome on ``make()``."""
    for name, call in ONE_STRUCTURE.items():
        if name not in skip:
            assert_same_outcome(outcome(call, tree, make()), outcome(call, dmtree, make()))


def assert_compiled_like_eager(function: Callable[[torch.Tensor], Any]) -> None:
    torch._dynamo.reset()
    x = torch.ones(2)
    expected = outcome(function, x)
    actual = outcome(torch.compile(function, backend="eager"), x)
    assert expected[:1] == actual[:1]
    if expected[0] == "raised":
        assert expected[1:] == actual[1:]
    else:
        assert_identical(expected[1], actual[1])


def test_nested_thousands_of_levels_deep() -> None:
    deep: Any = 0
    for _ in range(2000):
        deep = {"k": [deep]}
    if sys.version_info < (3, 13):  # 3.13 gives C code its own, higher recursion limit
        with pytest.raises(RecursionError):
            tree.flatten(deep)  # the C library overflows; the twin does better
    assert dmtree.flatten(deep) == [0]
    unflattened = dmtree.unflatten_as(deep, [1])
    assert dmtree.flatten(unflattened) == [1]
    dmtree.assert_same_structure(deep, unflattened)
    dmtree.assert_same_structure(deep, dmtree.map_structure(lambda v: v, deep))
    assert len(dmtree.flatten_with_path(deep)[0][0]) == 4000


@pytest.mark.parametrize("make", [lambda: [1], lambda: {"a": 1}], ids=["list", "dict"])
def test_self_referencing_structures_end_with_a_clear_error(make: Callable[[], Any]) -> None:
    loop = make()
    if isinstance(loop, list):
        loop.append(loop)
    else:
        loop["self"] = loop
    for name, call in ONE_STRUCTURE.items():
        if name == "is_nested":
            continue
        with pytest.raises(RecursionError, match="maximum recursion depth exceeded"):
            call(dmtree, loop)


def test_self_referencing_list_built_inside_compiled_code() -> None:
    def function(x: torch.Tensor) -> Any:
        loop: list[Any] = [x]
        loop.append(loop)
        return tree.flatten(loop)

    with pytest.raises(RecursionError):
        torch.compile(function, backend="eager")(torch.ones(1))


def test_a_hundred_thousand_leaves() -> None:
    structure = {f"k{i}": [i, (i,)] for i in range(50_000)}
    assert dmtree.flatten(structure) == tree.flatten(structure)
    assert_identical(tree.map_structure(abs, structure), dmtree.map_structure(abs, structure))
    dmtree.assert_same_structure(structure, structure)


def test_unsortable_keys() -> None:
    assert_parity(lambda: {1: "a", "b": 2, None: 3})
    assert_compiled_like_eager(lambda x: tree.flatten({1: x, "b": x}))
    assert_compiled_like_eager(lambda x: tree.map_structure(abs, [{1: x, "b": x}]))


class _RaisingLess:
    def __init__(self, value: int) -> None:
        self.value = value

    def __lt__(self, other: object) -> bool:
        raise ZeroDivisionError("__lt__ refuses")

    def __hash__(self) -> int:
        return hash(self.value)


def test_keys_whose_lt_raises() -> None:
    # assert_same_structure: dm-tree 0.1.10 raises SystemError (its C core ignores the
    # failed sort); the twin raises the __lt__ error itself.
    assert_parity(lambda: {_RaisingLess(1): 1, _RaisingLess(2): 2}, skip=("assert_same_structure",))
    with pytest.raises(ZeroDivisionError, match="__lt__ refuses"):
        dmtree.assert_same_structure({_RaisingLess(1): 1, _RaisingLess(2): 2}, {1: 1, 2: 2})


class _GetitemRaises(abc.Mapping):
    def __getitem__(self, key: Any) -> Any:
        raise KeyError("no such key")

    def __iter__(self) -> Iterator[str]:
        return iter(["a", "b"])

    def __len__(self) -> int:
        return 2


class _IterRaises(abc.Mapping):
    def __getitem__(self, key: Any) -> Any:
        return 1

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("__iter__ refuses")

    def __len__(self) -> int:
        return 2


def test_mapping_whose_getitem_raises() -> None:
    assert_parity(_GetitemRaises)


def test_mapping_whose_iter_raises() -> None:
    # dm-tree 0.1.10's assert_same_structure crashes the interpreter here (a segmentation
    # fault: its C core iterates a NULL iterator), so it is not called; the twin raises.
    assert_parity(_IterRaises, skip=("assert_same_structure",))
    with pytest.raises(RuntimeError, match="__iter__ refuses"):
        dmtree.assert_same_structure(_IterRaises(), _IterRaises())


class _KeysDisagree(ReadOnlyMapping):
    """A Mapping whose ``keys()`` lists its keys in another order than iterating it."""

    def keys(self) -> Any:
        return list(reversed(list(self._data)))


def test_mapping_whose_keys_disagree_with_its_iteration() -> None:
    """dm-tree takes a Mapping's children from ``keys()`` and rebuilds it in iteration
    order; compiled calls do the same, on every torch the package supports."""
    assert_parity(lambda: _KeysDisagree({"b": 1, "a": [2], "c": 3}))
    for call in (
        lambda s: tree.flatten(s),
        lambda s: tree.flatten_with_path(s),
        lambda s: tree.map_structure(lambda v: v * 2, s),
        lambda s: tree.assert_same_structure(s, s),
    ):
        assert_compiled_like_eager(lambda x, call=call: call(_KeysDisagree({"b": x, "a": [x]})))


_Base = collections.namedtuple("_Base", "a b")


class _CustomNew(_Base):
    def __new__(cls, a: Any, b: Any = 0, *, extra: Any = None) -> _CustomNew:
        return super().__new__(cls, a, b)


class _StrictNew(_Base):
    def __new__(cls, a: Any) -> _StrictNew:
        return super().__new__(cls, a, a)


def test_namedtuple_with_custom_new() -> None:
    assert_parity(lambda: [_CustomNew(1, 2)])
    assert_parity(lambda: [_StrictNew(1)])  # rebuilding calls __new__ with two values


@attr.s
class _InitFalse:
    a = attr.ib()
    b = attr.ib(init=False, default=5)


def test_attrs_class_with_init_false_fields() -> None:
    assert_parity(lambda: [_InitFalse(1)])


class _LiesAboutDict:
    __class__ = property(lambda self: dict)  # type: ignore[assignment]


class _LiesAboutList:
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return list


def test_objects_whose_class_lies() -> None:
    # dm-tree's assert_same_structure can crash the interpreter on the lying "dict" (its
    # C core goes on after a failed keys() call), so it is not called for it.
    assert_parity(lambda: [_LiesAboutDict(), 1], skip=("assert_same_structure",))
    with pytest.raises(AttributeError, match="has no attribute 'keys'"):
        dmtree.assert_same_structure([_LiesAboutDict(), 1], [_LiesAboutDict(), 1])
    assert_parity(lambda: [_LiesAboutList(), 1])


class _MyTensor(torch.Tensor):
    pass


def test_tensor_subclasses_as_leaves() -> None:
    def make() -> Any:
        return {"p": torch.nn.Parameter(torch.ones(2)), "s": torch.ones(2).as_subclass(_MyTensor)}

    assert_parity(make)
    assert_compiled_like_eager(lambda x: tree.map_structure(lambda t: t * 2, {"s": [x, x + 1]}))


@needs_dynamo("Tensor.as_subclass")
def test_tensor_subclasses_made_in_the_graph_as_leaves() -> None:
    assert_compiled_like_eager(
        lambda x: tree.map_structure(lambda t: t * 2, {"s": [x.as_subclass(_MyTensor), x]})
    )


def test_none_and_empty_containers_everywhere() -> None:
    def make() -> Any:
        return [None, [], {}, (), [[], {"a": None}], collections.OrderedDict(), ((),)]

    assert_parity(make)
    assert_compiled_like_eager(
        lambda x: tree.map_structure(lambda v: v, [None, [], {}, (x, ()), {"a": [None, {}]}])
    )


def test_keys_values_and_items_views() -> None:
    def make() -> Any:
        source = {"b": [1], "a": (2,)}
        return [source.keys(), source.values(), source.items()]

    assert_parity(make)
    assert_compiled_like_eager(lambda x: tree.flatten({"v": {"b": x, "a": x * 2}.values()}))


def test_mapping_proxy_and_defaultdict_rebuild() -> None:
    assert_parity(lambda: [types.MappingProxyType({"b": 1}), collections.defaultdict(list, a=1)])


KEY_SAMPLES = [1, 2.5, True, "a", b"b", None, (1,), ("a",), frozenset()]


@pytest.mark.parametrize("right", KEY_SAMPLES, ids=repr)
@pytest.mark.parametrize("left", KEY_SAMPLES, ids=repr)
def test_the_checked_key_sort_ends_as_python_s(left: Any, right: Any) -> None:
    """The sort traced where Dynamo cannot raise a comparison's error as the user's
    (torch 2.8 to 2.10) returns or raises what Python's sorted() does, message included."""
    assert outcome(dmtree._sorted_keys_checked, [left, right]) == outcome(sorted, [left, right])


_Point = collections.namedtuple("_Point", "x y")


@pytest.mark.parametrize("read", [len, lambda proxy: proxy[0]], ids=["len", "item"])
def test_dynamo_cannot_read_a_proxy_of_a_namedtuple_with_no_tree_call(
    read: Callable[[Any], Any],
) -> None:
    """dm-tree's own ``testFlattenWithPath7`` flattens a ``wrapt.ObjectProxy`` of a
    namedtuple, which its C code unwraps. Compiled, it fails before any tree function
    could read the proxy: Dynamo fails on the proxy itself, without this package
    (torch 2.6 on: inside, ``descriptor '__len__' requires a 'tuple' object``)."""
    proxy = wrapt.ObjectProxy(_Point(torch.ones(1), 2))
    assert read(proxy) is not None  # eagerly, the proxy reads as its namedtuple
    with dynamo_tree_compat.disabled():
        compiled = torch.compile(lambda p, x: (read(p), x + 1), backend="eager", fullgraph=True)
        with pytest.raises(torch._dynamo.exc.TorchDynamoException):
            compiled(proxy, torch.ones(1))
