"""Registration: ``substitute_in_graph``, and routing an original through the handlers.

:func:`substitute` registers a twin the public way. :func:`route` then replaces the
entry Dynamo keeps for the original in its dispatch table, so that every graph meeting
the original guards on the mode flag and tries this package's handler first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .common.guards import guard_flag
from .common.reading import dynamo_own_errors
from .handlers import (
    CORRECTIONS,
    FAST_PATHS,
    HANDLED,
    OPTREE_C_LAYER,
    Handled,
    handled_variable_class,
)
from .runtime import LOG, step_aside, traced
from .seam import frames, internals, patches
from .seam.types import Builder

__all__ = [
    "SUBSTITUTE_UNAVAILABLE",
    "route",
    "routing_support",
    "substitute",
    "substitution_support",
    "torch_polyfills",
    "unroute",
    "unsubstitute",
]

SUBSTITUTE_UNAVAILABLE = "torch is older than 2.5: it has no torch.compiler.substitute_in_graph"

# id(original) -> (original, the dispatch route() replaced)
_PREVIOUS_DISPATCH: dict[int, tuple[Callable[..., Any], Any]] = {}


def substitution_support() -> str | None:
    """None if this torch can register twins, else the reason why not."""
    try:
        frames.substitute_in_graph()
    except Exception:  # noqa: BLE001 - missing, or moved: no twin can register
        return SUBSTITUTE_UNAVAILABLE
    return None


def substitute(
    original: Callable[..., Any], twin: Callable[..., Any], fold: bool = False
) -> Callable[..., Any]:
    """Registers ``twin`` to be traced wherever Dynamo meets ``original``; with ``fold``,
    Dynamo runs it while tracing instead, when its arguments are known then.

    Returns the handle Dynamo made, which :func:`unsubstitute` needs. Raises
    ValueError if something already handles ``original``.
    """
    # Our gates take (*args, **kwargs); tests compare each twin's signature instead.
    register = frames.substitute_in_graph()(
        original, can_constant_fold_through=fold, skip_signature_check=True
    )
    return register(twin)


def has_handler(name: str) -> bool:
    """Whether this package has a handler (fast path or C layer) for ``name``."""
    return name in FAST_PATHS or name in OPTREE_C_LAYER or name in CORRECTIONS


def route(
    original: Callable[..., Any],
    name: str,
    flag_path: str,
    torch_way: Callable[..., Any] | None = None,
    our_way: Callable[..., Any] | None = None,
) -> bool:
    """Makes every graph that meets ``original`` guard on the mode flag at ``flag_path``,
    and routes its calls through this package's handler, if it has one.

    The twin reads the flag too, but where Dynamo retraces a frame after a graph break
    inside the twin it does not enter the twin again, so that read alone leaves no guard
    behind. A guard added when Dynamo first meets the original, at the call site, always
    holds. Where the handler is off or falls back, ``our_way`` (while the flag is on) or
    else ``torch_way`` is traced as plain Python, before the registered twin. Returns
    False, changing nothing, if torch's tables are not as expected.
    """
    try:
        id_dispatch = internals.registration_tables()[0]
        internals.sources()
        wanted = has_handler(name) or our_way is not None
        handled_class = handled_variable_class() if wanted else None
    except Exception as missing:  # noqa: BLE001 - Dynamo's internals are not as expected
        LOG.debug("not routing %s: %s", name, missing)
        return False
    dispatch = id_dispatch.get(id(original))
    if dispatch is None:
        return False
    if handled_class is not None:
        HANDLED[id(original)] = Handled(original, name, flag_path, torch_way, our_way)

    def dispatch_with_flag_guard(builder: Builder, value: Any) -> Any:
        LOG.debug("Dynamo met %s: tracing its twin", name)
        try:
            tx = internals.read(builder, "tx")
            guard_flag(tx, flag_path)
            traced(internals.root_code(tx))
        except dynamo_own_errors():
            raise
        except Exception as error:  # noqa: BLE001 - graphs then do not guard on the mode
            step_aside(f"the mode guard of {name}", error)
        variable = dispatch(builder, value)
        if handled_class is not None and type(variable) is handled_class.__base__:
            try:
                patches.set_class(variable, handled_class)
            except Exception as error:  # noqa: BLE001 - the registered twin's way
                step_aside(f"the handler of {name}", error)
        return variable

    _PREVIOUS_DISPATCH.setdefault(id(original), (original, dispatch))
    id_dispatch[id(original)] = dispatch_with_flag_guard
    return True


def unroute(original: Callable[..., Any]) -> bool:
    """Undoes :func:`route` where the registration itself is torch's."""
    entry = _PREVIOUS_DISPATCH.get(id(original))
    try:
        tables = internals.registration_tables()
    except Exception:  # noqa: BLE001 - Dynamo's internals are not as expected
        return False
    if entry is None or entry[0] is not original:
        return False  # nothing changed: the registration stays whole, handler included
    del _PREVIOUS_DISPATCH[id(original)]
    HANDLED.pop(id(original), None)
    tables[0][id(original)] = entry[1]
    return True


def unsubstitute(original: Callable[..., Any], handle: Callable[..., Any]) -> bool:
    """Undoes :func:`substitute`; False (and nothing changed) if torch's tables moved."""
    try:
        id_dispatch, polyfilled_ids, rule_map, handlers = internals.registration_tables()
    except Exception:  # noqa: BLE001 - Dynamo's internals are not as expected
        return False
    if handlers.get(original) is not handle:
        return False
    _PREVIOUS_DISPATCH.pop(id(original), None)
    HANDLED.pop(id(original), None)
    for key in (original, handle):
        id_dispatch.pop(id(key), None)
        if polyfilled_ids is not None and id(key) in polyfilled_ids():
            polyfilled_ids.remove(id(key))
        rule_map.pop(key, None)
        handlers.pop(key, None)
    return True


def routing_support() -> str | None:
    """None if :func:`route` can work on this torch, else why not."""
    try:
        internals.registration_tables()
        internals.sources()
        handled_variable_class()
    except Exception as missing:  # noqa: BLE001 - Dynamo's internals are not as expected
        return f"{type(missing).__name__}: {missing}"
    return None


def torch_polyfills() -> dict[Any, Any]:
    """The functions torch itself traces through polyfills: original -> handler."""
    try:
        return dict(internals.registration_tables()[3])
    except Exception:  # noqa: BLE001 - Dynamo's internals are not as expected
        return {}
