"""optree's tree_leaves, its maps (with paths, with accessors) and the tree_flatten family:
the fast path.

For dicts, lists, tuples and None holding tensors and constants, the fast path gives
eager optree's answer exactly: it asks optree's own C code, while tracing, for the order
of the leaves, their paths and the containers of the result. Anything else goes on to
optree's own Python code, over this package's handling of optree's C functions.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dynamo_tree_compat
from dynamo_tree_compat import _dynamo
from dynamo_tree_compat._dynamo.runtime import Event
from tests.helpers.compiling import compiled, stats
from tests.helpers.dynamo_support import TORCH, dynamo_traces, needs_dynamo, require_dynamo
from tests.helpers.structures import (
    COMPILED_EXAMPLES,
    Spec,
    assert_identical,
    build,
    outcome,
    plain_specs,
    tensor_leaves,
)

optree = pytest.importorskip("optree")

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
NAMES = (
    "optree.tree_leaves",
    "optree.tree_map",
    "optree.tree_map_with_path",
    "optree.tree_map_with_accessor",
)


def _tag(path: Any, value: Any) -> Any:
    return (path, value * 2 if isinstance(value, torch.Tensor) else value)


CALLS: dict[str, Callable[[Any], Any]] = {
    "optree.tree_leaves": optree.tree_leaves,
    "optree.tree_map": lambda s: optree.tree_map(lambda a, b: (b, a), s, s),
    "optree.tree_map_with_path": lambda s: optree.tree_map_with_path(_tag, s, none_is_leaf=True),
    "optree.tree_map_with_accessor": lambda s: optree.tree_map_with_accessor(
        lambda a, v, w: (v, w), s, s, none_is_leaf=True
    ),
    "optree.tree_flatten": optree.tree_flatten,
    "optree.tree_structure": lambda s: optree.tree_structure(s, none_is_leaf=True),
    "optree.tree_flatten_with_path": optree.tree_flatten_with_path,
}


def mixed(x: torch.Tensor) -> dict[Any, Any]:
    return {"b": [x, None, (x + 1, "s")], "a": x * 2, "c": {}, "d": (), 3.5: {"z": 1, "y": x}}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_taken_and_exact_for_plain_structures(name: str) -> None:
    def body(x: torch.Tensor) -> Any:
        return CALLS[name]({"k": mixed(x), "j": [mixed(x)]}), CALLS[name](x), CALLS[name](None)

    x = torch.arange(2.0)
    assert_identical(body(x), compiled(body)(x))
    assert stats(Event.TAKEN) == {name} and not stats(Event.FALLBACK)


def test_func_is_called_in_optree_order_not_insertion_order() -> None:
    def body(x: torch.Tensor, seen: list[Any]) -> Any:
        def count(value: torch.Tensor) -> torch.Tensor:
            seen.append(len(seen))
            return value + len(seen)

        return optree.tree_map(count, {"b": x, "a": x * 2, "c": {"z": x, "y": x}})

    x = torch.ones(2)
    expected = body(x, [])
    assert_identical(expected, compiled(body)(x, []))
    assert stats(Event.TAKEN) == {"optree.tree_map"}
    torch._dynamo.reset()
    require_dynamo("optree without the package")
    with dynamo_tree_compat.disabled():  # torch's own fast path calls in insertion order
        assert repr(compiled(body, fullgraph=False)(x, [])) != repr(expected)


def test_paths_hold_keys_and_none_is_no_leaf() -> None:
    def body(x: torch.Tensor, seen: list[Any]) -> Any:
        def record(path: Any, value: Any) -> Any:
            seen.append(path)
            return value

        return optree.tree_map_with_path(record, {"b": x, "a": [x, None], "c": {"z": x, "y": x}})

    x = torch.ones(2)
    eager_seen: list[Any] = []
    compiled_seen: list[Any] = []
    assert_identical(body(x, eager_seen), compiled(body)(x, compiled_seen))
    assert compiled_seen == eager_seen == [("a", 0), ("b",), ("c", "y"), ("c", "z")]


def _accessor_maps(x: torch.Tensor) -> Any:
    tree = {"b": [x, None, (x + 1, "s")], "a": {"z": x * 2}, "c": ()}
    return optree.tree_map_with_accessor(lambda a, v: v, tree), tree


def test_an_unread_accessor_costs_nothing() -> None:
    """An accessor func never reads is never built: the map traces as tree_map does, on
    every torch (Dynamo need not read optree's PyTreeAccessor, a tuple subclass)."""
    x = torch.arange(2.0)
    assert_identical(_accessor_maps(x), compiled(_accessor_maps)(x))
    assert stats(Event.TAKEN) == {"optree.tree_map_with_accessor"} and not stats(Event.FALLBACK)


@needs_dynamo("tuple subclass")
def test_accessors_are_built_only_where_func_reads_them() -> None:
    """An accessor func never reads costs nothing (a map of 1,000 leaves compiles as fast
    as tree_map); one it reads is the object eager optree gives, methods and all."""

    def body(x: torch.Tensor) -> Any:
        unread, tree = _accessor_maps(x)
        read = optree.tree_map_with_accessor(lambda a, v: (a.path, a(tree), a), tree)
        return unread, read

    x = torch.arange(2.0)
    expected = body(x)
    got = compiled(body)(x)
    assert_identical(expected, got)
    assert repr(got) == repr(expected)  # PyTreeAccessor and its entries, type and all
    assert stats(Event.TAKEN) == {"optree.tree_map_with_accessor"} and not stats(Event.FALLBACK)


def test_dict_insertion_ordered_mode_is_guarded() -> None:
    def body(x: torch.Tensor) -> Any:
        return optree.tree_leaves({"b": x, "a": x + 1}, namespace="ns")

    step = compiled(body)
    x = torch.zeros(1)
    assert_identical(body(x), step(x))
    with optree.dict_insertion_ordered(True, namespace="ns"):
        assert_identical(body(x), step(x))  # recompiled: [b, a] now
        assert [t.item() for t in step(x)] == [0.0, 1.0]
    assert [t.item() for t in step(x)] == [1.0, 0.0]


Point = collections.namedtuple("Point", "x y")

FALLBACKS: dict[str, Callable[[torch.Tensor], Any]] = {
    "namedtuple": lambda x: optree.tree_leaves({"p": Point(x, x + 1)}),
    "OrderedDict": lambda x: optree.tree_leaves(collections.OrderedDict(b=x, a=x + 1)),
    "is_leaf": lambda x: optree.tree_leaves([x, [x]], is_leaf=lambda v: isinstance(v, list)),
    "prefix tree in tree_map": lambda x: optree.tree_map(lambda a, b: b, [x, x], [x, [x, x]]),
}


@pytest.mark.parametrize("case", sorted(FALLBACKS))
def test_anything_else_goes_to_optrees_own_code(case: str) -> None:
    body = FALLBACKS[case]
    x = torch.ones(2)
    assert_identical(body(x), compiled(body)(x))
    assert stats(Event.FALLBACK) and stats(Event.TAKEN) == {"optree._C.flatten"}


@needs_dynamo("optree without the package")
def test_disabled_mode_leaves_everything_to_torch() -> None:
    x = torch.ones(2)
    with dynamo_tree_compat.disabled():
        compiled(lambda x: optree.tree_leaves({"a": x}))(x)
    assert not _dynamo.STATS


def _paths_seen(structure: Any, none_is_leaf: bool) -> list[Any]:
    seen: list[Any] = []

    def record(path: Any, value: Any) -> Any:
        seen.append(path)
        return value

    optree.tree_map_with_path(record, structure, none_is_leaf=none_is_leaf)
    return seen


TORCH_MISTAKES: dict[str, Callable[[torch.Tensor], Any]] = {
    "paths hold SequenceKey objects": lambda x: _paths_seen([x, [x]], none_is_leaf=True),
    "func called on None nodes": lambda x: _paths_seen([x, None], none_is_leaf=False),
    "an empty dict in the tree": lambda x: optree.tree_leaves([x, {}]),
}


@pytest.mark.parametrize("case", sorted(TORCH_MISTAKES))
def test_mends_torchs_mistakes_for_plain_structures(case: str) -> None:
    body = TORCH_MISTAKES[case]
    x = torch.ones(2)
    assert_identical(body(x), compiled(body)(x))
    if optree.__version__.startswith("0.20") and TORCH >= (2, 12):  # torch's own polyfills
        torch._dynamo.reset()
        with dynamo_tree_compat.disabled():  # torch's own way: a graph break or another answer
            assert outcome(compiled(body), x) != ("returned", body(x), None)


#: What a map's func reads of an accessor: its path, where Dynamo reads a tuple subclass.
_READ_ACCESSOR = dynamo_traces("tuple subclass")


@settings(max_examples=COMPILED_EXAMPLES)
@given(spec=plain_specs(max_leaves=8), none_is_leaf=st.booleans())
def test_generated_plain_structures_trace_like_eager(spec: Spec, none_is_leaf: bool) -> None:
    def read(accessor: Any, value: Any) -> Any:
        return (accessor.path if _READ_ACCESSOR else None, value)

    def body(structure: Any) -> Any:
        seen: list[Any] = []

        def record(path: Any, value: Any) -> Any:
            seen.append(path)
            return value

        return (
            optree.tree_leaves(structure, none_is_leaf=none_is_leaf),
            optree.tree_map(lambda v: (v,), structure, none_is_leaf=none_is_leaf),
            optree.tree_map_with_path(record, structure, none_is_leaf=none_is_leaf),
            optree.tree_map_with_accessor(read, structure, none_is_leaf=none_is_leaf),
            seen,
        )

    torch._dynamo.reset()
    _dynamo.STATS.clear()
    expected = body(build(spec, tensor_leaves))
    assert_identical(expected, compiled(body)(build(spec, tensor_leaves)))
    assert stats(Event.TAKEN) == set(NAMES)


def test_a_structure_that_contains_itself_is_a_clear_error_not_a_hang() -> None:
    """torch's own handling loops on it; eager optree raises RecursionError."""

    def body(x: torch.Tensor) -> Any:
        loop: list[Any] = [x]
        loop.append(loop)
        return optree.tree_leaves(loop)

    with pytest.raises(RecursionError, match="Maximum recursion depth"):
        body(torch.ones(1))
    with pytest.raises(torch._dynamo.exc.Unsupported, match="contains itself"):
        compiled(body)(torch.ones(1))
    assert stats(Event.CYCLE) == {"optree.tree_leaves"}
