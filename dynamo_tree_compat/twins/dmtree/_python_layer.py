"""What dm-tree's Python layer decides: sorted items, rebuilt containers, the *_up_to walk."""

from __future__ import annotations

import collections
import types
from collections import abc
from collections.abc import Iterable, Iterator
from typing import Any

from ._base import (
    _IF_SHALLOW_IS_SEQ_INPUT_MUST_BE_SEQ,
    _IF_SHALLOW_IS_SEQ_INPUT_MUST_BE_SEQ_WITH_PATH,
    _LEAVE,
    _PARAMETER,
    _SHALLOW_TREE_HAS_INVALID_KEYS,
    _STRUCTURES_HAVE_MISMATCHING_LENGTHS,
    _STRUCTURES_HAVE_MISMATCHING_TYPES,
    _TENSOR,
    _TEXT_OR_BYTES,
    NESTING_TOO_DEEP,
    SORTABLE_KEYS_ERROR,
    ObjectProxy,
    Path,
    _attribute_items,
    _depth_limit,
    _items,
    _Marker,
    _values,
)
from ._nodes import (
    _attrs_field_names,
    _fields_of,
    _is_attrs,
    _is_namedtuple,
    _iterated,
    _same_namedtuples,
    _sorted_keys,
    _unwrap,
    is_nested,
)


def _sorted(dictionary: Iterable[Any]) -> list[Any]:
    """Returns the sorted keys of a mapping, with dm-tree's error if they can't be sorted.

    >>> _sorted({"b": 1, "a": 2})
    ['a', 'b']
    """
    try:
        return _sorted_keys(dictionary)
    except TypeError:
        raise TypeError(SORTABLE_KEYS_ERROR)  # noqa: B904 - dm-tree chains the original


def _sorted_items(iterable: Any) -> list[tuple[Any, Any]]:
    """``(key, value)`` pairs in dm-tree's deterministic order, as a list."""
    if isinstance(iterable, abc.Mapping):
        return _items(iterable, _sorted(iterable))
    if _is_attrs(iterable):
        return _attribute_items(iterable, _attrs_field_names(iterable.__class__))
    if _is_namedtuple(iterable):
        return _attribute_items(iterable, _fields_of(iterable))
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


def _defaultdict_like(instance: Any, pairs: Iterable[tuple[Any, Any]]) -> Any:
    """A defaultdict of ``instance``'s type and factory, holding ``pairs``.

    Where Dynamo cannot call ``defaultdict(factory, pairs)`` with a factory read in
    traced code (torch 2.9), the installer has :func:`_defaultdict_like_copied` traced
    in its place.

    >>> _defaultdict_like(collections.defaultdict(list), [("a", 1)])
    defaultdict(<class 'list'>, {'a': 1})
    """
    return type(instance)(instance.default_factory, pairs)


def _defaultdict_like_copied(instance: Any, pairs: Iterable[tuple[Any, Any]]) -> Any:
    """:func:`_defaultdict_like` as such a Dynamo traces it: an exact defaultdict is
    copied, which keeps the factory, then emptied and filled.

    >>> _defaultdict_like_copied(collections.defaultdict(int, b=2), [("a", 1)])
    defaultdict(<class 'int'>, {'a': 1})
    """
    if type(instance) is not collections.defaultdict:  # not _defaultdict_like: traced as this
        return type(instance)(instance.default_factory, pairs)
    made = instance.copy()
    made.clear()
    made.update(pairs)
    return made


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
        pairs = _items(by_key, _iterated(instance))  # in the mapping's order
        if isinstance(instance, collections.defaultdict):
            return _defaultdict_like(instance, pairs)
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
) -> tuple[list[tuple[Path, Any]], BaseException | None, Any]:
    """``tree``'s ``(path, value)`` pairs, flattened as deep as ``shallow`` goes.

    ``one_structure`` says that ``shallow`` is ``tree`` (flatten_with_path): one walk then
    serves both sides. (An ``is`` test here would not trace: Dynamo cannot compare
    containers by identity.) Returns the pairs found before any error, and that error
    (or None), so that callers can raise it where dm-tree's generator would have, and the
    key found missing, if that was the error (Dynamo 2.10 cannot read a caught error's
    ``args``). Like that generator, it looks a child up only after the siblings before it
    have been walked.
    """
    pairs: list[tuple[Path, Any]] = []
    # Each entry: the path, the shallow node, and the (container, key) holding the node.
    pending: list[tuple[Path, Any, Any, Any]] = [((), shallow, (tree,), 0)]
    limit = _depth_limit()
    try:
        while len(pending) > 0:  # not `while pending`: see _base.py
            path, shallow_node, container, key = pending.pop()
            if type(container) is dict and key not in container:
                return pairs, KeyError(key), key
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
                items = _items(node, _sorted(node))
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
        return pairs, error, None
    return pairs, None, None


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
    # Depth first, as dm-tree's recursion: one frame per nested node, holding its sorted
    # items, the next shallow item to check, the scan position in the input's items.
    frames: list[list[Any]] = []
    pending: tuple[Any, Any, Path | None] | None = (shallow_tree, input_tree, path)
    while True:
        if pending is not None:
            node_items = _shallow_node_items(*pending, check_types)
            if node_items is not None:
                frames.append([*node_items, 0, 0, pending[2]])
            pending = None
        if len(frames) == 0:
            return
        frame = frames[-1]
        shallow_items, input_items, index, position, node_path = frame
        if index == len(shallow_items):
            frames.pop()
            continue
        shallow_key, shallow_branch = shallow_items[index]
        # Keys are matched by a forward scan of the sorted input, as dm-tree does.
        while position < len(input_items) and input_items[position][0] != shallow_key:
            position += 1
        if position == len(input_items):
            raise ValueError(_SHALLOW_TREE_HAS_INVALID_KEYS.format([shallow_key]))
        frame[2], frame[3] = index + 1, position + 1
        branch_path = None if node_path is None else node_path + (shallow_key,)
        pending = (shallow_branch, input_items[position][1], branch_path)


def _shallow_node_items(
    shallow_tree: Any, input_tree: Any, path: Path | None, check_types: bool
) -> tuple[list[tuple[Any, Any]], list[tuple[Any, Any]]] | None:
    """One node of :func:`_assert_shallow_structure`: None for a shallow leaf, else the
    sorted items of both, after raising dm-tree's error where they do not match."""
    if not is_nested(shallow_tree):
        return None
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
    return _sorted_items(shallow_tree), input_items


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
    while len(pending) > 0:  # not `while pending`: see _base.py
        node = pending.pop()
        kind = type(node)
        if kind is _TENSOR or kind is _PARAMETER:
            children = None
        elif kind is list or kind is tuple:
            children = node
        elif kind is dict:
            children = _values(node, _sorted(node))
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
        if type(node) is _Marker:  # _LEAVE
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
