"""optree's PyTreeSpec, its registry entry, and ``operator.methodcaller``, as Dynamo
variables.

A spec is a constant of the graph: what depends on the spec alone runs while tracing
on the real spec; ``unflatten``, ``flatten_up_to``, ``walk``, ``traverse`` and
``transform`` trace over the leaves' variables through :mod:`.optree_reader`.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import sys
from collections.abc import Callable
from typing import Any

from ..common.guards import guard_dict_order
from ..common.held import HeldConstant, load_held
from ..common.reading import breaks_on_error, constant_or, is_none, is_variable, unsupported
from ..seam import internals, making, patches
from ..seam.types import Codegen, Translator, Variable
from . import reader as optree_reader
from .fresh import fresh_spec
from .reader import Reader, call, from_skeleton, items, real, unflatten
from .records import Markers, Slot, aligned, plain, traverse

__all__ = [
    "entry_variable_class",
    "is_registry_entry",
    "is_spec_method",
    "method_caller_class",
    "spec_method_class",
    "spec_variable_class",
    "wrap",
]


def wrap(tx: Translator, value: Any) -> Any:
    """Dynamo's variable for a Python value that exists while tracing (a constant); a
    tree spec, also inside a list or tuple, as this package's spec variable."""
    import optree

    cls = type(value)
    if cls is optree.PyTreeSpec:
        return spec_variable_class()(value)
    if is_registry_entry(value):
        return entry_variable_class()(value)
    if cls is list:
        return making.new_list([wrap(tx, item) for item in value])
    if cls is tuple:
        return making.new_tuple([wrap(tx, item) for item in value])
    return optree_reader.wrap(tx, value)


#: PyTreeSpec members that depend on the spec alone: run while tracing, on real specs.
_SPEC_ATTRIBUTES = frozenset(
    {"kind", "type", "namespace", "none_is_leaf", "num_children", "num_leaves", "num_nodes"}
)
_SPEC_CONSTANT_METHODS = frozenset(
    {
        "accessors", "broadcast_to_common_suffix", "child", "children", "compose", "entries",
        "entry", "is_leaf", "is_one_level", "is_prefix", "is_suffix", "one_level", "paths",
        "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__repr__",
        "__str__", "__len__",
    }
)  # fmt: skip
_SPEC_TRACED_METHODS = frozenset({"unflatten", "flatten_up_to", "walk", "traverse", "transform"})


def _class_once(function: Callable[[], type]) -> Callable[[], type]:
    """Makes a Dynamo variable class once, on first use (Dynamo must be loaded)."""
    return functools.cache(function)


@_class_once
def _holding_variable_class() -> type:
    """A Dynamo variable that holds one real Python object, ``value``."""

    class HoldingVariable(internals.kinds().Base):  # type: ignore[misc, name-defined]
        """Holds a real object, which Dynamo must not walk as it walks variables."""

        _nonvar_fields = internals.nonvar_fields("value")
        value: Any  # this package's own field (tests/internals/test_seam_reads.py)

        def __init__(self, value: Any, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.value = value

    return HoldingVariable


@_class_once
def spec_variable_class() -> type:
    """Dynamo's variable for a real optree.PyTreeSpec: a constant of the graph."""

    @patches.with_slot_names
    class TreeSpecVariable(HeldConstant, _holding_variable_class()):  # type: ignore[misc]
        """A real optree.PyTreeSpec; what depends on the spec alone is run while tracing."""

        def __repr__(self) -> str:
            return f"TreeSpecVariable({self.value!r})"

        @breaks_on_error("reconstructing a tree spec")
        def reconstruct(self, codegen: Codegen) -> None:
            # One that names a class: a new spec each call, the classes held weakly.
            made = fresh_spec(self.value)
            if made is None:
                load_held(codegen, self.value)
            else:
                internals.push_call_of_global(codegen, "__dtc_fresh_spec", made)

        def python_type(self) -> type:
            return type(self.value)

        @breaks_on_error("PyTreeSpec attribute")
        def var_getattr(self, tx: Translator, name: str) -> Any:
            if name in _SPEC_ATTRIBUTES:
                return wrap(tx, getattr(self.value, name))
            if name in _SPEC_CONSTANT_METHODS or name in _SPEC_TRACED_METHODS:
                return internals.kinds().GetAttr(self, name)
            return unsupported(f"PyTreeSpec.{name}", "an attribute this package does not read")

        @breaks_on_error("PyTreeSpec.call_method")
        def call_method(self, tx: Translator, name: str, args: Any, kwargs: Any) -> Any:
            return _spec_method(tx, self.value, name, list(args), dict(kwargs))

        @breaks_on_error("PyTreeSpec.richcompare_impl")
        def richcompare_impl(self, tx: Translator, other: Any, op: str) -> Any:
            if not internals.call(other, "is_python_constant"):
                return wrap(tx, NotImplemented)
            return _spec_method(tx, self.value, op, [other], {})

        @breaks_on_error("PyTreeSpec.len_impl")
        def len_impl(self, tx: Translator) -> Any:
            return wrap(tx, len(self.value))

        @breaks_on_error("PyTreeSpec.str_impl")
        def str_impl(self, tx: Translator) -> Any:
            return wrap(tx, str(self.value))

        @breaks_on_error("PyTreeSpec.repr_impl")
        def repr_impl(self, tx: Translator) -> Any:
            return wrap(tx, repr(self.value))

        @breaks_on_error("PyTreeSpec.bool_impl")
        def bool_impl(self, tx: Translator) -> Any:
            return wrap(tx, bool(self.value))

        @breaks_on_error("PyTreeSpec.hash_impl")
        def hash_impl(self, tx: Translator) -> tuple[int, bool]:
            try:
                return hash(self.value), False
            except TypeError as error:  # metadata that is not hashable
                return unsupported("PyTreeSpec.__hash__", f"optree raises {error!r}")

    return TreeSpecVariable


@_class_once
def entry_variable_class() -> type:
    """Dynamo's variable for optree's registry entry of a class (``register_pytree_node.get``).

    Dynamo 2.5 on Python 3.10 fails to make any guard on an entry (an internal error: a
    dataclass with slots claims weak references there), so none is made on the entry
    itself. One the C layer's handler gives follows from the class and the namespace,
    which the registry's guard holds (:func:`~..common.guards.guard_registration`); one
    that comes in (a frame resumed after a break) has a source, and each field it is read
    for is guarded at its own source, as Dynamo guards the read.
    """

    class RegistryEntryVariable(HeldConstant, _holding_variable_class()):  # type: ignore[misc]
        """A real registry entry; its fields are read while tracing."""

        def python_type(self) -> type:
            return type(self.value)

        @breaks_on_error("optree registry entry attribute")
        def var_getattr(self, tx: Translator, name: str) -> Any:
            if name not in {field.name for field in dataclasses.fields(self.value)}:
                return unsupported(f"PyTreeNodeRegistryEntry.{name}", "not one of its fields")
            value, source = getattr(self.value, name), internals.read(self, "source", None)
            if source is None:
                return wrap(tx, value)
            return internals.build_at(tx, internals.sources().Attr(source, name), value)

    return patches.with_slot_names(RegistryEntryVariable)


def is_registry_entry(value: Any) -> bool:
    """Whether ``value`` is an entry of optree's registry (optree loaded, never imported).

    >>> import optree
    >>> is_registry_entry(optree.register_pytree_node.get(list)), is_registry_entry(list)
    (True, False)
    """
    entry = getattr(sys.modules.get("optree.registry"), "PyTreeNodeRegistryEntry", None)
    return entry is not None and type(value) is entry


def is_spec_method(value: Any) -> bool:
    """Whether ``value`` is one of PyTreeSpec's own (C) methods, read off the class."""
    import optree

    name = getattr(value, "__name__", None)
    return isinstance(name, str) and optree.PyTreeSpec.__dict__.get(name) is value


@_class_once
def spec_method_class() -> type:
    """Dynamo's variable for a PyTreeSpec method read off the class, ``PyTreeSpec.__ne__``.

    Dynamo 2.12 and earlier trace ``spec != other`` through polyfills that read
    ``type(spec).__ne__``, and fail to make a variable of pybind11's method object.
    """

    class SpecMethodVariable(_holding_variable_class()):  # type: ignore[misc]
        """``PyTreeSpec.name``; called on a spec variable, it is the spec's method."""

        def python_type(self) -> type:
            return type(self.value)

        @breaks_on_error("PyTreeSpec method")
        def call_function(self, tx: Translator, args: Any, kwargs: Any) -> Any:
            what = f"PyTreeSpec.{self.value.__name__}"
            if not args or not isinstance(args[0], spec_variable_class()):
                return unsupported(what, "a call on something other than a tree spec")
            spec = constant_or(args[0])  # this package's spec variable
            return _spec_method(tx, spec, self.value.__name__, list(args[1:]), kwargs)

    return SpecMethodVariable


@_class_once
def method_caller_class() -> type:
    """Dynamo's variable for an ``operator.methodcaller``, which Dynamo cannot call."""

    class MethodCallerVariable(_holding_variable_class()):  # type: ignore[misc]
        """``methodcaller(name, *args)(obj)``, traced as ``obj.name(*args)``."""

        def python_type(self) -> type:
            return operator.methodcaller

        @breaks_on_error("operator.methodcaller")
        def call_function(self, tx: Translator, args: Any, kwargs: Any) -> Any:
            reduced = self.value.__reduce__()
            if reduced[0] is not operator.methodcaller or len(args) != 1 or kwargs:
                return unsupported("operator.methodcaller", "keyword arguments")
            name, *extra = reduced[1]
            method = internals.get_attribute(tx, args[0], name)
            return internals.call(method, "call_function", tx, [wrap(tx, v) for v in extra], {})

    return MethodCallerVariable


def _spec_method(
    tx: Translator, spec: Any, name: str, args: list[Variable], kwargs: dict[str, Variable]
) -> Any:
    what = f"PyTreeSpec.{name}"
    if name in _SPEC_CONSTANT_METHODS:
        real_args = [real(a, what) for a in args]
        real_kwargs = {key: real(value, what) for key, value in kwargs.items()}
        try:
            result = getattr(spec, name)(*real_args, **real_kwargs)
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return unsupported(what, f"optree raises {error!r}")
        return wrap(tx, result)
    if name == "unflatten" and len(args) == 1 and not kwargs:
        return unflatten(tx, spec, args[0], what)
    if name == "flatten_up_to" and len(args) == 1 and not kwargs:
        reader = Reader(tx, None, spec.none_is_leaf, spec.namespace, what)
        skeleton = reader.skeleton(args[0])
        if reader.dict_met:
            guard_dict_order(tx, spec.namespace)
        try:  # the spec's custom nodes as lists, the skeleton's as markers (see .records)
            pieces = plain(spec).flatten_up_to(skeleton)
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return unsupported(what, f"optree raises {error!r}")
        if not aligned(spec, skeleton, reader.markers):  # optree's own error, eagerly
            return unsupported(what, "a custom node where the spec has none, or another")
        return making.new_list(
            [
                from_skeleton(tx, piece, reader.leaves, reader.by_id, spec, reader.markers)
                for piece in pieces
            ]
        )
    if name in ("walk", "traverse", "transform"):
        return _spec_callbacks(tx, spec, name, args, kwargs)
    return unsupported(what, "arguments this package does not read")


def _spec_callbacks(
    tx: Translator, spec: Any, name: str, args: list[Variable], kwargs: dict[str, Variable]
) -> Any:
    """walk, traverse and transform: optree's C code, calling back into Dynamo's tracing.

    While tracing, the C code passes Dynamo's variables around as opaque leaves; each
    callback traces the user's function on them.
    """
    what = f"PyTreeSpec.{name}"
    names = ("f_node", "f_leaf") if name == "transform" else ("leaves", "f_node", "f_leaf")
    if len(args) > len(names) or set(kwargs) - set(names[len(args) :]):
        return unsupported(what, "arguments this package does not read")
    bound: dict[str, Any] = dict(zip(names, args)) | kwargs
    f_node, f_leaf = (
        None if is_none(bound.get(key)) else bound[key] for key in ("f_node", "f_leaf")
    )
    if name == "transform":

        def spec_of(variable: Variable) -> Any:
            if not isinstance(constant_or(variable), type(spec)):
                return unsupported(what, "a callback that returns no tree spec known while tracing")
            return constant_or(variable)

        node_callback = leaf_callback = None
        if f_node is not None:
            node_callback = lambda s: spec_of(call(tx, f_node, wrap(tx, s)))  # noqa: E731
        if f_leaf is not None:
            leaf_callback = lambda s: spec_of(call(tx, f_leaf, wrap(tx, s)))  # noqa: E731
        try:
            return wrap(tx, spec.transform(node_callback, leaf_callback))
        # optree's own error, raised eagerly (AttributeError: an optree with no transform)
        except (ValueError, TypeError, AttributeError) as error:
            return unsupported(what, f"optree raises {error!r}")
    if "leaves" not in bound:
        return unsupported(what, "no leaves")
    leaves = items(tx, bound["leaves"])
    slots = [Slot(index) for index in range(len(leaves))]
    markers = Markers()

    def leaf(slot: Slot) -> Any:
        variable = leaves[slot.index]
        return variable if f_leaf is None else call(tx, f_leaf, variable)

    def as_variable(value: Any) -> Any:
        return value if is_variable(value) else from_skeleton(tx, value, [], {}, spec, markers)

    if name == "walk" and f_node is not None:  # optree rebuilds no node: no marker

        def node(node_type: Any, node_data: Any, children: Any) -> Any:
            parts = making.new_tuple([as_variable(child) for child in children])
            return call(tx, f_node, wrap(tx, node_type), wrap(tx, node_data), parts)

        run = lambda: spec.walk(slots, node, leaf)  # noqa: E731
    else:  # walk without f_node rebuilds each node, as traverse does: each where optree
        # would, between the leaf callbacks, so that the user's functions interleave alike

        def node_rebuilt(rebuilt: Any) -> Any:
            made = as_variable(rebuilt)
            return made if f_node is None else call(tx, f_node, made)

        run = lambda: traverse(spec, slots, markers, node_rebuilt, leaf)  # noqa: E731
    try:
        result = run()
    except (ValueError, TypeError) as error:  # optree's own error, raised eagerly
        return unsupported(what, f"optree raises {error!r}")
    return as_variable(result)
