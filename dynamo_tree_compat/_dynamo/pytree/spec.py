"""torch's TreeSpec, and its key-path entries, as Dynamo variables: constants of the graph.

The torch-pytree fast path (:mod:`.pytree_fast`) runs torch's own code on a skeleton of
plain containers while tracing, and gets the real ``TreeSpec``. Dynamo sees it as it sees
any spec made while tracing (a user object without a source: attributes and methods are
traced as torch's Python code), with two additions: the spec is a constant, so that
comparisons fold while tracing, and it can leave the graph (it is loaded from a global).
"""

from __future__ import annotations

import functools
from typing import Any

from ..common.held import HeldConstant
from ..common.skeletons import variable_of
from ..seam import internals, reads
from ..seam.types import Translator, Variable

__all__ = [
    "is_plain_spec",
    "keep_skeleton",
    "known_spec",
    "known_variable_class",
    "unflatten_known",
    "wrap_known",
]


@functools.cache
def known_variable_class() -> type:
    """Dynamo's user-object variable for an object known while tracing (a torch TreeSpec,
    a key-path entry), which can leave the graph."""

    class KnownObjectVariable(HeldConstant, internals.kinds().UserObject):  # type: ignore[misc, name-defined]
        """A real object made while tracing: a constant of the graph."""

        def call_method(self, tx: Translator, name: str, args: Any, kwargs: Any) -> Any:
            if name == "unflatten" and len(args) == 1 and not kwargs:
                result = unflatten_known(self.value, args[0])
                if result is not None:
                    return result
            return internals.call(super(), "call_method", tx, name, args, kwargs)

    return KnownObjectVariable


def wrap_known(value: Any) -> Any:
    """The variable for ``value``, an object made while tracing."""
    return known_variable_class()(value)


def known_spec(variable: Variable) -> Any:
    """The real TreeSpec a variable of this package stands for; else None (a spec Dynamo
    made by tracing torch's code holds its fields in Dynamo's side effects, not in the
    object, and a spec from outside the graph would need guards)."""
    import torch.utils._pytree as pytree

    if type(variable) is not known_variable_class():
        return None
    value = internals.read(variable, "value")
    return value if isinstance(value, pytree.TreeSpec) else None


def is_plain_spec(spec: Any) -> bool:
    """Whether every node of a TreeSpec is an exact dict, list or tuple (or a leaf)."""
    if spec.is_leaf():
        return True
    # torch 2.13 deprecates children_specs for children()
    children = spec.children() if hasattr(spec, "children") else spec.children_specs
    return spec.type in (dict, list, tuple) and all(map(is_plain_spec, children))


#: The skeletons behind the latest specs the fast path made, by the spec's id (the spec
#: held with it), with their dict keys' trackers: unflattening them reads neither again.
_SKELETONS: dict[int, tuple[Any, Any, dict[Any, Any]]] = {}
_SKELETONS_KEPT = 64


def keep_skeleton(spec: Any, skeleton: Any, keys: dict[Any, Any]) -> None:
    """Keeps the skeleton behind a spec the fast path made, for :func:`unflatten_known`."""
    if len(_SKELETONS) >= _SKELETONS_KEPT:
        del _SKELETONS[next(iter(_SKELETONS))]
    _SKELETONS[id(spec)] = (spec, skeleton, keys)


def unflatten_known(spec: Any, leaves: Any) -> Any:
    """``spec.unflatten(leaves)`` for a spec of plain containers and a list or tuple of
    as many leaves; None for anything else (torch's own code then runs)."""
    k = internals.kinds()
    made = _SKELETONS.get(id(spec))
    if type(leaves) not in (k.List, k.Tuple) or not (made or is_plain_spec(spec)):
        return None
    items = reads.sequence_items(leaves)
    if len(items) != spec.num_leaves:
        return None  # torch's own ValueError
    if made and made[0] is spec:
        return variable_of(made[1], items, made[2])
    return variable_of(spec.unflatten(range(len(items))), items)
