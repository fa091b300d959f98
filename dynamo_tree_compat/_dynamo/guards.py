"""The guards a traced graph gets from this package: what must still hold to reuse it.

Guards on state behind a function call (optree's dict-order mode, its registry) read
the answer through a probe in a table of this module, named by the module's own
``__name__``, so moving the file cannot silently break them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from . import internals

__all__ = [
    "guard_dict_order",
    "guard_flag",
    "guard_registration",
    "spec_text_source",
]

#: Probes of optree's dict order mode, by namespace; Dynamo's guards call them.
ORDER_PROBES: dict[str, Callable[[], bool]] = {}
#: Probes of optree's registry, by class and namespace; Dynamo's guards call them.
REGISTRY_PROBES: dict[str, Callable[[], tuple[int, int] | None]] = {}


def guard_flag(flag_path: str) -> None:
    """Makes the graph being traced guard on the module attribute at ``flag_path``."""
    internals.guard_constant(internals.import_path_source(flag_path))


def _guard_probe(table: str, key: str) -> None:
    s = internals.sources()
    probes = internals.import_path_source(f"{__name__}.{table}")
    internals.guard_constant(s.CallNoArgs(s.Item(probes, key)))


def guard_dict_order(namespace: str) -> None:
    """Recompiles when optree's dict-order mode for ``namespace`` changes."""
    import optree._C

    if namespace not in ORDER_PROBES:
        ORDER_PROBES[namespace] = functools.partial(
            optree._C.is_dict_insertion_ordered, namespace, inherit_global_namespace=True
        )
    _guard_probe("ORDER_PROBES", namespace)


def _registry_probe(cls: type, namespace: str) -> Callable[[], tuple[int, int] | None]:
    import optree

    def probe() -> tuple[int, int] | None:
        # The functions, not the entry: optree before 0.14 makes a new entry per lookup.
        entry = optree.register_pytree_node.get(cls, namespace=namespace)
        return None if entry is None else (id(entry.flatten_func), id(entry.unflatten_func))

    return probe


def guard_registration(cls: type, namespace: str) -> None:
    """Recompiles when ``cls`` is registered or unregistered with optree later."""
    key = f"{cls.__module__}.{cls.__qualname__}@{id(cls)}|{namespace}"
    if key not in REGISTRY_PROBES:
        REGISTRY_PROBES[key] = _registry_probe(cls, namespace)
    _guard_probe("REGISTRY_PROBES", key)


def spec_text_source(source: Any) -> Any:
    """A guard's source for ``repr(spec.__getstate__())``: all a spec holds, in order.

    Two specs can be equal, with equal ``repr``, and still unflatten a dict's keys in
    different orders; optree's pickled state keeps that order. (Where a spec has no
    ``__getstate__``, its ``repr`` stands in.)
    """
    import optree

    s = internals.sources()
    if hasattr(optree.PyTreeSpec, "__getstate__"):
        state = s.CallNoArgs(s.Attr(source, "__getstate__"))
        return s.CallNoArgs(s.Attr(state, "__repr__"))
    return s.CallNoArgs(s.Attr(source, "__repr__"))
