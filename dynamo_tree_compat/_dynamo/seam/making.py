"""Dynamo's new containers and constants, as the package makes them: the seam's
constructors (:mod:`.internals` exports them; ``tests/internals/test_seam.py`` counts this
module in the seam).

A fast-path call makes one container variable per container of the structure, and
Dynamo's constructors check every item against a metaclass that realizes lazy variables:
on torch 2.5 that checking is a third of a map's compile time. Where a class's
constructor sets nothing but the items, the mark of a container made while tracing and
plain fields (None, a bool, an int, a string, a class), a new variable here is the
constructor's own, made once per class, copied, with items and mark of its own: the
same class and fields. Elsewhere (a field that holds a container, as torch 2.9's dicts
keep their original items), the constructor makes each one.
"""

from __future__ import annotations

import functools
from typing import Any

from . import internals

__all__ = ["constant", "new_dict", "new_list", "new_tuple"]

_PLAIN = (type(None), bool, int, str)


def _mark() -> dict[str, Any]:
    """The keyword that marks a container as made while tracing."""
    k = internals.kinds()
    return {k.new_keyword: k.new()}


@functools.cache
def _fields(cls: type, marked: bool) -> dict[str, Any] | None:
    """The fields a new empty ``cls`` holds besides its items and mark, where they are
    plain and the constructor is ``cls``'s whole making; else None."""
    try:
        if type(cls).__call__ is not type.__call__ or cls.__new__ is not object.__new__:
            return None
        empty: Any = {} if cls is internals.kinds().Dict else []
        fields = dict(vars(_construct(cls, empty, marked)))
        if type(fields.pop("items", None)) is not type(empty):
            return None
        if marked and type(fields.pop(internals.kinds().new_keyword, None)) is not type(
            internals.kinds().new()
        ):
            return None
        if all(type(value) in _PLAIN or isinstance(value, type) for value in fields.values()):
            return fields
    except Exception:  # noqa: BLE001 - any surprise: the constructor, every time
        pass
    return None


def _construct(cls: type, items: Any, marked: bool) -> Any:
    k = internals.kinds()
    extra = {"user_cls": dict} if cls is k.Dict and k.dict_takes_user_cls else {}
    return cls(items, **extra, **(_mark() if marked else {}))


def _new(cls: type, items: Any, marked: bool) -> Any:
    fields = _fields(cls, marked)
    if fields is None:
        return _construct(cls, items, marked)
    made = object.__new__(cls)
    made.__dict__.update(fields)
    made.items = items
    if marked:
        made.__dict__.update(_mark())
    return made


@functools.cache
def _key_tracker() -> type:
    """Dynamo's wrapper of a dict key variable (a dict variable's items are keyed by it)."""
    k = internals.kinds()
    found = getattr(k.Dict, "_HashableTracker", None)
    if found is None:
        from torch._dynamo.variables.hashable import HashableTracker as found
    return found


def new_list(items: list[Any]) -> Any:
    """A list made while tracing."""
    return _new(internals.kinds().List, list(items), marked=True)


def new_tuple(items: list[Any]) -> Any:
    """A tuple made while tracing."""
    return _new(internals.kinds().Tuple, list(items), marked=False)


def new_dict(items: dict[Any, Any] | list[tuple[Any, Any]]) -> Any:
    """A plain dict made while tracing, from key variables (or key trackers) to values,
    given as a dict or as pairs (a tracker's hash is Python code: pairs spare one)."""
    k = internals.kinds()
    pairs = items.items() if isinstance(items, dict) else items
    if _fields(k.Dict, True) is None:
        return _construct(k.Dict, dict(pairs), marked=True)
    tracker = _key_tracker()
    return _new(
        k.Dict,
        {key if type(key) is tracker else tracker(key): value for key, value in pairs},
        marked=True,
    )


def constant(value: Any) -> Any:
    """A constant variable."""
    return internals.kinds().Constant.create(value)
