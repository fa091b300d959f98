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

from . import internals
from .optree_fast import _skeleton, _variable
from .reading import Fallback, bind, call_func, is_none

__all__ = ["HANDLERS"]


def _bound(original: Any, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by name; Fallback where torch would raise or is_leaf is set."""
    bound = bind(original, args, kwargs)
    if "is_leaf" in bound and not is_none(bound["is_leaf"]):
        raise Fallback
    return bound


def _read(variable: Any, leaves: list[Any]) -> Any:
    """A skeleton of plain containers, leaf numbers for leaves (None is a leaf); a
    structure that contains itself goes torch's way."""
    return _skeleton(variable, True, leaves, [], cycle=Fallback)


def _layout(skeleton: Any) -> Any:
    """The skeleton's shape, dict key order included, for comparing two structures."""
    if type(skeleton) is int:
        return None
    if type(skeleton) is dict:
        return ("dict", tuple((key, _layout(part)) for key, part in skeleton.items()))
    return (type(skeleton).__name__, tuple(_layout(part) for part in skeleton))


def tree_leaves(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``torch.utils._pytree.tree_leaves``."""
    import torch.utils._pytree as pytree

    bound = _bound(pytree.tree_leaves, args, kwargs)
    leaves: list[Any] = []
    _read(bound["tree"], leaves)
    return internals.new_list(leaves)


def tree_map(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``torch.utils._pytree.tree_map``, over one tree or several of one layout."""
    import torch.utils._pytree as pytree

    bound = _bound(pytree.tree_map, args, kwargs)
    func = bound["func"]
    if not isinstance(func, internals.kinds().callables):
        raise Fallback
    leaves: list[Any] = []
    skeleton = _read(bound["tree"], leaves)
    columns = [leaves]
    for rest in bound.get("rests", ()):
        rest_leaves: list[Any] = []
        if _layout(_read(rest, rest_leaves)) != _layout(skeleton):
            raise Fallback  # a prefix or a mismatch: torch's own rules
        columns.append(rest_leaves)
    # Everything is checked before the first call of func: from here on, no fallback.
    results = [call_func(tx, func, list(row)) for row in zip(*columns)]
    return _variable(skeleton, results)


#: Handlers by original: each returns Dynamo's variable for the result, or raises Fallback.
HANDLERS: dict[str, Callable[[Any, list[Any], dict[str, Any]], Any]] = {
    "torch.utils._pytree.tree_leaves": tree_leaves,
    "torch.utils._pytree.tree_map": tree_map,
}
