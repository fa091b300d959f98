"""The graph breaks Keras's own code leaves, package on, for finding the release that
removes each (the "Ways out" of docs/measurements.md and ``hints.KNOWN_BREAKS``).

    python benchmarks/keras_breaks.py [forward|fit]

``forward``: a Sequential model (Dense, ReLU, Dense, LayerNormalization, Dense) under
``torch.compile(model)``, three calls. ``fit``: ``fit`` (2 epochs), ``evaluate`` and
``predict`` with ``jit_compile=True``, the eager backend. Prints the Keras release, the
graphs, and each break's place, count and cause, with whether explain knows it. To try
another release without a new environment:
``pip install --no-deps --target /tmp/keras-X keras==X`` and ``PYTHONPATH=/tmp/keras-X``.
"""

from __future__ import annotations

import collections
import functools
import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "torch")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import keras
import numpy as np
import torch

import dynamo_tree_compat  # noqa: F401 - the package on, as autoload would
from dynamo_tree_compat import _dynamo, recording
from dynamo_tree_compat.hints import known_break, text_and_places


def forward() -> None:
    layers = [keras.layers.Dense(32), keras.layers.ReLU(), keras.layers.Dense(32)]
    layers += [keras.layers.LayerNormalization(), keras.layers.Dense(3)]
    compiled = torch.compile(keras.Sequential([keras.Input((12,)), *layers]))
    x = torch.randn(8, 12)
    for _ in range(3):
        compiled(x)


def fit() -> None:
    torch.compile = functools.partial(torch.compile, backend="eager")
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((12,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.LayerNormalization(),
            keras.layers.Dense(3),
        ]
    )
    model.compile(optimizer="adam", loss="mse", jit_compile=True)
    generator = np.random.default_rng(0)
    x = generator.standard_normal((96, 12)).astype("float32")
    y = generator.standard_normal((96, 3)).astype("float32")
    model.fit(x, y, epochs=2, batch_size=32, shuffle=False, verbose=0)
    model.evaluate(x, y, batch_size=32, verbose=0)
    model.predict(x, batch_size=32, verbose=0)


def main() -> None:
    program = {"forward": forward, "fit": fit}[(sys.argv[1:] or ["forward"])[0]]
    graphs, undo = _dynamo.count_graphs()
    with _dynamo.GraphBreakRecorder() as recorder:
        program()
    undo()
    found: collections.Counter[tuple[str, str, bool]] = collections.Counter()
    for item in recorder.breaks:
        record = recording.break_record(item)
        known = known_break(*text_and_places(record)) is not None
        place = record["location"].split("keras/src/")[-1]
        found[place, item.reason.splitlines()[0][:70], known] += 1
    print(f"Keras {keras.__version__}, {program.__name__}: {graphs()} graphs, ", end="")
    print(f"{len(recorder.breaks)} breaks")
    for (place, reason, known), count in sorted(found.items()):
        print(f"  {count:3}  {place}  {reason}  ({'known' if known else 'not known'})")


if __name__ == "__main__":
    main()
