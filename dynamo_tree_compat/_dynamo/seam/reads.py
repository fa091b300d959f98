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

from typing import Any

from . import Missing, internals
from .types import Source, Translator, Variable

__all__ = [
    "constant_value",
    "default_factory",
    "deque_maxlen",
    "dict_class",
    "dict_entries",
    "iterated",
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


def dict_entries(variable: Variable) -> list[tuple[Any, Any, Any]]:
    """``(key variable, key tracker, value variable)`` of a dict variable, in its order,
    guarded as Dynamo guards ``dict.keys()`` in Python code: its own ``keys`` is traced
    (the keys and their order; each release records the order its own way)."""
    if _source(variable) is not None:
        variable.call_method(_current_tx(), "keys", [], {})
    return [(tracker.vt, tracker, value) for tracker, value in variable.items.items()]


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
