"""Keras 3.0.5 (torch backend, the dm-tree era) under torch.compile: no dm-tree breaks.

Runs in its own environment (`make integration-keras`): keras 3.0.5 needs numpy<2.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras")
import torch  # noqa: E402

import dynamo_tree_compat  # noqa: E402
from dynamo_tree_compat import _dynamo  # noqa: E402


def sequential() -> Any:
    return keras.Sequential(
        [
            keras.Input((16,)),
            keras.layers.Dense(32),
            keras.layers.ReLU(),
            keras.layers.Dense(32),
            keras.layers.LayerNormalization(),
            keras.layers.Dense(4),
        ]
    )


def functional() -> Any:
    inputs = keras.Input((16,))
    hidden = keras.layers.ReLU()(keras.layers.Dense(32)(inputs))
    hidden = keras.layers.LayerNormalization()(keras.layers.Dense(32)(hidden))
    return keras.Model(inputs, keras.layers.Dense(4)(hidden))


def _is_dm_tree_break(item: Any) -> bool:
    return item.library == "dm-tree"


def compile_and_count(model: Any, scope: Any) -> tuple[list[Any], int, bool]:
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
    expected = model(x)
    graphs = []

    def counting_backend(graph_module: Any, example_inputs: Any) -> Any:
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    with scope, _dynamo.GraphBreakRecorder() as recorder:
        actual = torch.compile(model, backend=counting_backend)(x)
    return recorder.breaks, len(graphs), bool(torch.allclose(expected, actual, atol=1e-5))


@pytest.mark.parametrize("build", [sequential, functional])
def test_keras_model_has_no_dm_tree_breaks(build: Any) -> None:
    model = build()
    before, graphs_before, same_before = compile_and_count(model, dynamo_tree_compat.disabled())
    after, graphs_after, same_after = compile_and_count(model, dynamo_tree_compat.enabled())
    dm_tree_before = sum(map(_is_dm_tree_break, before))
    assert dm_tree_before > 0  # the baseline does have dm-tree breaks to remove
    assert sum(map(_is_dm_tree_break, after)) == 0
    assert same_before and same_after
    remaining = Counter(
        (item.reason.splitlines()[0], item.location.rpartition("site-packages" + os.sep)[2])
        for item in after
    )
    ours_or_dm_tree = ("dynamo_tree_compat" + os.sep, "tree" + os.sep)
    assert not any(location.startswith(ours_or_dm_tree) for _, location in remaining)
    print(
        f"\n{build.__name__}: without: {graphs_before} graphs, {len(before)} breaks "
        f"({dm_tree_before} in dm-tree); with: {graphs_after} graphs, {len(after)} breaks, "
        "none in dm-tree or this package:"
    )
    for (reason, location), count in sorted(remaining.items()):
        print(f"  {count:3} {location}: {reason}")


@pytest.mark.no_tree_graph_breaks  # the plugin fails the test on any dm-tree or optree break
@pytest.mark.parametrize("build", [sequential, functional])
def test_keras_training_step_keeps_clear_of_tree_graph_breaks(build: Any) -> None:
    """How a library's maintainers keep the property: the pytest plugin's marker."""
    torch._dynamo.reset()
    model = build()
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(
        torch.compile(model, backend="eager")(x), model(x), atol=1e-5, rtol=0
    )
