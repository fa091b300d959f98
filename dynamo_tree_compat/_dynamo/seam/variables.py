"""Dynamo variable classes this package builds on Dynamo's own."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from . import internals
from .types import Translator

__all__ = ["handled_function_class"]

#: ``route(variable, tx, args, kwargs)``: the call's result variable, or None for
#: Dynamo's own handling.
Route = Callable[[Any, Any, list[Any], dict[str, Any]], Any]


@functools.cache
def handled_function_class(route: Route) -> type:
    """A PolyfilledFunctionVariable whose calls ``route`` answers first.

    Raises :class:`~.internals.Missing` where Dynamo has no such class to build on.
    """
    base = internals.kinds().Polyfilled
    if not callable(getattr(base, "call_function", None)):
        raise internals.Missing("PolyfilledFunctionVariable.call_function")

    class HandledFunctionVariable(base):  # type: ignore[misc, valid-type]
        """A registered original whose calls this package handles at the variable level."""

        def call_function(self, tx: Translator, args: Any, kwargs: Any) -> Any:
            result = route(self, tx, args, kwargs)
            return super().call_function(tx, args, kwargs) if result is None else result

    return HandledFunctionVariable
