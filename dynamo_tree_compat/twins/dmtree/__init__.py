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
from collections import abc
from collections.abc import Callable
from typing import Any, NamedTuple

from . import _base, _nodes, _python_layer

# What dm-tree's module offers besides its public functions, as dm-tree names it: the
# table, downstream code (Keras 3.0) and dm-tree's own test suite use these.
from ._base import (  # noqa: F401
    _IF_SHALLOW_IS_SEQ_INPUT_MUST_BE_SEQ,
    _IF_SHALLOW_IS_SEQ_INPUT_MUST_BE_SEQ_WITH_PATH,
    _INPUT_TREE_SMALLER_THAN_SHALLOW_TREE,
    _LEAVE,
    _PARAMETER,
    _SHALLOW_TREE_HAS_INVALID_KEYS,
    _STRUCTURES_HAVE_MISMATCHING_LENGTHS,
    _STRUCTURES_HAVE_MISMATCHING_TYPES,
    _TENSOR,
    CHECK_TYPES_DEPRECATED,
    KEY_NOT_FOUND_IN_INPUT_TREES,
    MAP_TO_NONE,
    MAPPING_CHANGED,
    MAX_DEPTH,
    NESTING_TOO_DEEP,
    SET_WARNING,
    SORTABLE_KEYS_ERROR,
    TRACED_MAX_DEPTH,
    Path,
    _depth_limit,
    _dm_tree_map_to_none,
    _dot,
    _Marker,
    _values,
)
from ._nodes import (
    _attrs_field_names,
    _attrs_field_names_known,
    _attrs_field_names_traced,
    _attrs_field_names_unknown,
    _children,
    _describe,
    _has_attrs_fields_traced,
    _is_attrs,
    _is_namedtuple,
    _sorted_keys,
    _sorted_keys_checked,
    _structure_mismatch,
    _warn_about_set,
    has_attrs_fields,
    is_nested,
)
from ._python_layer import (  # noqa: F401
    _assert_shallow_structure,
    _defaultdict_like,
    _defaultdict_like_copied,
    _flat_up_to,
    _pack,
    _sequence_like,
    _sorted,
    _sorted_items,
    _yield_sorted_items,
    _yield_value,
)

# dm-tree's public API; and, for the installer, connect and the tracing helpers.
__all__ = [
    "MAP_TO_NONE",
    "TRACING_HELPERS",
    "TracingHelpers",
    "assert_same_structure",
    "connect",
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


def connect(map_to_none: Any, tensor: type, parameter: type) -> None:
    """Tells the twins what only a process with dm-tree and torch has: dm-tree's own
    ``MAP_TO_NONE``, and torch's tensor classes (leaves, compared by exact class). The
    installer calls it once dm-tree's twins are registered."""
    for module in (_base, _nodes, _python_layer, sys.modules[__name__]):
        module._dm_tree_map_to_none = map_to_none
        module._TENSOR, module._PARAMETER = tensor, parameter


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
    while len(pending) > 0:  # not `while pending`: see _base.py
        node = pending.pop()
        kind = type(node)
        if kind is _TENSOR or kind is _PARAMETER:
            leaves.append(node)
            continue
        if type(node) is _Marker:  # _LEAVE
            depth -= 1
            continue
        # Exact list, tuple and dict first: the common case, in few bytecodes.
        if kind is list or kind is tuple:
            children = node
        elif kind is dict:
            children = _values(node, _sorted_keys(node))
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
    if len(structures) == 0:  # not `not structures`: see _base.py
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
    flattened = []  # a loop: a comprehension would close over the shallow structure
    for tree in structures:
        flattened.append(_flat_up_to(shallow_structure, tree))
    results = []
    index = 0
    last_paths: Path = ()
    while len(flattened) > 0:
        row = []
        for pairs, error, missing in flattened:
            if index < len(pairs):
                row.append(pairs[index])
            elif error is None:
                break
            elif isinstance(error, KeyError):
                raise ValueError(
                    KEY_NOT_FOUND_IN_INPUT_TREES.format(key=missing, path=last_paths)
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
    pairs, error, _ = _flat_up_to(shallow, tree, one_structure)
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
    # Depth first with an explicit stack, so that any depth traces: one frame per nested
    # node being rebuilt, [node, its sorted items, its path, the values made so far].
    frames: list[list[Any]] = []
    try:
        value, entered = _visit(fn, path, structure, top_down, frames)
        while True:
            if not entered:
                if len(frames) == 0:
                    return value
                frames[-1][3].append(value)
            node, items, node_path, values = frames[-1]
            if len(values) < len(items):
                key, child = items[len(values)]
                value, entered = _visit(fn, node_path + (key,), child, top_down, frames)
                continue
            frames.pop()
            # A map, as dm-tree hands over: a constructor that fails names it alike.
            value = _sequence_like(node, map(_same, values))
            value, entered = _visited(fn, node_path, value, top_down), False
    except Exception as error:
        # dm-tree visits a namedtuple's or attrs instance's children while building it,
        # inside a try: each such node around the failure wraps the error in its own.
        for frame in reversed(frames):
            node = frame[0]
            if not isinstance(node, (abc.Mapping, abc.MappingView)) and (
                _is_namedtuple(node) or _is_attrs(node)
            ):
                wrapped = TypeError(f"Couldn't traverse {node!r} with arguments {map(_same, ())}")
                wrapped.__cause__ = error
                error = wrapped
        raise error


def _visit(
    fn: Callable[[Path, Any], Any],
    path: Path,
    structure: Any,
    top_down: bool,
    frames: list[list[Any]],
) -> tuple[Any, bool]:
    """(the value for ``structure``, False), or (None, True) with a frame pushed for its
    children."""
    if top_down:
        result = fn(path, structure)
        if result is not None:
            return _result_or(result, None), False
    if not is_nested(structure):
        return _visited(fn, path, structure, top_down), False
    if len(frames) >= _depth_limit():
        raise RecursionError(NESTING_TOO_DEEP.format("traverse"))
    if not _rebuilt_after_children(structure):
        # dm-tree hands such a constructor a lazy map of the children: it may fail, or
        # consume them in its own way, before any child is visited.
        value = _sequence_like(
            structure, map(_TraverseChild(fn, path, top_down), _yield_sorted_items(structure))
        )
        return _visited(fn, path, value, top_down), False
    frames.append([structure, _sorted_items(structure), path, []])
    return None, True


def _rebuilt_after_children(structure: Any) -> bool:
    """Whether dm-tree visits all of the node's children before it builds the new node."""
    kind = type(structure)
    return (
        kind is list
        or kind is tuple
        or kind is dict
        or kind is collections.deque
        or isinstance(structure, (abc.Mapping, abc.MappingView))
        or _is_namedtuple(structure)
        or _is_attrs(structure)
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


def _visited(fn: Callable[[Path, Any], Any], path: Path, value: Any, top_down: bool) -> Any:
    """A sub-tree's value once its children are done: bottom up, after ``fn``'s say."""
    if top_down:
        return value
    return _result_or(fn(path, value), value)


def _result_or(result: Any, default: Any) -> Any:
    """What a sub-tree becomes: ``default`` for None, None for MAP_TO_NONE."""
    if result is None:
        return default
    # By type first: ``is`` between a deep container and an object does not trace.
    kind = type(result)
    if kind is type(MAP_TO_NONE) or kind is type(_dm_tree_map_to_none):
        if result is MAP_TO_NONE or result is _dm_tree_map_to_none:
            return None
    return result


def _same(value: Any) -> Any:
    return value


class TracingHelpers(NamedTuple):
    """The twins' own helpers that the installer has Dynamo trace another way, each with
    what stands in for it: dm-tree's rules hold eagerly, Dynamo's limits while tracing.

    >>> TRACING_HELPERS.depth_limit(), TRACING_HELPERS.traced_max_depth
    (5000, 1000)
    >>> TRACING_HELPERS.sorted_keys_checked({"b": 1, "a": 2})
    ['a', 'b']
    """

    #: Eager-only side effects (stderr, logging), which do nothing while tracing.
    warn_about_set: Callable[[], None]
    check_types_deprecated: Callable[[], None]
    #: MAX_DEPTH eagerly; while tracing, ``traced_max_depth`` (the C library's depth).
    depth_limit: Callable[[], int]
    traced_max_depth: int
    has_attrs_fields: Callable[[Any], bool]
    has_attrs_fields_traced: Callable[[Any], bool]
    #: Traced as the names found while tracing (folded on a class known then): Dynamo
    #: 2.5 and 2.6 cannot iterate the fields.
    attrs_field_names: Callable[[Any], tuple[str, ...]]
    attrs_field_names_traced: Callable[[Any], tuple[str, ...]]
    attrs_field_names_known: Callable[[Any], tuple[str, ...] | None]
    attrs_field_names_unknown: Callable[[Any], None]
    #: Where Dynamo's sort lets a comparison's TypeError escape (before torch 2.11).
    sorted_keys: Callable[[Any], list[Any]]
    sorted_keys_checked: Callable[[Any], list[Any]]
    #: Where Dynamo cannot call ``defaultdict(factory, items)`` (before torch 2.10).
    defaultdict_like: Callable[[Any, Any], Any]
    defaultdict_like_copied: Callable[[Any, Any], Any]


#: The helpers the installer stands in for while tracing.
TRACING_HELPERS = TracingHelpers(
    warn_about_set=_warn_about_set,
    check_types_deprecated=_check_types_deprecated,
    depth_limit=_depth_limit,
    traced_max_depth=TRACED_MAX_DEPTH,
    has_attrs_fields=has_attrs_fields,
    has_attrs_fields_traced=_has_attrs_fields_traced,
    attrs_field_names=_attrs_field_names,
    attrs_field_names_traced=_attrs_field_names_traced,
    attrs_field_names_known=_attrs_field_names_known,
    attrs_field_names_unknown=_attrs_field_names_unknown,
    sorted_keys=_sorted_keys,
    sorted_keys_checked=_sorted_keys_checked,
    defaultdict_like=_defaultdict_like,
    defaultdict_like_copied=_defaultdict_like_copied,
)
