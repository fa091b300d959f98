"""The dm-tree fast path: every dm-tree call done at Dynamo's variable level.

Tracing a Python twin costs Dynamo an interpreted step per bytecode. For the common case
(exact dicts, lists and tuples of tensors and constants) these handlers read the
structure straight from Dynamo's variables, as torch's own tree_map fast path does, and
build the result the twin would. Anything else, anywhere in the structure, raises
:class:`~.reading.Fallback` before any user code is traced: the twin then runs.

The walks are iterative, so they go as deep as dm-tree's traced limit
(``TRACED_MAX_DEPTH``); past it, the call ends the graph with a message naming it.
"""

from __future__ import annotations

import functools
from collections import abc
from collections.abc import Callable
from typing import Any, NamedTuple

from ...twins import dmtree
from ...twins.dmtree._base import ObjectProxy, made_by_a_class_statement
from ...twins.dmtree._nodes import has_attrs_fields
from ..common.reading import (
    DICT,
    LEAF,
    LIST,
    NOT_CONSTANT,
    TUPLE,
    DictKey,
    Fallback,
    Node,
    call_func,
    constant_or,
    made_once,
    node,
    reads_argument,
    too_deep,
    with_first,
)
from ..seam import internals, making, reads
from ..seam.types import Handler, Translator, Variable

__all__ = ["HANDLERS"]


class Built(NamedTuple):
    """A container the walk met, to be made again around its children's results."""

    kind: int
    variable: Variable
    keys: list[DictKey] | None
    count: int  # its children


#: One node of a walk, in dm-tree's order: a leaf's number, or a container.
Entry = int | Built


class _TooDeep(Exception):
    """The structure nests deeper than dm-tree's traced limit."""


#: Types dm-tree reads into, or warns about: an object of any of them is no plain leaf.
_NOT_PLAIN = (abc.Mapping, abc.MappingView, abc.Sequence, set, ObjectProxy)


def _may_fake_its_class(cls: type) -> bool:
    """Whether ``cls`` itself may answer ``__class__`` with another class: it defines
    ``__class__``, or, made by a class statement, ``__getattribute__`` (as lazy proxies
    do; the types made in C that define one do not lie)."""
    own = vars(cls)
    return "__class__" in own or ("__getattribute__" in own and made_by_a_class_statement(cls))


def is_leaf_type(kind: type) -> bool:
    """Whether dm-tree takes an object of type ``kind``, whose ``__class__`` is ``kind``,
    as a leaf without a word: not a mapping, view, sequence, set, attrs class or proxy,
    and with the ``__class__`` every object has (else ``isinstance`` may answer for
    another class; see :func:`_may_fake_its_class`).

    >>> is_leaf_type(type), is_leaf_type(object), is_leaf_type(type(abc.Sequence))
    (True, True, True)
    >>> is_leaf_type(range), is_leaf_type(dict), is_leaf_type(frozenset)
    (False, False, True)
    """
    return (
        isinstance(kind, type)
        and not issubclass(kind, _NOT_PLAIN)
        and not any(_may_fake_its_class(cls) for cls in kind.__mro__[:-1])
        and not has_attrs_fields(kind)
    )


def _object_leaf(variable: Variable) -> bool:
    """Whether the variable is a class, module, function or user object that dm-tree
    takes as a leaf (see :func:`is_leaf_type`); False where Dynamo cannot say."""
    try:
        return isinstance(variable, internals.kinds().leaf_objects) and is_leaf_type(
            internals.call(variable, "python_type")
        )
    except Exception:  # noqa: BLE001 - Dynamo cannot name its type: the twin reads it
        return False


#: ``reading.node`` by dm-tree's rule: any other object that is no structure is a leaf
#: (a partial: no frame of its own per node read).
_node: Callable[[Variable], Node] = functools.partial(node, leaf=_object_leaf)


def _walk(
    roots: list[Any],
    paths: list[Any] | None = None,
    up_to: bool = False,
    seen: dict[int, Any] | None = None,
) -> tuple[list[Entry], list[list[Any]]]:
    """Reads structures of one layout: (nodes of the first, in dm-tree's order; leaves
    by position, a row of one variable per structure).

    With ``up_to``, the first root is a shallow structure: where it has a leaf, the
    others' values there are taken whole, unread. If ``paths`` is a list, it receives
    each leaf's path, as a tuple of the variables of its keys and indices. If ``seen``
    is a dict, it receives each node of the first structure as ``reading.node`` read it,
    by the id of its variable.
    """
    if len(roots) == 1 and paths is None and seen is None:
        return _walk_one(roots[0])
    entries: list[Entry] = []
    leaves: list[list[Any]] = []
    index_variable = made_once(making.constant)  # one per index, shared by the paths
    limit = dmtree.TRACED_MAX_DEPTH
    pending: list[tuple[list[Any], int, tuple[Any, ...]]] = [(roots, 1, ())]
    while pending:
        variables, depth, path = pending.pop()
        read = _node(variables[0])
        if seen is not None:
            seen[id(variables[0])] = read
        kind, first, keys, children = read
        if kind == LEAF:
            if up_to:
                row = [first, *variables[1:]]
            else:
                row = [first]
                for other in variables[1:]:
                    other_node = _node(other)
                    if other_node.kind != LEAF:
                        raise Fallback
                    row.append(other_node.variable)
            entries.append(len(leaves))
            leaves.append(row)
            if paths is not None:
                paths.append(path)
            continue
        if depth > limit:
            raise _TooDeep
        others = [_node(other) for other in variables[1:]]
        for other in others:
            if other.kind != kind or len(other.children) != len(children):
                raise Fallback
            if keys is not None and [key.key for key in keys] != [
                key.key for key in other.keys or []
            ]:
                raise Fallback
        entries.append(tuple.__new__(Built, (kind, first, keys, len(children))))
        rows = list(zip(children, *[other.children for other in others]))
        for index in range(len(children) - 1, -1, -1):
            if paths is None:
                step = path
            elif keys:
                step = (*path, keys[index].variable)
            else:
                step = (*path, index_variable(index))
            pending.append((list(rows[index]), depth + 1, step))
    return entries, leaves


def _walk_one(root: Variable) -> tuple[list[Entry], list[list[Any]]]:
    """:func:`_walk` of one structure, without paths: the common case, in fewer steps."""
    entries: list[Entry] = []
    leaves: list[list[Any]] = []
    limit = dmtree.TRACED_MAX_DEPTH
    pending: list[tuple[Variable, int]] = [(root, 1)]
    while pending:
        variable, depth = pending.pop()
        kind, first, keys, children = _node(variable)
        if kind == LEAF:
            entries.append(len(leaves))
            leaves.append([first])
            continue
        if depth > limit:
            raise _TooDeep
        entries.append(tuple.__new__(Built, (kind, first, keys, len(children))))
        depth += 1
        pending.extend([(child, depth) for child in reversed(children)])
    return entries, leaves


def _container(kind: int, first: Any, keys: Any, items: list[Any]) -> Any:
    """A new container of ``first``'s kind holding ``items`` (dm-tree's _sequence_like)."""
    if kind == LIST:
        return making.new_list(items)
    if kind == TUPLE:
        return making.new_tuple(items)
    assert kind == DICT
    # In the dict's own order; by identity: a key tracker's hash is Python code.
    by_tracker = {id(key.tracker): item for key, item in zip(keys, items)}
    order = [tracker for _, tracker, _ in reads.dict_entries(first)]
    return making.new_dict([(tracker, by_tracker[id(tracker)]) for tracker in order])


def _rebuild(entries: list[Entry], results: list[Any]) -> Any:
    """The walked containers, rebuilt around ``results`` (as dm-tree's unflatten_as)."""
    built: list[Any] = []
    for entry in reversed(entries):
        if type(entry) is int:
            built.append(results[entry])
            continue
        kind, first, keys, count = entry
        items = [built.pop() for _ in range(count)]
        built.append(_container(kind, first, keys, items))
    return built[0]


def _bind(
    args: list[Variable],
    kwargs: dict[str, Variable],
    names: tuple[str, ...],
    constants: dict[str, Any],
) -> list[Any]:
    """The arguments by ``names``; those in ``constants`` are optional, must be constants,
    and come as their values. Anything else raises Fallback: the twin raises dm-tree's
    own error."""
    if len(args) > len(names) or set(kwargs) - set(names[len(args) :]):
        raise Fallback
    bound = dict(zip(names, args)) | kwargs
    found = []
    for name in names:
        if name in constants:
            variable = bound.get(name)
            if variable is None:
                found.append(constants[name])
            elif (value := constant_or(variable)) is not NOT_CONSTANT:
                found.append(value)
            else:
                raise Fallback
        elif name in bound:
            found.append(bound[name])
        else:
            raise Fallback
    return found


def _callable(variable: Variable) -> Any:
    if not isinstance(variable, internals.kinds().callables):
        raise Fallback
    return variable


def _path_tuples(paths: list[Any]) -> list[Any]:
    return [making.new_tuple(list(path)) for path in paths]


def _deep_enough(handler: Handler) -> Any:
    """Past dm-tree's traced depth, the handler ends the graph with a message naming it."""

    def handle(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
        try:
            return handler(tx, args, kwargs)
        except _TooDeep:
            what = f"tree.{handler.__name__}"
            return too_deep(tx, what, dmtree.TRACED_MAX_DEPTH, "dm-tree")

    handle.__name__ = handler.__name__
    handle.__doc__ = handler.__doc__
    return handle


def is_nested(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``tree.is_nested``."""
    (structure,) = _bind(args, kwargs, ("structure",), {})
    return making.constant(_node(structure).kind != LEAF)


def flatten(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``tree.flatten``."""
    (structure,) = _bind(args, kwargs, ("structure",), {})
    _, leaves = _walk([structure])
    return making.new_list([leaf[0] for leaf in leaves])


def _pairs(paths: list[Any], values: list[Any]) -> Any:
    tuples = _path_tuples(paths)
    return making.new_list([making.new_tuple([path, value]) for path, value in zip(tuples, values)])


def flatten_with_path(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``tree.flatten_with_path``."""
    (structure,) = _bind(args, kwargs, ("structure",), {})
    paths: list[Any] = []
    _, leaves = _walk([structure], paths)
    return _pairs(paths, [leaf[0] for leaf in leaves])


def assert_same_structure(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``tree.assert_same_structure``."""
    a, b, _ = _bind(args, kwargs, ("a", "b", "check_types"), {"check_types": True})
    _walk([a, b])  # same exact kinds, lengths and keys: check_types is moot
    return making.constant(None)


def _call_rows(
    tx: Translator, func: Any, rows: list[list[Any]], paths: list[Any] | None
) -> list[Any]:
    """``func`` on each row of values, after the path where there are paths."""
    if paths is not None:
        rows = with_first(func, rows, lambda: _path_tuples(paths))
    return [call_func(tx, func, row) for row in rows]


def _map(tx: Translator, args: list[Variable], kwargs: dict[str, Variable], with_path: bool) -> Any:
    if set(kwargs) - {"check_types"} or len(args) < 2:
        raise Fallback
    _bind([], kwargs, ("check_types",), {"check_types": True})
    func = _callable(args[0])
    paths: list[Any] | None = [] if with_path else None
    entries, leaves = _walk(args[1:], paths)
    # Everything is checked before the first call of func: from here on, no fallback.
    return _rebuild(entries, _call_rows(tx, func, leaves, paths))


def map_structure(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``tree.map_structure``."""
    return _map(tx, args, kwargs, with_path=False)


def map_structure_with_path(
    tx: Translator, args: list[Variable], kwargs: dict[str, Variable]
) -> Any:
    """``tree.map_structure_with_path``."""
    return _map(tx, args, kwargs, with_path=True)


def _flatten_up_to(
    args: list[Variable], kwargs: dict[str, Variable], paths: list[Any] | None
) -> Any:
    names = ("shallow_structure", "input_structure", "check_types")
    shallow, structure, _ = _bind(args, kwargs, names, {"check_types": True})
    _, leaves = _walk([shallow, structure], paths, up_to=True)
    return [leaf[1] for leaf in leaves]


def flatten_up_to(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``tree.flatten_up_to``: the same kinds, lengths and keys down to the shallow
    structure's leaves (else the twin raises dm-tree's error)."""
    return making.new_list(_flatten_up_to(args, kwargs, None))


def flatten_with_path_up_to(
    tx: Translator, args: list[Variable], kwargs: dict[str, Variable]
) -> Any:
    """``tree.flatten_with_path_up_to``."""
    paths: list[Any] = []
    values = _flatten_up_to(args, kwargs, paths)
    return _pairs(paths, values)


def _map_up_to(
    tx: Translator, args: list[Variable], kwargs: dict[str, Variable], with_path: bool
) -> Any:
    if set(kwargs) - {"check_types"} or len(args) < 3:
        raise Fallback
    _bind([], kwargs, ("check_types",), {"check_types": True})  # ignored, as in dm-tree
    shallow, func = args[0], _callable(args[1])
    paths: list[Any] | None = [] if with_path else None
    entries, leaves = _walk([shallow, *args[2:]], paths, up_to=True)
    rows = [leaf[1:] for leaf in leaves]
    return _rebuild(entries, _call_rows(tx, func, rows, paths))


def map_structure_up_to(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``tree.map_structure_up_to``."""
    return _map_up_to(tx, args, kwargs, with_path=False)


def map_structure_with_path_up_to(
    tx: Translator, args: list[Variable], kwargs: dict[str, Variable]
) -> Any:
    """``tree.map_structure_with_path_up_to``."""
    return _map_up_to(tx, args, kwargs, with_path=True)


def unflatten_as(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``tree.unflatten_as``, from a list or tuple of the structure's leaf count."""
    structure, flat = _bind(args, kwargs, ("structure", "flat_sequence"), {})
    kind, _, _, items = _node(flat)
    if kind not in (LIST, TUPLE):
        raise Fallback
    entries, leaves = _walk([structure])
    if len(leaves) != len(items):
        raise Fallback  # the twin raises dm-tree's error
    return _rebuild(entries, items)


def _is_none(variable: Variable) -> bool:
    # By class, not reading.is_none: is_python_constant() reads a container whole, which
    # overflows Python's stack on a deep subtree the user's function returned.
    variable = internals.realized(variable)
    return type(variable) is internals.kinds().Constant and reads.constant_value(variable) is None


def _maps_to_none(variable: Variable) -> bool:
    value = internals.object_value(internals.realized(variable))
    return value is not None and (
        value is dmtree.MAP_TO_NONE or value is dmtree._dm_tree_map_to_none
    )


def _traverse(
    tx: Translator, args: list[Variable], kwargs: dict[str, Variable], with_path: bool
) -> Any:
    names = ("fn", "structure", "top_down")
    fn, structure, top_down = _bind(args, kwargs, names, {"top_down": True})
    fn = _callable(fn)
    # Every node readable, and not too deep: no fallback after a call. Each node is read
    # once, here: the structure's variables stay alive, so their ids stay theirs.
    _walk([structure], seen=(seen := {}))
    top_down = bool(top_down)
    frames: list[list[Any]] = []  # [kind, container, keys, children, path, results]
    index_variable = made_once(making.constant)  # one per index, shared by the paths
    pushed = object()

    reads_path = with_path and reads_argument(fn, 0, 2)
    unread = making.constant(None)  # a path fn never reads: none made

    def call(path: tuple[Any, ...], subtree: Any) -> Any:
        if with_path:
            return call_func(
                tx, fn, [making.new_tuple(list(path)) if reads_path else unread, subtree]
            )
        return call_func(tx, fn, [subtree])

    def replaced(result: Any) -> Any:
        return making.constant(None) if _maps_to_none(result) else result

    def bottom_up(path: tuple[Any, ...], subtree: Any) -> Any:
        result = call(path, subtree)
        return subtree if _is_none(result) else replaced(result)

    def enter(subtree: Any, path: tuple[Any, ...]) -> Any:
        if top_down:
            result = call(path, subtree)
            if not _is_none(result):
                return replaced(result)
        kind, first, keys, children = seen.get(id(subtree)) or _node(subtree)
        if kind == LEAF:
            return first if top_down else bottom_up(path, first)
        frames.append([kind, first, keys, children, path, []])
        return pushed

    value = enter(structure, ())
    while True:
        if value is not pushed:
            if not frames:
                return value
            frames[-1][5].append(value)
        kind, first, keys, children, path, results = frames[-1]
        index = len(results)
        if index < len(children):
            if not reads_path:  # no path is read: none made
                value = enter(children[index], path)
                continue
            key = keys[index].variable if keys else index_variable(index)
            value = enter(children[index], (*path, key))
            continue
        frames.pop()
        built = _container(kind, first, keys, results)
        value = built if top_down else bottom_up(path, built)


def traverse(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``tree.traverse``: the function on every subtree, in dm-tree's order."""
    return _traverse(tx, args, kwargs, with_path=False)


def traverse_with_path(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``tree.traverse_with_path``."""
    return _traverse(tx, args, kwargs, with_path=True)


#: Handlers by original: each returns Dynamo's variable for the result, or raises Fallback.
HANDLERS: dict[str, Handler] = {
    f"tree.{handler.__name__}": _deep_enough(handler)
    for handler in (
        is_nested,
        flatten,
        flatten_with_path,
        assert_same_structure,
        map_structure,
        map_structure_with_path,
        flatten_up_to,
        flatten_with_path_up_to,
        map_structure_up_to,
        map_structure_with_path_up_to,
        unflatten_as,
        traverse,
        traverse_with_path,
    )
}
