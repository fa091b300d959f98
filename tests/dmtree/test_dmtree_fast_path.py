"""The fast path: common dm-tree calls handled at Dynamo's variable level.

Each test checks three things: the result is eager's (the C library's), the fast path was
taken or fell back as it should, and, where the fast path falls back, it did so before
any user code was traced, so that user functions still run once per leaf, in order.
"""

from __future__ import annotations

import collections
import enum
import types
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import torch
import wrapt

import dynamo_tree_compat
import dynamo_tree_compat.dmtree
from dynamo_tree_compat import _dynamo, config
from dynamo_tree_compat._dynamo.dmtree import fast as dmtree_fast
from dynamo_tree_compat._dynamo.runtime import Event
from dynamo_tree_compat._dynamo.seam import internals, variables
from tests.helpers.compiling import compiled, stats
from tests.helpers.dmtree_calls import FAST_CALLS
from tests.helpers.dynamo_support import needs_dynamo, new_defaultdict
from tests.helpers.leaves import UserLeaf
from tests.helpers.structures import assert_identical, deep_recursion, outcome

tree = pytest.importorskip("tree")

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
FAST = tuple(name for name in _dynamo.FAST_PATHS if name.startswith("tree."))


def benchmark_structure(x: torch.Tensor) -> dict[str, Any]:
    return {f"k{i}": [(x, x + i)] for i in range(5, 0, -1)}


CALLS = FAST_CALLS


def test_every_fast_path_is_exercised() -> None:
    assert set(CALLS) == set(FAST)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_taken_for_dicts_lists_and_tuples_built_inside(name: str) -> None:
    call = CALLS[name]

    def body(x: torch.Tensor) -> Any:
        return call(benchmark_structure(x))

    x = torch.ones(2)
    assert_identical(body(x), compiled(body)(x))  # fullgraph: one graph, no break
    assert name in stats(Event.TAKEN) and not stats(Event.FALLBACK)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_taken_for_inputs_with_constants_symbols_and_parameters(name: str) -> None:
    structure = {
        3: [torch.ones(2), 1.5, "s", None, b"b", True],
        -1: (torch.nn.Parameter(torch.zeros(2)), ()),
        0: {},
        7: [],
    }
    # In a function of ours: torch 2.11 runs a compiled C function (tree.flatten) eagerly.
    assert_identical(CALLS[name](structure), compiled(lambda s: CALLS[name](s))(structure))
    assert name in stats(Event.TAKEN) and not stats(Event.FALLBACK)


class Module(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Posing:
    """An object whose ``__class__`` is not its type (Dynamo 2.13 cannot trace it)."""

    @property
    def __class__(self) -> type:  # type: ignore[override]
        return list


class Lazy:
    """A lazy proxy: its ``__getattribute__`` answers for what it wraps, ``__class__``
    too, so dm-tree reads a wrapped list into."""

    def __init__(self, wrapped: Any) -> None:
        object.__setattr__(self, "_wrapped", wrapped)

    def __getattribute__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_wrapped"), name)

    def __iter__(self) -> Any:
        return iter(object.__getattribute__(self, "_wrapped"))

    def __len__(self) -> int:
        return len(object.__getattribute__(self, "_wrapped"))

    def __getitem__(self, index: Any) -> Any:
        return object.__getattribute__(self, "_wrapped")[index]


def test_the_leaf_rule_trusts_only_plain_classes() -> None:
    plain = (UserLeaf, Module, type, type(collections.abc.Sequence), type(len))
    assert all(dmtree_fast.is_leaf_type(kind) for kind in plain)
    nested = (Pair, Fields, Posing, Lazy, set, collections.UserDict, wrapt.ObjectProxy)
    assert not any(dmtree_fast.is_leaf_type(kind) for kind in (*nested, type({}.keys())))
    assert tree.is_nested(Posing()) and tree.is_nested(Lazy([1, 2]))  # as dm-tree asks
    assert not tree.is_nested(UserLeaf(1))


def test_an_object_taken_as_a_leaf_is_guarded_on_its_type() -> None:
    """A graph that took an object as a leaf is not reused for a sequence in its place."""
    holder = types.SimpleNamespace(value=UserLeaf(1))
    x = torch.ones(2)
    flatten = torch.compile(lambda s: tree.flatten(s), backend="eager")
    read = torch.compile(lambda: tree.flatten([x, holder.value]), backend="eager")
    for value in (UserLeaf(x), Pair(x, x)):
        holder.value = value
        assert_identical(tree.flatten([x, value]), flatten([x, value]))
        assert_identical(tree.flatten([x, value]), read())


def test_map_structure_calls_func_in_sorted_key_order_and_keeps_insertion_order() -> None:
    def body(x: torch.Tensor, seen: list[Any]) -> Any:
        def record(path: Any, value: torch.Tensor) -> torch.Tensor:
            seen.append(path)
            return value + len(seen)

        return tree.map_structure_with_path(record, {"b": x, "a": [x, {"z": x, "c": x}]})

    x = torch.ones(2)
    eager_seen: list[Any] = []
    compiled_seen: list[Any] = []
    assert_identical(body(x, eager_seen), compiled(body)(x, compiled_seen))
    assert compiled_seen == eager_seen == [("a", 0), ("a", 1, "c"), ("a", 1, "z"), ("b",)]
    assert stats(Event.TAKEN) == {"tree.map_structure_with_path"}


class Colour(enum.Enum):
    RED = 1


Point = collections.namedtuple("Point", "x y")


class SubTensor(torch.Tensor):
    pass


class Pair(collections.abc.Sequence):
    """A user sequence: dm-tree reads into it."""

    FIELDS = ("items",)  # compared field by field (``assert_identical``)

    def __init__(self, *items: Any) -> None:
        self.items = items

    def __getitem__(self, index: Any) -> Any:
        return self.items[index]

    def __len__(self) -> int:
        return len(self.items)


@attrs.define
class Fields:
    a: Any
    b: Any


FALLBACKS: dict[str, Callable[[torch.Tensor], Any]] = {
    "user sequence": lambda x: {"a": x, "b": [x, Pair(x, x)]},
    "attrs instance": lambda x: [x, Fields(x, 1)],
    "namedtuple deep inside": lambda x: {"a": x, "b": [x, Point(x, x)]},
    "OrderedDict": lambda x: collections.OrderedDict([("b", x), ("a", x)]),
    "defaultdict": lambda x: new_defaultdict(list, [("b", x)]),
    "enum key": lambda x: {Colour.RED: x},
    "set leaf": lambda x: [x, {1, 2}],
    "tensor subclass leaf": lambda x: [x, x.as_subclass(SubTensor)],
}
#: Cases that need a Dynamo feature some supported torch lacks.
FALLBACK_NEEDS = {
    # The twin rebuilds them by calling their class: type(made)(...).
    "attrs instance": "class of an object made in the graph",
    "user sequence": "class of an object made in the graph",
    "defaultdict": "defaultdict leaves the graph",
    "tensor subclass leaf": "Tensor.as_subclass",
}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            case, marks=[needs_dynamo(FALLBACK_NEEDS[case])] if case in FALLBACK_NEEDS else []
        )
        for case in sorted(FALLBACKS)
    ],
)
def test_falls_back_to_the_twin_before_any_user_call(case: str) -> None:
    make = FALLBACKS[case]

    def body(x: torch.Tensor, seen: list[Any]) -> Any:
        def record(value: Any) -> Any:
            # Dynamo's type() of an in-graph tensor subclass says Tensor: ask no more.
            seen.append("tensor" if isinstance(value, torch.Tensor) else type(value).__name__)
            return value

        structure = make(x)
        return tree.map_structure(record, structure), tree.flatten_with_path(structure)

    x = torch.ones(2)
    eager_seen: list[Any] = []
    compiled_seen: list[Any] = []
    assert_identical(body(x, eager_seen), compiled(body)(x, compiled_seen))
    assert compiled_seen == eager_seen
    assert {"tree.map_structure", "tree.flatten_with_path"} <= stats(Event.FALLBACK)
    assert not stats(Event.TAKEN)


def test_structures_that_differ_fall_back_and_keep_dm_tree_semantics() -> None:
    def body(x: torch.Tensor) -> Any:
        # check_types=False lets a list match a tuple: dm-tree's rule, from the twin.
        return tree.map_structure(torch.add, [x, (x,)], ([x], [x]), check_types=False)

    x = torch.ones(2)
    assert outcome(body, x)[0] == "raised"
    assert outcome(compiled(body, fullgraph=False), x) == outcome(body, x)
    assert "tree.map_structure" in stats(Event.FALLBACK)


@pytest.mark.parametrize(
    "body",
    [
        lambda x: tree.flatten({1: x, "a": x}),
        lambda x: tree.assert_same_structure({"a": x}, {"b": x}),
        lambda x: tree.map_structure(3, [x]),
        lambda x: tree.map_structure(torch.neg),
        lambda x: tree.map_structure(torch.neg, [x], bogus=True),
        lambda x: tree.flatten_up_to([None, None], [x]),
        lambda x: tree.flatten_with_path_up_to({"a": None}, {"b": x}),
        lambda x: tree.map_structure_up_to([None], torch.neg, (x,), [x]),
        lambda x: tree.unflatten_as([None, None], [x]),
        lambda x: tree.unflatten_as([None], x),
        lambda x: tree.traverse(lambda v: None, {1: x, "a": x}),
    ],
    ids=[
        "unsortable keys",
        "different keys",
        "not callable",
        "no structure",
        "bad keyword",
        "up_to lengths",
        "up_to keys",
        "up_to types",
        "unflatten_as count",
        "unflatten_as not a sequence",
        "traverse unsortable",
    ],
)
def test_errors_come_from_the_twin_word_for_word(body: Callable[[torch.Tensor], Any]) -> None:
    x = torch.ones(2)
    expected = outcome(body, x)
    assert expected[0] == "raised"
    assert outcome(compiled(body, fullgraph=False), x) == expected
    assert stats(Event.FALLBACK) and not stats(Event.TAKEN)


def test_results_are_new_containers_and_see_earlier_mutation() -> None:
    def body(items: list[Any], table: dict[str, Any]) -> Any:
        table["z"] = items[0]
        del table["a"]
        flat = tree.flatten(items)
        flat.append(len(flat))
        mapped = tree.map_structure(torch.neg, table)
        mapped["new"] = 1
        return flat, mapped

    def inputs() -> tuple[list[Any], dict[str, Any]]:
        x = torch.arange(2.0)
        return [x, [x]], {"b": x, "a": x}

    eager_inputs, compiled_inputs = inputs(), inputs()
    assert_identical(body(*eager_inputs), compiled(body)(*compiled_inputs))
    assert_identical(eager_inputs, compiled_inputs)
    assert stats(Event.TAKEN) == {"tree.flatten", "tree.map_structure"}


def test_a_graph_break_inside_func_behaves_as_with_the_twin() -> None:
    def body(x: torch.Tensor) -> Any:
        def breaks(value: torch.Tensor) -> torch.Tensor:
            torch._dynamo.graph_break()
            return value + 1

        return tree.map_structure(breaks, {"a": x, "b": x})

    x = torch.ones(2)
    assert_identical(body(x), compiled(body, fullgraph=False)(x))


def test_disabled_mode_takes_no_fast_path() -> None:
    x = torch.ones(2)
    with dynamo_tree_compat.disabled():
        assert_identical(
            tree.flatten(benchmark_structure(x)),
            compiled(lambda x: tree.flatten(benchmark_structure(x)), fullgraph=False)(x),
        )
    assert not stats(Event.TAKEN)


def test_forced_off_traces_the_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "fast_path", False)
    x = torch.ones(2)
    result = compiled(lambda x: tree.flatten(benchmark_structure(x)))(x)
    assert_identical(tree.flatten(benchmark_structure(x)), result)
    assert not _dynamo.STATS


def test_moved_dynamo_classes_mean_no_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def moved() -> None:
        raise internals.Missing("moved, for the test")

    monkeypatch.setattr(internals, "kinds", moved)
    with pytest.raises(internals.Missing):
        variables.handled_function_class.__wrapped__(lambda *_: None)


def _nest(x: torch.Tensor, depth: int) -> Any:
    structure: Any = x
    for level in range(depth):
        structure = [structure] if level % 2 else {"k": structure}
    return structure


@pytest.mark.parametrize("name", sorted(CALLS))
def test_taken_up_to_the_traced_depth_limit(name: str) -> None:
    call = CALLS[name]
    limit = dynamo_tree_compat.dmtree.TRACED_MAX_DEPTH

    def body(x: torch.Tensor) -> Any:
        # Some calls put a pair with a path where a leaf was: room for two levels.
        return tree.flatten(call({"top": _nest(x, limit - 3)}))

    x = torch.ones(2)
    actual = compiled(body)(x)
    with deep_recursion():
        assert_identical(body(x), actual)
    assert name in stats(Event.TAKEN) and not stats(Event.FALLBACK)


def test_past_the_traced_depth_limit_the_graph_ends_naming_it() -> None:
    limit = dynamo_tree_compat.dmtree.TRACED_MAX_DEPTH

    def body(x: torch.Tensor) -> Any:
        return tree.flatten(_nest(x, limit + 1))[0] + 1

    x = torch.ones(2)
    with pytest.raises(torch._dynamo.exc.Unsupported, match=f"flatten: .* deeper than {limit}"):
        compiled(body)(x)
    torch._dynamo.reset()
    with deep_recursion():  # the frame runs eagerly, in dm-tree's C code, which recurses
        assert_identical(body(x), compiled(body, fullgraph=False)(x))
    assert stats(Event.SKIP_FRAME) == {"tree.flatten"}


@pytest.mark.parametrize("top_down", [True, False], ids=["top down", "bottom up"])
def test_traverse_maps_to_none_with_dm_tree_s_object(top_down: bool) -> None:
    def drop_strings(value: Any) -> Any:
        return tree.MAP_TO_NONE if isinstance(value, str) else None

    def body(x: torch.Tensor) -> Any:
        return (
            tree.traverse(drop_strings, "root", top_down=top_down),
            tree.traverse(drop_strings, {"b": ["s", x], "a": ("t",)}, top_down=top_down),
        )

    x = torch.ones(2)
    assert_identical(body(x), compiled(body)(x))
    assert stats(Event.TAKEN) == {"tree.traverse"}
