"""Real clients under torch.compile with inductor, package off and on, in one run.

Rows: RLlib's PPO learner update (ray 2.60.0; the step of ``tests/integration/
rllib_learner.py``, compiled, then backward and Adam) as RLlib ships it and with its own
graph breaks worked around; Keras's ``fit`` with ``jit_compile=True`` (the torch backend
compiles its train step), for a Sequential MLP and for a model that passes tuples through
a layer calling ``keras.tree``. Each row gives graphs and graph breaks, the
compile time of the first step, and the step time compiled over eager (below 1: faster
than eager): for RLlib, the compiled region alone (the step) and the whole update with
its eager backward and Adam step; for Keras, a fit epoch, and how far the compiled
model's trained weights are from eager's and, with the package, from the compiled
model's without it (the largest difference of a weight). A row whose program fails says so.

    python benchmarks/real_clients.py [--steps 30] [--only rllib|keras|keras-forward]

``keras-forward``: a Sequential model's forward under ``torch.compile(model)`` (the model
of the Keras 3.0.5 issue), with Keras 3.0's own breaks also worked around where it is 3.0.

Needs ray[rllib] and keras 3.11.3 in one environment: ``make benchmark-real-clients``.
``--only keras`` runs any Keras (Keras 3.15.1: ``.venv-keras-new/bin/python
benchmarks/real_clients.py --only keras``); with 3.12 or later ``keras.tree`` goes through
torch's own pytree.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "torch")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

import dynamo_tree_compat
from dynamo_tree_compat import _dynamo
from dynamo_tree_compat._dynamo.graph_breaks import TREE_LIBRARIES

Row = dict[str, Any]


def _timed(step: Callable[[], Any], steps: int) -> float:
    """Seconds per call, the best of three rounds of ``steps`` calls."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - started) / steps)
    return best


def _scope(package: str) -> Any:
    return dynamo_tree_compat.enabled() if package == "on" else dynamo_tree_compat.disabled()


def _measure(name: str, package: str, run: Callable[[], tuple[float, ...]]) -> Row:
    """Runs one row: graphs and breaks counted from Dynamo, whatever fails reported.

    ``run`` returns the compile seconds, then the compiled step's time over eager's, then
    (RLlib) the whole update's, backward and Adam included.
    """
    torch._dynamo.reset()
    graphs, undo = _dynamo.count_graphs()
    row: Row = {"client": name, "package": package, "update: compiled / eager": "-"}
    try:
        with _scope(package), _dynamo.GraphBreakRecorder() as recorder:
            compile_seconds, *ratios = run()
        row |= {"compile s": f"{compile_seconds:.1f}", "step: compiled / eager": f"{ratios[0]:.2f}"}
        if len(ratios) > 1:
            row["update: compiled / eager"] = f"{ratios[1]:.2f}"
    except Exception as error:  # noqa: BLE001 - a client that fails is a result too
        row |= {"compile s": "-", "step: compiled / eager": f"fails: {type(error).__name__}"}
    finally:
        undo()
    breaks = recorder.breaks
    tree_breaks = sum(item.library in TREE_LIBRARIES for item in breaks)
    row |= {"graphs": graphs(), "breaks (tree)": f"{len(breaks)} ({tree_breaks})"}
    if os.environ.get("REAL_CLIENTS_SHOW_BREAKS"):
        for item in breaks:
            print(f"  {name}, package {package}: {item.location}: {item.reason[:80]}")
    return row


def rllib_rows(steps: int) -> list[Row]:
    from tests.integration.rllib_learner import (
        NESTED_ACTIONS,
        OBSERVATIONS,
        build_learner,
        make_batch,
        training_step,
    )

    spaces = {"default_policy": (OBSERVATIONS, NESTED_ACTIONS)}

    def run(worked_around: bool) -> tuple[float, float, float]:
        learner = build_learner(spaces, worked_around)
        batch = make_batch(learner, spaces)
        step_seconds: list[float] = []

        def update(step: Callable[[Any], Any]) -> None:
            started = time.perf_counter()
            _, losses = step(batch)
            step_seconds.append(time.perf_counter() - started)
            learner.apply_gradients(learner.compute_gradients(losses))

        def timed(step: Callable[[Any], Any]) -> tuple[float, float]:
            """(update seconds, seconds of the step in it), the best of three rounds."""
            step_seconds.clear()
            update_time = _timed(lambda: update(step), steps)
            rounds = [step_seconds[i : i + steps] for i in range(0, len(step_seconds), steps)]
            return update_time, min(sum(part) / steps for part in rounds)

        eager_step = training_step(learner)
        update(eager_step)
        eager_update, eager_step_time = timed(eager_step)
        compiled_step = torch.compile(training_step(learner))
        started = time.perf_counter()
        update(compiled_step)
        compile_seconds = time.perf_counter() - started
        compiled_update, compiled_step_time = timed(compiled_step)
        return compile_seconds, compiled_step_time / eager_step_time, compiled_update / eager_update

    rows = []
    for worked_around, label in (
        (False, "RLlib PPO update, as shipped"),
        (True, "RLlib, worked around"),
    ):
        for package in ("off", "on"):
            rows.append(_measure(label, package, lambda w=worked_around: run(w)))
    return rows


def _keras_models() -> dict[str, tuple[Callable[[], Any], Callable[[Any, Any], Any]]]:
    """Each Keras model of the rows: how it is built, and how its data and targets are
    shaped from one array of each."""
    import keras

    def mlp() -> Any:
        return keras.Sequential(
            [
                keras.Input((32,)),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.LayerNormalization(),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(4),
            ]
        )

    class PairScale(keras.layers.Layer):
        """A layer over a pair, as model libraries write them: keras.tree on a tuple."""

        def build(self, input_shape: Any) -> None:
            self.scales = [self.add_weight(shape=(1,), initializer="ones") for _ in input_shape]

        def call(self, pair: Any) -> Any:
            scaled = [part * scale for part, scale in zip(keras.tree.flatten(pair), self.scales)]
            return keras.tree.pack_sequence_as(pair, keras.tree.lists_to_tuples(scaled))

    def tuples() -> Any:
        inputs = (keras.Input((16,)), keras.Input((16,)))
        pair = PairScale()(inputs)
        hidden = keras.layers.Concatenate()([keras.layers.Dense(32)(pair[0]), pair[1]])
        hidden = keras.layers.Dense(64, activation="relu")(hidden)
        return keras.Model(inputs, (keras.layers.Dense(4)(hidden), keras.layers.Dense(1)(hidden)))

    return {
        "Sequential MLP": (mlp, lambda x, y: (x, y)),
        "tuples through a keras.tree layer": (
            tuples,
            lambda x, y: ((x[:, :16], x[:, 16:]), (y, y[:, :1])),
        ),
    }


def keras_rows(steps: int) -> list[Row]:
    """Keras's fit, compiled (``jit_compile=True``) and eager, from the same weights and
    batches, for each model of :func:`_keras_models`: a Sequential MLP, and one that
    passes tuples through a layer calling ``keras.tree`` (from Keras 3.12 on the torch
    backend, over torch's pytree; a row counts the calls this package's torch-pytree fast
    path took)."""
    import numpy as np

    generator = np.random.default_rng(0)
    x = generator.standard_normal((32 * steps, 32)).astype("float32")
    y = generator.standard_normal((32 * steps, 4)).astype("float32")
    rows = []
    for name, (build, shape) in _keras_models().items():
        rows += _keras_model_rows(name, build, *shape(x, y))
    return rows


def _keras_model_rows(name: str, build: Callable[[], Any], x: Any, y: Any) -> list[Row]:
    """One model's rows, package off and on; the compiled model's trained weights are
    compared with eager's, and with the package with those without it."""
    import keras
    import numpy as np

    def model(jit_compile: bool) -> Any:
        keras.utils.set_random_seed(0)
        built = build()
        loss = ("mse", "mse") if isinstance(y, tuple) else "mse"
        built.compile(optimizer="adam", loss=loss, jit_compile=jit_compile)
        return built

    def epoch_seconds(built: Any) -> float:
        started = time.perf_counter()
        built.fit(x, y, epochs=1, batch_size=32, verbose=0, shuffle=False)
        return time.perf_counter() - started

    same: list[str] = []
    trained: dict[str, list[Any]] = {}

    def run() -> tuple[float, float]:
        eager = model(False)
        epoch_seconds(eager)
        eager_time = min(epoch_seconds(eager) for _ in range(3))
        compiled = model(True)
        compile_seconds = epoch_seconds(compiled)  # the first epoch compiles the step
        compiled_time = min(epoch_seconds(compiled) for _ in range(3))
        pairs = zip(eager.get_weights(), compiled.get_weights())
        same.append(f"{max(float(np.abs(a - b).max()) for a, b in pairs):.1e}")
        trained[package] = compiled.get_weights()
        return compile_seconds, compiled_time / eager_time

    label = f"Keras {keras.__version__} fit ({name})"
    rows = []
    package = "off"
    for package in ("off", "on"):
        same.clear()
        before = _pytree_fast_path_calls()
        rows.append(_measure(label, package, run))
        rows[-1]["max |w - eager w|"] = same[0] if same else "-"
        rows[-1]["torch pytree fast path"] = _pytree_fast_path_calls() - before
    if len(trained) == 2:  # the package's own effect on the result: none expected
        pairs = zip(trained["off"], trained["on"])
        rows[-1]["max |w - w off|"] = f"{max(float(np.abs(a - b).max()) for a, b in pairs):.1e}"
    return rows


def keras_forward_rows(steps: int) -> list[Row]:
    """A Sequential model's forward (Dense, ReLU, Dense, LayerNormalization, Dense) under
    ``torch.compile(model)``, compiled over eager; with Keras 3.0, also with Keras's own
    three breaks worked around (``tests/integration/keras_workarounds.py``), as
    ``explain`` tells a user to."""
    import contextlib

    import keras

    from tests.integration.keras_workarounds import (
        keras_breaks_worked_around,
        model_worked_around,
    )

    x = torch.randn(8, 12, generator=torch.Generator().manual_seed(0))

    def build() -> Any:
        keras.utils.set_random_seed(0)
        layers = [keras.layers.Dense(32), keras.layers.ReLU(), keras.layers.Dense(32)]
        layers += [keras.layers.LayerNormalization(), keras.layers.Dense(3)]
        return keras.Sequential([keras.Input((12,)), *layers])

    def run(worked_around: bool) -> Callable[[], tuple[float, float]]:
        def measured() -> tuple[float, float]:
            scope = keras_breaks_worked_around() if worked_around else contextlib.nullcontext()
            with scope:
                model = build()
                if worked_around:
                    model_worked_around(model)
                eager = _timed(lambda: model(x), steps)
                compiled = torch.compile(model)
                started = time.perf_counter()
                compiled(x)
                compile_seconds = time.perf_counter() - started
                return compile_seconds, _timed(lambda: compiled(x), steps) / eager

        return measured

    label = f"Keras {keras.__version__} forward (Sequential)"
    rows = [_measure(label, package, run(False)) for package in ("off", "on")]
    if keras.__version__.startswith("3.0."):
        rows.append(_measure(f"{label}, Keras's breaks worked around", "on", run(True)))
    return rows


def _pytree_fast_path_calls() -> int:
    """How many torch-pytree calls this package's fast path has taken in this process."""
    taken = _dynamo.counted(_dynamo.Event.TAKEN)
    return sum(number for what, number in taken.items() if what.startswith("torch.utils._pytree."))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="timed steps per round")
    parser.add_argument("--only", choices=["rllib", "keras", "keras-forward"])
    options = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.platform()}")
    print(f"torch {torch.__version__}, python {platform.python_version()}, inductor on CPU\n")
    rows: list[Row] = []
    if options.only in (None, "rllib"):
        rows += rllib_rows(options.steps)
    if options.only in (None, "keras"):
        rows += keras_rows(options.steps)
    if options.only in (None, "keras-forward"):
        rows += keras_forward_rows(options.steps * 10)
    header = ["client", "package", "graphs", "breaks (tree)", "compile s"]
    header += ["step: compiled / eager", "update: compiled / eager", "max |w - eager w|"]
    header += ["max |w - w off|", "torch pytree fast path"]
    cells = [header, *[[str(row.get(key, "-")) for key in header] for row in rows]]
    widths = [max(len(line[index]) for line in cells) for index in range(len(header))]
    for index, line in enumerate(cells):
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
        if index == 0:
            print("  ".join("-" * width for width in widths))


if __name__ == "__main__":
    main()
