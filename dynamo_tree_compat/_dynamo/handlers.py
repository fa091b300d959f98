"""The handler table, and the Dynamo variable that runs a handler behind one guard.

Two kinds of handler, by the original's import path:

- :data:`FAST_PATHS`: shortcuts for common structures (dm-tree and optree). They raise
  :class:`~.reading.Fallback` on anything else, and ``config.fast_path`` turns them off.
- :data:`OPTREE_C_LAYER`: optree's C functions, which Dynamo cannot trace; these are
  the only path, always on while the mode is.
- :data:`CORRECTIONS`: a library's own functions where Dynamo would read a wrong value
  (a deque's maxlen that comes in); always on while the mode is.

Every handler runs behind :func:`_run`: Dynamo's own exceptions (the user's error, a
graph break) pass; any other exception is this package's fault, and the call steps aside
to the twin or to torch's own handling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .. import config
from . import probes
from .common import deques
from .common.guards import flag_is_on
from .common.reading import (
    Cycle,
    Fallback,
    cycle_break,
    dynamo_own_errors,
    stepped_aside_break,
    too_deep,
)
from .dmtree import fast as dmtree_fast
from .optree import c_layer as optree_c
from .optree import fast as optree_fast
from .pytree import fast as pytree_fast
from .runtime import HANDLING, Event, count, step_aside
from .seam import internals, reads, variables
from .seam.types import Handler, Translator, Variable

__all__ = [
    "CORRECTIONS",
    "FAST_PATHS",
    "HANDLED",
    "OPTREE_C_LAYER",
    "Handled",
    "handled_variable_class",
]

#: Each library's fast paths: (library, the probe hook that turns them off, handlers).
_FAST_PATH_TABLES: tuple[tuple[str, str, dict[str, Handler]], ...] = (
    ("dm-tree", probes.DMTREE_FAST_PATH, dmtree_fast.HANDLERS),
    ("optree", probes.OPTREE_FAST_PATH, optree_fast.HANDLERS),
    ("torch pytree", probes.TORCH_PYTREE_FAST_PATH, pytree_fast.HANDLERS),
)
#: Shortcuts for common structures, by the original's import path.
FAST_PATHS: dict[str, Handler] = {
    name: handler for _, _, table in _FAST_PATH_TABLES for name, handler in table.items()
}
#: optree's C functions at Dynamo's variable level, by import path.
OPTREE_C_LAYER: dict[str, Handler] = dict(optree_c.HANDLERS)
#: Where Dynamo would read a wrong value in a library's own code, by import path.
CORRECTIONS: dict[str, Handler] = dict(deques.HANDLERS)
#: Each handled original's library and probe hook, from the tables it is in.
_LIBRARY: dict[str, tuple[str, str]] = {
    **{name: ("optree", probes.OPTREE_C_LAYER) for name in OPTREE_C_LAYER},
    **{name: (lib, hook) for lib, hook, table in _FAST_PATH_TABLES for name in table},
}


class Handled(NamedTuple):
    """A routed original, as the registration recorded it."""

    original: Callable[..., Any]
    #: Its import path (``tree.flatten``): the key of its handler and of its row.
    name: str
    #: The path of the mode flag whose value picks our way or torch's.
    flag_path: str
    #: What Dynamo traces where the flag is off or the handler falls back: torch's own
    #: handling, and our way (optree's Python code over the C layer), each or None.
    torch_way: Any
    our_way: Any


#: id(original) -> its record; set by the registration.
HANDLED: dict[int, Handled] = {}


def _handler(name: str) -> Handler | None:
    if name in CORRECTIONS:
        return CORRECTIONS[name]
    if name in OPTREE_C_LAYER:
        return OPTREE_C_LAYER[name] if probes.is_on(probes.OPTREE_C_LAYER) else None
    handler = FAST_PATHS.get(name)
    if handler is None or not config.fast_path or not probes.is_on(_LIBRARY[name][1]):
        return None
    return handler


def _run(handler: Handler, name: str, tx: Translator, args: Any, kwargs: Any) -> Any:
    """The handler's variable, or None where the call goes the other way."""
    HANDLING[0] += 1
    try:
        result = handler(tx, list(args), dict(kwargs))
    except Cycle:  # run eagerly, the call raises optree's own error
        return cycle_break(name, tx)
    except Fallback:
        count(Event.FALLBACK, name)
        return None
    except dynamo_own_errors():
        raise  # the user's own error, or a graph break
    except RecursionError as error:  # Dynamo's own reading of a deep structure (torch
        # 2.8: from about 190 levels in) recurses past Python's limit: as past our limit
        try:
            library = _LIBRARY.get(name, ("optree",))[0]
            return too_deep(tx, name, "this Dynamo reads in Python's recursion limit", library)
        except dynamo_own_errors():
            raise
        except Exception:  # noqa: BLE001 - ours: step aside, as below
            step_aside(name, error)
            return None
    except Exception as error:  # noqa: BLE001 - ours: step aside, never crash the trace
        if name in OPTREE_C_LAYER:  # torch's way would give specs of another class
            try:
                return stepped_aside_break(name, error)
            except dynamo_own_errors():
                raise
            except Exception:  # noqa: BLE001 - no graph break either: torch's way
                pass
        else:
            step_aside(name, error)
        return None
    finally:
        HANDLING[0] -= 1
    count(Event.TAKEN, name)
    return result


def _route(
    variable: Variable, tx: Translator, args: list[Variable], kwargs: dict[str, Variable]
) -> Any:
    """The result of a registered original's call, by this package's handler or by the
    way it names (optree's Python code over the C layer, or torch's way); None for
    Dynamo's own handling."""
    try:
        fn = internals.read(variable, "fn")
        entry = HANDLED.get(id(fn))
    except Exception as error:  # noqa: BLE001 - ours: Dynamo's own way instead
        step_aside("the handled function variable", error)
        entry = None
    if not entry or entry.original is not fn:
        return None
    name, flag_path = entry.name, entry.flag_path
    try:
        flag_on = flag_is_on(flag_path)
        handler = _handler(name) if flag_on else None
    except Exception as error:  # noqa: BLE001 - ours: Dynamo's own way instead
        step_aside(f"the handler of {name}", error)
        return None
    if flag_on:
        try:  # Dynamo's own guard on a dict's keys misses an OrderedDict's own order
            reads.guard_own_orders([*args, *kwargs.values()])
        except dynamo_own_errors():
            raise
        except Exception as error:  # noqa: BLE001 - ours: the call goes on unguarded
            step_aside(f"the order guards of {name}", error)
    if handler is not None:
        result = _run(handler, name, tx, args, kwargs)
        if result is not None:
            return result
    way = entry.our_way if flag_on and entry.our_way is not None else entry.torch_way
    if way is None:
        return None
    try:  # optree's own Python code over our C layer, or torch's way
        traced_way = internals.function_caller(way)
    except Exception as error:  # noqa: BLE001 - ours: Dynamo's own way instead
        step_aside(f"the way of {name}", error)
        return None
    return traced_way(tx, args, kwargs)


def handled_variable_class() -> type:
    """The function variable of a registered original, which tries this package's
    handler first. Raises :class:`~.seam.internals.Missing` where Dynamo has no class to
    build on."""
    return variables.handled_function_class(_route)
