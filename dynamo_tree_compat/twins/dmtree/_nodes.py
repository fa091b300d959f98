"""What dm-tree's C library decides: kinds of node, their children, mismatches."""

from __future__ import annotations

import sys
import types
from collections import abc
from collections.abc import Iterable
from typing import Any

from ._base import (
    _LEAF_BUILTINS,
    _LEAVE,
    _NESTED_BUILTINS,
    _PARAMETER,
    _PLAIN_DICTS,
    _SHORT,
    _STRINGS,
    _TENSOR,
    MAPPING_CHANGED,
    NESTING_TOO_DEEP,
    SET_WARNING,
    ObjectProxy,
    _attribute_items,
    _depth_limit,
    _Marker,
    _values,
    made_by_a_class_statement,
)

__all__ = [
    "has_attrs_fields",
    "is_nested",
]

_set_warning_issued = False


def _warn_about_set() -> None:
    """Print dm-tree's once-per-process warning about sets (a no-op while Dynamo traces)."""
    global _set_warning_issued
    if not _set_warning_issued:
        _set_warning_issued = True
        print(SET_WARNING, file=sys.stderr)


# Objects whose ``__class__`` is their type, besides tensors: Dynamo reads their type
# where it cannot read ``__class__`` (on torch 2.5 and 2.6, of a class or a function).
_CLASS_IS_TYPE = (type, types.FunctionType, types.BuiltinFunctionType)


def _class_of(instance: object) -> Any:
    """``instance.__class__``, as the C library asks; for a tensor, a numpy array, a
    class or a function, its type, which is the same thing (Dynamo reads no
    ``__class__`` of an array).

    >>> _class_of(len), _class_of(int)
    (<class 'builtin_function_or_method'>, <class 'type'>)
    """
    if isinstance(instance, _TENSOR) or isinstance(instance, _CLASS_IS_TYPE):
        return type(instance)
    kind = type(instance)
    if kind.__name__ == "ndarray" and kind.__module__ == "numpy":
        return kind
    return instance.__class__


def _is_attrs(instance: object) -> bool:
    """Returns True iff ``instance``'s class is an attrs class.

    >>> _is_attrs([1, 2])
    False
    """
    kind = type(instance)
    if kind in _NESTED_BUILTINS or kind in _LEAF_BUILTINS or kind is set:
        return False
    return has_attrs_fields(_class_of(instance))


def has_attrs_fields(cls: Any) -> bool:
    """Whether a class has ``__attrs_attrs__`` (as attrs classes do). An error looking
    it up means no, as in dm-tree's C code (``PyObject_HasAttrString``).

    While Dynamo traces, the installer runs it on a class known then (else it traces
    :func:`_has_attrs_fields_traced`).

    >>> class Lookups(type):
    ...     def __getattr__(cls, name):
    ...         raise RuntimeError(name)
    >>> bad = type("Bad", (), {"__attrs_attrs__": None})
    >>> has_attrs_fields(Lookups("Odd", (), {})), has_attrs_fields(bad)
    (False, True)
    """
    try:
        return hasattr(cls, "__attrs_attrs__")
    except Exception:  # noqa: BLE001 - dm-tree's C code takes any error for "no"
        return False


def _attrs_field_names(cls: Any) -> tuple[str, ...]:
    """The names of an attrs class's fields, in order.

    While Dynamo traces, the installer puts :func:`_attrs_field_names_traced` in its
    place: Dynamo of torch 2.5 and 2.6 cannot iterate ``__attrs_attrs__``.
    """
    return tuple(field.name for field in cls.__attrs_attrs__)


def _attrs_field_names_known(cls: Any) -> tuple[str, ...] | None:
    """:func:`_attrs_field_names`, or None where that raises. While Dynamo traces, it runs
    in Python on a class known then (else :func:`_attrs_field_names_unknown` is traced).

    >>> _attrs_field_names_known(type("Bad", (), {"__attrs_attrs__": None})) is None
    True
    """
    try:
        return _attrs_field_names(cls)
    except Exception:  # noqa: BLE001 - the traced twin then raises the same error
        return None


def _attrs_field_names_unknown(cls: Any) -> None:
    """:func:`_attrs_field_names_known` for a class not known while tracing: the names are
    read in traced code."""
    return None


def _attrs_field_names_traced(cls: Any) -> tuple[str, ...]:
    """:func:`_attrs_field_names` as Dynamo traces it: the names found while tracing, or
    where that raises (``__attrs_attrs__`` is None), the same error, raised in traced code
    as eager code raises it."""
    names = _attrs_field_names_known(cls)
    if names is None:
        return tuple(field.name for field in cls.__attrs_attrs__)
    return names


def _has_attrs_fields_traced(cls: Any) -> bool:
    """:func:`has_attrs_fields` as Dynamo traces it where the class is not known while
    tracing: ``getattr`` with a None default, since Dynamo of torch 2.5 and 2.6 traces
    neither ``hasattr`` on a class nor ``getattr`` with another default. (A class whose
    ``__attrs_attrs__`` is None then counts as not attrs; where the class is known, as it
    almost always is, dm-tree's rule holds and iterating None raises.)
    """
    return getattr(cls, "__attrs_attrs__", None) is not None


def is_nested(structure: object) -> bool:
    """Checks if a given structure is nested.

    Sequences (but not strings), mappings, mapping views and attrs instances are
    nested; everything else, sets included, is a leaf.

    >>> is_nested(42)
    False
    >>> is_nested({"foo": 42})
    True
    >>> is_nested("a string")
    False

    Args:
      structure: A structure to check.

    Returns:
      Whether ``structure`` is a sequence, a mapping, a mapping view or an attrs
      instance.
    """
    kind = type(structure)
    if kind in _NESTED_BUILTINS:
        return True
    if kind in _LEAF_BUILTINS:
        return False
    if kind is set:  # not attrs (Dynamo 2.5 cannot read a set's __class__)
        _warn_about_set()
        return False
    if isinstance(structure, (dict, abc.Mapping, abc.MappingView)):
        return True
    if has_attrs_fields(_class_of(structure)):
        return True
    if isinstance(structure, set):
        _warn_about_set()
    return isinstance(structure, abc.Sequence) and not isinstance(structure, _STRINGS)


def _sorted_keys(keys: Iterable[Any]) -> list[Any]:
    """``sorted(keys)``, with Python's own error if they can't be sorted.

    Where Dynamo's ``sorted()`` cannot raise that error as the user's (before torch
    2.11), the installer has :func:`_sorted_keys_checked` traced in its place.

    >>> _sorted_keys({"b": 1, "a": 2})
    ['a', 'b']
    """
    return sorted(keys)


def _listed(keys: Iterable[Any]) -> list[Any]:
    """``list(keys)`` by iteration, which Dynamo traces on a user Mapping or its keys
    view where it cannot call ``list()`` on one (torch 2.8; there ``sorted()`` of them
    goes through :func:`_sorted_keys_checked`, which lists them so)."""
    return [key for key in keys]


def _keys_of(mapping: Any) -> Iterable[Any]:
    """What a mapping's keys are listed from: its ``keys()``, or, where its class keeps
    Mapping's own, whose view iterates the mapping, the mapping itself. Dynamo 2.7 traces
    neither that view (a generator) nor a mappingproxy that comes in, iterated directly
    (a guard that fails when checked).

    >>> _keys_of({"a": 1})
    dict_keys(['a'])
    """
    if getattr(type(mapping), "keys", None) is abc.Mapping.keys:
        return mapping
    return mapping.keys()


def _iterated(mapping: Any) -> Iterable[Any]:
    """What iterating ``mapping`` goes through: the mapping itself, or a mappingproxy's
    keys view (the same keys). Dynamo 2.7 iterates a mappingproxy that comes in under a
    guard that fails when checked (an internal error), but not its keys view.

    >>> _iterated(types.MappingProxyType({"a": 1}))
    dict_keys(['a'])
    """
    return mapping.keys() if type(mapping) is types.MappingProxyType else mapping


def _sorted_keys_checked(keys: Iterable[Any]) -> list[Any]:
    """:func:`_sorted_keys` as such a Dynamo traces it: neighbours are compared first, in
    the order Python's sort starts with, so that keys of types that can't be ordered
    raise Python's own TypeError from the package's code or from a comparison Dynamo
    traces (Dynamo 2.8 lets the error of a comparison between constants escape as its
    own, so builtin types that never order are told apart before comparing).

    >>> _sorted_keys_checked([2, "a"])
    Traceback (most recent call last):
    TypeError: '<' not supported between instances of 'str' and 'int'
    """
    keys = _listed(_iterated(keys) if isinstance(keys, abc.Mapping) else keys)  # as sorted()
    for index in range(1, len(keys)):
        left, right = keys[index], keys[index - 1]
        if _never_ordered(type(left), type(right)):
            raise TypeError(
                f"'<' not supported between instances of '{type(left).__name__}' and "
                f"'{type(right).__name__}'"
            )
        if left < right:
            pass
    return sorted(keys)


#: Builtin key types by what they order with: a number with a number, a str with a str.
_ORDER_FAMILIES = {bool: 0, int: 0, float: 0, str: 1, bytes: 2, type(None): 3}


def _never_ordered(left: type, right: type) -> bool:
    """Whether ``<`` between instances of two builtin key types always raises.

    >>> _never_ordered(str, int), _never_ordered(bool, float)
    (True, False)
    """
    if left not in _ORDER_FAMILIES or right not in _ORDER_FAMILIES:
        return False  # a user type may order with anything: compare it
    return left is type(None) or _ORDER_FAMILIES[left] != _ORDER_FAMILIES[right]


def _children(node: Any) -> list[Any]:
    """The children of a nested node, in the C library's order."""
    if issubclass(type(node), dict):  # PyDict_Check: the real type, not __class__
        if type(node) in _PLAIN_DICTS:
            return _values(node, _sorted_keys(node))
        # The C library reads a dict subclass's storage, not its overrides.
        values = []
        for key in _sorted_keys(dict.keys(node)):
            values.append(dict.__getitem__(node, key))
        return values
    if isinstance(node, abc.Mapping):
        values = []
        for key in _sorted_keys(_listed(_keys_of(node))):
            try:
                values.append(node[key])
            except Exception:  # noqa: BLE001 - the C library replaces any failure
                raise RuntimeError(MAPPING_CHANGED)  # noqa: B904 - C keeps the context
        return values
    if _is_attrs(node):
        return [value for _, value in _attribute_items(node, _attrs_field_names(node.__class__))]
    if type(node) is list or type(node) is tuple:
        return node
    try:
        iterator = iter(node)
    except TypeError:
        # PySequence_Fast(node, "") puts its empty message in place of the original.
        raise TypeError("") from None
    return list(iterator)


def _class_name(cls: type) -> str:
    """The C-level ``tp_name`` of a class: ``collections.OrderedDict``, ``list``, ``Foo``.

    A class statement's type is a mutable heap type, named by its ``__name__``; a C type
    made from a spec is an immutable heap type with its full name (``collections.deque``
    on Python 3.12 and later).
    """
    if made_by_a_class_statement(cls) or cls.__module__ == "builtins":
        return cls.__name__
    return f"{cls.__module__}.{cls.__name__}"


def _describe(value: object) -> str:
    """How the C library draws a value in its messages."""
    return f"type={_class_name(type(value)).rpartition('.')[2]} str={value}"


def _unwrap(value: Any) -> Any:
    return value.__wrapped__ if isinstance(value, ObjectProxy) else value


def _is_namedtuple(instance: object, strict: bool = False) -> bool:
    """Returns True iff ``instance`` is a namedtuple.

    >>> import collections
    >>> Point = collections.namedtuple("Point", ["x", "y"])
    >>> _is_namedtuple(Point(1, 2)), _is_namedtuple((1, 2))
    (True, False)

    Args:
      instance: An instance of a Python object.
      strict: If True, a subclass of a namedtuple class does not count.

    Returns:
      True if ``instance`` is a ``namedtuple``.
    """
    instance = _unwrap(instance)
    if not issubclass(type(instance), tuple):
        return False
    if strict and instance.__class__.__base__ is not tuple:
        return False
    # Read from the class: Dynamo of torch 2.5 and 2.6 cannot read it from a namedtuple made
    # in the graph. (An instance attribute named _fields is not looked at.)
    fields = getattr(type(instance), "_fields", None)
    if not isinstance(fields, abc.Sequence):
        return False
    for field in fields:
        if not isinstance(field, _STRINGS):
            return False
    return True


def _fields_of(instance: Any) -> Any:
    """A namedtuple's ``_fields``, read from its class (see :func:`_is_namedtuple`)."""
    return type(_unwrap(instance))._fields


def _same_namedtuples(first: Any, second: Any) -> bool:
    if not (hasattr(first, "_fields") and hasattr(second, "_fields")):
        raise RuntimeError("Expected namedtuple-like objects (that have _fields attr)")
    if _fields_of(first) != _fields_of(second):
        return False
    return (
        _class_name(type(first)).rpartition(".")[2] == _class_name(type(second)).rpartition(".")[2]
    )


def _different_keys(first: Any, second: Any) -> tuple[type[Exception], str]:
    return ValueError, (
        "The two dictionaries don't have the same set of keys. First structure has keys "
        f"{_describe(_listed(_keys_of(first)))}, while second structure has keys "
        f"{_describe(_listed(_keys_of(second)))}"
    )


def _node_mismatch(
    first: Any, second: Any, check_types: bool
) -> tuple[type[Exception], str] | None:
    """Compares two nested nodes' kinds and keys, as the C library does before recursing."""
    if not check_types:
        return None
    if _is_namedtuple(first, True) and _is_namedtuple(second, True):
        same_type = _same_namedtuples(first, second)
    else:
        same_type = (
            type(first) is type(second)
            or (issubclass(type(first), list) and issubclass(type(second), list))
            or (isinstance(first, abc.Mapping) and isinstance(second, abc.Mapping))
        )
    if not same_type:
        return TypeError, (
            "The two namedtuples don't have the same sequence type. First structure "
            f"{_describe(first)} has type {_class_name(type(first))}, while second "
            f"structure {_describe(second)} has type {_class_name(type(second))}"
        )
    if issubclass(type(first), dict) and issubclass(type(second), dict):
        if len(first) != len(second):
            return _different_keys(first, second)
        for key in first:
            if key not in second:
                return _different_keys(first, second)
    elif isinstance(first, abc.Mapping):
        if len(first) != len(second):
            return _different_keys(first, second)
        for key in _iterated(first):
            try:
                second[key]
            except Exception:  # noqa: BLE001 - the C library's PyMapping_HasKey swallows all
                return _different_keys(first, second)
    return None


def _structure_mismatch(
    first: Any, second: Any, check_types: bool
) -> tuple[type[Exception], str] | None:
    """The first difference between two structures, in the C library's words, or None.

    The C library walks both structures depth first and notices a length difference
    only after comparing the children the two have in common; so does this loop.
    """
    pending = [first, second]
    depth = 0
    limit = _depth_limit()
    while len(pending) > 0:  # not `while pending`: see _base.py
        right = pending.pop()
        left = pending.pop()
        if type(left) is _Marker and left is _LEAVE:
            depth -= 1
            continue
        if type(left) is _Marker:  # _SHORT
            return ValueError, (
                "The two structures don't have the same number of elements. "
                f"First structure: {_describe(right[0])}. Second structure: {_describe(right[1])}"
            )
        kind = type(left)
        right_kind = type(right)
        if (kind is _TENSOR or kind is _PARAMETER) and (
            right_kind is _TENSOR or right_kind is _PARAMETER
        ):
            continue
        # Exact lists, tuples and dicts of the same type: the common case, inlined.
        if kind is right_kind and (kind is list or kind is tuple):
            left_children = left
            right_children = right
        elif kind is dict and right_kind is dict:
            if check_types:
                if len(left) != len(right):
                    return _different_keys(left, right)
                for key in left:
                    if key not in right:
                        return _different_keys(left, right)
            left_children = _values(left, _sorted_keys(left))
            right_children = _values(right, _sorted_keys(right))
        else:
            mismatch_or_children = _generic_pair(left, right, check_types)
            if mismatch_or_children is None:
                continue
            if len(mismatch_or_children) == 2:
                return mismatch_or_children
            _, left, right, left_children, right_children = mismatch_or_children
        depth += 1
        if depth > limit:
            raise RecursionError(NESTING_TOO_DEEP.format("assert_same_structure"))
        pending.append(_LEAVE)
        pending.append(None)
        common = min(len(left_children), len(right_children))
        if common != len(left_children) or common != len(right_children):
            pending.append(_SHORT)
            pending.append((left, right))
        for index in range(common - 1, -1, -1):
            pending.append(left_children[index])
            pending.append(right_children[index])
    return None


def _generic_pair(left: Any, right: Any, check_types: bool) -> Any:
    """Compares two nodes of any kinds, as the C library does.

    Returns None if both are leaves, ``(error type, message)`` if they differ, else
    ``(None, left, right, left's children, right's children)`` with proxies unwrapped
    where ``check_types`` asks for it.
    """
    left_nested = is_nested(left)
    if left_nested != is_nested(right):
        nested, leaf = (left, right) if left_nested else (right, left)
        return ValueError, (
            f'Substructure "{_describe(nested)}" is a sequence, while substructure '
            f'"{_describe(leaf)}" is not'
        )
    if not left_nested:
        return None
    if check_types:
        left = _unwrap(left)
        right = _unwrap(right)
    mismatch = _node_mismatch(left, right, check_types)
    if mismatch is not None:
        return mismatch
    return None, left, right, _children(left), _children(right)
