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
from typing import Any

from ..common.guards import guard_dict_order
from ..common.reading import (
    Fallback,
    bind,
    call_func,
    made_once,
    tree_options,
    with_first,
)
from ..common.skeletons import skeleton_of, variable_of
from ..seam import internals, making
from ..seam.types import Handler, Translator, Variable
from .spec import wrap

__all__ = ["HANDLERS"]


def _options(original: Any, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """The bound arguments and options, if is_leaf is None and the options are constants."""
    bound = bind(original, args, kwargs)
    predicate, none_is_leaf, namespace = tree_options(bound, original.__name__, strict=True)
    if predicate is not None:
        raise Fallback
    return bound, {"none_is_leaf": none_is_leaf, "namespace": namespace}


def _flat(
    tx: Translator, variable: Variable, options: dict[str, Any], keys: dict[Any, Any] | None = None
) -> tuple[Any, list[Any], Any]:
    """(skeleton, leaf variables in optree's order, the real PyTreeSpec)."""
    import optree

    leaves: list[Any] = []
    skeleton = skeleton_of(variable, options["none_is_leaf"], leaves, [], keys=keys)
    guard_dict_order(tx, options["namespace"])
    order, spec = optree.tree_flatten(skeleton, **options)
    return skeleton, [leaves[index] for index in order], spec


def _paths(skeleton: Any, options: dict[str, Any]) -> list[Any]:
    """Each leaf's path, optree's own, as a tuple variable; one variable per distinct key
    or index, shared by the paths."""
    import optree

    entry_variable = made_once(making.constant)
    return [
        making.new_tuple(list(map(entry_variable, path)))
        for path in optree.tree_paths(skeleton, **options)
    ]


def tree_leaves(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``optree.tree_leaves``."""
    import optree

    bound, options = _options(optree.tree_leaves, args, kwargs)
    _, leaves, _ = _flat(tx, bound["tree"], options)
    return making.new_list(leaves)


_MAPS = {"": "tree_map", "paths": "tree_map_with_path", "accessors": "tree_map_with_accessor"}


def _tree_map(
    tx: Translator, args: list[Variable], kwargs: dict[str, Variable], before: str
) -> Any:
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
    return variable_of(spec.unflatten(range(len(results))), results, keys)


def _tree_flatten(
    tx: Translator, args: list[Variable], kwargs: dict[str, Variable], name: str
) -> Any:
    import optree

    bound, options = _options(getattr(optree, name), args, kwargs)
    skeleton, leaves, spec = _flat(tx, bound["tree"], options)
    if name == "tree_structure":
        return wrap(tx, spec)
    flat = [making.new_list(leaves), wrap(tx, spec)]
    if name == "tree_flatten_with_path":
        flat.insert(0, making.new_list(_paths(skeleton, options)))
    return making.new_tuple(flat)


#: Handlers by original: each returns Dynamo's variable for the result, or raises Fallback.
HANDLERS: dict[str, Handler] = {
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
