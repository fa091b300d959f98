"""dm-tree's constants, messages and the small shared pieces of the twins."""

from __future__ import annotations

import collections
import types
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, Union

__all__ = [
    "CHECK_TYPES_DEPRECATED",
    "KEY_NOT_FOUND_IN_INPUT_TREES",
    "MAPPING_CHANGED",
    "MAP_TO_NONE",
    "MAX_DEPTH",
    "NESTING_TOO_DEEP",
    "SET_WARNING",
    "SORTABLE_KEYS_ERROR",
    "TRACED_MAX_DEPTH",
    "ObjectProxy",
    "Path",
    "Structure",
    "StructureKV",
    "made_by_a_class_statement",
]

try:
    from wrapt import ObjectProxy
except ImportError:  # pragma: no cover - wrapt comes with dm-tree

    class ObjectProxy:  # type: ignore[no-redef]
        """Stand-in for ``wrapt.ObjectProxy`` when wrapt is not installed."""


#: Special value for :func:`traverse`: return it to replace a sub-tree with None.
MAP_TO_NONE: Any = object()
# dm-tree's own sentinel, set by connect() once the installer registers these twins
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
# Loops over a work list test ``len(pending) > 0``, never the list's truth: Dynamo
# decides a list's truth by reading it whole as a constant, which recurses through every
# structure the list holds and, past a few hundred levels, overflows Python's stack.


def _depth_limit() -> int:
    """MAX_DEPTH; the installer makes it TRACED_MAX_DEPTH while Dynamo traces."""
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
# does not import torch; connect() fills these in once the installer registers the twins.
_TENSOR: type = _NoSuchType
_PARAMETER: type = _NoSuchType


_STRINGS = (str, bytes, bytearray)
_HEAP_TYPE_FLAG = 1 << 9  # Py_TPFLAGS_HEAPTYPE
_IMMUTABLE_TYPE_FLAG = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE


def made_by_a_class_statement(cls: type) -> bool:
    """Whether ``cls`` was made by a class statement (a mutable heap type), not in C
    (a static type, or an immutable heap type made from a spec).

    >>> class Mine:
    ...     pass
    >>> made_by_a_class_statement(Mine), made_by_a_class_statement(dict)
    (True, False)
    """
    flags = cls.__flags__
    return bool(flags & _HEAP_TYPE_FLAG and not flags & _IMMUTABLE_TYPE_FLAG)


class _DotString:
    """Draws a leaf as ``.`` in assert_same_structure's messages."""

    def __repr__(self) -> str:
        return "."

    __str__ = __repr__


_DOT = _DotString()
# Markers on the explicit stacks: a node's children end here; two nodes differ in length.


class _Marker:
    """A work-list marker. Loops test ``type(entry) is _Marker``, never ``entry is
    _LEAVE``: Dynamo decides ``is`` between a container and an object by reading the
    container whole, which overflows Python's stack on deep structures."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_LEAVE = _Marker("_LEAVE")
_SHORT = _Marker("_SHORT")


def _dot(_: object) -> _DotString:
    return _DOT


# Python 3.11 runs a comprehension as a nested function; Dynamo, to inline one, turns the
# variables it closes over into constants, which recurses through a deep structure. The
# twins' hot loops close over no node: they call these helpers, which take it as an
# argument.


def _values(container: Any, keys: Any) -> list[Any]:
    """``[container[key] for key in keys]``."""
    values = []
    for key in keys:
        values.append(container[key])
    return values


def _items(container: Any, keys: Any) -> list[tuple[Any, Any]]:
    """``[(key, container[key]) for key in keys]``."""
    items = []
    for key in keys:
        items.append((key, container[key]))
    return items


def _attribute_items(instance: Any, names: Any) -> list[tuple[Any, Any]]:
    """``[(name, getattr(instance, name)) for name in names]``."""
    items = []
    for name in names:
        items.append((name, getattr(instance, name)))
    return items
