"""RLlib's structures under torch.compile: leaves that are classes (distribution
classes, an ABC), functions, builtins, modules, user objects (distribution instances)
and ``torch.distributions`` instances, passed in and made in the graph, through every
dm-tree call with a fast path and the common optree calls. One graph
(``fullgraph=True``) on every release, results as eager; dm-tree's calls on the fast
path, which takes such objects as leaves, with no fallback to the twin.

On torch 2.5 the dm-tree twin's attrs check once read ``cls.__class__`` of a class leaf,
which that Dynamo cannot do: eight breaks per RLlib learner step.
"""

from __future__ import annotations

import collections.abc
from collections.abc import Callable
from typing import Any

import pytest
import torch

from dynamo_tree_compat._dynamo.runtime import Event
from tests.helpers.compiling import stats
from tests.helpers.dmtree_calls import FAST_CALLS
from tests.helpers.leaves import UserLeaf, leaf_function
from tests.helpers.structures import assert_identical

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class Module(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


MODULE = Module()
tree = pytest.importorskip("tree")


def structure(x: torch.Tensor) -> dict[str, Any]:
    """What RLlib's distributions and learners nest: classes, functions, objects."""
    return {
        "classes": [UserLeaf, torch.distributions.Normal, collections.abc.Sequence],
        "functions": (leaf_function, torch.tanh, len),
        "module": {"m": MODULE},
        "object": UserLeaf(x * 2),
        "distribution": torch.distributions.Normal(x, 1.0, validate_args=False),
        "tensor": x,
    }


CALLS: dict[str, Callable[[Any], Any]] = {
    **FAST_CALLS,
    "tree.is_nested of each leaf": lambda s: [tree.is_nested(leaf) for leaf in tree.flatten(s)],
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
    if name in FAST_CALLS:
        assert name in stats(Event.TAKEN) and not stats(Event.FALLBACK)
