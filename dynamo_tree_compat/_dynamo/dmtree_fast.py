"""The dm-tree fast path: common calls done at Dynamo's variable level.

Tracing a Python twin costs Dynamo an interpreted step per bytecode. For the common case
(exact dicts, lists and tuples of tensors and constants) these handlers read the
structure straight from Dynamo's variables, as torch's own tree_map fast path does, and
build the result the twin would. Anything else, anywhere in the structure, raises
:class:`~.reading.Fallback` before any user code is traced: the twin then runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import internals
from .reading import DICT, FAST_PATH_MAX_DEPTH, LEAF, LIST, TUPLE, Fallback, node

__all__ = ["HANDLERS"]


def _walk(roots: list[Any], paths: list[Any] | None) -> tuple[Any, list[list[Any]]]:
    """Checks that ``roots`` have one structure; returns (skeleton, leaves by position).

    If ``paths`` is a list, it receives each leaf's path, as a tuple of the variables
    of its keys and indices.
    """
    leaves: list[list[Any]] = []
    index_variables: dict[int, Any] = {}  # path entries are shared variables, made once

    def index_variable(index: int) -> Any:
        if index not in index_variables:
            index_variables[index] = internals.constant(index)
        return index_variables[index]

    def visit(variables_: list[Any], depth: int, path: tuple[Any, ...]) -> Any:
        kind, first, keys, children = node(variables_[0])
        others = [node(other) for other in variables_[1:]]
        if kind == LEAF:
            if any(other[0] != LEAF for other in others):
                raise Fallback
            leaves.append([first, *(other[1] for other in others)])
            if paths is not None:
                paths.append(path)
            return len(leaves) - 1
        if depth >= FAST_PATH_MAX_DEPTH:
            raise Fallback
        for other in others:
            if other[0] != kind or len(other[3]) != len(children):
                raise Fallback
            if keys is not None and [key[0] for key in keys] != [key[0] for key in other[2]]:
                raise Fallback
        parts = []
        for index, child in enumerate(children):
            if paths is None:
                step = path
            else:
                step = path + (keys[index][2] if keys else index_variable(index),)
            parts.append(visit([child, *(other[3][index] for other in others)], depth + 1, step))
        return kind, first, keys, parts

    return visit(roots, 0, ()), leaves


def _rebuild(skeleton: Any, results: list[Any]) -> Any:
    """The skeleton's containers, rebuilt around ``results`` (as dm-tree's unflatten_as)."""
    if type(skeleton) is int:
        return results[skeleton]
    kind, first, keys, parts = skeleton
    items = [_rebuild(part, results) for part in parts]
    if kind == LIST:
        return internals.new_list(items)
    if kind == TUPLE:
        return internals.new_tuple(items)
    assert kind == DICT
    by_tracker = {key[1]: item for key, item in zip(keys, items)}
    order = [tracker for _, tracker, _ in internals.dict_entries(first)]
    return internals.new_dict({tracker: by_tracker[tracker] for tracker in order})


def _one_structure(args: list[Any], kwargs: dict[str, Any]) -> None:
    if kwargs or len(args) != 1:
        raise Fallback


def _check_types_only(kwargs: dict[str, Any]) -> None:
    if set(kwargs) - {"check_types"} or not all(v.is_python_constant() for v in kwargs.values()):
        raise Fallback


def is_nested(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``tree.is_nested``."""
    _one_structure(args, kwargs)
    return internals.constant(node(args[0])[0] != LEAF)


def flatten(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``tree.flatten``."""
    _one_structure(args, kwargs)
    _, leaves = _walk(args, None)
    return internals.new_list([leaf[0] for leaf in leaves])


def flatten_with_path(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``tree.flatten_with_path``."""
    _one_structure(args, kwargs)
    paths: list[Any] = []
    _, leaves = _walk(args, paths)
    pairs = [
        internals.new_tuple([internals.new_tuple(list(path)), leaf[0]])
        for path, leaf in zip(paths, leaves)
    ]
    return internals.new_list(pairs)


def assert_same_structure(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``tree.assert_same_structure``."""
    _check_types_only(kwargs)
    if (
        len(args) + len(kwargs) > 3
        or len(args) < 2
        or not all(a.is_python_constant() for a in args[2:])
    ):
        raise Fallback
    _walk(args[:2], None)  # same exact kinds, lengths and keys: check_types is moot
    return internals.constant(None)


def _map(tx: Any, args: list[Any], kwargs: dict[str, Any], with_path: bool) -> Any:
    _check_types_only(kwargs)
    if len(args) < 2 or not isinstance(args[0], internals.kinds().callables):
        raise Fallback
    func = args[0]
    paths: list[Any] | None = [] if with_path else None
    skeleton, leaves = _walk(args[1:], paths)
    # Everything is checked before the first call of func: from here on, no fallback.
    if paths is None:
        results = [func.call_function(tx, leaf, {}) for leaf in leaves]
    else:
        results = [
            func.call_function(tx, [internals.new_tuple(list(path)), *leaf], {})
            for path, leaf in zip(paths, leaves)
        ]
    return _rebuild(skeleton, results)


def map_structure(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``tree.map_structure``."""
    return _map(tx, args, kwargs, with_path=False)


def map_structure_with_path(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``tree.map_structure_with_path``."""
    return _map(tx, args, kwargs, with_path=True)


#: Handlers by original: each returns Dynamo's variable for the result, or raises Fallback.
HANDLERS: dict[str, Callable[[Any, list[Any], dict[str, Any]], Any]] = {
    f"tree.{handler.__name__}": handler
    for handler in (
        is_nested,
        flatten,
        flatten_with_path,
        assert_same_structure,
        map_structure,
        map_structure_with_path,
    )
}
