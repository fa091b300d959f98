"""torch's own pytree (``torch.utils._pytree``): ``tree_map`` and ``tree_leaves`` at
Dynamo's variable level, where Dynamo would inline them leaf by leaf.

``tree_leaves`` is handled on every release (Dynamo's own fast path maps only);
``tree_map`` where Dynamo has no fast path of its own (before torch 2.10, asked by the
capability ``tree_map_fast_path``). Compiled calls give eager torch's answers exactly;
anything but dicts, lists and tuples of tensors and constants goes torch's own way.
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
from tests.helpers.compiling import compiled, fresh_dynamo, stats  # noqa: F401
from tests.helpers.structures import (
    COMPILED_EXAMPLES,
    Spec,
    assert_identical,
    build,
    plain_specs,
    specs,
    tensor_leaves,
)

#: Whether this Dynamo maps torch's pytree itself (then tree_map is left to it).
DYNAMO_MAPS = _dynamo.capability("tree_map_fast_path")
MAP = "torch.utils._pytree.tree_map"
LEAVES = "torch.utils._pytree.tree_leaves"
OURS = {LEAVES} if DYNAMO_MAPS else {MAP, LEAVES}

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


pytree.register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda values, _: Pair(*values))


def _double(value: Any) -> Any:
    return value * 2 if isinstance(value, torch.Tensor) else value


def _calls(structure_of: Callable[[torch.Tensor], Any]) -> Callable[[torch.Tensor], Any]:
    """Every handled call on a structure built in the graph (two built apart for the
    two-tree map), plus a log of the order in which func saw the leaves."""

    def body(x: torch.Tensor) -> Any:
        seen: list[Any] = []

        def logged(value: Any) -> Any:
            seen.append(len(seen))
            return _double(value)

        structure = structure_of(x)
        return (
            pytree.tree_leaves(structure),
            pytree.tree_map(_double, structure),
            pytree.tree_map(lambda a, b: (b, a), structure, structure_of(x)),
            pytree.tree_map(logged, structure),
            seen,
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
    assert stats("taken:") >= OURS


def test_other_nodes_go_torch_s_way_and_match_eager() -> None:
    """namedtuples, OrderedDicts and a registered custom node: torch's own code."""
    body = _calls(_with_nodes)
    x = torch.ones(2)
    assert_identical(body(x), compiled(body)(x))
    assert not stats("taken:") & {MAP, LEAVES}


def test_is_leaf_and_a_different_second_tree_go_torch_s_way() -> None:
    def body(x: torch.Tensor) -> Any:
        tree = {"a": [x, x], "b": x}
        return (
            pytree.tree_leaves(tree, is_leaf=lambda node: isinstance(node, list)),
            pytree.tree_map(lambda a, b: (a, b), tree, {"a": [1, 2], "b": [3]}),
        )

    x = torch.ones(2)
    assert_identical(body(x), compiled(body)(x))
    assert LEAVES in stats("fallback:")


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
    assert not stats("taken:") & {MAP, LEAVES}


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
        return pytree.tree_leaves(tree), pytree.tree_map(_double, tree)

    tree = build(spec, tensor_leaves)
    torch._dynamo.reset()
    expected = body(tree)
    actual = compiled(body, fullgraph=False)(tree)
    assert_identical(expected, actual)
