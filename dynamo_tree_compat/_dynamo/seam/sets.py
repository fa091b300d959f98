"""Set subclasses kept whole, where Dynamo would lose what one holds.

Some Dynamos (torch 2.13) trace a set subclass (Keras's ``TrackedSet``) made or filled
in the graph, but rebuild it empty when it leaves the graph: no error, a wrong answer.
Where the capability ``set_subclass_keeps_contents`` says so, every call that would
change what such a set holds (``__init__`` with items, ``add``, ``update``, ``clear``,
...) ends the graph instead, so that it runs in Python. While the package's mode is
off, or a capability trial compiles, Dynamo is left as it is.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from . import capabilities, internals, patches
from .types import Translator, Variable

__all__ = ["CHANGING", "KEPT_WHOLE", "keep_set_subclasses_whole"]

#: The set methods that change what a set holds.
CHANGING = frozenset(
    {
        "__init__",
        "add",
        "update",
        "discard",
        "remove",
        "pop",
        "clear",
        "intersection_update",
        "difference_update",
        "symmetric_difference_update",
        "__ior__",
        "__iand__",
        "__isub__",
        "__ixor__",
    }
)
#: What such a graph break says.
KEPT_WHOLE = (
    "this Dynamo would rebuild a set subclass (such as Keras's TrackedSet) empty when it "
    "leaves the graph; dynamo-tree-compat runs this call in Python instead"
)


def _changes_contents(name: str, args: list[Any], kwargs: dict[str, Any]) -> bool:
    """Whether calling ``name`` with these arguments changes what a set holds (a bare
    ``__init__`` leaves a new set empty, as Dynamo has it).

    >>> _changes_contents("__init__", [], {}), _changes_contents("add", [1], {})
    (False, True)
    >>> _changes_contents("__len__", [], {})
    False
    """
    return name in CHANGING and (name != "__init__" or bool(args or kwargs))


@functools.cache
def _breaking(base: type) -> type:
    """A subclass of the class of a set subclass's inner set variable, whose calls that
    change what it holds end the graph."""

    def call_method(
        self: Variable, tx: Translator, name: str, args: list[Any], kwargs: dict[str, Any]
    ) -> Any:
        if _changes_contents(name, args, kwargs) and _ON[0]():
            internals.graph_break(
                "set subclass changed in the graph", f"set.{name}", KEPT_WHOLE, _HINT
            )
        return base.call_method(self, tx, name, args, kwargs)

    made = type(f"KeptWhole{base.__name__}", (base,), {"call_method": call_method})
    _MADE.add(made)
    return made


_MADE: set[type] = set()


_HINT = "torch 2.15 keeps a set subclass whole: there this call stays in the graph"
#: Whether the package's mode is on now (set by :func:`keep_set_subclasses_whole`).
_ON: list[Callable[[], bool]] = [lambda: False]


def keep_set_subclasses_whole(mode_on: Callable[[], bool]) -> Callable[[], None] | None:
    """Makes each call that would change what a set subclass holds in the graph end the
    graph, while ``mode_on()`` and this Dynamo needs it (asked at each new set variable,
    so an answer settled later counts). Returns how to undo it; None where this Dynamo
    has no set-subclass variable.
    """
    try:
        user_defined = importlib.import_module("torch._dynamo.variables.user_defined")
        variable_class = user_defined.UserDefinedSetVariable
        original = variable_class.__dict__["__init__"]
    except Exception:  # noqa: BLE001 - no such variable here: Dynamo breaks by itself
        return None

    def __init__(self: Variable, value: Any, *args: Any, **kwargs: Any) -> None:
        original(self, value, *args, **kwargs)
        inner = getattr(self, "_base_vt", None)
        if (
            isinstance(value, set)
            and inner is not None
            and mode_on()
            and capabilities.lacks("set_subclass_keeps_contents")
            and type(inner) not in _MADE
        ):
            patches.set_class(inner, _breaking(type(inner)))

    _ON[0] = mode_on
    return patches.put_own(variable_class, "__init__", __init__)
