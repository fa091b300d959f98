"""Keras's own graph breaks, worked around, so that a graph count shows this package's.

Keras 3.0.5's forward breaks the graph three ways that have nothing to do with a tree
library (measured without this package: 13 graphs and 72 breaks for a Sequential model
of Dense, ReLU, Dense, LayerNormalization, Dense; with it and these workarounds, one
graph): ``standardize_dtype`` hashes a torch dtype (``variables.py:386``, "Non-constant
GetAttrVariable hash"), the torch ``Variable.value`` property reads ``super().value``,
and ``LayerNormalization`` passes its axes to ``torch.mean`` as a ``TrackedList``
("Failed to convert args/kwargs to proxy"). Later Keras releases have none of them.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import keras
import torch

__all__ = ["keras_breaks_worked_around", "model_worked_around"]

_OLD_KERAS = keras.__version__.startswith("3.0.")


@contextlib.contextmanager
def keras_breaks_worked_around() -> Iterator[None]:
    """Keras 3.0's dtype and ``Variable.value`` breaks worked around, while active (later
    Keras: nothing to do)."""
    if not _OLD_KERAS:
        yield
        return
    from keras.src.backend.common import variables
    from keras.src.backend.torch import core

    original = variables.standardize_dtype

    def standardize_dtype(dtype: Any) -> Any:
        if isinstance(dtype, torch.dtype):  # what the original finds, without the hash
            return str(dtype).split(".")[-1]
        return original(dtype)

    holders = [
        m for m in list(sys.modules.values()) if vars(m).get("standardize_dtype") is original
    ]
    saved_value = core.Variable.__dict__["value"]
    for module in holders:
        module.standardize_dtype = standardize_dtype
    core.Variable.value = property(variables.KerasVariable.__dict__["value"].fget)
    try:
        yield
    finally:
        for module in holders:
            module.standardize_dtype = original
        core.Variable.value = saved_value


def model_worked_around(model: Any) -> Any:
    """``model`` with each LayerNormalization's axes a tuple (Keras 3.0 tracks them in a
    list subclass torch's ops do not take in a graph)."""
    if _OLD_KERAS:
        for layer in model._flatten_layers():
            if isinstance(layer, keras.layers.LayerNormalization):
                object.__setattr__(layer, "axis", tuple(layer.axis))
    return model
