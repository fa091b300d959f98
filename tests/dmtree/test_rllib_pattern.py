"""RLlib's structures under torch.compile: leaves that are classes (distribution
classes), functions, user objects (distribution instances) and ``torch.distributions``
instances, passed in and made in the graph, through every common dm-tree and optree
call. One graph (``fullgraph=True``) on every release, results as eager.

On torch 2.5 the dm-tree twin's attrs check once read ``cls.__class__`` of a class leaf,
which that Dynamo cannot do: eight breaks per RLlib learner step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from tests.helpers.leaves import UserLeaf, leaf_function
from tests.helpers.structures import assert_identical

tree = pytest.importorskip("tree")


def structure(x: torch.Tensor) -> dict[str, Any]:
    """What RLlib's distributions and learners nest: classes, functions, objects."""
    return {
        "classes": [UserLeaf, torch.distributions.Normal, torch.distributions.Categorical],
        "functions": (leaf_function, torch.tanh, len),
        "object": UserLeaf(x * 2),
        "distribution": torch.distributions.Normal(x, 1.0, validate_args=False),
        "tensor": x,
    }


def _is_tensor(leaf: Any) -> bool:
    return isinstance(leaf, torch.Tensor)


CALLS: dict[str, Callable[[Any], Any]] = {
    "tree.flatten": lambda s: tree.flatten(s),
    "tree.map_structure": lambda s: tree.map_structure(lambda v: v, s),
    "tree.map_structure two": lambda s: tree.map_structure(lambda a, b: a, s, s),
    "tree.map_structure_with_path": lambda s: tree.map_structure_with_path(lambda p, v: (p, v), s),
    "tree.unflatten_as": lambda s: tree.unflatten_as(s, tree.flatten(s)),
    "tree.assert_same_structure": lambda s: tree.assert_same_structure(s, s),
    "tree.is_nested": lambda s: [tree.is_nested(leaf) for leaf in tree.flatten(s)],
    "tree.flatten_with_path": lambda s: tree.flatten_with_path(s),
    "tree.traverse": lambda s: tree.traverse(lambda v: None, s),
    "tree.flatten_up_to": lambda s: tree.flatten_up_to(s, s),
}
try:
    import optree
except ImportError:  # pragma: no cover - the matrix's environment without optree
    optree = None
else:
    CALLS |= {
        "optree.tree_flatten": lambda s: optree.tree_flatten(s),
        "optree.tree_leaves": lambda s: optree.tree_leaves(s),
        "optree.tree_map": lambda s: optree.tree_map(lambda v: v, s),
        "optree.tree_map two": lambda s: optree.tree_map(lambda a, b: a, s, s),
        "optree.tree_map_with_path": lambda s: optree.tree_map_with_path(lambda p, v: (p, v), s),
        "optree.tree_unflatten": lambda s: optree.tree_unflatten(*optree.tree_flatten(s)[::-1]),
        "optree.tree_structure": lambda s: optree.tree_structure(s).num_leaves,
    }


@pytest.mark.parametrize("made", ["passed in", "made in the graph"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_rllib_leaves_trace_in_one_graph(name: str, made: str) -> None:
    call = CALLS[name]
    x = torch.arange(3.0)
    graphs = []

    def counting(graph_module: Any, example_inputs: Any) -> Any:
        graphs.append(graph_module)
        return graph_module.forward

    if made == "passed in":

        def function(s: Any) -> Any:
            return call(s), s["tensor"] + 1

        expected = function(structure(x))
        torch._dynamo.reset()
        actual = torch.compile(function, backend=counting, fullgraph=True)(structure(x))
    else:

        def function(t: torch.Tensor) -> Any:  # type: ignore[misc]
            return call(structure(t)), t + 1

        expected = function(x)
        torch._dynamo.reset()
        actual = torch.compile(function, backend=counting, fullgraph=True)(x)
    assert len(graphs) == 1
    assert_identical(expected, actual)
