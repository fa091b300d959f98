"""The optree fast path: common calls on dicts, lists, tuples and None.

The structure is read from Dynamo's variables into a skeleton of plain Python
containers whose leaves are numbers; optree's own C code, run on the skeleton while
tracing, then says the order of the leaves, their paths and the result's containers.
Dict order depends on optree's dict_insertion_ordered mode, so the graph guards on it.
Anything else raises :class:`~.reading.Fallback`: optree's own code then runs over
this package's C layer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from . import internals
from .guards import guard_dict_order
from .optree_spec import wrap
from .reading import (
    FAST_PATH_MAX_DEPTH,
    LEAF,
    LIST,
    TUPLE,
    Cycle,
    Fallback,
    bind,
    call_func,
    made_once,
    node,
    tree_options,
    with_first,
)

__all__ = ["HANDLERS"]


def _options(original: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The bound arguments and options, if is_leaf is None and the options are constants."""
    bound = bind(original, args, kwargs)
    predicate, none_is_leaf, namespace = tree_options(bound, original.__name__, strict=True)
    if predicate is not None:
        raise Fallback
    return bound, {"none_is_leaf": none_is_leaf, "namespace": namespace}


def _skeleton(
    variable: Any,
    none_is_leaf: bool,
    leaves: list[Any],
    above: list[Any],
    cycle: type[Exception] = Cycle,
    keys: dict[tuple[type, Any], Any] | None = None,
) -> Any:
    """Plain containers like the structure's, with leaf numbers for leaves.

    ``above`` holds the containers on the way down, to tell a structure that contains
    itself (torch's own handling would loop on it; ``cycle`` is raised) from one that is
    merely deep. ``keys``, if given, receives the dict keys' trackers, by key, for
    :func:`_variable` to reuse.
    """
    kind, first, dict_keys, children = node(variable, sort=False)
    if kind == LEAF:
        is_constant = type(first) is internals.kinds().Constant
        if not none_is_leaf and is_constant and internals.read(first, "value") is None:
            return None
        leaves.append(first)
        return len(leaves) - 1
    if any(first is container for container in above):
        raise cycle
    if len(above) >= FAST_PATH_MAX_DEPTH:
        raise Fallback
    above.append(first)
    parts = [_skeleton(child, none_is_leaf, leaves, above, cycle, keys) for child in children]
    above.pop()
    if kind == LIST:
        return parts
    if kind == TUPLE:
        return tuple(parts)
    if keys is not None:
        for key in dict_keys or []:
            keys.setdefault((type(key[0]), key[0]), key[1])
    return {key[0]: part for key, part in zip(dict_keys or [], parts)}


def _variable(
    skeleton: Any, values: list[Any], keys: dict[tuple[type, Any], Any] | None = None
) -> Any:
    """Dynamo's variable for a skeleton, leaf numbers replaced by ``values``; dict keys
    from the trackers in ``keys`` where read (a key's hash is then not taken again)."""
    cls = type(skeleton)
    if cls is int:
        return values[skeleton]
    if skeleton is None:
        return internals.constant(None)
    if cls is list:
        return internals.new_list([_variable(item, values, keys) for item in skeleton])
    if cls is tuple:
        return internals.new_tuple([_variable(item, values, keys) for item in skeleton])
    known = keys or {}
    return internals.new_dict(
        [
            (known.get((type(key), key)) or internals.constant(key), _variable(item, values, keys))
            for key, item in skeleton.items()
        ]
    )


def _flat(
    tx: Any, variable: Any, options: dict[str, Any], keys: dict[Any, Any] | None = None
) -> tuple[Any, list[Any], Any]:
    """(skeleton, leaf variables in optree's order, the real PyTreeSpec)."""
    import optree

    leaves: list[Any] = []
    skeleton = _skeleton(variable, options["none_is_leaf"], leaves, [], keys=keys)
    guard_dict_order(tx, options["namespace"])
    order, spec = optree.tree_flatten(skeleton, **options)
    return skeleton, [leaves[index] for index in order], spec


def _paths(skeleton: Any, options: dict[str, Any]) -> list[Any]:
    """Each leaf's path, optree's own, as a tuple variable; one variable per distinct key
    or index, shared by the paths."""
    import optree

    entry_variable = made_once(internals.constant)
    return [
        internals.new_tuple(list(map(entry_variable, path)))
        for path in optree.tree_paths(skeleton, **options)
    ]


def tree_leaves(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``optree.tree_leaves``."""
    import optree

    bound, options = _options(optree.tree_leaves, args, kwargs)
    _, leaves, _ = _flat(tx, bound["tree"], options)
    return internals.new_list(leaves)


_MAPS = {"": "tree_map", "paths": "tree_map_with_path", "accessors": "tree_map_with_accessor"}


def _tree_map(tx: Any, args: list[Any], kwargs: dict[str, Any], before: str) -> Any:
    """optree's map that passes each leaf's path or accessor first where ``before`` says so
    ("paths", "accessors" or "")."""
    import optree

    bound, options = _options(getattr(optree, _MAPS[before]), args, kwargs)
    func = bound["func"]
    if not isinstance(func, internals.kinds().callables):
        raise Fallback
    keys: dict[tuple[type, Any], Any] = {}
    skeleton, leaves, spec = _flat(tx, bound["tree"], options, keys)
    columns = [leaves]
    for rest in bound.get("rests", ()):
        _, rest_leaves, rest_spec = _flat(tx, rest, options)
        if rest_spec != spec:  # a prefix or a mismatch: optree's own rules, untouched
            raise Fallback
        columns.append(rest_leaves)
    rows = [list(row) for row in zip(*columns)]
    if before == "paths":
        rows = with_first(func, rows, lambda: _paths(skeleton, options))
    elif before == "accessors":
        # The skeleton's containers are the tree's: so are its accessors. Each is built as
        # Dynamo builds any object only where func reads it.
        rows = with_first(
            func,
            rows,
            lambda: internals.build_lazily(
                tx, "__dtc_accessors", optree.tree_accessors(skeleton, **options)
            ),
        )
    # Everything is checked before the first call of func: from here on, no fallback.
    results = [call_func(tx, func, row) for row in rows]
    return _variable(spec.unflatten(range(len(results))), results, keys)


def _tree_flatten(tx: Any, args: list[Any], kwargs: dict[str, Any], name: str) -> Any:
    import optree

    bound, options = _options(getattr(optree, name), args, kwargs)
    skeleton, leaves, spec = _flat(tx, bound["tree"], options)
    if name == "tree_structure":
        return wrap(tx, spec)
    flat = [internals.new_list(leaves), wrap(tx, spec)]
    if name == "tree_flatten_with_path":
        flat.insert(0, internals.new_list(_paths(skeleton, options)))
    return internals.new_tuple(flat)


#: Handlers by original: each returns Dynamo's variable for the result, or raises Fallback.
HANDLERS: dict[str, Callable[[Any, list[Any], dict[str, Any]], Any]] = {
    "optree.tree_leaves": tree_leaves,
    **{
        f"optree.{name}": functools.partial(_tree_map, before=before)
        for before, name in _MAPS.items()
    },
    **{
        f"optree.{name}": functools.partial(_tree_flatten, name=name)
        for name in ("tree_flatten", "tree_structure", "tree_flatten_with_path")
    },
}
