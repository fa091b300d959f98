"""The guards a traced graph gets from this package: what must still hold to reuse it.

Every guard reads its value through a global the graph installs (a module, or a probe
object whose ``state`` property asks optree): Dynamo's ``GlobalSource`` and
``AttrSource`` exist in every torch this package supports, where the sources for
imports and function calls do not.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any

from ..seam import internals
from ..seam.types import Source, Translator

__all__ = [
    "class_paths",
    "flag_is_on",
    "guard_dict_order",
    "guard_flag",
    "guard_registration",
    "guard_registry",
    "guard_spec",
    "state_class_paths",
]


class _Probe:
    """Holds a question a guard asks each time the graph is about to run."""

    __slots__ = ("ask",)

    def __init__(self, ask: Callable[[], Any]) -> None:
        self.ask = ask

    @property
    def state(self) -> Any:
        """The answer now."""
        return self.ask()


#: Probes of optree's dict order mode, by namespace.
ORDER_PROBES: dict[str, _Probe] = {}
#: Probes of optree's registry, by class and namespace.
REGISTRY_PROBES: dict[str, _Probe] = {}


def _guard_attribute(tx: Translator, holder: Any, name: str, prefix: str) -> None:
    """Guards on ``holder.<name>``, read through a global of the compiled code."""
    s = internals.sources()
    holder_source = s.Global(internals.install_global(tx, prefix, holder))
    internals.guard_constant(s.Attr(holder_source, name))


def flag_is_on(flag_path: str) -> bool:
    """The value of the module attribute at ``flag_path``, as a bool (False if absent)."""
    module, _, name = flag_path.rpartition(".")
    return bool(getattr(sys.modules.get(module), name, False))


def guard_flag(tx: Translator, flag_path: str) -> None:
    """Makes the graph being traced guard on the module attribute at ``flag_path``."""
    module, _, name = flag_path.rpartition(".")
    _guard_attribute(tx, sys.modules[module], name, "__dtc_flag_module")


def _dict_order(namespace: str) -> tuple[bool, bool]:
    """optree's dict-order mode for ``namespace``: (its own, or inherited from the global
    one). Both count: a spec records a namespace whose own mode is on, not one that
    only inherits it.

    >>> _dict_order("no mode here")
    (False, False)
    """
    import optree._C

    ordered = optree._C.is_dict_insertion_ordered
    return (
        ordered(namespace, inherit_global_namespace=False),
        ordered(namespace, inherit_global_namespace=True),
    )


def guard_dict_order(tx: Translator, namespace: str) -> None:
    """Recompiles when optree's dict-order mode for ``namespace`` changes."""
    if namespace not in ORDER_PROBES:
        ORDER_PROBES[namespace] = _Probe(lambda: _dict_order(namespace))
    _guard_attribute(tx, ORDER_PROBES[namespace], "state", "__dtc_dict_order")


def _registry_probe(cls: type, namespace: str) -> Callable[[], tuple[int, int] | None]:
    """What optree's registry holds for ``cls``; the class is held weakly, so that a class
    registered in a function's scope can be freed (its probe then answers None)."""
    import optree

    held = weakref.ref(cls)

    def probe() -> tuple[int, int] | None:
        # The functions, not the entry: optree before 0.14 makes a new entry per lookup.
        found = held()
        entry = (
            None if found is None else optree.register_pytree_node.get(found, namespace=namespace)
        )
        return None if entry is None else (id(entry.flatten_func), id(entry.unflatten_func))

    return probe


def _registry_of(namespace: str) -> tuple[tuple[int, int, int], ...]:
    """What optree's registry holds for ``namespace`` (its own entries and the global
    ones), by identity, in its order.

    >>> _registry_of("no such namespace") == _registry_of("")
    True
    """
    import optree

    return tuple(
        (id(cls), id(entry.flatten_func), id(entry.unflatten_func))
        for cls, entry in optree.register_pytree_node.get(namespace=namespace).items()
    )


def guard_registry(tx: Translator, namespace: str) -> None:
    """Recompiles when any class is registered or unregistered with optree in
    ``namespace`` or the global namespace (a read of the whole registry)."""
    key = f"*|{namespace}"
    if key not in REGISTRY_PROBES:
        REGISTRY_PROBES[key] = _Probe(lambda: _registry_of(namespace))
    _guard_attribute(tx, REGISTRY_PROBES[key], "state", "__dtc_registration")


def guard_registration(tx: Translator, cls: type, namespace: str) -> None:
    """Recompiles when ``cls`` is registered or unregistered with optree later."""
    key = f"{cls.__module__}.{cls.__qualname__}@{id(cls)}|{namespace}"
    if key not in REGISTRY_PROBES:
        REGISTRY_PROBES[key] = _Probe(_registry_probe(cls, namespace))
        weakref.finalize(cls, REGISTRY_PROBES.pop, key, None)  # a new class may reuse the id
    _guard_attribute(tx, REGISTRY_PROBES[key], "state", "__dtc_registration")


def class_paths(value: Any, path: tuple[int, ...], depth: int = 2) -> list[tuple[int, ...]]:
    """The paths to the classes in a record's field (a tuple or list of them, nested).

    >>> class_paths((list, ["a", (dict, 1)]), ())
    [(0,), (1, 1, 0)]
    """
    if isinstance(value, type):
        return [path]
    if depth < 0 or type(value) not in (tuple, list):
        return []
    nested = (class_paths(item, (*path, i), depth - 1) for i, item in enumerate(value))
    return [found for paths in nested for found in paths]


def guard_spec(source: Source, spec: Any) -> None:
    """Guards a spec that comes in by what it holds: ``repr(spec.__getstate__())`` and the
    identity of each class in it. Raises :class:`~..seam.internals.Missing` on torch 2.5.

    Two specs can be equal, with equal ``repr``, and still unflatten a dict's keys in
    different orders; optree's pickled state keeps that order. Two classes made anew with
    one qualified name share a ``repr``, so each class the state holds (a custom node's,
    a namedtuple's, a default factory) is guarded by identity. (Where a spec has no
    ``__getstate__``, its ``repr`` stands in.)
    """
    import optree

    s = internals.sources()
    attr, call = s.Attr, internals.call_no_args_source
    if not hasattr(optree.PyTreeSpec, "__getstate__"):
        internals.guard_constant(call(attr(source, "__repr__")))
        return
    state = call(attr(source, "__getstate__"))
    internals.guard_constant(call(attr(state, "__repr__")))
    for path in state_class_paths(spec.__getstate__()):
        item = state
        for step in path:
            item = s.Item(item, step)
        internals.guard_id(item)


def state_class_paths(state: Any) -> list[tuple[int, ...]]:
    """The paths to the classes in a spec's state (``PyTreeSpec.__getstate__``): a custom
    node's, a namedtuple's or structseq's, a default factory, wherever each sits in its
    record; none where the state is not a tuple of records first.

    >>> import collections, optree
    >>> Pair = collections.namedtuple("Pair", "a b")
    >>> state_class_paths(optree.tree_structure([Pair(1, 2)]).__getstate__())
    [(0, 2, 2)]
    """
    records = state[0] if type(state) is tuple and state else ()
    if type(records) is not tuple:
        return []
    return [
        found
        for index, record in enumerate(records)
        for found in class_paths(record, (0, index), depth=3)
    ]
