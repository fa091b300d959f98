"""Hooks on how Dynamo turns a Python value into a variable, and on its frame check.

While the mode is on, Dynamo reads a real ``optree.PyTreeSpec`` that comes in (an
argument, a global) as this package's spec variable; where a tree function reads it
(``common.scope``), an ``operator.methodcaller`` as a callable and an object that lies
about its class as the object it is, and optree's registry entry as a variable Dynamo
2.5 can guard; a structure too deep for Dynamo's own recursion
runs its frame eagerly.
Each hook steps aside to Dynamo's own code on an unexpected error of its own.
"""

from __future__ import annotations

import collections
import operator
import sys
from typing import Any

from .common.guards import flag_is_on, guard_flag, guard_spec
from .common.reading import dynamo_own_errors, too_deep
from .common.scope import for_a_tree
from .optree.spec import (
    entry_variable_class,
    is_registry_entry,
    is_spec_method,
    method_caller_class,
    spec_method_class,
    spec_variable_class,
)
from .runtime import Capability, step_aside
from .seam import capabilities, frames, internals, patches, reads
from .seam.types import Builder, Translator

__all__ = ["hook_builder", "is_builder_hooked", "unhook_builder"]

#: (owner, name, what it was before the hook), in the order the hooks went in.
_HOOKED: list[tuple[Any, str, Any]] = []


def _lies_about_its_class(value: Any) -> bool:
    """An object whose ``__class__`` claims a container its type is not (optree, by its
    type, takes it for a leaf)."""
    containers = (list, tuple, dict, set, frozenset)
    return not issubclass(type(value), containers) and isinstance(value, containers)


def _ours(builder: Builder, value: Any, flag_path: str, wrap: Any) -> Any:
    """This package's variable for ``value``, or None to leave it to Dynamo."""
    # A spec exists only once optree is loaded: never import it here (it may not be
    # installed, and a process that never used it should not pay for it).
    spec_type = getattr(sys.modules.get("optree"), "PyTreeSpec", None)
    source, tx = internals.read(builder, "source"), internals.read(builder, "tx")
    if type(value) is operator.methodcaller and flag_is_on(flag_path) and for_a_tree(tx):
        # optree's flatten function for @register_pytree_node_class classes.
        internals.guard_id(source)
        guard_flag(tx, flag_path)
        return method_caller_class()(value, source=source)
    if spec_type is not None and type(value) is spec_type:
        guard_flag(tx, flag_path)
        if flag_is_on(flag_path):
            internals.guard_type(source)
            try:
                guard_spec(source, value)
            except internals.Missing:  # torch 2.5: no guard on a call; the very same spec
                internals.guard_id(source)
            return spec_variable_class()(value, source=source)
        return None
    if is_registry_entry(value) and flag_is_on(flag_path) and for_a_tree(tx):
        # optree's registry entry, a local of optree's code resumed after a break: its
        # class by identity (read as an attribute: Dynamo 2.5 turns a guard on type() into
        # one on the entry), its fields where they are read (see entry_variable_class).
        internals.guard_id(internals.sources().Attr(source, "__class__"))
        guard_flag(tx, flag_path)
        return entry_variable_class()(value, source=source)
    if (
        isinstance(value, collections.OrderedDict)
        and source is not None
        and flag_is_on(flag_path)
        and for_a_tree(tx)
    ):
        # Dynamo's own guard reads the underlying dict's order; the tree function reads
        # the OrderedDict's (Dynamo builds it, below, after this guard).
        reads.guard_own_order(source)
        return None
    if _lies_about_its_class(value) and flag_is_on(flag_path) and for_a_tree(tx):
        # Dynamo takes it for the container it claims to be, and fails on it.
        internals.guard_type(source)
        guard_flag(tx, flag_path)
        return internals.kinds().UserObject(value, source=source)
    return None


def hook_builder(flag_path: str) -> bool:
    """Installs the builder and frame-check hooks; False, changing nothing, where
    Dynamo's builder has moved."""
    if _HOOKED:
        return True
    try:
        owner, name = internals.builder_wrap()
        internals.sources()
        spec_variable_class()
        method_caller_class()
    except Exception:  # noqa: BLE001 - Dynamo's builder is not as expected
        return False
    wrap = internals.hook_point(owner, name)

    def wrap_with_our_variables(builder: Builder, value: Any) -> Any:
        try:
            variable = _ours(builder, value, flag_path, wrap)
        except dynamo_own_errors():
            raise
        except Exception as error:  # noqa: BLE001 - step aside to Dynamo's own builder
            step_aside("the variable builder hook", error)
            variable = None
        if variable is not None:
            return variable
        try:
            return wrap(builder, value)
        except RecursionError:  # Dynamo's builder recurses through a list that comes in
            if not isinstance(value, (list, tuple, dict)) or not flag_is_on(flag_path):
                raise
            return too_deep(internals.read(builder, "tx"), "a structure that comes in")

    _HOOKED.append((owner, name, patches.replace(owner, name, wrap_with_our_variables)))
    _hook_tensor_check(flag_path)
    _hook_sourceless(flag_path)
    return True


def _hook_sourceless(flag_path: str) -> None:
    """Where Dynamo traces ``spec != other`` through its polyfills (2.12 and earlier),
    they read ``type(spec).__ne__``, a pybind11 method object, and Dynamo's builder fails
    on it with a TypeError (an internal error). This package's variable stands in."""
    try:
        if not capabilities.has(Capability.COMPARES_THROUGH_POLYFILLS):
            return
        owner, name = internals.sourceless_create()
        spec_method_class()
    except Exception:  # noqa: BLE001 - Dynamo's builder is not as expected
        return
    original = internals.hook_point(owner, name)

    def create_or_spec_method(tx: Translator, value: Any) -> Any:
        try:
            return original(tx, value)
        except TypeError:
            if not is_spec_method(value) or not flag_is_on(flag_path):
                raise
            return spec_method_class()(value)

    _HOOKED.append((owner, name, patches.replace(owner, name, staticmethod(create_or_spec_method))))


def _hook_tensor_check(flag_path: str) -> None:
    """Dynamo asks of each new frame whether it holds a tensor, recursing through its
    arguments: through a structure nested deeper than Python allows, that raises
    RecursionError out of Dynamo's frame callback. While the mode is on, the answer is
    then yes: Dynamo tries the frame, and this package, meeting the structure, runs the
    frame eagerly (see ``reading.too_deep``), where optree gives its own result or error.
    """
    try:
        owner, name = frames.tensor_check()
    except Exception:  # noqa: BLE001 - Dynamo's frame check is not as expected
        return
    original = internals.hook_point(owner, name)

    def has_tensor_in_frame(frame: Any) -> bool:
        try:
            return original(frame)
        except RecursionError:
            if not flag_is_on(flag_path):
                raise
            return True

    _HOOKED.append((owner, name, patches.replace(owner, name, has_tensor_in_frame)))


def is_builder_hooked() -> bool:
    """Whether the hooks are in."""
    return bool(_HOOKED)


def unhook_builder() -> None:
    """Undoes :func:`hook_builder`."""
    while _HOOKED:
        owner, name, original = _HOOKED.pop()
        patches.replace(owner, name, original)
