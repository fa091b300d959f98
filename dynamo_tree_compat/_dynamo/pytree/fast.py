"""torch's own pytree at Dynamo's variable level, where Dynamo has no fast path for it.

Dynamo before 2.10 inlines ``torch.utils._pytree`` bytecode by bytecode: a ``tree_map``
over a thousand leaves costs tens of seconds of compile time. For exact dicts, lists and
tuples of tensors and constants these handlers read the structure from Dynamo's
variables and build the result torch's code would: None is a leaf, dicts keep their
insertion order. Anything else raises :class:`~.reading.Fallback`, and torch's own code
is traced as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..common.reading import (
    Fallback,
    bind,
    call_func,
    constant_or,
    is_none,
    made_once,
    unsupported,
    with_first,
)
from ..common.skeletons import skeleton_of, variable_of
from ..seam import internals, making, reads
from ..seam.types import Handler, Translator, Variable
from .spec import keep_skeleton, known_spec, unflatten_known, wrap_known

__all__ = ["HANDLERS"]


def _bound(original: Any, args: list[Variable], kwargs: dict[str, Variable]) -> dict[str, Any]:
    """The call's arguments by name; Fallback where torch would raise or is_leaf is set."""
    bound = bind(original, args, kwargs)
    if "is_leaf" in bound and not is_none(bound["is_leaf"]):
        raise Fallback
    return bound


def _read(variable: Variable, leaves: list[Any], keys: dict[Any, Any] | None = None) -> Any:
    """A skeleton of plain containers, leaf numbers for leaves (None is a leaf); a
    structure that contains itself goes torch's way. ``keys``: see ``skeleton_of``."""
    return skeleton_of(variable, True, leaves, [], cycle=Fallback, keys=keys)


def _layout(skeleton: Any) -> Any:
    """The skeleton's shape, dict key order included, for comparing two structures."""
    if type(skeleton) is int:
        return None
    if type(skeleton) is dict:
        return ("dict", tuple((key, _layout(part)) for key, part in skeleton.items()))
    return (type(skeleton).__name__, tuple(_layout(part) for part in skeleton))


def _flat(variable: Variable) -> tuple[Any, list[Any], Any]:
    """(skeleton, leaf variables in torch's order, the real TreeSpec): torch's own
    ``tree_flatten`` runs on the skeleton, whose leaves are their numbers."""
    import torch.utils._pytree as pytree

    leaves: list[Any] = []
    skeleton = _read(variable, leaves, keys := {})
    numbers, spec = pytree.tree_flatten(skeleton)
    if numbers == list(range(len(numbers))):  # then spec.unflatten(numbers) is skeleton
        keep_skeleton(spec, skeleton, keys)
    return skeleton, [leaves[number] for number in numbers], spec


def _pytree(name: str) -> Any:
    import torch.utils._pytree as pytree

    return getattr(pytree, name)


def tree_leaves(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``torch.utils._pytree.tree_leaves``."""
    bound = _bound(_pytree("tree_leaves"), args, kwargs)
    leaves: list[Any] = []
    _read(bound["tree"], leaves)
    return making.new_list(leaves)


def _paths(skeleton: Any) -> list[Any]:
    """Each leaf's key path, as a tuple variable of entry variables, in torch's order: a
    dict's keys as ``MappingKey``, a list's or tuple's indices as ``SequenceKey``, one
    variable per distinct entry, shared by the paths."""
    import torch.utils._pytree as pytree

    entry = made_once(lambda cls, value: wrap_known(cls(value)))  # MappingKey(1), (True): two
    paths: list[Any] = []

    def walk(part: Any, path: tuple[Any, ...]) -> None:
        if type(part) is int:
            paths.append(making.new_tuple(list(path)))
        elif type(part) is dict:
            for key, child in part.items():
                walk(child, (*path, entry(pytree.MappingKey, key)))
        else:
            for index, child in enumerate(part):
                walk(child, (*path, entry(pytree.SequenceKey, index)))

    walk(skeleton, ())
    return paths


def _rows(bound: dict[str, Any], keys: dict[Any, Any]) -> tuple[Any, list[list[Any]]]:
    """(skeleton, one row per leaf: the leaf of each tree), all trees of one layout;
    checked before the first call of a function, after which there is no fallback. The
    first tree's dict keys go to ``keys``."""
    leaves: list[Any] = []
    skeleton = _read(bound["tree"], leaves, keys)
    columns = [leaves]
    for rest in bound.get("rests", ()):
        rest_leaves: list[Any] = []
        if _layout(_read(rest, rest_leaves)) != _layout(skeleton):
            raise Fallback  # a prefix or a mismatch: torch's own rules
        columns.append(rest_leaves)
    return skeleton, [list(row) for row in zip(*columns)]


def _func(bound: dict[str, Any]) -> Any:
    func = bound["func"]
    if not isinstance(func, internals.kinds().callables):
        raise Fallback
    return func


def tree_map(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``torch.utils._pytree.tree_map``, over one tree or several of one layout."""
    bound = _bound(_pytree("tree_map"), args, kwargs)
    func = _func(bound)
    skeleton, rows = _rows(bound, keys := {})
    # Everything is checked before the first call of func: from here on, no fallback.
    return variable_of(skeleton, [call_func(tx, func, row) for row in rows], keys)


def tree_map_with_path(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``torch.utils._pytree.tree_map_with_path``: ``func(key_path, leaf, *other_leaves)``."""
    bound = _bound(_pytree("tree_map_with_path"), args, kwargs)
    func = _func(bound)
    skeleton, rows = _rows(bound, keys := {})
    rows = with_first(func, rows, lambda: _paths(skeleton))
    return variable_of(skeleton, [call_func(tx, func, row) for row in rows], keys)


def _leaf_class(variable: Variable) -> type:
    """The Python class of a leaf the reader took: a tensor's or a constant's."""
    k = internals.kinds()
    if type(variable) is k.Constant:
        return type(reads.constant_value(variable))
    if type(variable) is k.Tensor:
        return internals.call(variable, "python_type")
    raise Fallback  # a symbolic number: isinstance is Dynamo's to answer


def _predicate(tx: Translator, first: Any) -> Callable[[Any], bool]:
    """``map_only``'s predicate, traced on a leaf variable: it must answer True or False
    known while tracing (else the graph breaks here, as torch's own ``if pred(x)`` does)."""

    def predicate(leaf: Any) -> bool:
        answer = constant_or(call_func(tx, first, [leaf]))
        if type(answer) is not bool:
            return unsupported(
                "torch.utils._pytree.tree_map_only",
                "the predicate answers something other than True or False known while tracing",
                "torch pytree",
            )
        return answer

    return predicate


def tree_map_only(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``torch.utils._pytree.tree_map_only``: ``func`` on the leaves that are instances of
    the classes (or that the predicate takes), the others as they are."""
    bound = _bound(_pytree("tree_map_only"), args, kwargs)
    first = next(iter(bound.values()))
    func = _func(bound)
    skeleton, rows = _rows(bound, keys := {})
    classes = constant_or(first, None)
    if isinstance(classes, type) or (
        type(classes) is tuple and all(isinstance(cls, type) for cls in classes)
    ):
        chosen = [issubclass(_leaf_class(row[0]), classes) for row in rows]
        chooses: Callable[[Any], bool] = lambda _: chosen.pop(0)  # noqa: E731
    elif isinstance(first, internals.kinds().callables):
        chooses = _predicate(tx, first)
    else:
        raise Fallback  # a union, or what torch rejects: torch's own code
    # From here on, no fallback: predicate and func are traced leaf by leaf, as torch's.
    results = [call_func(tx, func, row) if chooses(row[0]) else row[0] for row in rows]
    return variable_of(skeleton, results, keys)


def tree_flatten(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``torch.utils._pytree.tree_flatten``: the leaves, and the spec as a constant."""
    bound = _bound(_pytree("tree_flatten"), args, kwargs)
    _, leaves, spec = _flat(bound["tree"])
    return making.new_tuple([making.new_list(leaves), wrap_known(spec)])


def tree_structure(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``torch.utils._pytree.tree_structure``."""
    bound = _bound(_pytree("tree_structure"), args, kwargs)
    return wrap_known(_flat(bound["tree"])[2])


def _with_paths(bound: dict[str, Any]) -> tuple[Any, Any]:
    skeleton, leaves, spec = _flat(bound["tree"])
    pairs = [making.new_tuple([p, leaf]) for p, leaf in zip(_paths(skeleton), leaves)]
    return making.new_list(pairs), spec


def tree_flatten_with_path(
    tx: Translator, args: list[Variable], kwargs: dict[str, Variable]
) -> Any:
    """``torch.utils._pytree.tree_flatten_with_path``."""
    pairs, spec = _with_paths(_bound(_pytree("tree_flatten_with_path"), args, kwargs))
    return making.new_tuple([pairs, wrap_known(spec)])


def tree_leaves_with_path(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``torch.utils._pytree.tree_leaves_with_path``."""
    return _with_paths(_bound(_pytree("tree_leaves_with_path"), args, kwargs))[0]


def tree_unflatten(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``torch.utils._pytree.tree_unflatten`` with a spec the fast path made."""
    bound = bind(_pytree("tree_unflatten"), args, kwargs)
    spec = known_spec(bound["treespec"])
    result = None if spec is None else unflatten_known(spec, bound["leaves"])
    if result is None:
        raise Fallback
    return result


#: Handlers by original: each returns Dynamo's variable for the result, or raises Fallback.
HANDLERS: dict[str, Handler] = {
    f"torch.utils._pytree.{handler.__name__}": handler
    for handler in (
        tree_leaves,
        tree_map,
        tree_map_with_path,
        tree_map_only,
        tree_flatten,
        tree_structure,
        tree_flatten_with_path,
        tree_leaves_with_path,
        tree_unflatten,
    )
}
