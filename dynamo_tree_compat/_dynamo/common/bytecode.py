"""Functions whose body only returns an argument or a constant, found from their bytecode:
their calls need no inlining."""

from __future__ import annotations

import dis
import inspect
import types
from typing import Any

from ..seam import internals

__all__ = ["trivial_body_of"]


#: Flags of code that :func:`trivial_body_of` leaves to Dynamo.
_NOT_TRIVIAL = (
    inspect.CO_VARARGS
    | inspect.CO_VARKEYWORDS
    | inspect.CO_GENERATOR
    | inspect.CO_COROUTINE
    | inspect.CO_ASYNC_GENERATOR
    | inspect.CO_ITERABLE_COROUTINE
)
_SETUP_OPS = frozenset({"RESUME", "NOP", "CACHE", "EXTENDED_ARG", "NOT_TAKEN"})
_LOAD_ARGUMENT = frozenset({"LOAD_FAST", "LOAD_FAST_BORROW", "LOAD_FAST_CHECK"})
_LOAD_CONSTANT = frozenset({"LOAD_CONST", "LOAD_SMALL_INT"})
_CONSTANTS = (type(None), bool, int, float, str, bytes)
_TRIVIAL_BODIES: dict[types.CodeType, tuple[str, Any] | None] = {}


def _trivial_body(code: types.CodeType) -> tuple[str, Any] | None:
    """``("argument", index)`` or ``("constant", value)`` where the code does nothing but
    return that; None for any other code."""
    if code.co_flags & _NOT_TRIVIAL or code.co_kwonlyargcount or code.co_cellvars:
        return None
    if code.co_freevars:
        return None
    ops = [op for op in dis.get_instructions(code) if op.opname not in _SETUP_OPS]
    if len(ops) == 1 and ops[0].opname == "RETURN_CONST":
        value = ops[0].argval
    elif len(ops) == 2 and ops[1].opname == "RETURN_VALUE":
        if ops[0].opname in _LOAD_ARGUMENT and ops[0].arg < code.co_argcount:
            return ("argument", ops[0].arg)
        if ops[0].opname not in _LOAD_CONSTANT:
            return None
        value = ops[0].argval
    else:
        return None
    return ("constant", value) if type(value) in _CONSTANTS else None


def trivial_body_of(function: Any) -> tuple[str, Any, int] | None:
    """``(kind, value, argument count)`` of a Python function variable that only returns
    one of its arguments or a constant (``lambda x: x``, ``lambda _: None``): its calls
    need no inlining, as their body has no effect to trace. None for any other callable,
    which Dynamo then inlines."""
    code = internals.function_code(function)
    if code is None:
        return None
    if code not in _TRIVIAL_BODIES:
        _TRIVIAL_BODIES[code] = _trivial_body(code)
    body = _TRIVIAL_BODIES[code]
    return None if body is None else (*body, code.co_argcount)
