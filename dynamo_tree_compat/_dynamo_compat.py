"""Every use of TorchDynamo's private state, in one place, behind version checks.

Dynamo's internals change between torch releases. Each function here checks that what
it touches looks as expected and, where it does not, reports failure instead of raising;
the callers then fall back to leaving torch as it is.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = [
    "SUBSTITUTE_UNAVAILABLE",
    "dynamo_imported",
    "guard_on_flag",
    "graph_break_function",
    "substitute",
    "substitution_support",
    "unsubstitute",
]

SUBSTITUTE_UNAVAILABLE = "torch is older than 2.5: it has no torch.compiler.substitute_in_graph"


def dynamo_imported() -> bool:
    """Whether ``torch._dynamo`` has been imported (importing it costs about 2 s)."""
    return "torch._dynamo" in sys.modules


def substitution_support() -> str | None:
    """None if this torch can register twins, else the reason why not."""
    import torch.compiler

    if not hasattr(torch.compiler, "substitute_in_graph"):
        return SUBSTITUTE_UNAVAILABLE
    return None


def substitute(original: Callable[..., Any], twin: Callable[..., Any]) -> Callable[..., Any]:
    """Registers ``twin`` to be traced wherever Dynamo meets ``original``.

    Returns the handle Dynamo made, which :func:`unsubstitute` needs. Raises
    ValueError if something already handles ``original``.
    """
    from torch.compiler import substitute_in_graph

    # Our gates take (*args, **kwargs); tests compare each twin's signature instead.
    return substitute_in_graph(original, skip_signature_check=True)(twin)


def _registration_tables() -> tuple[dict[Any, Any], Any, dict[Any, Any], dict[Any, Any]] | None:
    """The four tables substitute_in_graph writes to, or None if they have moved."""
    try:
        from torch._dynamo.trace_rules import _polyfilled_function_ids, get_torch_obj_rule_map
        from torch._dynamo.variables import PolyfilledFunctionVariable
        from torch._dynamo.variables.builder import VariableBuilder

        tables = (
            VariableBuilder._id_dispatch(),
            _polyfilled_function_ids,
            get_torch_obj_rule_map(),
            PolyfilledFunctionVariable._get_polyfill_handlers(),
        )
    except (ImportError, AttributeError, TypeError):
        return None
    id_dispatch, polyfilled_ids, rule_map, handlers = tables
    if not (
        isinstance(id_dispatch, dict)
        and isinstance(rule_map, dict)
        and isinstance(handlers, dict)
        and callable(getattr(polyfilled_ids, "add", None))
        and callable(getattr(polyfilled_ids, "remove", None))
    ):
        return None
    return tables


def guard_on_flag(original: Callable[..., Any], flag_path: tuple[str, ...]) -> bool:
    """Makes every graph that meets ``original`` guard on a module-level flag.

    ``flag_path`` names the flag from an importable top-level module, such as
    ``("dynamo_tree_compat", "activation", "twins_enabled")``. The twin reads the flag
    too, but where Dynamo retraces a frame after a graph break inside the twin it does
    not enter the twin again, so that read alone leaves no guard behind. A guard added
    when Dynamo first meets the original, at the call site, always holds. Returns
    False, changing nothing, if torch's tables are not as expected.
    """
    tables = _registration_tables()
    if tables is None:
        return False
    id_dispatch = tables[0]
    dispatch = id_dispatch.get(id(original))
    try:
        from torch._dynamo.guards import GuardBuilder, install_guard
        from torch._dynamo.source import AttrSource, ImportSource
    except ImportError:
        return False
    if dispatch is None or not hasattr(GuardBuilder, "CONSTANT_MATCH"):
        return False

    def dispatch_with_flag_guard(builder: Any, value: Any) -> Any:
        source: Any = ImportSource(flag_path[0])
        for name in flag_path[1:]:
            source = AttrSource(source, name)
        install_guard(source.make_guard(GuardBuilder.CONSTANT_MATCH))
        return dispatch(builder, value)

    id_dispatch[id(original)] = dispatch_with_flag_guard
    return True


def unsubstitute(original: Callable[..., Any], handle: Callable[..., Any]) -> bool:
    """Undoes :func:`substitute`; False (and nothing changed) if torch's tables moved."""
    tables = _registration_tables()
    if tables is None:
        return False
    id_dispatch, polyfilled_ids, rule_map, handlers = tables
    if handlers.get(original) is not handle:
        return False
    for key in (original, handle):
        id_dispatch.pop(id(key), None)
        if id(key) in polyfilled_ids():
            polyfilled_ids.remove(id(key))
        rule_map.pop(key, None)
        handlers.pop(key, None)
    _reset_compiled_code()
    return True


def _reset_compiled_code() -> None:
    """Drops compiled graphs so that none traced with a removed twin runs again."""
    import torch._dynamo

    torch._dynamo.reset()


def graph_break_function() -> Callable[[], None]:
    """Dynamo's ``graph_break``: traced, it ends the graph; run eagerly, it does nothing."""
    import torch._dynamo

    return torch._dynamo.graph_break
