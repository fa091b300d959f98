"""A graph budget for Keras models: the package changes only tree calls, so a real
client's graph count never rises. Each model's forward, with Keras's own non-tree
breaks worked around (``keras_workarounds.py``, Keras 3.0 only), is one graph under
``fullgraph=True``, called twice (the second reuses it), with eager's outputs. (``fit``'s
budget: ``test_keras_fit.py``.)

Keras 3.11.3 runs in the project's environment (``make test``); 3.0.5 in ``.venv-keras``
and 3.15.1 in ``.venv-keras-new`` (``make integration-keras``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras")
import torch  # noqa: E402

from dynamo_tree_compat import _dynamo  # noqa: E402
from tests.integration.keras_workarounds import (  # noqa: E402
    keras_breaks_worked_around,
    model_worked_around,
)
from tests.integration.test_keras_fit import (  # noqa: E402
    dict_input,
    sequential,
    tuple_io,
    unknown_to_explain,
)


def functional() -> Any:
    inputs = keras.Input((12,))
    hidden = keras.layers.Dense(32, activation="relu")(inputs)
    hidden = keras.layers.LayerNormalization()(hidden)
    return keras.Model(inputs, keras.layers.Dense(3)(hidden))


MODELS: dict[str, Callable[[], Any]] = {
    "sequential": sequential,
    "functional": functional,
    "dict": dict_input,
}
if hasattr(keras, "tree"):  # keras.tree is public from Keras 3.1 on
    MODELS["tuple"] = tuple_io


def _inputs(name: str) -> Any:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(8, 12, generator=generator)
    if name == "dict":
        return {"a": x[:, :8], "b": x[:, 8:]}
    if name == "tuple":
        return (x[:, :8], x[:, 8:])
    return x


@pytest.fixture
def worked_around() -> Iterator[None]:
    with keras_breaks_worked_around():
        yield


@pytest.mark.parametrize("name", MODELS)
def test_forward_is_one_graph(name: str, worked_around: None) -> None:
    torch._dynamo.reset()
    keras.utils.set_random_seed(0)
    model = model_worked_around(MODELS[name]())
    graphs: list[Any] = []

    def counting(graph_module: Any, example_inputs: Any) -> Any:
        graphs.append(graph_module)
        return graph_module.forward

    compiled = torch.compile(model, backend=counting, fullgraph=True)
    for _ in range(2):
        expected, actual = model(_inputs(name)), compiled(_inputs(name))
        for got, want in zip(_parts(actual), _parts(expected), strict=True):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert len(graphs) == 1


def _parts(output: Any) -> list[Any]:
    if isinstance(output, dict):
        return [output[key] for key in sorted(output)]
    return list(output) if isinstance(output, (tuple, list)) else [output]


def test_explain_knows_each_break_that_remains_in_the_forward() -> None:
    """Without the workarounds, every break left in the models' forward is one that
    explain knows (``hints.KNOWN_BREAKS``): its cause in a user's words and its way out
    (on Keras 3.0.5 the four causes of the workarounds above; later releases: none)."""
    torch._dynamo.reset()
    with _dynamo.GraphBreakRecorder() as recorder:
        for name in ("sequential", "functional"):
            keras.utils.set_random_seed(0)
            compiled = torch.compile(MODELS[name](), backend="eager")
            for _ in range(2):
                compiled(_inputs(name))
    assert unknown_to_explain(recorder.breaks) == []
    if keras.__version__.startswith("3.0."):
        assert len({item.location for item in recorder.breaks}) >= 4
