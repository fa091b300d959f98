"""The handler table, and the Dynamo variable that runs a handler behind one guard.

Two kinds of handler, by the original's import path:

- :data:`FAST_PATHS`: shortcuts for common structures (dm-tree and optree). They raise
  :class:`~.reading.Fallback` on anything else, and ``config.fast_path`` turns them off.
- :data:`OPTREE_C_LAYER`: optree's C functions, which Dynamo cannot trace; these are
  the only path, always on while the mode is.

Every handler runs behind :func:`_run`: Dynamo's own exceptions (the user's error, a
graph break) pass; any other exception is this package's fault, and the call steps aside
to the twin or to torch's own handling.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .. import config
from . import dmtree_fast, internals, optree_c, optree_fast, probes, pytree_fast
from .guards import flag_is_on
from .reading import Cycle, Fallback, cycle_break, dynamo_own_errors, stepped_aside_break, too_deep
from .runtime import STATS, step_aside

__all__ = ["FAST_PATHS", "HANDLED", "OPTREE_C_LAYER", "handled_variable_class"]

Handler = Callable[[Any, list[Any], dict[str, Any]], Any]

#: Shortcuts for common structures, by the original's import path.
FAST_PATHS: dict[str, Handler] = {
    **dmtree_fast.HANDLERS,
    **optree_fast.HANDLERS,
    **pytree_fast.HANDLERS,
}
#: optree's C functions at Dynamo's variable level, by import path.
OPTREE_C_LAYER: dict[str, Handler] = dict(optree_c.HANDLERS)

#: id(original) -> (original, its import path, the mode flag's path, torch's way or None,
#: our way or None); set by the registration.
HANDLED: dict[int, tuple[Callable[..., Any], str, str, Any, Any]] = {}


def _handler(name: str) -> Handler | None:
    if name in OPTREE_C_LAYER:
        return OPTREE_C_LAYER[name] if probes.is_on(probes.OPTREE_C_LAYER) else None
    if config.fast_path and probes.is_on(probes.fast_path_hook(name)):
        return FAST_PATHS.get(name)
    return None


def _run(handler: Handler, name: str, tx: Any, args: Any, kwargs: Any) -> Any:
    """The handler's variable, or None where the call goes the other way."""
    try:
        result = handler(tx, list(args), dict(kwargs))
    except Cycle:  # run eagerly, the call raises optree's own error
        return cycle_break(name, tx)
    except Fallback:
        STATS["fallback:" + name] += 1
        return None
    except dynamo_own_errors():
        raise  # the user's own error, or a graph break
    except RecursionError as error:  # Dynamo's own reading of a deep structure (torch
        # 2.8: from about 190 levels in) recurses past Python's limit: as past our limit
        library = "dm-tree" if name.startswith("tree.") else "optree"
        if name.startswith("torch."):
            library = "torch pytree"
        try:
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
    STATS["taken:" + name] += 1
    return result


@functools.cache
def handled_variable_class() -> type:
    """A PolyfilledFunctionVariable that tries this package's handler first.

    Raises :class:`~.internals.Missing` where Dynamo has no such class to build on.
    """
    kinds = internals.kinds()
    base = kinds.Polyfilled
    if not callable(getattr(base, "call_function", None)):
        raise internals.Missing("PolyfilledFunctionVariable.call_function")

    class HandledFunctionVariable(base):  # type: ignore[misc, valid-type]
        """A registered original whose calls this package handles at the variable level."""

        def call_function(self, tx: Any, args: Any, kwargs: Any) -> Any:
            try:
                fn = internals.read(self, "fn")
                entry = HANDLED.get(id(fn))
            except Exception as error:  # noqa: BLE001 - ours: Dynamo's own way instead
                step_aside("the handled function variable", error)
                entry = None
            if not entry or entry[0] is not fn:
                return super().call_function(tx, args, kwargs)
            _, name, flag_path, torch_way, our_way = entry
            flag_on = flag_is_on(flag_path)
            handler = _handler(name) if flag_on else None
            if handler is not None:
                result = _run(handler, name, tx, args, kwargs)
                if result is not None:
                    return result
            way = our_way if flag_on and our_way is not None else torch_way
            if way is not None:  # optree's own Python code over our C layer, or torch's way
                try:
                    traced_way = internals.read(kinds.Function(way), "call_function")
                except Exception as error:  # noqa: BLE001 - ours: Dynamo's own way instead
                    step_aside(f"the way of {name}", error)
                else:
                    return traced_way(tx, args, kwargs)
            return super().call_function(tx, args, kwargs)

    return HandledFunctionVariable
