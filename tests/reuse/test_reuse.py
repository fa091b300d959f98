"""Eager's answer on every call, not only the first: the other half of differential tests.

A compiled function is called with one structure, then with a changed one (a key more, a
key less, another order, another container type, deeper): Dynamo reuses the first graph
wherever its guards hold, so every value the package reads from Dynamo must be guarded
as Dynamo guards the same read. Each call of every public tree function is compiled once
and called along a chain of structures, each change's structure before and after it;
every answer is compared with eager's. The fast paths run on and off. A graph is reused
where nothing changed: the guards are not so strict that every call recompiles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import optree
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dynamo_tree_compat
from dynamo_tree_compat import config
from tests.helpers.breadth import LONG
from tests.helpers.dynamo_support import with_a_graph_op
from tests.helpers.reuse import CALLS, CHANGES, Change, changes_for, leaf
from tests.helpers.structures import (
    COMPILED_EXAMPLES,
    assert_same_ending,
    build,
    outcome,
    specs,
    tensor_leaves,
)

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

#: Calls CI also runs with the fast paths off (then the twins, or the library's own code
#: over the C layer, read the structure): one that maps and one that flattens per
#: library. The long profile (DTC_FUZZ=long) runs every call both ways. Each call takes
#: the core changes ``changes_for`` gives it (all of them in the ci and long profiles).
_ALSO_WITHOUT_FAST_PATH = {
    "dm-tree": {"map_structure", "flatten_with_path", "unflatten_as"},
    "optree": {"tree_map", "tree_flatten"},
    "torch pytree": {"tree_map", "tree_flatten", "tree_unflatten"},
    "keras.tree": set(),
}
CASES = [
    pytest.param(library, name, fast, id=f"{library}.{name}-{'fast' if fast else 'twin'}")
    for library, calls in CALLS.items()
    for name in calls
    for fast in (True, False)
    if fast or LONG or name in _ALSO_WITHOUT_FAST_PATH[library]
]
#: Each case's place among its library's cases: which core changes it takes.
PLACES = {
    case.values: place
    for library in CALLS
    for place, case in enumerate(case for case in CASES if case.values[0] == library)
}


@pytest.fixture(autouse=True)
def many_graphs() -> Iterator[None]:
    """Room for a graph per structure: past Dynamo's limit a frame runs eagerly, which
    would hide a wrong reuse (the limit's name: torch 2.6 renamed it)."""
    dynamo_config = torch._dynamo.config
    name = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
    dynamo_tree_compat.install()
    with dynamo_config.patch(**{name: 1000}):
        yield


def _compiled(call: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``call`` compiled with the eager backend, fullgraph off (a break is not wrong,
    a wrong answer is), with a graph op beside it so that every Dynamo traces it."""
    return torch.compile(with_a_graph_op(call), backend="eager")


def _wrong_answers(call: Callable[[Any], Any], changes: dict[str, Change]) -> list[str]:
    """Each structure of each change in turn, through one compiled call: what differs
    from eager's answer. The first structure is called twice: the second call must reuse
    its graph (guards not so strict that every call recompiles)."""
    compiled = _compiled(call)
    wrong = []
    first = True
    for name, change in changes.items():
        for side, make in (("before", change.before), ("after", change.after)):
            expected, actual = outcome(call, make()), outcome(compiled, make())
            try:
                assert_same_ending(expected, actual)
            except AssertionError as error:
                wrong.append(f"{name} ({side}): {str(error).splitlines()[0][:200]}")
            if first:
                first, graphs = False, _graphs()
                assert_same_ending(expected, outcome(compiled, make()))
                if _graphs() != graphs:
                    wrong.append(f"{name} ({side}): the same structure compiled again")
    return wrong


def _graphs() -> int:
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


@pytest.mark.parametrize("library, name, fast", CASES)
def test_every_change_gets_eagers_answer(library: str, name: str, fast: bool) -> None:
    saved, config.fast_path = config.fast_path, fast
    try:
        changes = changes_for(PLACES[library, name, fast])
        wrong = _wrong_answers(CALLS[library][name], {c: CHANGES[c] for c in changes})
    finally:
        config.fast_path = saved
    assert not wrong, "\n".join(wrong)


def test_the_issues_example_the_new_parameter_is_updated() -> None:
    import tree

    @torch.compile(backend="eager")
    def sgd(params: Any, grads: Any) -> Any:
        return tree.map_structure(lambda p, g: p - 0.1 * g, params, grads)

    p = {"w": torch.ones(3), "b": torch.zeros(3)}
    sgd(p, p)
    p["head"] = torch.ones(2)
    updated = sgd(p, p)
    assert sorted(updated) == ["b", "head", "w"]
    assert torch.allclose(updated["head"], torch.full((2,), 0.9))


# --- Generated pairs: a structure and a mutation of it --------------------------------

#: A representative call per library and kind of read.
_GENERATED_CALLS = [
    ("dm-tree", "map_structure"),
    ("dm-tree", "flatten_with_path"),
    ("optree", "tree_map"),
    ("optree", "tree_structure"),
    ("torch pytree", "tree_map"),
    ("torch pytree", "tree_flatten"),
]


@st.composite
def _mutated(draw: Any) -> tuple[Any, Any]:
    """A spec of plain and named containers, and the same spec changed at one node."""
    spec = draw(specs(max_leaves=6, compiled=True).filter(_reusable))
    return spec, draw(_mutate(spec))


def _reusable(spec: Any) -> bool:
    """Containers and leaves whose kinds every Dynamo passes in: the pairs test the
    guards, not Dynamo's limits."""
    kind = spec[0]
    if kind in _CONTAINERS:
        return all(_reusable(child) for child in _items(spec))
    return kind in ("int", "float", "none", "str")


_CONTAINERS = ("list", "tuple", "dict", "ordereddict", "namedtuple", "defaultdict")


def _items(spec: Any) -> list[Any]:
    """A container spec's children (a mapping's without their keys)."""
    kind, payload = spec
    return [child for _, child in payload] if kind.endswith("dict") else list(payload)


@st.composite
def _mutate(draw: Any, spec: Any) -> Any:
    """``spec`` with one change at one node: a key or item more or less, keys in another
    order, another container kind, a leaf made None or a container."""
    kind, payload = spec
    if kind not in _CONTAINERS:  # a leaf: None, or a list of itself
        return draw(st.sampled_from([("none", None), ("list", (spec,))]))
    if payload and draw(st.booleans()):  # deeper: change one child
        index = draw(st.integers(0, len(payload) - 1))
        items = list(payload)
        if kind.endswith("dict"):
            key, child = items[index]
            items[index] = (key, draw(_mutate(child)))
        else:
            items[index] = draw(_mutate(items[index]))
        return (kind, tuple(items))
    how = draw(st.sampled_from(["kind", "more"] + (["fewer", "reorder"] if payload else [])))
    items = list(payload)
    if how == "kind":
        other = draw(st.sampled_from([k for k in ("list", "tuple", "dict") if k != kind]))
        children = _items(spec)
        if other == "dict":
            return (other, tuple((f"k{i}", child) for i, child in enumerate(children)))
        return (other, tuple(children))
    if how == "more":
        items.append((f"new{len(items)}", ("int", 7)) if kind.endswith("dict") else ("int", 7))
    elif how == "fewer":
        items.pop(draw(st.integers(0, len(items) - 1)))
    else:
        items.reverse()
    if kind == "namedtuple" and how != "reorder":  # its class has a number of fields
        return ("tuple", tuple(items))
    return (kind, tuple(items))


@pytest.mark.parametrize("library, name", _GENERATED_CALLS)
@settings(max_examples=COMPILED_EXAMPLES)
@given(pair=_mutated())
def test_a_generated_structure_and_its_mutation(library: str, name: str, pair: Any) -> None:
    torch._dynamo.reset()
    before, after = pair
    change = Change(lambda: build(before, tensor_leaves), lambda: build(after, tensor_leaves))
    assert not _wrong_answers(CALLS[library][name], {"generated": change})


# --- optree's dict-order mode: global, and a namespace's own ---------------------------

_MODE_CALLS = {
    "tree_structure": lambda s: optree.tree_structure(s, namespace="ns"),
    "tree_flatten": lambda s: optree.tree_flatten(s, namespace="ns"),
    "tree_map": lambda s: optree.tree_map(lambda v: v, s, namespace="ns"),
    "treespec_dict": lambda s: optree.treespec_dict(
        {"b": optree.treespec_leaf(), "a": optree.tree_structure(s)}, namespace="ns"
    ),
}


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "twin"])
@pytest.mark.parametrize("name", _MODE_CALLS)
def test_optrees_dict_order_mode_is_guarded(name: str, fast: bool) -> None:
    """A spec shows the namespace's own mode (its namespace recorded), not the global
    one; the keys' order shows either: a graph built under one mode never answers under
    another."""
    from optree.registry import __GLOBAL_NAMESPACE as everywhere  # type: ignore[attr-defined]

    call = _MODE_CALLS[name]
    saved, config.fast_path = config.fast_path, fast
    try:
        compiled = _compiled(call)
        for on, namespace in [(False, everywhere), (True, everywhere), (True, "ns")] * 2:
            with optree.dict_insertion_ordered(on, namespace=namespace):
                for structure in (lambda: 7, lambda: {"b": leaf(1), "a": leaf(2)}):
                    expected, actual = outcome(call, structure()), outcome(compiled, structure())
                    assert_same_ending(expected, actual)
    finally:
        config.fast_path = saved
