"""Leaves as RLlib's structures hold them: classes (distribution classes), functions,
user objects (distribution instances) and ``torch.distributions`` instances.

A spec leaf is ``(kind, payload)`` with kind in :data:`KINDS`; :func:`make` builds it,
from a tensor where one is given (inside a compiled function), else from the payload.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import strategies as st

KINDS = ("class", "function", "object", "distribution")


class UserLeaf:
    """A user object holding a value, as RLlib's distribution instances hold logits."""

    FIELDS = ("value",)  # compared field by field (``assert_identical``)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and bool(other.value == self.value)  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"UserLeaf({self.value!r})"


def leaf_function(x: Any) -> Any:
    """A plain function as a leaf."""
    return x


CLASSES: tuple[type, ...] = (UserLeaf, torch.distributions.Normal)
FUNCTIONS: tuple[Any, ...] = (leaf_function, torch.tanh)


def strategy() -> st.SearchStrategy[tuple[str, Any]]:
    """Spec leaves of every kind here."""
    return st.one_of(
        st.integers(0, len(CLASSES) - 1).map(lambda index: ("class", index)),
        st.integers(0, len(FUNCTIONS) - 1).map(lambda index: ("function", index)),
        st.integers(-3, 9).map(lambda v: ("object", v)),
        st.integers(-3, 9).map(lambda v: ("distribution", v)),
    )


def make(kind: str, payload: Any, x: torch.Tensor | None = None) -> Any:
    """A fresh leaf; ``x``, where given, is the tensor the graph builds it from."""
    if kind == "class":
        return CLASSES[payload]
    if kind == "function":
        return FUNCTIONS[payload]
    value = torch.full((2,), float(payload)) if x is None else x + payload
    if kind == "object":
        return UserLeaf(value)
    if kind == "distribution":
        return torch.distributions.Normal(value, 1.0, validate_args=False)
    raise AssertionError(kind)
