"""Graphs no bigger than hand-written ones (issue 32).

Each case is a function that calls a tree function and the same function written by hand
without it. Compiled, both must give the same FX graph: the same inputs, the same tensor
operations in the same order, and no node more. Run with the fast paths on and off (the
traced twins, and optree's own code over the C layer), on structures built in the graph
and passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree

from dynamo_tree_compat import config

tree = pytest.importorskip("tree")
optree = pytest.importorskip("optree")

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

Case = tuple[Callable[..., Any], Callable[..., Any]]


# dm-tree takes None for a leaf, optree for an empty node: the functions take both.
def _double(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t * 2


def _add(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    return None if a is None or b is None else a + b


def _sin(path: Any, t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.sin()


def _made(x: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
    return {"a": x, "b": (y, [x + 1]), "c": None}


def _by_hand_double(s: dict[str, Any]) -> dict[str, Any]:
    return {"a": s["a"] * 2, "b": (s["b"][0] * 2, [s["b"][1][0] * 2]), "c": None}


def _by_hand_added(s: dict[str, Any]) -> dict[str, Any]:
    return {
        "a": s["a"] + s["a"],
        "b": (s["b"][0] + s["b"][0], [s["b"][1][0] + s["b"][1][0]]),
        "c": None,
    }


def _by_hand_sin(s: dict[str, Any]) -> dict[str, Any]:
    return {"a": s["a"].sin(), "b": (s["b"][0].sin(), [s["b"][1][0].sin()]), "c": None}


#: name -> (with the tree call, by hand); each takes the structure and returns tensors.
CASES: dict[str, Case] = {
    "tree.flatten": (
        lambda s: sum(tree.flatten(s)[:3]),
        lambda s: 0 + s["a"] + s["b"][0] + s["b"][1][0],
    ),
    "tree.map_structure": (lambda s: tree.map_structure(_double, s), _by_hand_double),
    "tree.map_structure (two)": (
        lambda s: tree.map_structure(_add, s, s),
        _by_hand_added,
    ),
    "tree.map_structure_with_path": (
        lambda s: tree.map_structure_with_path(_sin, s),
        _by_hand_sin,
    ),
    "tree.map_structure_up_to": (
        lambda s: tree.map_structure_up_to(
            {"a": 0, "b": 0}, lambda b: b[0] * 2, {"a": s["b"], "b": s["b"]}
        ),
        lambda s: {"a": s["b"][0] * 2, "b": s["b"][0] * 2},
    ),
    "tree.unflatten_as": (
        lambda s: tree.unflatten_as(s, [t * 2 for t in tree.flatten(s)[:3]] + [None]),
        _by_hand_double,
    ),
    "tree.traverse": (
        lambda s: tree.traverse(lambda t: _double(t) if isinstance(t, torch.Tensor) else None, s),
        _by_hand_double,
    ),
    "tree.assert_same_structure": (
        lambda s: (tree.assert_same_structure(s, s), s["a"] * 2)[1],
        lambda s: s["a"] * 2,
    ),
    "optree.tree_map": (
        lambda s: optree.tree_map(_double, s),
        _by_hand_double,
    ),
    "optree.tree_map (two)": (
        lambda s: optree.tree_map(_add, s, s),
        _by_hand_added,
    ),
    "optree.tree_map_with_path": (
        lambda s: optree.tree_map_with_path(_sin, s),
        _by_hand_sin,
    ),
    "optree.tree_map_with_accessor": (
        lambda s: optree.tree_map_with_accessor(_sin, s),
        _by_hand_sin,
    ),
    "optree.tree_flatten, tree_unflatten": (
        lambda s: optree.tree_unflatten(
            optree.tree_structure(s), [t * 2 for t in optree.tree_leaves(s)]
        ),
        _by_hand_double,
    ),
    "optree.tree_map_": (
        lambda s: (optree.tree_map_(lambda t: t.add(1), s), s["a"] * 2)[1],
        lambda s: (s["a"].add(1), s["b"][0].add(1), s["b"][1][0].add(1), s["a"] * 2)[3],
    ),
    "torch pytree tree_map": (lambda s: pytree.tree_map(_double, s), _by_hand_double),
    "torch pytree tree_map (two)": (lambda s: pytree.tree_map(_add, s, s), _by_hand_added),
    "torch pytree tree_leaves": (
        lambda s: sum(pytree.tree_leaves(s)[:3]),
        lambda s: 0 + s["a"] + s["b"][0] + s["b"][1][0],
    ),
    "torch pytree tree_flatten, tree_unflatten": (
        lambda s: pytree.tree_unflatten(
            [t * 2 for t in pytree.tree_flatten(s)[0][:3]] + [None],
            pytree.tree_structure(s),
        ),
        _by_hand_double,
    ),
    "torch pytree tree_map_only": (
        lambda s: pytree.tree_map_only(torch.Tensor, _double, s),
        _by_hand_double,
    ),
    "torch pytree tree_map_with_path": (
        lambda s: pytree.tree_map_with_path(_sin, s),
        _by_hand_sin,
    ),
    "optree.tree_reduce": (
        lambda s: optree.tree_reduce(_add, s),
        lambda s: s["a"] + s["b"][0] + s["b"][1][0],
    ),
}


def _graph(function: Callable[..., Any], *args: Any) -> tuple[Any, Any]:
    """The one FX graph Dynamo makes of ``function`` (fullgraph), and what it returns."""
    graphs: list[torch.fx.GraphModule] = []

    def backend(graph_module: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    result = torch.compile(function, backend=backend, fullgraph=True)(*args)
    assert len(graphs) == 1
    return graphs[0].graph, result


def _shape(graph: Any) -> list[tuple[str, str]]:
    """Every node: its kind and, for operations, what it calls; inputs by kind only."""
    found = []
    for node in graph.nodes:
        target = "" if node.op in ("placeholder", "output") else str(node.target)
        found.append((node.op, target))
    return found


@pytest.fixture(params=[True, False], ids=["fast path", "twins"])
def fast_path(request: pytest.FixtureRequest) -> Iterator[bool]:
    saved, config.fast_path = config.fast_path, request.param
    try:
        yield request.param
    finally:
        config.fast_path = saved


@pytest.mark.parametrize("built", ["built in the graph", "passed in"])
@pytest.mark.parametrize("name", list(CASES))
def test_graph_is_the_hand_written_one(name: str, built: str, fast_path: bool) -> None:
    with_tree, by_hand = CASES[name]
    x, y = torch.randn(3), torch.randn(3)

    if built == "passed in":

        def run(body: Callable[..., Any]) -> Callable[..., Any]:
            return lambda s: body(s)

        args: tuple[Any, ...] = (_made(x, y),)
    else:

        def run(body: Callable[..., Any]) -> Callable[..., Any]:
            return lambda a, b: body(_made(a, b))

        args = (x, y)
    graph, result = _graph(run(with_tree), *args)
    hand_graph, hand_result = _graph(run(by_hand), *args)
    assert _shape(graph) == _shape(hand_graph), f"{graph}\n--- by hand ---\n{hand_graph}"
    torch.testing.assert_close(result, hand_result)


def test_the_comparison_sees_an_extra_node() -> None:
    """The check can fail: one operation more than the hand-written graph is seen."""
    x = torch.randn(3)
    graph, _ = _graph(lambda t: tree.map_structure(_double, [t, t + 0]), x)
    hand_graph, _ = _graph(lambda t: [t * 2, t * 2], x)
    assert _shape(graph) != _shape(hand_graph)
