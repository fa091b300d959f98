"""Pure-Python twin of dm-tree's API (``import tree``), traceable by TorchDynamo.

Every function here gives what dm-tree 0.1.8-0.1.10 gives: the same results, the same
container types and key order, and the same exception types and messages. It needs
neither dm-tree nor torch, so it also serves as a drop-in where dm-tree cannot be
installed.

The conventions are dm-tree's. Dict keys are visited in sorted order, whatever the
insertion order; a rebuilt dict keeps the insertion order of the one it mimics:

>>> flatten({"b": 1, "a": [2, 3]})
[2, 3, 1]
>>> unflatten_as({"b": None, "a": None}, [1, 2])
{'b': 2, 'a': 1}

None, strings and sets are leaves:

>>> flatten([None, "ab", b"cd"])
[None, 'ab', b'cd']

The bodies are written for Dynamo, which runs them one bytecode at a time: plain loops
over explicit stacks, no generators in the hot paths, no per-node closures.
"""

from __future__ import annotations

import collections
import logging
import sys
import types
from collections import abc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, Union

try:
    from wrapt import ObjectProxy
except ImportError:  # pragma: no cover - wrapt comes with dm-tree

    class ObjectProxy:  # type: ignore[no-redef]
        """Stand-in for ``wrapt.ObjectProxy`` when wrapt is not installed."""


__all__ = [
    "MAP_TO_NONE",
    "assert_same_structure",
    "flatten",
    "flatten_up_to",
    "flatten_with_path",
    "flatten_with_path_up_to",
    "is_nested",
    "map_structure",
    "map_structure_up_to",
    "map_structure_with_path",
    "map_structure_with_path_up_to",
    "traverse",
    "traverse_with_path",
    "unflatten_as",
]

#: Special value for :func:`traverse`: return it to replace a sub-tree with None.
MAP_TO_NONE: Any = object()
# dm-tree's own sentinel, set by the registry when it registers these twins for dm-tree
# (importing dm-tree here would load it into programs that never use it).
_dm_tree_map_to_none: Any = MAP_TO_NONE

K = TypeVar("K")
V = TypeVar("V")
StructureKV = Union[Sequence["StructureKV[K, V]"], Mapping[K, "StructureKV[K, V]"], V]
Structure = StructureKV[str, V]
Path = tuple[Any, ...]

# dm-tree's messages, word for word: tests and the C library's users match on them. The
# underscored ones keep dm-tree's private names, which its own tests import.
SORTABLE_KEYS_ERROR = "tree only supports dicts with sortable keys."
SET_WARNING = (
    "Sets are not currently considered sequences, but this may change in the future, "
    "so consider avoiding using them."
)
_SHALLOW_TREE_HAS_INVALID_KEYS = (
    "The shallow_tree's keys are not a subset of the input_tree's keys. The "
    "shallow_tree has the following keys that are not in the input_tree: {}."
)
_STRUCTURES_HAVE_MISMATCHING_TYPES = (
    "The two structures don't have the same sequence type. Input structure has "
    "type {input_type}, while shallow structure has type {shallow_type}."
)
_STRUCTURES_HAVE_MISMATCHING_LENGTHS = (
    "The two structures don't have the same sequence length. Input "
    "structure has length {input_length}, while shallow structure has length "
    "{shallow_length}."
)
_INPUT_TREE_SMALLER_THAN_SHALLOW_TREE = (
    "The input_tree has fewer elements than the shallow_tree. Input structure "
    "has length {input_size}, while shallow structure has length "
    "{shallow_size}."
)
_IF_SHALLOW_IS_SEQ_INPUT_MUST_BE_SEQ = (
    "If shallow structure is a sequence, input must also be a sequence. Input has type: {}."
)
_IF_SHALLOW_IS_SEQ_INPUT_MUST_BE_SEQ_WITH_PATH = (
    "If shallow structure is a sequence, input must also be a sequence. "
    "Input at path: {path} has type: {input_type}."
)
KEY_NOT_FOUND_IN_INPUT_TREES = (
    "Could not find key '{key}' in some `input_trees`. Please ensure the structure of "
    "all `input_trees` are compatible with `shallow_tree`. The last valid path yielded "
    "was {path}."
)
CHECK_TYPES_DEPRECATED = "The use of `check_types` is deprecated and does not have any effect."
NESTING_TOO_DEEP = "maximum recursion depth exceeded in {}"
MAPPING_CHANGED = "Mapping was modified during iteration over it"

# The C library stops at the interpreter's recursion limit (about 1,000 levels); the loops
# here allow deeper nesting but still end, with RecursionError, on a structure that
# contains itself. Paths make the with-path functions' output quadratic in the depth,
# which bounds this limit: 5,000 levels of paths are about 100 MB.
MAX_DEPTH = 5_000
# While Dynamo traces, where each level costs far more, the C library's own depth holds.
TRACED_MAX_DEPTH = 1_000


def _depth_limit() -> int:
    """MAX_DEPTH; the registry makes it TRACED_MAX_DEPTH while Dynamo traces."""
    return MAX_DEPTH


_TEXT_OR_BYTES = (str, bytes)
# Built-in types whose kind is known without asking (their __class__ cannot lie). Dynamo
# also cannot trace hasattr(x.__class__, ...) on some of them, such as deque and views.
_NESTED_BUILTINS = (
    list,
    tuple,
    dict,
    collections.OrderedDict,
    collections.defaultdict,
    collections.deque,
    types.MappingProxyType,
    type({}.keys()),
    type({}.values()),
    type({}.items()),
)
_LEAF_BUILTINS = (type(None), bool, int, float, complex, str, bytes, bytearray, frozenset)
_PLAIN_DICTS = (dict, collections.OrderedDict, collections.defaultdict)


class _NoSuchType:
    """Matches no value: the tensor slots below before torch is known."""


# Exact tensor types, the commonest leaves, tested first in the hot loops. This module
# does not import torch; the registry fills these in when it registers the twins.
_TENSOR: type = _NoSuchType
_PARAMETER: type = _NoSuchType


def _connect(map_to_none: Any, tensor: type, parameter: type) -> None:
    """Tells the twins what only a process with dm-tree and torch has: dm-tree's own
    ``MAP_TO_NONE``, and torch's tensor classes (leaves, compared by exact class)."""
    global _dm_tree_map_to_none, _TENSOR, _PARAMETER
    _dm_tree_map_to_none, _TENSOR, _PARAMETER = map_to_none, tensor, parameter


_STRINGS = (str, bytes, bytearray)
_HEAP_TYPE_FLAG = 1 << 9  # Py_TPFLAGS_HEAPTYPE
_set_warning_issued = False


class _DotString:
    """Draws a leaf as ``.`` in assert_same_structure's messages."""

    def __repr__(self) -> str:
        return "."

    __str__ = __repr__


_DOT = _DotString()
# Markers on the explicit stacks: a node's children end here; two nodes differ in length.
_LEAVE = object()
_SHORT = object()


def _dot(_: object) -> _DotString:
    return _DOT


# --- What the C library decides: kinds of node and their children ---------------------


def _warn_about_set() -> None:
    """Print dm-tree's once-per-process warning about sets (a no-op while Dynamo traces)."""
    global _set_warning_issued
    if not _set_warning_issued:
        _set_warning_issued = True
        print(SET_WARNING, file=sys.stderr)


def _class_of(instance: object) -> Any:
    """``instance.__class__``, as the C library asks; for a tensor, its type.

    Dynamo cannot read ``__class__`` of a tensor subclass, and a tensor's is its type.
    """
    if isinstance(instance, _TENSOR):
        return type(instance)
    return instance.__class__


def _is_attrs(instance: object) -> bool:
    """Returns True iff ``instance``'s class is an attrs class.

    >>> _is_attrs([1, 2])
    False
    """
    kind = type(instance)
    if kind in _NESTED_BUILTINS or kind in _LEAF_BUILTINS:
        return False
    return _has_attrs_fields(_class_of(instance))


def _has_attrs_fields(cls: Any) -> bool:
    """Whether a class has ``__attrs_attrs__`` (as attrs classes do).

    While Dynamo traces, the registry puts :func:`_has_attrs_fields_traced` in its place.
    """
    return hasattr(cls, "__attrs_attrs__")


def _attrs_field_names(cls: Any) -> tuple[str, ...]:
    """The names of an attrs class's fields, in order.

    While Dynamo traces, the registry folds calls of it to a constant (the class is known
    then): Dynamo of torch 2.5 and 2.6 cannot iterate ``__attrs_attrs__``.
    """
    return tuple(field.name for field in cls.__attrs_attrs__)


def _attrs_field_names_folded(cls: Any) -> tuple[str, ...] | None:
    """:func:`_attrs_field_names`, run by Dynamo while tracing; None where it raises, so
    that the twin raises while traced rather than Dynamo itself."""
    try:
        return _attrs_field_names(cls)
    except Exception:  # noqa: BLE001 - iterating None then raises in the twin
        return None


def _has_attrs_fields_traced(cls: Any) -> bool:
    """:func:`_has_attrs_fields` as Dynamo traces it: ``getattr`` with a None default,
    since Dynamo of torch 2.5 and 2.6 traces neither ``hasattr`` on a class nor ``getattr``
    with another default. (A class whose ``__attrs_attrs__`` is None then counts as not
    attrs; eagerly, dm-tree's rule holds and iterating None raises.)
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
    if isinstance(structure, (dict, abc.Mapping, abc.MappingView)):
        return True
    if _has_attrs_fields(_class_of(structure)):
        return True
    if isinstance(structure, set):
        _warn_about_set()
    return isinstance(structure, abc.Sequence) and not isinstance(structure, _STRINGS)


def _children(node: Any) -> list[Any]:
    """The children of a nested node, in the C library's order."""
    if issubclass(type(node), dict):  # PyDict_Check: the real type, not __class__
        if type(node) in _PLAIN_DICTS:
            return [node[key] for key in sorted(node)]
        # The C library reads a dict subclass's storage, not its overrides.
        return [dict.__getitem__(node, key) for key in sorted(dict.keys(node))]
    if isinstance(node, abc.Mapping):
        values = []
        for key in sorted(list(node.keys())):
            try:
                values.append(node[key])
            except Exception:  # noqa: BLE001 - the C library replaces any failure
                raise RuntimeError(MAPPING_CHANGED)  # noqa: B904 - C keeps the context
        return values
    if _is_attrs(node):
        return [getattr(node, name) for name in _attrs_field_names(node.__class__)]
    if type(node) is list or type(node) is tuple:
        return node
    try:
        iterator = iter(node)
    except TypeError:
        # PySequence_Fast(node, "") puts its empty message in place of the original.
        raise TypeError("") from None
    return list(iterator)


def _class_name(cls: type) -> str:
    """The C-level ``tp_name`` of a class: ``collections.OrderedDict``, ``list``, ``Foo``."""
    if cls.__flags__ & _HEAP_TYPE_FLAG or cls.__module__ == "builtins":
        return cls.__name__
    return f"{cls.__module__}.{cls.__name__}"


def _describe(value: object) -> str:
    """How the C library draws a value in its messages."""
    return f"type={_class_name(type(value)).rpartition('.')[2]} str={value}"


def _unwrap(value: Any) -> Any:
    return value.__wrapped__ if isinstance(value, ObjectProxy) else value


def _is_namedtuple(instance: object, strict: bool = False) -> bool:
    """Returns True iff ``instance`` is a namedtuple.

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
        f"{_describe(list(first.keys()))}, while second structure has keys "
        f"{_describe(list(second.keys()))}"
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
        for key in first:
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
    while pending:
        right = pending.pop()
        left = pending.pop()
        if left is _LEAVE:
            depth -= 1
            continue
        if left is _SHORT:
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
            left_children = [left[key] for key in sorted(left)]
            right_children = [right[key] for key in sorted(right)]
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


# --- What dm-tree's Python layer decides: sorted items, rebuilding ----------------------


def _sorted(dictionary: Iterable[Any]) -> list[Any]:
    """Returns the sorted keys of a mapping, with dm-tree's error if they can't be sorted.

    >>> _sorted({"b": 1, "a": 2})
    ['a', 'b']
    """
    try:
        return sorted(dictionary)
    except TypeError:
        raise TypeError(SORTABLE_KEYS_ERROR)  # noqa: B904 - dm-tree chains the original


def _sorted_items(iterable: Any) -> list[tuple[Any, Any]]:
    """``(key, value)`` pairs in dm-tree's deterministic order, as a list."""
    if isinstance(iterable, abc.Mapping):
        return [(key, iterable[key]) for key in _sorted(iterable)]
    if _is_attrs(iterable):
        return [(name, getattr(iterable, name)) for name in _attrs_field_names(iterable.__class__)]
    if _is_namedtuple(iterable):
        return [(field, getattr(iterable, field)) for field in _fields_of(iterable)]
    return list(enumerate(iterable))


def _yield_sorted_items(iterable: Any) -> Iterator[tuple[Any, Any]]:
    """Yields ``(key, value)`` pairs of ``iterable`` in dm-tree's deterministic order.

    Mappings by sorted key, attrs instances and namedtuples by field, sequences by index.

    >>> list(_yield_sorted_items({"b": 1, "a": 2}))
    [('a', 2), ('b', 1)]
    """
    # A loop, not ``yield from``: closing the generator would then close the list
    # iterator, which Dynamo 2.15 cannot do.
    for item in _sorted_items(iterable):  # noqa: UP028
        yield item


def _yield_value(iterable: Any) -> Iterator[Any]:
    """Yields the values of ``iterable`` in dm-tree's deterministic order.

    >>> list(_yield_value({"b": 1, "a": 2}))
    [2, 1]
    """
    for _, value in _sorted_items(iterable):
        yield value


def _sequence_like(instance: Any, args: Iterable[Any]) -> Any:
    """Converts the sequence ``args`` to the same type as ``instance``.

    >>> _sequence_like((1, 2), [3, 4])
    (3, 4)
    >>> _sequence_like({"b": 0, "a": 0}, [1, 2])
    {'b': 2, 'a': 1}

    Args:
      instance: a sequence, mapping, mapping view, namedtuple or attrs instance.
      args: the elements, in dm-tree's order, for the new container.

    Returns:
      ``args`` in a container of ``instance``'s type.
    """
    if isinstance(instance, abc.Mapping):
        by_key = dict(zip(_sorted(instance), args))
        pairs = [(key, by_key[key]) for key in instance]
        if isinstance(instance, collections.defaultdict):
            return type(instance)(instance.default_factory, pairs)
        if isinstance(instance, types.MappingProxyType):
            return type(instance)(dict(pairs))
        if type(instance) is collections.OrderedDict:
            # By name: Dynamo 2.15 cannot call type() of an OrderedDict made in the graph.
            return collections.OrderedDict(pairs)
        return type(instance)(pairs)
    if isinstance(instance, abc.MappingView):
        return list(args)
    if _is_namedtuple(instance) or _is_attrs(instance):
        instance_type = type(_unwrap(instance))
        try:
            if _is_attrs(instance):
                return instance_type(**dict(zip(_attrs_field_names(instance_type), args)))
            return instance_type(*args)
        except Exception as error:
            raise TypeError(f"Couldn't traverse {instance!r} with arguments {args}") from error
    if isinstance(instance, ObjectProxy):
        return type(instance)(_sequence_like(instance.__wrapped__, args))
    return type(instance)(args)


def _is_shallow_leaf(shallow: Any) -> bool:
    """Whether the ``*_up_to`` family stops at ``shallow``; not the same test as is_nested."""
    return isinstance(shallow, _TEXT_OR_BYTES) or not (
        isinstance(shallow, (abc.Mapping, abc.Sequence))
        or _is_namedtuple(shallow)
        or _is_attrs(shallow)
    )


def _flat_up_to(
    shallow: Any, tree: Any, one_structure: bool = False
) -> tuple[list[tuple[Path, Any]], BaseException | None]:
    """``tree``'s ``(path, value)`` pairs, flattened as deep as ``shallow`` goes.

    ``one_structure`` says that ``shallow`` is ``tree`` (flatten_with_path): one walk then
    serves both sides. (An ``is`` test here would not trace: Dynamo cannot compare
    containers by identity.) Returns the pairs found before any error, and that error
    (or None), so that callers can raise it where dm-tree's generator would have. Like
    that generator, it looks a child up only after the siblings before it have been walked.
    """
    pairs: list[tuple[Path, Any]] = []
    # Each entry: the path, the shallow node, and the (container, key) holding the node.
    pending: list[tuple[Path, Any, Any, Any]] = [((), shallow, (tree,), 0)]
    limit = _depth_limit()
    try:
        while pending:
            path, shallow_node, container, key = pending.pop()
            node = container[key]
            kind = type(shallow_node)
            if kind is _TENSOR or kind is _PARAMETER:
                pairs.append((path, node))
                continue
            if not (kind is list or kind is tuple or kind is dict) and _is_shallow_leaf(
                shallow_node
            ):
                pairs.append((path, node))
                continue
            if len(path) >= limit:
                raise RecursionError(NESTING_TOO_DEEP.format("flatten_with_path"))
            node_kind = type(node)
            if node_kind is list or node_kind is tuple:
                items = list(enumerate(node))
            elif node_kind is dict:
                items = [(child_key, node[child_key]) for child_key in _sorted(node)]
            else:
                items = _sorted_items(node)
            by_key = dict(items)
            if one_structure:
                shallow_items = items
            else:
                shallow_items = _sorted_items(shallow_node)
            for index in range(len(shallow_items) - 1, -1, -1):
                child_key, shallow_child = shallow_items[index]
                pending.append((path + (child_key,), shallow_child, by_key, child_key))
    except Exception as error:  # noqa: BLE001 - handed back to be raised in order
        return pairs, error
    return pairs, None


def _assert_shallow_structure(
    shallow_tree: Any,
    input_tree: Any,
    path: Path | None = None,
    check_types: bool = True,
) -> None:
    """Asserts that ``shallow_tree`` is a shallow structure of ``input_tree``.

    >>> _assert_shallow_structure({"a": None}, {"a": [1, 2]})
    >>> _assert_shallow_structure(["a", "b"], ["c", ["d", "e"], "f"])
    Traceback (most recent call last):
      ...
    ValueError: The two structures don't have the same sequence length. ...

    Args:
      shallow_tree: an arbitrarily nested structure.
      input_tree: an arbitrarily nested structure.
      path: the path so far, for messages; None leaves it out of them.
      check_types: if True, corresponding nodes must have the same type.

    Raises:
      TypeError: If ``shallow_tree`` is nested but ``input_tree`` is not, or if
        ``check_types`` and the two differ in type.
      ValueError: If the two differ in length or keys.
    """
    if not is_nested(shallow_tree):
        return
    if not is_nested(input_tree):
        if path is not None:
            raise TypeError(
                _IF_SHALLOW_IS_SEQ_INPUT_MUST_BE_SEQ_WITH_PATH.format(
                    path=list(path), input_type=type(input_tree)
                )
            )
        raise TypeError(_IF_SHALLOW_IS_SEQ_INPUT_MUST_BE_SEQ.format(type(input_tree)))
    shallow_type = type(_unwrap(shallow_tree))
    if check_types and not isinstance(input_tree, shallow_type):
        if _is_namedtuple(shallow_tree) and _is_namedtuple(input_tree):
            compatible = _same_namedtuples(shallow_tree, input_tree)
        else:
            compatible = isinstance(shallow_tree, abc.Mapping) and isinstance(
                input_tree, abc.Mapping
            )
        if not compatible:
            raise TypeError(
                _STRUCTURES_HAVE_MISMATCHING_TYPES.format(
                    input_type=type(input_tree), shallow_type=shallow_type
                )
            )
    input_length = _num_elements(input_tree)
    shallow_length = _num_elements(shallow_tree)
    if input_length != shallow_length:
        raise ValueError(
            _STRUCTURES_HAVE_MISMATCHING_LENGTHS.format(
                input_length=input_length, shallow_length=shallow_length
            )
        )
    input_items = _sorted_items(input_tree)
    position = 0
    for shallow_key, shallow_branch in _sorted_items(shallow_tree):
        # Keys are matched by a forward scan of the sorted input, as dm-tree does.
        while position < len(input_items) and input_items[position][0] != shallow_key:
            position += 1
        if position == len(input_items):
            raise ValueError(_SHALLOW_TREE_HAS_INVALID_KEYS.format([shallow_key]))
        input_branch = input_items[position][1]
        position += 1
        _assert_shallow_structure(
            shallow_branch,
            input_branch,
            None if path is None else path + (shallow_key,),
            check_types=check_types,
        )


def _num_elements(structure: Any) -> int:
    if _is_attrs(structure):
        return len(_attrs_field_names(structure.__class__))
    return len(structure)


def _pack(structure: Any, flat: Any) -> Any:
    """Rebuilds nested ``structure`` from the leaves ``flat`` (counts already checked)."""
    # First a preorder walk records each nested node with its child count, and each leaf
    # as _LEAVE; then a walk back over that record rebuilds bottom up, children before
    # parents, taking leaves from the end of ``flat``.
    order: list[Any] = []
    sizes: list[int] = []
    pending = [structure]
    while pending:
        node = pending.pop()
        kind = type(node)
        if kind is _TENSOR or kind is _PARAMETER:
            children = None
        elif kind is list or kind is tuple:
            children = node
        elif kind is dict:
            children = [node[key] for key in _sorted(node)]
        elif is_nested(node):
            children = [value for _, value in _sorted_items(node)]
        else:
            children = None
        if children is None:
            order.append(_LEAVE)
            sizes.append(0)
        else:
            order.append(node)
            sizes.append(len(children))
            pending += children[::-1]
    built: list[Any] = []
    position = len(flat)
    for index in range(len(order) - 1, -1, -1):
        node = order[index]
        if node is _LEAVE:
            position -= 1
            built.append(flat[position])
            continue
        values = []
        for _ in range(sizes[index]):
            values.append(built.pop())
        kind = type(node)
        if kind is list:
            built.append(values)
        elif kind is tuple:
            built.append(tuple(values))
        elif kind is dict:
            by_key = dict(zip(sorted(node), values))
            rebuilt = {}
            for key in node:
                rebuilt[key] = by_key[key]
            built.append(rebuilt)
        else:
            built.append(_sequence_like(node, values))
    return built[0]


# --- Public API ------------------------------------------------------------------------


def flatten(structure: Any) -> list[Any]:
    """Flattens a possibly nested structure into a list.

    >>> flatten([[1, 2, 3], [4, [5], [[6]]]])
    [1, 2, 3, 4, 5, 6]
    >>> flatten(None)
    [None]
    >>> flatten({100: "world!", 6: "Hello"})
    ['Hello', 'world!']

    Args:
      structure: An arbitrarily nested structure.

    Returns:
      The leaves of ``structure``, depth first, dict values in sorted-key order.

    Raises:
      TypeError: If ``structure`` contains a mapping whose keys can't be sorted.
    """
    leaves: list[Any] = []
    pending = [structure]
    depth = 0
    limit = _depth_limit()
    while pending:
        node = pending.pop()
        kind = type(node)
        if kind is _TENSOR or kind is _PARAMETER:
            leaves.append(node)
            continue
        if node is _LEAVE:
            depth -= 1
            continue
        # Exact list, tuple and dict first: the common case, in few bytecodes.
        if kind is list or kind is tuple:
            children = node
        elif kind is dict:
            children = [node[key] for key in sorted(node)]
        elif is_nested(node):
            children = _children(node)
        else:
            leaves.append(node)
            continue
        depth += 1
        if depth > limit:
            raise RecursionError(NESTING_TOO_DEEP.format("flatten"))
        pending.append(_LEAVE)
        pending += children[::-1]
    return leaves


def assert_same_structure(a: Any, b: Any, check_types: bool = True) -> None:
    """Asserts that two structures are nested in the same way.

    >>> assert_same_structure([(0, 1)], [(2, 3)])
    >>> assert_same_structure([0, 1], (2, 3))
    Traceback (most recent call last):
      ...
    TypeError: The two structures don't have the same nested structure.
    ...

    Args:
      a: an arbitrarily nested structure.
      b: an arbitrarily nested structure.
      check_types: if True, the sequence types and dict keys must match too;
        namedtuples with the same name and fields always match.

    Raises:
      ValueError: If the two differ in their number of elements or their nesting.
      TypeError: If ``check_types`` and the two differ in the type of a node.
    """
    try:
        mismatch = _structure_mismatch(a, b, check_types)
        if mismatch is not None:
            error_type, detail = mismatch
            raise error_type(
                "The two structures don't have the same nested structure.\n\n"
                f"First structure: {_describe(a)}\n\nSecond structure: {_describe(b)}\n\n"
                f"More specifically: {detail}"
            )
    except (ValueError, TypeError) as error:
        first = map_structure(_dot, a)
        second = map_structure(_dot, b)
        raise type(error)(  # noqa: B904 - dm-tree keeps the first error as the context
            f"{error}\nEntire first structure:\n{first}\nEntire second structure:\n{second}"
        )


def unflatten_as(structure: Any, flat_sequence: Any) -> Any:
    """Unflattens a sequence into a given structure.

    >>> unflatten_as([[1, 2], [[3], [4]]], [5, 6, 7, 8])
    [[5, 6], [[7], [8]]]
    >>> unflatten_as(None, [1])
    1
    >>> unflatten_as({1: None, 2: None}, ["Hello", "world!"])
    {1: 'Hello', 2: 'world!'}

    Args:
      structure: Arbitrarily nested structure.
      flat_sequence: Sequence to unflatten.

    Returns:
      ``flat_sequence`` unflattened into ``structure``.

    Raises:
      ValueError: If ``flat_sequence`` and ``structure`` have different element counts.
      TypeError: If ``structure`` contains a mapping whose keys can't be sorted.
    """
    if not is_nested(flat_sequence):
        raise TypeError(
            f"flat_sequence must be a sequence not a {type(flat_sequence)}:\n{flat_sequence}"
        )
    if not is_nested(structure):
        if len(flat_sequence) != 1:
            raise ValueError(
                f"Structure is a scalar but len(flat_sequence) == {len(flat_sequence)} > 1"
            )
        return flat_sequence[0]
    leaf_count = len(flatten(structure))
    if leaf_count != len(flat_sequence):
        raise ValueError(
            f"Could not pack sequence. Structure had {leaf_count} elements, but "
            f"flat_sequence had {len(flat_sequence)} elements.  Structure: {structure}, "
            f"flat_sequence: {flat_sequence}."
        )
    return _pack(structure, flat_sequence)


def map_structure(func: Callable[..., Any], *structures: Any, **kwargs: Any) -> Any:
    """Maps ``func`` through given structures.

    >>> map_structure(lambda v: v**2, [[1], [2], [3]])
    [[1], [4], [9]]
    >>> map_structure(lambda x, y: x * y, [1, 2], [3, 4])
    [3, 8]

    Args:
      func: A callable that takes as many arguments as there are structures.
      *structures: Arbitrarily nested structures of the same layout.
      **kwargs: Only ``check_types`` (default True), as for assert_same_structure.

    Returns:
      A structure like ``structures[0]`` holding ``func``'s results.

    Raises:
      TypeError: If ``func`` is not callable, or the structures differ in type.
      ValueError: If no structures are given, the structures differ, or another
        keyword argument is given.
    """
    if not callable(func):
        raise TypeError(f"func must be callable, got: {func}")
    if not structures:
        raise ValueError("Must provide at least one structure")
    check_types = kwargs.pop("check_types", True)
    if kwargs:
        raise ValueError(
            "Only valid keyword arguments are `check_types` not: `{}`".format(
                "`, `".join(kwargs.keys())
            )
        )
    first = structures[0]
    for other in structures[1:]:
        assert_same_structure(first, other, check_types=check_types)
    if len(structures) == 1:
        results = [func(leaf) for leaf in flatten(first)]
    else:
        results = [func(*leaves) for leaves in zip(*[flatten(s) for s in structures])]
    # unflatten_as(first, results), less the leaf count it would check: it holds here.
    if not is_nested(first):
        return results[0]
    return _pack(first, results)


def map_structure_with_path(func: Callable[..., Any], *structures: Any, **kwargs: Any) -> Any:
    """Maps ``func`` through given structures, passing each leaf's path first.

    >>> map_structure_with_path(lambda path, v: (path, v**2), [{"foo": 42}])
    [{'foo': ((0, 'foo'), 1764)}]

    Args:
      func: A callable that takes a path and as many values as there are structures.
      *structures: Arbitrarily nested structures of the same layout.
      **kwargs: ``check_types`` is accepted, with a deprecation warning, and ignored.

    Returns:
      A structure like ``structures[0]`` holding ``func``'s results.
    """
    return map_structure_with_path_up_to(structures[0], func, *structures, **kwargs)


def map_structure_up_to(
    shallow_structure: Any, func: Callable[..., Any], *structures: Any, **kwargs: Any
) -> Any:
    """Maps ``func`` through given structures, no deeper than ``shallow_structure``.

    >>> map_structure_up_to([None, None], len, [[1, 1], [2, 2]])
    [2, 2]
    >>> map_structure_up_to([None, [None, None]], str, [[1, 1], [2, 2]])
    ['[1, 1]', ['2', '2']]

    Args:
      shallow_structure: A structure with layout common to all ``structures``.
      func: A callable that takes as many arguments as there are structures.
      *structures: Arbitrarily nested structures.
      **kwargs: ``check_types`` is accepted, with a deprecation warning, and ignored.

    Returns:
      A structure like ``shallow_structure`` holding ``func``'s results.
    """
    return map_structure_with_path_up_to(
        shallow_structure, _PathDropper(func), *structures, **kwargs
    )


class _PathDropper:
    """Calls ``func`` without the leading path argument."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func

    def __call__(self, _path: Path, *values: Any) -> Any:
        return self.func(*values)


def _check_types_deprecated() -> None:
    """Log dm-tree's deprecation warning (a no-op while Dynamo traces)."""
    logging.warning(CHECK_TYPES_DEPRECATED)


def map_structure_with_path_up_to(
    shallow_structure: Any, func: Callable[..., Any], *structures: Any, **kwargs: Any
) -> Any:
    """Maps ``func`` through given structures up to ``shallow_structure``, with paths.

    >>> map_structure_with_path_up_to([None, None], lambda p, v: p, [[1], [2]])
    [(0,), (1,)]

    Args:
      shallow_structure: A structure with layout common to all ``structures``.
      func: A callable that takes a path and as many values as there are structures.
      *structures: Arbitrarily nested structures.
      **kwargs: ``check_types`` is accepted, with a deprecation warning, and ignored.

    Returns:
      A structure like ``shallow_structure`` holding ``func``'s results.

    Raises:
      ValueError: If a key of ``shallow_structure`` is missing from a structure.
    """
    if "check_types" in kwargs:
        _check_types_deprecated()
    flattened = [_flat_up_to(shallow_structure, tree) for tree in structures]
    results = []
    index = 0
    last_paths: Path = ()
    while flattened:
        row = []
        for pairs, error in flattened:
            if index < len(pairs):
                row.append(pairs[index])
            elif error is None:
                break
            elif isinstance(error, KeyError):
                raise ValueError(
                    KEY_NOT_FOUND_IN_INPUT_TREES.format(key=error.args[0], path=last_paths)
                ) from error
            else:
                raise error
        if len(row) < len(flattened):
            break
        last_paths = row[0][0]
        values = [value for _, value in row]
        results.append(func(last_paths, *values))
        index += 1
    return unflatten_as(shallow_structure, results)


def flatten_up_to(
    shallow_structure: Any, input_structure: Any, check_types: bool = True
) -> list[Any]:
    """Flattens ``input_structure`` up to ``shallow_structure``.

    >>> flatten_up_to([None, None], [[1, 1], [2, 2]])
    [[1, 1], [2, 2]]
    >>> flatten_up_to([None, [None, None]], [[1, 1], [2, 2]])
    [[1, 1], 2, 2]
    >>> flatten_up_to(42, [1, 2, 3])
    [[1, 2, 3]]

    Args:
      shallow_structure: A structure with the same, possibly shallower, layout.
      input_structure: An arbitrarily nested structure.
      check_types: If True, corresponding nodes must have the same type.

    Returns:
      The parts of ``input_structure`` at the leaves of ``shallow_structure``.

    Raises:
      TypeError: If the layouts or (with ``check_types``) the node types differ.
      ValueError: If lengths or keys differ.
    """
    _assert_shallow_structure(shallow_structure, input_structure, None, check_types)
    return [value for _, value in _raise_or_pairs(shallow_structure, input_structure)]


def flatten_with_path_up_to(
    shallow_structure: Any, input_structure: Any, check_types: bool = True
) -> list[tuple[Path, Any]]:
    """Flattens ``input_structure`` up to ``shallow_structure``, with paths.

    >>> flatten_with_path_up_to([None, [None]], [[1, 1], [2]])
    [((0,), [1, 1]), ((1, 0), 2)]

    Args:
      shallow_structure: A structure with the same, possibly shallower, layout.
      input_structure: An arbitrarily nested structure.
      check_types: If True, corresponding nodes must have the same type.

    Returns:
      ``(path, value)`` pairs for the leaves of ``shallow_structure``.
    """
    _assert_shallow_structure(shallow_structure, input_structure, (), check_types)
    return _raise_or_pairs(shallow_structure, input_structure)


def _raise_or_pairs(shallow: Any, tree: Any, one_structure: bool = False) -> list[tuple[Path, Any]]:
    pairs, error = _flat_up_to(shallow, tree, one_structure)
    if error is not None:
        raise error
    return pairs


def flatten_with_path(structure: Any) -> list[tuple[Path, Any]]:
    """Flattens a possibly nested structure into ``(path, leaf)`` pairs.

    >>> flatten_with_path([{"foo": 42}])
    [((0, 'foo'), 42)]

    Args:
      structure: An arbitrarily nested structure.

    Returns:
      ``(path, leaf)`` pairs, a path being the tuple of keys and indices to the leaf.

    Raises:
      TypeError: If ``structure`` contains a mapping whose keys can't be sorted.
    """
    return _raise_or_pairs(structure, structure, one_structure=True)


def traverse(fn: Callable[[Any], Any], structure: Any, top_down: bool = True) -> Any:
    """Traverses the given nested structure, applying the given function.

    >>> visited = []
    >>> traverse(visited.append, [(1, 2), [3], {"a": 4}], top_down=True)
    [(1, 2), [3], {'a': 4}]
    >>> visited
    [[(1, 2), [3], {'a': 4}], (1, 2), 1, 2, [3], 3, {'a': 4}, 4]

    Args:
      fn: Called on each sub-tree. Top down, a result other than None replaces the
        sub-tree and stops the descent; bottom up, it replaces the sub-tree. Return
        MAP_TO_NONE to replace a sub-tree with None.
      structure: The structure to traverse.
      top_down: If True, parents are visited before their children.

    Returns:
      The structured output from the traversal.
    """
    return traverse_with_path(_PathDropper(fn), structure, top_down=top_down)


def traverse_with_path(
    fn: Callable[[Path, Any], Any], structure: Any, top_down: bool = True
) -> Any:
    """Traverses the given nested structure, applying ``fn(path, subtree)``.

    >>> traverse_with_path(lambda path, x: len(path) if not is_nested(x) else None, [[1]])
    [[2]]

    Args:
      fn: Called with each sub-tree's path and the sub-tree; see :func:`traverse`.
      structure: The structure to traverse.
      top_down: If True, parents are visited before their children.

    Returns:
      The structured output from the traversal.
    """
    return _traverse(fn, (), structure, top_down)


def _traverse(fn: Callable[[Path, Any], Any], path: Path, structure: Any, top_down: bool) -> Any:
    if top_down:
        result = fn(path, structure)
        if result is None:
            return _traverse_children(fn, path, structure, top_down)
    else:
        structure = _traverse_children(fn, path, structure, top_down)
        result = fn(path, structure)
        if result is None:
            return structure
    if result is MAP_TO_NONE or result is _dm_tree_map_to_none:
        return None
    return result


def _traverse_children(
    fn: Callable[[Path, Any], Any], path: Path, structure: Any, top_down: bool
) -> Any:
    if not is_nested(structure):
        return structure
    # Lazy, as in dm-tree: the container is built, and may fail, before any child is
    # visited, and its error message shows this map.
    return _sequence_like(
        structure, map(_TraverseChild(fn, path, top_down), _yield_sorted_items(structure))
    )


class _TraverseChild:
    """Traverses one ``(key, child)`` item below ``path``."""

    def __init__(self, fn: Callable[[Path, Any], Any], path: Path, top_down: bool) -> None:
        self.fn = fn
        self.path = path
        self.top_down = top_down

    def __call__(self, item: tuple[Any, Any]) -> Any:
        key, child = item
        return _traverse(self.fn, self.path + (key,), child, self.top_down)
