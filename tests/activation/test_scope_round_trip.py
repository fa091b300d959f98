"""Scopes never lose a graph: after ``disabled()``, the enabled graph comes back.

Dynamo gives up on a whole frame when a graph break happens where it cannot resume (in
a user's context manager, say), and marks the frame to run eagerly for good. A mark
made while the package was disabled must not outlive that mode.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import optree
import pytest
import torch
import tree

import dynamo_tree_compat as dtc
from dynamo_tree_compat import _dynamo
from tests.helpers.breadth import WIDE
from tests.helpers.dynamo_support import needs_dynamo


class Counting:
    """A backend that counts the graphs it compiles and the graph runs."""

    def __init__(self) -> None:
        self.compiled = 0
        self.runs = 0

    def __call__(self, graph_module: Any, example_inputs: Any) -> Callable[..., Any]:
        self.compiled += 1

        def run(*args: Any) -> Any:
            self.runs += 1
            return graph_module.forward(*args)

        return run


class Scope:
    """Any user context manager."""

    def __enter__(self) -> Scope:
        return self

    def __exit__(self, *exc_info: object) -> bool:
        return False


def with_optree(x: torch.Tensor) -> torch.Tensor:
    """The issue's reproduction."""
    with Scope():
        y = x + 1
        leaves, _ = optree.tree_flatten(((y,), {"training": None}), none_is_leaf=True)
        return leaves[0] - 1


def with_dmtree(x: torch.Tensor) -> torch.Tensor:
    with Scope():
        y = x + 1
        return tree.flatten({"b": (y,), "a": [y * 2]})[0] - 1


@contextlib.contextmanager
def name_scope(name: str) -> Iterator[None]:
    """Keras wraps every layer call in a name scope like this."""
    yield


class Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dense = torch.nn.Linear(3, 3)

    def forward(self, inputs: dict[str, torch.Tensor]) -> Any:
        with name_scope("dense"):
            flat = tree.flatten(inputs)
            return tree.map_structure(lambda t: self.dense(t), {"out": flat})


def _runs(compiled: Callable[..., Any], counting: Counting, *args: Any, mode: Any = None) -> int:
    before = counting.runs
    with mode() if mode is not None else contextlib.nullcontext():
        compiled(*args)
    return counting.runs - before


@pytest.mark.parametrize("function", [with_optree, with_dmtree], ids=["optree", "dm-tree"])
def test_the_enabled_graph_comes_back_after_disabled(function: Any) -> None:
    torch._dynamo.reset()
    counting = Counting()
    compiled, x = torch.compile(function, backend=counting), torch.randn(3)
    runs = [_runs(compiled, counting, x, mode=mode) for mode in (None, dtc.disabled, None)]
    assert runs[0] == 1 and runs[2] == 1, runs
    assert counting.compiled <= 2  # one graph per mode, at most
    torch.testing.assert_close(compiled(x), function(x))


@needs_dynamo("a @contextmanager scope")
def test_a_keras_like_name_scope_around_a_layer() -> None:
    torch._dynamo.reset()
    counting = Counting()
    layer = Layer()
    compiled = torch.compile(layer, backend=counting)
    inputs = {"b": torch.randn(2, 3), "a": torch.randn(2, 3)}
    runs = [_runs(compiled, counting, inputs, mode=mode) for mode in (None, dtc.disabled, None)]
    assert runs[0] == 1 and runs[2] == 1, runs
    expected, actual = layer(inputs), compiled(inputs)
    torch.testing.assert_close(expected["out"], actual["out"])


#: Round trips: 25 in make test, 100 in the ci and long profiles.
ROUND_TRIPS = 100 if WIDE else 25


@pytest.mark.parametrize("function", [with_optree, with_dmtree], ids=["optree", "dm-tree"])
@pytest.mark.skipif(
    not _dynamo.has(_dynamo.Capability.SKIP_KEEPS_GRAPHS),
    reason=f"torch {torch.__version__}: Dynamo's mark to run a code eagerly replaces its "
    "compiled graphs (no exec strategies), so each return to a mode compiles again",
)
def test_round_trips_compile_once_per_mode(function: Any) -> None:
    """Scopes entered and left ROUND_TRIPS times: each mode compiles once."""
    torch._dynamo.reset()
    counting = Counting()
    compiled, x = torch.compile(function, backend=counting), torch.randn(3)
    enabled_runs = []
    for _ in range(ROUND_TRIPS):
        enabled_runs.append(_runs(compiled, counting, x))
        _runs(compiled, counting, x, mode=dtc.disabled)
    assert enabled_runs == [1] * ROUND_TRIPS
    assert counting.compiled <= 2, counting.compiled


def test_with_fullgraph_the_enabled_graph_comes_back_after_the_disabled_error() -> None:
    torch._dynamo.reset()
    counting = Counting()
    compiled, x = torch.compile(with_dmtree, backend=counting, fullgraph=True), torch.randn(3)
    assert _runs(compiled, counting, x) == 1
    with dtc.disabled(), pytest.raises(torch._dynamo.exc.Unsupported):
        compiled(x)
    assert _runs(compiled, counting, x) == 1
    assert counting.compiled == 1


def test_a_function_nested_in_another_compiled_function() -> None:
    torch._dynamo.reset()
    counting = Counting()
    inner = torch.compile(with_optree, backend=counting)

    def outer(x: torch.Tensor) -> torch.Tensor:
        with Scope():
            return inner(x * 2) + tree.flatten([x])[0]

    compiled, x = torch.compile(outer, backend=counting), torch.randn(3)
    runs = [_runs(compiled, counting, x, mode=mode) for mode in (None, dtc.disabled, None)]
    assert runs[0] >= 1 and runs[2] == runs[0], runs
    torch.testing.assert_close(compiled(x), outer(x))
