"""Generated nested structures of every container kind dm-tree knows, and comparisons.

A strategy draws a *spec*, a plain description of a structure; :func:`build` turns a
spec into fresh objects each time, so that a function that mutates its input (a
defaultdict grows keys when looked up) cannot spoil the other side of a comparison.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import re
import sys
import types
from collections import abc
from collections.abc import Callable, Iterator
from typing import Any

import attr
import numpy as np
import torch
import wrapt
from hypothesis import strategies as st

from tests.helpers import leaves as rllib_leaves
from tests.helpers.breadth import by_profile
from tests.helpers.dynamo_support import drawn_kinds, new_defaultdict

Spec = tuple[Any, ...]

#: Structures per compiled fuzz test, by profile (tests/helpers/breadth.py); each compiles.
COMPILED_EXAMPLES = int(
    os.environ.get("DTC_COMPILED_EXAMPLES") or by_profile(quick=4, ci=10, smoke=4, long=2000)
)

# --- Container classes used in specs ---------------------------------------------------

_NAMEDTUPLES: dict[int, type] = {}
_NAMEDTUPLE_SUBCLASSES: dict[int, type] = {}
_ATTRS: dict[int, type] = {}


def namedtuple_class(arity: int) -> type:
    if arity not in _NAMEDTUPLES:
        _NAMEDTUPLES[arity] = collections.namedtuple(
            f"Point{arity}", [f"f{i}" for i in range(arity)]
        )
    return _NAMEDTUPLES[arity]


def namedtuple_subclass(arity: int) -> type:
    if arity not in _NAMEDTUPLE_SUBCLASSES:
        _NAMEDTUPLE_SUBCLASSES[arity] = type(f"SubPoint{arity}", (namedtuple_class(arity),), {})
    return _NAMEDTUPLE_SUBCLASSES[arity]


def attrs_class(arity: int) -> type:
    if arity not in _ATTRS:
        fields = {f"a{i}": attr.ib() for i in range(arity)}
        _ATTRS[arity] = attr.make_class(f"Record{arity}", fields)
    return _ATTRS[arity]


class ReadOnlyMapping(abc.Mapping):
    """A user Mapping that is not a dict."""

    def __init__(self, items: Any = ()) -> None:
        self._data = dict(items)

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"ReadOnlyMapping({self._data!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and list(self._data.items()) == list(other._data.items())

    __hash__ = None  # type: ignore[assignment]


# --- Specs -----------------------------------------------------------------------------

SEQUENCE_KINDS = ("list", "tuple", "namedtuple", "namedtuple_subclass", "deque", "attrs", "proxy")
MAPPING_KINDS = ("dict", "ordereddict", "defaultdict", "mapping", "mappingproxy")
VIEW_KINDS = ("keys", "values", "items")
LEAF_KINDS = ("int", "str", "bytes", "none", "float", "array", "set", "bytearray")
LEAF_KINDS += rllib_leaves.KINDS  # classes, functions, user objects, distributions

_sortable_keys = st.one_of(
    st.sampled_from(["a", "b", "c", "d", "e", "aa"]), st.integers(min_value=-3, max_value=3)
)


def leaves() -> st.SearchStrategy[Spec]:
    return st.one_of(
        st.integers(min_value=-5, max_value=50).map(lambda v: ("int", v)),
        st.sampled_from(["x", "yy", ""]).map(lambda v: ("str", v)),
        st.just(("none", None)),
        st.sampled_from([b"", b"ab"]).map(lambda v: ("bytes", v)),
        st.sampled_from([0.5, -1.0]).map(lambda v: ("float", v)),
        st.integers(0, 3).map(lambda v: ("array", v)),
        st.just(("set", (1, 2))),
        st.just(("bytearray", b"ab")),
        rllib_leaves.strategy(),
    )


def _keys(count: int, unsortable: bool) -> st.SearchStrategy[list[Any]]:
    if unsortable:
        return st.lists(
            st.one_of(st.sampled_from(["k", "j"]), st.integers(0, 2)),
            min_size=count,
            max_size=count,
            unique=True,
        )
    return st.lists(_sortable_keys, min_size=count, max_size=count, unique=True).filter(
        lambda keys: _sorts(keys)
    )


def _sorts(keys: list[Any]) -> bool:
    try:
        sorted(keys)
    except TypeError:
        return False
    return True


@st.composite
def _node(draw: Any, children: st.SearchStrategy[Spec], unsortable: bool, compiled: bool) -> Spec:
    kinds = SEQUENCE_KINDS + MAPPING_KINDS + VIEW_KINDS
    kind = draw(st.sampled_from(drawn_kinds(kinds) if compiled else kinds))
    items = draw(st.lists(children, max_size=4))
    if kind in MAPPING_KINDS or kind in VIEW_KINDS:
        keys = draw(_keys(len(items), unsortable and draw(st.booleans())))
        return (kind, tuple(zip(keys, items)))
    if kind == "proxy":
        # dm-tree caches a proxy's kind by type(proxy), so the first proxy it meets decides
        # for all; proxies of sequences are the ones whose answer never changes.
        inner = draw(st.sampled_from(["list", "tuple", "namedtuple"]))
        return ("proxy", ((inner, tuple(items)),))
    return (kind, tuple(items))


def specs(
    max_leaves: int = 12, unsortable: bool = False, compiled: bool = False
) -> st.SearchStrategy[Spec]:
    """Specs of nested structures mixing every container kind; ``compiled``: those this
    Dynamo itself gets right made in the graph (see ``drawn_kinds``)."""
    return st.recursive(
        leaves(), lambda children: _node(children, unsortable, compiled), max_leaves=max_leaves
    )


PLAIN_KINDS = ("list", "tuple", "dict")
PLAIN_LEAF_KINDS = ("int", "str", "bytes", "none", "float", "array")


@st.composite
def _plain_node(draw: Any, children: st.SearchStrategy[Spec]) -> Spec:
    kind = draw(st.sampled_from(PLAIN_KINDS))
    items = draw(st.lists(children, max_size=4))
    if kind == "dict":
        return (kind, tuple(zip(draw(_keys(len(items), False)), items)))
    return (kind, tuple(items))


def plain_specs(max_leaves: int = 12) -> st.SearchStrategy[Spec]:
    """Specs of exact dicts, lists and tuples only: what the fast path handles."""
    plain_leaves = leaves().filter(lambda spec: spec[0] in PLAIN_LEAF_KINDS)
    return st.recursive(plain_leaves, _plain_node, max_leaves=max_leaves)


def is_plain(spec: Spec) -> bool:
    """Whether ``spec`` holds only exact dicts, lists, tuples and plain leaves."""
    kind, payload = spec
    if kind in LEAF_KINDS:
        return kind in PLAIN_LEAF_KINDS
    if kind == "dict":
        return all(is_plain(child) for _, child in payload)
    return kind in PLAIN_KINDS and all(is_plain(child) for child in payload)


# --- Building --------------------------------------------------------------------------


def build(spec: Spec, leaf: Callable[[Spec], Any] | None = None) -> Any:
    """Fresh objects for ``spec``; ``leaf`` may replace how leaves are made."""
    kind, payload = spec
    if kind in LEAF_KINDS:
        return leaf(spec) if leaf else _build_leaf(kind, payload)
    if kind == "proxy":
        return wrapt.ObjectProxy(build(payload[0], leaf))
    if kind in MAPPING_KINDS or kind in VIEW_KINDS:
        keys = [key for key, _ in payload]
        return container(kind, [build(child, leaf) for _, child in payload], keys)
    return container(kind, [build(child, leaf) for child in payload])


def container(kind: str, items: list[Any], keys: Any = ()) -> Any:
    """A new container of ``kind`` (a spec's) holding ``items``, under ``keys`` for the
    mapping and view kinds. Plain code, which Dynamo traces too, once the namedtuple and
    attrs classes of that arity exist."""
    if kind in MAPPING_KINDS or kind in VIEW_KINDS:
        pairs = list(zip(keys, items))
        if kind == "dict":
            return dict(pairs)
        if kind == "ordereddict":
            return collections.OrderedDict(pairs)
        if kind == "defaultdict":
            return new_defaultdict(list, pairs)
        if kind == "mapping":
            return ReadOnlyMapping(pairs)
        if kind == "mappingproxy":
            return types.MappingProxyType(dict(pairs))
        view = dict(pairs)
        return {"keys": view.keys, "values": view.values, "items": view.items}[kind]()
    if kind == "list":
        return items
    if kind == "tuple":
        return tuple(items)
    if kind == "deque":
        return collections.deque(items)
    if kind == "namedtuple":
        return namedtuple_class(len(items))(*items)
    if kind == "namedtuple_subclass":
        return namedtuple_subclass(len(items))(*items)
    if kind == "attrs":
        return attrs_class(len(items))(*items)
    raise AssertionError(kind)


def _build_leaf(kind: str, payload: Any) -> Any:
    if kind in rllib_leaves.KINDS:
        return rllib_leaves.make(kind, payload)
    if kind == "array":
        return np.arange(payload)
    if kind == "set":
        return set(payload)
    if kind == "bytearray":
        return bytearray(payload)
    return payload


def tensor_leaves(spec: Spec) -> Any:
    """Turns numeric leaves into tensors, for compiled runs; keeps the others."""
    kind, payload = spec
    if kind in ("int", "float"):
        return torch.full((2,), float(payload))
    if kind == "array":
        return torch.arange(payload)
    return _build_leaf(kind, payload)


# --- Comparing -------------------------------------------------------------------------


@contextlib.contextmanager
def deep_recursion(limit: int = 20_000) -> Iterator[None]:
    """Room on Python's stack for eager dm-tree (and the recursive comparisons here) on
    structures 1,000 deep: dm-tree's C core and Python layer recurse per level."""
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(max(saved, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(saved)


_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def normalize(message: str) -> str:
    """Drops memory addresses, which differ between any two runs."""
    return _ADDRESS.sub("0x?", message)


def assert_identical(expected: Any, actual: Any, where: str = "root") -> None:
    """Same types all the way down, same order of keys, equal leaves."""
    assert type(expected) is type(actual), f"{where}: {type(expected)} != {type(actual)}"
    if isinstance(expected, wrapt.ObjectProxy):
        assert_identical(expected.__wrapped__, actual.__wrapped__, where + ".__wrapped__")
    elif isinstance(expected, torch.Tensor):
        assert expected.dtype == actual.dtype and torch.equal(expected, actual), where
    elif isinstance(expected, np.ndarray):
        assert np.array_equal(expected, actual), where
    elif isinstance(expected, collections.defaultdict):
        assert expected.default_factory is actual.default_factory, where
        _assert_items(expected.items(), actual.items(), where)
    elif isinstance(expected, (abc.Mapping, abc.ItemsView)):
        _assert_items(
            expected.items() if isinstance(expected, abc.Mapping) else expected,
            actual.items() if isinstance(actual, abc.Mapping) else actual,
            where,
        )
    elif (dataclasses.is_dataclass(expected) and not isinstance(expected, type)) or hasattr(
        type(expected), "FIELDS"
    ):
        names = getattr(type(expected), "FIELDS", None) or [
            field.name for field in dataclasses.fields(expected)
        ]
        for name in names:
            assert_identical(getattr(expected, name), getattr(actual, name), f"{where}.{name}")
    elif isinstance(expected, torch.distributions.Distribution):
        for name in expected.arg_constraints:
            assert_identical(getattr(expected, name), getattr(actual, name), f"{where}.{name}")
    elif type(expected).__name__ == "PyTreeSpec":  # optree's: equal, and shown alike
        assert expected == actual and repr(expected) == repr(actual), where
    elif attr.has(type(expected)):
        for field in attr.fields(type(expected)):
            assert_identical(
                getattr(expected, field.name), getattr(actual, field.name), f"{where}.{field.name}"
            )
    elif isinstance(expected, (list, tuple, collections.deque, abc.KeysView, abc.ValuesView)):
        expected_items, actual_items = list(expected), list(actual)
        assert len(expected_items) == len(actual_items), f"{where}: lengths differ"
        for index, (left, right) in enumerate(zip(expected_items, actual_items)):
            assert_identical(left, right, f"{where}[{index}]")
    else:
        assert expected == actual, f"{where}: {expected!r} != {actual!r}"


def _assert_items(expected: Any, actual: Any, where: str) -> None:
    expected_items, actual_items = list(expected), list(actual)
    assert [k for k, _ in expected_items] == [k for k, _ in actual_items], f"{where}: keys differ"
    for (key, value), (_, actual_value) in zip(expected_items, actual_items):
        assert_identical(value, actual_value, f"{where}[{key!r}]")


def outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any, Any]:
    """What a call ends in: ``("returned", value, None)`` or ``("raised", type, message)``."""
    try:
        return ("returned", function(*args, **kwargs), None)
    except Exception as error:  # noqa: BLE001 - the outcome is the thing compared
        return ("raised", type(error), normalize(str(error)))


def _c_internal_error(raised: tuple[str, Any, Any]) -> bool:
    """dm-tree's C core raises SystemError (and kin) after a failed key sort it ignored."""
    _, error_type, message = raised
    return error_type is SystemError or (
        error_type is AttributeError and "has no attribute '__class__'" in message
    )


def has_unsortable_keys(spec: Spec) -> bool:
    """Whether any mapping or view in ``spec`` has keys that do not sort."""
    kind, payload = spec
    if kind in LEAF_KINDS:
        return False
    if kind in MAPPING_KINDS or kind in VIEW_KINDS:
        if not _sorts([key for key, _ in payload]):
            return True
        return any(has_unsortable_keys(child) for _, child in payload)
    return any(has_unsortable_keys(child) for child in payload)


def assert_same_outcome(
    expected: tuple[str, Any, Any], actual: tuple[str, Any, Any], swallowed: bool = False
) -> None:
    """The twin's outcome matches the C library's; see README for the divergences.

    After a failed key sort, dm-tree's C core raises SystemError, or, where ``swallowed``
    says it may (assert_same_structure with unsortable keys), goes on with the error
    pending and ends in no set way (it returns, or raises something unrelated, and not
    the same from one run to the next); the twin raises the sort's TypeError.
    """
    if swallowed and actual[0] == "raised" and "not supported between instances" in actual[2]:
        assert actual[1] is TypeError
        return
    if expected[0] == "raised" and _c_internal_error(expected):
        assert actual[0] == "raised" and actual[1] is TypeError, actual
        assert "not supported between instances" in actual[2], actual
        return
    assert expected[0] == actual[0], f"C library {expected[0]} {expected[1:]}, twin {actual}"
    if expected[0] == "raised":
        assert (expected[1], expected[2]) == (actual[1], actual[2])
    else:
        assert_identical(expected[1], actual[1])


def assert_same_ending(expected: tuple[str, Any, Any], actual: tuple[str, Any, Any]) -> None:
    """Two outcomes (see :func:`outcome`) end alike: the same error and message, or
    identical values, shown alike."""
    assert expected[0] == actual[0], (expected, actual)
    if expected[0] == "raised":
        assert expected[1:] == actual[1:]
    else:
        assert_identical(expected[1], actual[1])
        assert repr(expected[1]) == repr(actual[1])
