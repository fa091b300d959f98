"""``iter()`` of a constant that is not iterable, where Dynamo fails inside.

Dynamo 2.5 answers ``iter(5)`` (and so ``enumerate(5)``, ``zip(5)``, a ``for`` over a
number) with ``InternalTorchDynamoError: AttributeError: 'int' object has no attribute
'__iter__'`` instead of the TypeError eager code raises: a library's own check of bad
input (Keras's ``pack_sequence_as`` over a number of leaves) then crashes the compile.
Where the capability ``iter_of_a_number_raises`` says so, such a call ends the graph
instead, so that it runs in Python and raises the user's TypeError: where a tree
function does it (the caller says). While the package's mode is off, in code that is no
tree function's, or while a capability trial compiles, Dynamo is left as it is.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ..runtime import Capability
from . import capabilities, internals, patches
from .types import Translator

__all__ = ["NOT_ITERABLE", "break_on_iterating_a_number"]

#: What such a graph break says.
NOT_ITERABLE = (
    "this Dynamo fails inside on iter() of a value that is not iterable; "
    "dynamo-tree-compat runs the call in Python, which raises eager's TypeError"
)


def _iterable(value: Any) -> bool:
    """Whether ``iter(value)`` works for a constant.

    >>> _iterable("ab"), _iterable(5), _iterable(None)
    (True, False, False)
    """
    return hasattr(type(value), "__iter__") or hasattr(type(value), "__getitem__")


def break_on_iterating_a_number(applies: Callable[[], bool]) -> Callable[[], None] | None:
    """Makes ``iter()`` of a constant that is not iterable end the graph, while
    ``applies()`` and this Dynamo needs it. Returns how to undo it; None where Dynamo's
    constant variable is not found."""
    try:
        constant = importlib.import_module("torch._dynamo.variables.constant")
        variable_class = constant.ConstantVariable
        original = variable_class.__dict__["call_method"]
    except Exception:  # noqa: BLE001 - moved: nothing to change
        return None

    def call_method(
        self: Any, tx: Translator, name: str, args: list[Any], kwargs: dict[str, Any]
    ) -> Any:
        if (
            name == "__iter__"
            and not _iterable(getattr(self, "value", None))
            and applies()
            and capabilities.lacks(Capability.ITER_OF_A_NUMBER_RAISES)
        ):
            internals.graph_break("iter() of a number", repr(self.value), NOT_ITERABLE, "")
        return original(self, tx, name, args, kwargs)

    return patches.put_own(variable_class, "call_method", call_method)
