"""Every dm-tree function traces under torch.compile(fullgraph=True) and gives eager's answer.

fullgraph=True turns any graph break into an error, so each passing call here is one
graph. Results are compared with eager dm-tree (the C library), container types and key
order included.
"""

from __future__ import annotations

import collections
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._dynamo.utils import counters

import dynamo_tree_compat
from dynamo_tree_compat import _dynamo, config
from tests.helpers.compiling import compiled
from tests.helpers.dynamo_support import drawn_kinds, dynamo_traces, needs_dynamo, new_defaultdict
from tests.helpers.structures import (
    COMPILED_EXAMPLES,
    LEAF_KINDS,
    MAPPING_KINDS,
    ReadOnlyMapping,
    Spec,
    assert_identical,
    attrs_class,
    build,
    is_plain,
    namedtuple_class,
    namedtuple_subclass,
    outcome,
    plain_specs,
    specs,
    tensor_leaves,
)

tree = pytest.importorskip("tree")
_ITEMS_VIEWS = dynamo_traces("dict.items() view")
Point = namedtuple_class(2)
SubPoint = namedtuple_subclass(2)
Record = attrs_class(2)


#: The kinds make_mixed adds where this Dynamo takes them, made inside (True) or not.
_MIXED_KINDS = {
    inside: drawn_kinds(
        ["mapping", "mappingproxy", "attrs", "defaultdict", "namedtuple_subclass"], inside=inside
    )
    for inside in (True, False)
}


def make_mixed(x: torch.Tensor, inside: bool = True) -> dict[str, Any]:
    """One structure holding every container kind this Dynamo can trace around tensor x,
    made in the graph (``inside``) or passed in (see ``drawn_kinds``)."""
    mixed = {
        "list": [x, x + 1, None, "text"],
        "tuple": (x * 2, (x,), ()),
        "namedtuple": Point(x, [x - 1]),
        "ordered": collections.OrderedDict([("z", x), ("a", x + 3)]),
        "deque": collections.deque([x, x + 2]),
        "empty": {},
        "ints": {3: x, 1: x, 2: [x]},
    }
    kinds = _MIXED_KINDS[inside]
    if "namedtuple_subclass" in kinds:
        mixed["subclass"] = SubPoint(x, x)
    if "mapping" in kinds:
        mixed["mapping"] = ReadOnlyMapping({"m": x, "k": (x,)})
    if "mappingproxy" in kinds:
        mixed["proxy_of_dict"] = types.MappingProxyType({"y": x, "b": x})
    if "attrs" in kinds:
        mixed["attrs"] = Record(x, {"inner": x})
    if "defaultdict" in kinds:
        mixed["default"] = new_defaultdict(list, {"q": x, "p": [x]}.items())
    return mixed


def make_views(x: torch.Tensor) -> list[Any]:
    """Mapping views, which Dynamo cannot take as inputs, so built inside (an items view
    where Dynamo makes one)."""
    source = {"b": x, "a": x + 1}
    views = [source.values(), source.keys()]
    if _ITEMS_VIEWS:
        views.append(source.items())
    return views


def shallow_of(structure: Any) -> Any:
    """The top container of ``structure`` (of its type where it is a list or tuple), its
    children made None; for other kinds, a dict of its keys; None for a leaf."""
    if not tree.is_nested(structure):
        return None
    if type(structure) in (list, tuple):
        return type(structure)(None for _ in structure)
    return {key: None for key in structure}


def _double(value: Any) -> Any:
    return value * 2 if isinstance(value, torch.Tensor) else value


def _path_length(path: Any, value: Any) -> Any:
    return value + len(path) if isinstance(value, torch.Tensor) else (path, value)


def _stop_at_tuples(value: Any) -> Any:
    return "tuple" if type(value) is tuple else None


# Each call takes a structure and returns what the function under test gives.
CALLS: dict[str, Callable[[Any], Any]] = {
    "is_nested": lambda s: tree.is_nested(s),
    "flatten": lambda s: tree.flatten(s),
    "flatten_with_path": lambda s: tree.flatten_with_path(s),
    "flatten_up_to": lambda s: tree.flatten_up_to(shallow_of(s), s),
    "flatten_with_path_up_to": lambda s: tree.flatten_with_path_up_to(shallow_of(s), s),
    "unflatten_as": lambda s: tree.unflatten_as(s, tree.flatten(s)[::-1]),
    "map_structure": lambda s: tree.map_structure(_double, s),
    "map_structure_two": lambda s: tree.map_structure(lambda a, b: (a, b), s, s),
    "map_structure_with_path": lambda s: tree.map_structure_with_path(_path_length, s),
    "map_structure_up_to": lambda s: tree.map_structure_up_to(shallow_of(s), tree.flatten, s),
    "map_structure_with_path_up_to": lambda s: tree.map_structure_with_path_up_to(
        shallow_of(s), lambda p, v: (p, len(tree.flatten(v))), s
    ),
    "assert_same_structure": lambda s: tree.assert_same_structure(s, s),
    "traverse": lambda s: tree.traverse(_stop_at_tuples, s),
    "traverse_bottom_up": lambda s: tree.traverse(lambda v: None, s, top_down=False),
    "traverse_with_path": lambda s: tree.traverse_with_path(lambda p, v: None, s),
    "_sequence_like": lambda s: tree._sequence_like(s, list(tree._yield_value(s))),
    "_yield_sorted_items": lambda s: list(tree._yield_sorted_items(s)),
    "_yield_value": lambda s: list(tree._yield_value(s)),
    "_is_namedtuple": lambda s: [tree._is_namedtuple(v, True) for v in tree._yield_value(s)],
    "_is_attrs": lambda s: [tree._is_attrs(v) for v in tree._yield_value(s)],
    "_sorted": lambda s: tree._sorted(s),
    "_assert_shallow_structure": lambda s: tree._assert_shallow_structure(shallow_of(s), s),
}


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def test_every_registered_function_is_exercised() -> None:
    exercised = {name.removesuffix("_two").removesuffix("_bottom_up") for name in CALLS}
    functions = dynamo_tree_compat.status().functions
    registered = {name.removeprefix("tree.") for name in functions if name.startswith("tree.")}
    assert registered <= exercised


@pytest.mark.parametrize("name", sorted(CALLS))
def test_traces_on_structure_built_inside(name: str) -> None:
    call = CALLS[name]

    def built_inside(x: torch.Tensor) -> Any:
        return call(make_mixed(x))

    x = torch.arange(3.0)
    assert_identical(built_inside(x), compiled(built_inside)(x))


@pytest.mark.parametrize("name", sorted(CALLS))
def test_traces_on_structure_passed_in(name: str) -> None:
    call = CALLS[name]
    x = torch.arange(3.0)
    assert_identical(call(make_mixed(x, False)), compiled(call)(make_mixed(x, False)))


@pytest.mark.parametrize(
    "name",
    [
        "flatten",
        "map_structure",
        "flatten_with_path",
        "_yield_value",
        "assert_same_structure",
        "unflatten_as",
    ],
)
def test_traces_mapping_views_built_inside(name: str) -> None:
    call = CALLS[name]

    def built_inside(x: torch.Tensor) -> Any:
        return call(make_views(x))

    x = torch.arange(3.0)
    assert_identical(built_inside(x), compiled(built_inside)(x))


@pytest.mark.parametrize(
    "made",
    [
        "passed in",
        # Else Dynamo hands the eager call a plain dict for it: torch's own wrong result.
        pytest.param("built inside", marks=needs_dynamo("defaultdict leaves the graph")),
    ],
)
def test_a_defaultdict_comes_back_a_defaultdict(made: str) -> None:
    """In one graph where Dynamo returns a defaultdict made in the graph as one; else the
    call breaks the graph, naming why, and runs eagerly (torch 2.7 would return a dict)."""

    def step(x: torch.Tensor, given: Any) -> Any:
        structure = new_defaultdict(list, [("b", x), ("a", [x])]) if given is None else given
        return tree.map_structure(lambda t: t + 1, structure)

    x = torch.ones(2)
    given = new_defaultdict(list, [("b", x), ("a", [x])]) if made == "passed in" else None
    if dynamo_traces("defaultdict leaves the graph"):
        explanation = torch._dynamo.explain(step)(x, given)
        assert (explanation.graph_count, explanation.graph_break_count) == (1, 0)
    else:
        with pytest.raises(torch._dynamo.exc.Unsupported, match="as a plain dict"):
            compiled(step)(x, given)
    torch._dynamo.reset()
    assert_identical(step(x, given), torch.compile(step, backend="eager")(x, given))


def test_one_graph_for_a_model_full_of_tree_calls() -> None:
    def step(params: dict[str, torch.Tensor], grads: dict[str, torch.Tensor]) -> Any:
        tree.assert_same_structure(params, grads)
        updated = tree.map_structure(lambda p, g: p - 0.1 * g, params, grads)
        return sum(tree.flatten(updated)), tree.flatten_with_path(updated)

    params = {"w": torch.ones(3), "b": [torch.zeros(3), torch.ones(3)]}
    grads = {"w": torch.ones(3), "b": [torch.ones(3), torch.ones(3)]}
    explanation = torch._dynamo.explain(step)(params, grads)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0)
    assert_identical(step(params, grads), compiled(step)(params, grads))


ERRORS: dict[str, Callable[[torch.Tensor], Any]] = {
    "different nesting": lambda x: tree.assert_same_structure([x, [x]], [x, x]),
    "different types": lambda x: tree.assert_same_structure((x, x), [x, x]),
    "different keys": lambda x: tree.map_structure(torch.add, {"a": x}, {"b": x}),
    "unsortable keys": lambda x: tree.flatten({1: x, "a": x}),
    "unsortable keys, path": lambda x: tree.flatten_with_path({1: x, "a": x}),
    "wrong count": lambda x: tree.unflatten_as([x, x], [x]),
    "shallow not a subset": lambda x: tree.flatten_up_to({"a": None, "c": None}, {"a": x, "b": x}),
    "missing key in up_to": lambda x: tree.map_structure_up_to({"z": None}, abs, {"a": x}),
    "not callable": lambda x: tree.map_structure(3, [x]),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_user_errors_raise_as_in_eager(name: str) -> None:
    """Without fullgraph, an error in a compiled function is eager's error, word for word."""
    function = ERRORS[name]
    x = torch.ones(2)
    expected = outcome(function, x)
    assert expected[0] == "raised"
    assert outcome(torch.compile(function, backend="eager"), x) == expected


def test_disabled_scope_restores_the_graph_break_and_enabled_restores_the_graph() -> None:
    def step(x: torch.Tensor) -> Any:
        return tree.map_structure(lambda t: t + 1, {"a": x, "b": [x]})

    x = torch.ones(2)
    with dynamo_tree_compat.disabled():
        assert_identical(step(x), torch.compile(step, backend="eager")(x))
    assert sum(counters["graph_break"].values()) == 1
    torch._dynamo.reset()
    counters.clear()
    with dynamo_tree_compat.enabled():
        assert_identical(step(x), torch.compile(step, backend="eager")(x))
    assert sum(counters["graph_break"].values()) == 0


#: The dm-tree function each call is about, where it has a fast path.
FAST_CALLS = {
    "is_nested": "is_nested",
    "flatten": "flatten",
    "flatten_with_path": "flatten_with_path",
    "assert_same_structure": "assert_same_structure",
    "map_structure": "map_structure",
    "map_structure_two": "map_structure",
    "map_structure_with_path": "map_structure_with_path",
    "unflatten_as": "unflatten_as",
    "flatten_up_to": "flatten_up_to",
    "flatten_with_path_up_to": "flatten_with_path_up_to",
    "map_structure_up_to": "map_structure_up_to",
    "map_structure_with_path_up_to": "map_structure_with_path_up_to",
    "traverse": "traverse",
    "traverse_bottom_up": "traverse",
    "traverse_with_path": "traverse_with_path",
}
# The long profile (DTC_FUZZ=long) puts 2,000 structures through every function in one
# graph per structure (COMPILED_EXAMPLES), with the fast path and without; CI draws a few.
# Every call with the fast path in place; the fast-path calls also with it forced off.
GENERATED = [(name, True) for name in sorted(CALLS)] + [
    (name, False) for name in sorted(FAST_CALLS)
]
generated_specs = st.one_of(specs(max_leaves=8, compiled=True), plain_specs(max_leaves=8))


def traceable_here(name: str, spec: Spec) -> bool:
    """Whether Dynamo can take ``spec`` for this call (README lists what it cannot)."""
    text = repr(spec)
    if any(kind in text for kind in ("'proxy'", "'keys'", "'values'", "'items'")):
        return False  # Dynamo cannot take wrapt proxies or mapping views as inputs
    if "'bytearray'" in text and ("path" in name or "up_to" in name or "traverse" in name):
        return False  # dm-tree's Python paths iterate a bytearray; Dynamo cannot
    if name.startswith("_") and spec[0] in LEAF_KINDS:
        return False  # private helpers meant for containers, given a tensor: they iterate it
    return name != "_sorted" or spec[0] in MAPPING_KINDS  # it sorts dict keys, not tensors


def compile_and_compare(names: list[str], fast_path: bool, spec: Spec) -> None:
    """One graph running every call in ``names`` on ``spec`` equals eager's results."""
    names = [n for n in names if traceable_here(n, spec)]
    names = [n for n in names if outcome(CALLS[n], build(spec, tensor_leaves))[0] == "returned"]
    if not names:
        return  # nothing Dynamo can take; errors are checked by the named error tests

    def every_call(structure: Any) -> dict[str, Any]:
        return {name: CALLS[name](structure) for name in names}

    torch._dynamo.reset()
    _dynamo.STATS.clear()
    saved, config.fast_path = config.fast_path, fast_path
    try:
        expected = every_call(build(spec, tensor_leaves))
        assert_identical(expected, compiled(every_call)(build(spec, tensor_leaves)))
    finally:
        config.fast_path = saved
    taken = set(_dynamo.counted(_dynamo.Event.TAKEN))
    if not fast_path:
        assert not taken
    elif is_plain(spec):
        assert {f"tree.{FAST_CALLS[n]}" for n in names if n in FAST_CALLS} <= taken
        assert not _dynamo.counted(_dynamo.Event.FALLBACK)


@pytest.mark.parametrize(
    ("name", "fast_path"), GENERATED, ids=[f"{n}-{'fast' if f else 'twin'}" for n, f in GENERATED]
)
@settings(max_examples=4)
@given(spec=generated_specs)
def test_generated_structures_trace_like_eager(name: str, fast_path: bool, spec: Spec) -> None:
    compile_and_compare([name], fast_path, spec)


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast", "twin"])
@settings(max_examples=COMPILED_EXAMPLES)
@given(spec=generated_specs)
def test_generated_structures_every_function_in_one_graph(fast_path: bool, spec: Spec) -> None:
    compile_and_compare(sorted(CALLS), fast_path, spec)
