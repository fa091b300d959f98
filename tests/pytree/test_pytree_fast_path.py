"""torch's own pytree (``torch.utils._pytree``) at Dynamo's variable level, where Dynamo
would inline it leaf by leaf.

``tree_leaves``, ``tree_flatten``, ``tree_structure``, ``tree_unflatten`` and the
``_with_path`` flattens are handled on every release (Dynamo's own fast path maps only);
``tree_map``, ``tree_map_only`` and ``tree_map_with_path`` where Dynamo has no fast path
of its own for them (asked by capabilities). Compiled calls give eager torch's answers
exactly, TreeSpecs included; anything but dicts, lists and tuples of tensors and
constants goes torch's own way.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from hypothesis import given, settings

import dynamo_tree_compat
from dynamo_tree_compat import _dynamo
from dynamo_tree_compat._dynamo.runtime import Event
from tests.helpers.compiling import compiled, stats
from tests.helpers.structures import (
    COMPILED_EXAMPLES,
    Spec,
    assert_identical,
    build,
    plain_specs,
    specs,
    tensor_leaves,
)

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

#: Whether this Dynamo maps torch's pytree itself (then tree_map is left to it).
DYNAMO_MAPS = _dynamo.has(_dynamo.Capability.TREE_MAP_FAST_PATH)
PREFIX = "torch.utils._pytree."
MAP = PREFIX + "tree_map"
LEAVES = PREFIX + "tree_leaves"
#: The calls this package takes on this release: Dynamo's own fast path keeps its maps.
OURS = {
    PREFIX + name
    for name, capability in {
        "tree_map": _dynamo.Capability.TREE_MAP_FAST_PATH,
        "tree_map_with_path": _dynamo.Capability.TREE_MAP_WITH_PATH_FAST_PATH,
        "tree_map_only": _dynamo.Capability.TREE_MAP_ONLY_FAST_PATH,
        "tree_leaves": None,
        "tree_flatten": None,
        "tree_structure": None,
        "tree_unflatten": None,
        "tree_flatten_with_path": None,
        "tree_leaves_with_path": None,
    }.items()
    if capability is None or not _dynamo.has(capability)
}

Point = collections.namedtuple("Point", "x y")


class Pair:
    """A custom pytree node, registered with torch's pytree."""

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b

    def __eq__(self, other: object) -> bool:
        if type(other) is not Pair:
            return False
        pairs = zip(pytree.tree_leaves([self.a, self.b]), pytree.tree_leaves([other.a, other.b]))
        return all(torch.equal(p, q) if isinstance(p, torch.Tensor) else p == q for p, q in pairs)

    __hash__ = None  # type: ignore[assignment]


pytree.register_pytree_node(
    Pair,
    lambda p: ([p.a, p.b], None),
    lambda values, _: Pair(*values),
    flatten_with_keys_fn=lambda p: ([(pytree.GetAttrKey(n), getattr(p, n)) for n in "ab"], None),
)


def _double(value: Any) -> Any:
    return value * 2 if isinstance(value, torch.Tensor) else value


def _calls(
    structure_of: Callable[[torch.Tensor], Any], path_in_map: bool = True
) -> Callable[[torch.Tensor], Any]:
    """Every handled call on a structure built in the graph (two built apart for the
    two-tree maps), plus a log of the order in which func saw the leaves."""

    def body(x: torch.Tensor) -> Any:
        seen: list[Any] = []

        def logged(value: Any) -> Any:
            seen.append(len(seen))
            return _double(value)

        structure = structure_of(x)
        leaves, spec = pytree.tree_flatten(structure)
        paths, path_spec = pytree.tree_flatten_with_path(structure)
        return (
            pytree.tree_leaves(structure),
            pytree.tree_map(_double, structure),
            pytree.tree_map(lambda a, b: (b, a), structure, structure_of(x)),
            pytree.tree_map(logged, structure),
            seen,
            (leaves, spec, path_spec, spec == path_spec, spec.num_leaves),
            pytree.tree_unflatten([_double(leaf) for leaf in leaves], spec),
            spec.unflatten(leaves),
            pytree.tree_structure(structure) == pytree.tree_structure(structure_of(x)),
            paths,
            [pytree.keystr(path) for path, _ in pytree.tree_leaves_with_path(structure)],
            pytree.tree_map_only(torch.Tensor, _double, structure),
            pytree.tree_map_only((int, str), lambda v: (v,), structure),
            pytree.tree_map_with_path(
                lambda path, a, b: (path if path_in_map else (), b), structure, structure
            ),
        )

    return body


def _plain(x: torch.Tensor) -> Any:
    # Unsorted keys, None leaves, empty containers, constants: torch's insertion order.
    return {"b": [x, None, (x + 1, "s")], "a": x * 2, "c": {}, "d": (), 3: {"z": 1, "y": x}}


def _with_nodes(x: torch.Tensor) -> Any:
    return {"p": Point(x, 1), "o": collections.OrderedDict(b=x, a=2), "c": Pair(x, [x])}


def test_plain_structures_take_the_fast_path_and_match_eager() -> None:
    body = _calls(_plain)
    x = torch.ones(2)
    assert_identical(body(x), compiled(body)(x))
    assert stats(Event.TAKEN) >= OURS


def test_other_nodes_go_torch_s_way_and_match_eager() -> None:
    """namedtuples, OrderedDicts and a registered custom node: torch's own code."""
    # Without the paths in tree_map_with_path: Dynamo 2.13's own fast path gives paths into
    # an OrderedDict wrongly, with the package or without it (2.15 gives them right).
    body = _calls(_with_nodes, path_in_map=False)
    x = torch.ones(2)
    # Not fullgraph: Dynamo 2.9 fails to trace torch's two-tree map over Pair, package or not.
    assert_identical(body(x), compiled(body, fullgraph=False)(x))
    assert not stats(Event.TAKEN) & OURS


def test_is_leaf_and_a_different_second_tree_go_torch_s_way() -> None:
    def body(x: torch.Tensor) -> Any:
        tree = {"a": [x, x], "b": x}
        return (
            pytree.tree_leaves(tree, is_leaf=lambda node: isinstance(node, list)),
            pytree.tree_map(lambda a, b: (a, b), tree, {"a": [1, 2], "b": [3]}),
        )

    x = torch.ones(2)
    assert_identical(body(x), compiled(body)(x))
    assert LEAVES in stats(Event.FALLBACK)


def test_a_mismatch_raises_torch_s_own_error() -> None:
    def body(x: torch.Tensor) -> Any:
        return pytree.tree_map(lambda a, b: a, [x, x], [x])

    with pytest.raises(ValueError) as eager:
        body(torch.ones(2))
    with pytest.raises(ValueError) as traced:  # Dynamo lets the error out, unfused
        compiled(body, fullgraph=False)(torch.ones(2))
    assert str(traced.value) == str(eager.value)


def test_eager_calls_are_torch_s_own_functions() -> None:
    import importlib

    before = (pytree.tree_map, pytree.tree_leaves)
    importlib.reload(dynamo_tree_compat)
    assert (pytree.tree_map, pytree.tree_leaves) == before
    assert pytree.tree_map.__module__ == "torch.utils._pytree"


def test_disabled_leaves_torch_s_way() -> None:
    body = _calls(_plain)
    x = torch.ones(2)
    with dynamo_tree_compat.disabled():
        assert_identical(body(x), compiled(body)(x))
    assert not stats(Event.TAKEN) & OURS


@settings(max_examples=COMPILED_EXAMPLES, deadline=None)
@given(spec=plain_specs())
def test_generated_plain_structures_built_in_the_graph(spec: Spec) -> None:
    body = _calls(lambda x: build(spec, tensor_leaves))
    x = torch.ones(2)
    torch._dynamo.reset()
    assert_identical(body(x), compiled(body)(x))


@settings(max_examples=COMPILED_EXAMPLES, deadline=None)
@given(spec=specs(compiled=True))
def test_generated_structures_of_every_kind_passed_in(spec: Spec) -> None:
    """Every container kind, passed in: whatever way a call goes, eager's answer."""

    def body(tree: Any) -> Any:
        leaves, spec = pytree.tree_flatten(tree)
        return (
            pytree.tree_leaves(tree),
            pytree.tree_map(_double, tree),
            spec,
            pytree.tree_unflatten([_double(leaf) for leaf in leaves], spec),
            pytree.tree_flatten_with_path(tree),
            pytree.tree_map_only(torch.Tensor, _double, tree),
        )

    tree = build(spec, tensor_leaves)
    torch._dynamo.reset()
    expected = body(tree)
    actual = compiled(body, fullgraph=False)(tree)
    assert_identical(expected, actual)


def test_a_spec_from_outside_the_graph_goes_torch_s_way_and_guards() -> None:
    """A TreeSpec passed in is no constant of the graph: torch's own unflatten, and a
    second spec gives its own answer."""

    def body(leaves: list[torch.Tensor], spec: pytree.TreeSpec) -> Any:
        return pytree.tree_unflatten([leaf + 1 for leaf in leaves], spec)

    x = torch.ones(2)
    run = compiled(body)
    for tree in ({"a": [x, x]}, (x, {"b": x})):
        leaves, spec = pytree.tree_flatten(tree)
        assert_identical(body(leaves, spec), run(leaves, spec))
    assert PREFIX + "tree_unflatten" in stats(Event.FALLBACK)


def test_is_leaf_goes_torch_s_way() -> None:
    def body(x: torch.Tensor) -> Any:
        tree = {"a": [x, 1], "b": (x,)}
        return pytree.tree_flatten(tree, is_leaf=lambda node: isinstance(node, tuple))

    x = torch.ones(2)
    assert_identical(body(x), compiled(body)(x))
    assert PREFIX + "tree_flatten" in stats(Event.FALLBACK)


def test_tree_map_only_with_a_predicate_calls_it_and_func_in_torch_s_order() -> None:
    """A predicate (which Dynamo 2.5 to 2.9 cannot trace in torch's own map_only)."""

    def body(x: torch.Tensor) -> Any:
        seen: list[Any] = []

        def pred(v: Any) -> bool:
            seen.append(("pred", len(seen)))
            return isinstance(v, int)

        def func(v: Any) -> Any:
            seen.append(("func", len(seen)))
            return v + 1

        return pytree.tree_map_only(pred, func, {"a": [x, 1], "b": (x, 2)}), seen

    x = torch.ones(2)
    assert_identical(body(x), compiled(body)(x))


def test_tree_map_only_with_a_predicate_on_tensor_values_breaks_the_graph() -> None:
    def body(x: torch.Tensor) -> Any:
        return pytree.tree_map_only(lambda v: bool((v > 0).all()), lambda v: -v, [x, -x])

    x = torch.ones(2)
    assert_identical(body(x), compiled(body, fullgraph=False)(x))


def test_a_wrong_leaf_count_raises_torch_s_own_error() -> None:
    def body(x: torch.Tensor) -> Any:
        _, spec = pytree.tree_flatten({"a": [x, 1], "b": (x,)})
        return pytree.tree_unflatten([x, x, x, x], spec)

    with pytest.raises(ValueError) as eager:
        body(torch.ones(2))
    with pytest.raises(ValueError) as traced:  # the error torch's own unflatten raises
        compiled(body, fullgraph=False)(torch.ones(2))
    assert str(traced.value) == str(eager.value)
    assert PREFIX + "tree_unflatten" in stats(Event.FALLBACK)


def test_a_spec_made_in_the_graph_leaves_it_equal_to_eager_s() -> None:
    def body(x: torch.Tensor) -> Any:
        return pytree.tree_structure({"b": [x, None], "a": (1, x)})

    spec = compiled(body)(torch.ones(2))
    assert spec == body(torch.ones(2)) and repr(spec) == repr(body(torch.ones(2)))
    assert pytree.tree_unflatten([1, 2, 3, 4], spec) == {"b": [1, 2], "a": (3, 4)}


@pytest.mark.parametrize(
    "mapped",
    [
        lambda tree: pytree.tree_map(_double, tree),
        lambda tree: pytree.tree_map_with_path(lambda path, leaf: _double(leaf), tree),
        lambda tree: pytree.tree_map_only(torch.Tensor, _double, tree),
    ],
    ids=["tree_map", "tree_map_with_path", "tree_map_only"],
)
def test_every_map_keeps_a_defaultdict(mapped: Callable[[Any], Any]) -> None:
    """A defaultdict that comes in leaves a map as one: torch 2.15's own fast path gives
    a plain dict, so there the maps go this package's way. (Before 2.10 Dynamo cannot
    build a defaultdict with items in the graph: the map breaks the graph there, with
    eager's answer.)"""

    def make() -> Any:
        return collections.defaultdict(list, {"b": torch.ones(2), "a": [torch.zeros(1)]})

    fullgraph = _dynamo.has(_dynamo.Capability.DEFAULTDICT_TAKES_ITEMS)
    assert_identical(mapped(make()), compiled(mapped, fullgraph=fullgraph)(make()))
