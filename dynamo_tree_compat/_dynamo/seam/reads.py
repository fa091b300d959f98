"""What a variable holds, each read with the guard Dynamo installs for the same read.

Dynamo guards a value at the moment Python code looks at it: a dict's keys and their
order when they are iterated, a list's length when it is unpacked, a type when it is
checked. A fast path that read a variable's contents directly would skip that moment,
and the graph would be reused for a structure it was never built for. So the rest of the
package reaches a container's contents through these functions alone, one per kind of
read; each returns the value and guards it where the variable has a source (a value
made in the graph needs no guard: the graph itself made it).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

from . import Missing, internals
from .types import Source, Translator, Variable

__all__ = [
    "constant_value",
    "default_factory",
    "deque_maxlen",
    "dict_class",
    "dict_entries",
    "guard_own_order",
    "guard_own_orders",
    "iterated",
    "keys_underneath",
    "object_class",
    "sequence_items",
]


def _source(variable: Variable) -> Source | None:
    """The variable's source, where a guard on it means something: none for a value made
    in the graph, nor for one Dynamo holds as a constant of the program."""
    source = getattr(variable, "source", None)
    if source is None or _constant_source(source):
        return None
    return source


def _constant_source(source: Source) -> bool:
    from torch._dynamo.source import is_constant_source

    return bool(is_constant_source(source))


def _install(source: Source, *names: str) -> None:
    """Installs the first of Dynamo's guard kinds ``names`` that this release has."""
    s = internals.sources()
    for name in names:
        kind = getattr(s.builder, name, None)
        if kind is not None:
            s.install(source.make_guard(kind))
            return
    raise Missing(f"GuardBuilder.{names[0]}")


def _current_tx() -> Translator:
    """The translator of the frame Dynamo is tracing in this thread."""
    from torch._dynamo.symbolic_convert import InstructionTranslator

    return InstructionTranslator.current_tx()


def guard_own_order(source: Source) -> None:
    """Guards an OrderedDict at ``source`` by its own key order (``repr(od.keys())``).

    Dynamo guards a dict's keys through ``dict.keys``, which reads an OrderedDict's
    underlying dict: ``move_to_end`` does not change that order, and Dynamo reuses a graph
    built for the old order (seen on torch 2.7.1, 2.13 and 2.15). Where Dynamo has no
    source for a call (2.5), its own guard reads the OrderedDict's order.
    """
    s = internals.sources()
    try:
        keys = internals.call_no_args_source(s.Attr(source, "keys"))
        internals.guard_constant(internals.call_no_args_source(s.Attr(keys, "__repr__")))
    except Missing:
        pass


def guard_own_orders(variables: Iterable[Variable]) -> None:
    """Guards each OrderedDict that comes in, among ``variables`` and the lists, tuples
    and dicts they hold, by its own order (:func:`guard_own_order`). Only what Dynamo has
    built already: one it builds later, for a tree function, is guarded then (the
    builder hook)."""
    if internals.sources().CallNoArgs is None:  # torch 2.5: Dynamo's own guard reads it
        return
    k = internals.kinds()
    containers, leaves = (k.List, k.Tuple, k.Dict), (k.Tensor, k.Constant, k.Symbol)
    stack, seen = list(variables), set()
    while stack:
        variable = stack.pop()
        # Most of a structure, read by exact type: isinstance() would build a lazy variable.
        if type(variable) in leaves:
            continue
        variable = internals.built(variable)
        if not isinstance(variable, containers) or id(variable) in seen:
            continue
        seen.add(id(variable))
        if isinstance(variable, k.Dict):
            source = _source(variable)
            if source is not None and issubclass(variable.python_type(), collections.OrderedDict):
                guard_own_order(source)
            stack.extend(variable.items.values())
        else:
            stack.extend(variable.items)


def dict_entries(variable: Variable) -> list[tuple[Any, Any, Any]]:
    """``(key variable, key tracker, value variable)`` of a dict variable, in its order,
    guarded as Dynamo guards ``dict.keys()`` in Python code: its own ``keys`` is traced
    (the keys and their order; each release records the order its own way), and an
    OrderedDict's own order besides (see :func:`guard_own_order`)."""
    source = _source(variable)
    if source is not None:
        variable.call_method(_current_tx(), "keys", [], {})
        if issubclass(variable.python_type(), collections.OrderedDict):
            guard_own_order(source)
    return [(tracker.vt, tracker, value) for tracker, value in variable.items.items()]


def keys_underneath(tx: Translator, variable: Variable) -> list[Any] | None:
    """An OrderedDict's keys in its underlying dict's order, which ``move_to_end`` does
    not change and optree's C code reads, where it comes in (Dynamo's own guard on its
    keys reads that order: seen on torch 2.7.1, 2.13 and 2.15); None for one made in the
    graph, whose variable holds the keys in the OrderedDict's own order only."""
    source = _source(variable)
    if source is None:
        return None
    try:
        value = internals.resolve_source(tx, source)
    except Missing:
        return None
    return list(dict.keys(value))


def dict_class(variable: Variable) -> type:
    """The Python class of a dict variable (its ``user_cls`` before torch 2.15), guarded
    by type."""
    user_cls = getattr(variable, "user_cls", None)
    cls = user_cls if isinstance(user_cls, type) else variable.python_type()
    source = _source(variable)
    if source is not None:
        internals.guard_type(source)
    return cls


def sequence_items(variable: Variable) -> list[Any]:
    """The items of a list or tuple variable, guarded by type and length."""
    source = _source(variable)
    if source is not None:
        _install(source, "SEQUENCE_LENGTH")
    return list(variable.items)


def constant_value(variable: Variable) -> Any:
    """The value of a constant variable, guarded by value (as Dynamo guards it when it
    builds the variable from its source)."""
    source = _source(variable)
    if source is not None:
        internals.guard_constant(source)
    return variable.value


def object_class(tx: Translator, variable: Variable) -> type:
    """The Python class of an object variable, guarded by type. Dynamo names some classes
    by their base (a ``functools.partial`` subclass's variable says ``functools.partial``):
    an object that comes in is asked through its source."""
    source = _source(variable)
    if source is not None:
        try:
            value = internals.resolve_source(tx, source)
        except Missing:
            pass
        else:
            internals.guard_type(source)
            return type(value)
    return variable.python_type()


def deque_maxlen(tx: Translator, variable: Variable) -> int | None:
    """A deque variable's ``maxlen``, guarded by value. Dynamo builds a deque that comes
    in without it (``deque.maxlen`` reads None there), so one with a source is read from
    its source. Raises :class:`Missing` where this Dynamo keeps no maxlen (2.5)."""
    source = _source(variable)
    if source is not None:
        try:
            value = internals.resolve_source(tx, source)
        except Missing:
            pass
        else:
            internals.guard_constant(internals.sources().Attr(source, "maxlen"))
            return value.maxlen
    held = getattr(variable, "maxlen", None)
    if held is None or not held.is_python_constant():
        raise Missing("a deque variable's maxlen")
    return held.as_python_constant()


def default_factory(tx: Translator, variable: Variable) -> Any:
    """A defaultdict variable's ``default_factory`` (the object), guarded by identity;
    :class:`Missing` where the dict has no source (made in the graph: the caller reads
    the factory's variable)."""
    source = _source(variable)
    if source is None:
        raise Missing("a defaultdict made in the graph")
    factory = internals.resolve_source(tx, source).default_factory
    internals.guard_id_from_the_root(internals.sources().Attr(source, "default_factory"), factory)
    return factory


def iterated(tx: Translator, variable: Variable) -> list[Any]:
    """The items of an iterable variable as Dynamo's own iteration gives them, with the
    guards it installs."""
    return list(variable.unpack_var_sequence(tx))
