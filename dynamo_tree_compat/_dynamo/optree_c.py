"""optree's C layer and its PyTreeSpec, done at Dynamo's variable level.

optree's public functions are Python code over a few C functions (flatten, is_leaf,
make_*) and the C class PyTreeSpec. Dynamo inlines the Python code; the handlers here
stand in for the C part. A structure's tree spec never depends on the values of its
leaves, only on its containers, so each handler reads the containers from Dynamo's
variables into a skeleton (real containers holding numbered slots) and runs optree's
own C code on the skeleton while tracing. Specs are then real ``optree.PyTreeSpec``
objects: constants of the graph, equal to eager's, and returned to the caller as such.
"""

from __future__ import annotations

import collections
import functools
import inspect
import operator
from collections.abc import Callable
from typing import Any

from . import internals
from .guards import guard_dict_order, guard_registration
from .reading import (
    CONSTANT_TYPES,
    DEFAULTDICT_LEFT_AS_DICT,
    OPTREE_MAX_DEPTH,
    breaks_on_error,
    is_none,
    is_variable,
    too_deep,
    tree_options,
    unsupported,
)

__all__ = [
    "HANDLERS",
    "is_spec_method",
    "method_caller_class",
    "spec_method_class",
    "spec_variable_class",
    "wrap",
]

# --- Reading values and variables ---------------------------------------------------


def real(variable: Any, what: str) -> Any:
    """The Python value behind a variable that must be known while tracing.

    Constants, classes and functions only: another object's contents may change from
    one call to the next (or while tracing) without a guard to see it.
    """
    variable = variable.realize()
    if variable.is_python_constant():
        return variable.as_python_constant()
    for name in ("fn", "value"):
        value = getattr(variable, name, None)
        if isinstance(value, type) or inspect.isroutine(value):
            return value
    return unsupported(what, f"{type(variable).__name__} is not known while tracing")


def wrap(tx: Any, value: Any) -> Any:
    """Dynamo's variable for a Python value that exists while tracing (a constant)."""
    import optree

    cls = type(value)
    if cls is optree.PyTreeSpec:
        return spec_variable_class()(value)
    if cls in CONSTANT_TYPES:
        return internals.constant(value)
    if cls is list:
        return internals.new_list([wrap(tx, item) for item in value])
    if cls is tuple:
        return internals.new_tuple([wrap(tx, item) for item in value])
    # Through a global, so that what the value holds (a function's closure) has a source.
    return internals.build(tx, internals.install_global(tx, "__dtc_constant", value), value)


def call(tx: Any, function: Any, *args: Any) -> Any:
    """Traces ``function(*args)``; a Python function or a variable, with variable args."""
    callee = function if is_variable(function) else wrap(tx, function)
    return callee.call_function(tx, list(args), {})


def items(tx: Any, variable: Any) -> list[Any]:
    """The items of any iterable variable, as Python's list() would give them."""
    k = internals.kinds()
    if type(variable) in (k.List, k.Tuple):  # read directly: no call to trace
        return internals.sequence_items(variable)
    listed = call(tx, list, variable)
    if type(listed) is not k.List:
        return unsupported("optree", "an iterable Dynamo cannot list")
    return internals.sequence_items(listed)


def mapping(tx: Any, variable: Any, what: str) -> dict[Any, Any]:
    """A dict variable's items: real keys, in insertion order, to value variables."""
    k = internals.kinds()
    if type(variable) is k.Dict:  # read directly: no call to trace
        entries = internals.dict_entries(variable)
        if not any(isinstance(value, k.Deleted) for _, _, value in entries):
            return {real(key, what): value for key, _, value in entries}
    pairs = [items(tx, pair) for pair in items(tx, variable.call_method(tx, "items", [], {}))]
    return {real(key, what): value for key, value in pairs}


#: optree's own node types, which cannot be registered again.
_BUILTIN_NODE_TYPES = frozenset(
    {tuple, list, dict, collections.OrderedDict, collections.defaultdict, collections.deque}
)


class Slot:
    """A numbered placeholder for one leaf in a skeleton: optree takes it as a leaf."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<leaf {self.index}>"


def _entry_kind(entry: Any) -> Any:
    """The node kind of a registry entry (optree before 0.14 does not say it)."""
    import optree

    kind = getattr(entry, "kind", None)
    if kind is not None:
        return kind
    Kind = optree.PyTreeKind
    builtin = {
        type(None): Kind.NONE,
        tuple: Kind.TUPLE,
        list: Kind.LIST,
        dict: Kind.DICT,
        collections.OrderedDict: Kind.ORDEREDDICT,
        collections.defaultdict: Kind.DEFAULTDICT,
        collections.deque: Kind.DEQUE,
    }
    return builtin.get(entry.type, Kind.CUSTOM)


class Reader:
    """Reads a structure's containers from Dynamo's variables, as optree would see them.

    ``skeleton()`` gives real containers with a :class:`Slot` for each leaf, and
    remembers each container's variable, so that results of optree's C code on the
    skeleton map back to the user's own variables.
    """

    def __init__(
        self, tx: Any, predicate: Any, none_is_leaf: bool, namespace: str, what: str
    ) -> None:
        self.tx = tx
        self.predicate = predicate
        self.none_is_leaf = none_is_leaf
        self.namespace = namespace
        self.what = what
        self.leaves: list[Any] = []
        self.by_id: dict[int, Any] = {}
        self.guarded: set[type] = set()
        self.dict_met = False

    def leaf(self, variable: Any) -> Slot:
        slot = Slot(len(self.leaves))
        self.leaves.append(variable)
        return slot

    def classify(self, variable: Any) -> tuple[Any, type | None, Any]:
        """(node kind, class, registry entry); the kind is None for a leaf, as optree says.

        None is a node of kind NONE unless ``none_is_leaf``.
        """
        import optree

        if self.predicate is not None:
            said = call(self.tx, self.predicate, variable)
            if not said.is_python_constant():
                return unsupported(self.what, "is_leaf returned a value unknown while tracing")
            if said.as_python_constant():
                return None, None, None
        try:
            cls = variable.python_type()
        except NotImplementedError:
            return None, None, None
        if cls is type(None):
            return (None if self.none_is_leaf else optree.PyTreeKind.NONE), cls, None
        if cls in CONSTANT_TYPES or issubclass(cls, internals.kinds().tensor_types):
            return None, cls, None
        entry = optree.register_pytree_node.get(cls, namespace=self.namespace)
        kind = None if entry is None else _entry_kind(entry)
        if entry is None:
            if optree.is_namedtuple_class(cls):
                kind = optree.PyTreeKind.NAMEDTUPLE
            elif optree.is_structseq_class(cls):
                kind = optree.PyTreeKind.STRUCTSEQUENCE
        if cls not in _BUILTIN_NODE_TYPES and cls not in self.guarded:
            self.guarded.add(cls)
            guard_registration(self.tx, cls, self.namespace)
        return kind, cls, entry

    def skeleton(self, variable: Any, depth: int = 0) -> Any:
        variable = variable.realize()
        kind, cls, entry = self.classify(variable)
        if kind is None:
            return self.leaf(variable)
        if cls is type(None):
            return None
        if depth >= OPTREE_MAX_DEPTH:
            return too_deep(self.tx, self.what)
        node = self.node(variable, cls, kind, entry, depth)
        self.by_id[id(node)] = variable
        return node

    def node(self, variable: Any, cls: type, kind: Any, entry: Any, depth: int) -> Any:
        import optree

        Kind = optree.PyTreeKind
        tx = self.tx
        if kind in (Kind.DICT, Kind.ORDEREDDICT, Kind.DEFAULTDICT):
            self.dict_met = True
            values = mapping(tx, variable, self.what)
            # Children are read in optree's order, as is_leaf and flatten functions see them.
            parts = {key: self.skeleton(values[key], depth + 1) for key in self.order(kind, values)}
            pairs = [(key, parts[key]) for key in values]
            if kind == Kind.DEFAULTDICT:
                factory = real(internals.default_factory(tx, variable), self.what)
                return collections.defaultdict(factory, pairs)
            return cls(pairs) if kind == Kind.ORDEREDDICT else dict(pairs)
        if kind == Kind.CUSTOM:
            return self.custom(variable, entry, depth)
        parts = [self.skeleton(item, depth + 1) for item in items(tx, variable)]
        if kind == Kind.LIST:
            return parts
        if kind == Kind.TUPLE:
            return tuple(parts)
        if kind == Kind.NAMEDTUPLE:
            return tuple.__new__(cls, parts)
        if kind == Kind.DEQUE:
            return collections.deque(parts, maxlen=self.maxlen(variable))
        if kind == Kind.STRUCTSEQUENCE:
            return cls(parts)
        return unsupported(self.what, f"optree's node kind {kind} is new to this package")

    def maxlen(self, variable: Any) -> int | None:
        """A deque's maxlen; Dynamo drops it from a deque that comes in from outside."""
        if variable.source is not None:
            try:
                value = internals.resolve_source(self.tx, variable.source)
            except internals.Missing:
                pass
            else:
                internals.guard_constant(internals.sources().Attr(variable.source, "maxlen"))
                return value.maxlen
        try:
            held = internals.get_attribute(self.tx, variable, "maxlen")
        except NotImplementedError:  # Dynamo 2.5 keeps no maxlen
            return unsupported(self.what, "this Dynamo does not keep a deque's maxlen")
        return real(held, self.what)

    def order(self, kind: Any, keys: dict[Any, Any]) -> list[Any]:
        import optree

        if kind == optree.PyTreeKind.ORDEREDDICT or optree._C.is_dict_insertion_ordered(
            self.namespace, inherit_global_namespace=True
        ):
            return list(keys)
        return optree.utils.total_order_sorted(list(keys))

    def custom(self, variable: Any, entry: Any, depth: int) -> Any:
        tx = self.tx
        flatten = entry.flatten_func
        if isinstance(flatten, operator.methodcaller):  # register_pytree_node_class
            _, (method, *rest) = flatten.__reduce__()[:2]
            if rest:
                return unsupported(self.what, "a methodcaller with arguments")
            output = internals.get_attribute(tx, variable, method).call_function(tx, [], {})
        else:
            output = call(tx, flatten, variable)
        parts = items(tx, output)
        if len(parts) not in (2, 3):
            return unsupported(self.what, "a flatten function that returns neither 2 nor 3 items")
        children = [self.skeleton(child, depth + 1) for child in items(tx, parts[0])]
        metadata = real(parts[1], self.what)
        try:
            return entry.unflatten_func(metadata, children)
        except Exception as error:  # noqa: BLE001 - the user's function, on placeholders
            return unsupported(
                self.what, f"the unflatten function fails on placeholders: {error!r}"
            )

    def flatten(self, tree: Any, with_path: bool) -> tuple[Any, list[Any], Any, Any]:
        """(skeleton, leaf variables in optree's order, real spec, paths or None)."""
        import optree

        skeleton = self.skeleton(tree)
        if self.dict_met:
            guard_dict_order(self.tx, self.namespace)
        options = {"none_is_leaf": self.none_is_leaf, "namespace": self.namespace}
        try:
            if with_path:
                paths, slots, spec = optree.tree_flatten_with_path(skeleton, **options)
            else:
                (slots, spec), paths = optree.tree_flatten(skeleton, **options), None
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return unsupported(self.what, f"optree raises {error!r}")
        if sorted(slot.index for slot in slots) != list(range(len(self.leaves))):
            return unsupported(self.what, "a custom node flattens its placeholders differently")
        return skeleton, [self.leaves[slot.index] for slot in slots], spec, paths


def from_skeleton(tx: Any, value: Any, leaves: list[Any], by_id: dict[int, Any], spec: Any) -> Any:
    """Dynamo's variable for a skeleton value: a leaf, a container read, or one rebuilt."""
    import optree

    if type(value) is Slot:
        return leaves[value.index]
    if is_variable(value):  # a callback's result, inside a node optree's C code built
        return value
    if value is None:
        return internals.constant(None)
    if id(value) in by_id:
        return by_id[id(value)]
    children, metadata, _, unflatten_func = optree.tree_flatten_one_level(
        value, none_is_leaf=spec.none_is_leaf, namespace=spec.namespace
    )
    parts = [from_skeleton(tx, child, leaves, by_id, spec) for child in children]
    cls = type(value)
    if cls is list:
        return internals.new_list(parts)
    if cls is tuple:
        return internals.new_tuple(parts)
    if cls is dict:
        by_key = dict(zip(metadata, parts))
        return internals.new_dict({wrap(tx, key): by_key[key] for key in value})
    if cls in (collections.OrderedDict, collections.defaultdict):  # in the skeleton's order
        by_key = dict(zip(metadata[-1] if cls is collections.defaultdict else metadata, parts))
        ordered = internals.new_list([by_key[key] for key in value])
        keys = wrap(tx, list(value))
        if cls is collections.OrderedDict:
            return call(tx, _make_ordereddict, keys, ordered)
        if not internals.defaultdict_leaves_graph():
            return unsupported("optree: a defaultdict", DEFAULTDICT_LEFT_AS_DICT)
        return call(tx, _make_defaultdict, wrap(tx, value.default_factory), keys, ordered)
    return call(tx, unflatten_func, wrap(tx, metadata), internals.new_list(parts))


def _make_ordereddict(keys: list[Any], values: list[Any]) -> Any:
    """An OrderedDict of the given keys and values, as Dynamo traces it."""
    return collections.OrderedDict(zip(keys, values))


def _make_defaultdict(factory: Any, keys: list[Any], values: list[Any]) -> Any:
    """A defaultdict of the given keys and values, as Dynamo traces it."""
    made = collections.defaultdict(factory)
    for key, value in zip(keys, values):
        made[key] = value
    return made


def unflatten(tx: Any, spec: Any, leaves_variable: Any, what: str) -> Any:
    """``spec.unflatten(leaves)`` with leaves that are Dynamo's variables."""
    leaves = items(tx, leaves_variable)
    try:
        skeleton = spec.unflatten([Slot(index) for index in range(len(leaves))])
    except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
        return unsupported(what, f"optree raises {error!r}")
    return from_skeleton(tx, skeleton, leaves, {}, spec)


def _c_options(args: list[Any], kwargs: dict[str, Any], what: str) -> tuple[Any, Any, bool, str]:
    """(tree, predicate or None, none_is_leaf, namespace) of a call to optree._C."""
    names = ("tree", "leaf_predicate", "none_is_leaf", "namespace")
    if len(args) > 4 or set(kwargs) - set(names[len(args) :]):
        return unsupported(what, "arguments this package does not read")
    bound = dict(zip(names, args)) | kwargs
    if "tree" not in bound:
        return unsupported(what, "no tree")
    return (bound["tree"], *tree_options(bound, what, strict=False))


def _c_flatten(tx: Any, args: list[Any], kwargs: dict[str, Any], with_path: bool) -> Any:
    what = "optree._C.flatten_with_path" if with_path else "optree._C.flatten"
    tree, predicate, none_is_leaf, namespace = _c_options(args, kwargs, what)
    reader = Reader(tx, predicate, none_is_leaf, namespace, what)
    _, leaves, spec, paths = reader.flatten(tree, with_path)
    flat = [internals.new_list(leaves), wrap(tx, spec)]
    if with_path:
        flat.insert(0, wrap(tx, paths))
    return internals.new_tuple(flat)


def c_is_leaf(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``optree._C.is_leaf``."""
    tree, predicate, none_is_leaf, namespace = _c_options(args, kwargs, "optree._C.is_leaf")
    reader = Reader(tx, predicate, none_is_leaf, namespace, "optree._C.is_leaf")
    return internals.constant(reader.classify(tree.realize())[0] is None)


def c_all_leaves(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``optree._C.all_leaves`` (optree before 0.14): whether every item is a leaf."""
    what = "optree._C.all_leaves"
    if not args:
        return unsupported(what, "no iterable")
    answers = [
        internals.constant_value(c_is_leaf(tx, [item, *args[1:]], kwargs))
        for item in items(tx, args[0])
    ]
    return internals.constant(all(answers))


def _c_constant_fold(name: str) -> Callable[..., Any]:
    """A handler that runs optree._C.<name> while tracing, on arguments known then."""

    def handler(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        import optree._C

        what = f"optree._C.{name}"
        if name == "make_from_collection" and args:
            args = [_collection_of_specs(tx, args[0], what), *args[1:]]
        real_args = [real(a, what) if is_variable(a) else a for a in args]
        real_kwargs = {key: real(value, what) for key, value in kwargs.items()}
        if name == "is_dict_insertion_ordered":
            namespace = real_args[0] if real_args else real_kwargs.get("namespace", "")
            guard_dict_order(tx, namespace if type(namespace) is str else "")
        try:
            result = getattr(optree._C, name)(*real_args, **real_kwargs)
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return unsupported(what, f"optree raises {error!r}")
        return wrap(tx, result)

    return handler


def _collection_of_specs(tx: Any, variable: Any, what: str) -> Any:
    """A collection (one level of containers) whose children are tree specs, made real."""
    import optree

    variable = variable.realize()
    try:
        cls = variable.python_type()
    except NotImplementedError:
        return unsupported(what, "a collection Dynamo cannot read")
    if issubclass(cls, dict):
        real_mapping = {
            key: real(value, what) for key, value in mapping(tx, variable, what).items()
        }
        if cls is collections.defaultdict:
            factory = real(internals.default_factory(tx, variable), what)
            return collections.defaultdict(factory, real_mapping)
        return cls(real_mapping) if cls is not dict else real_mapping
    if cls is type(None):
        return None
    real_items = [real(item, what) for item in items(tx, variable)]
    if cls in (list, tuple):
        return cls(real_items)
    if cls is collections.deque:
        maxlen = real(internals.get_attribute(tx, variable, "maxlen"), what)
        return collections.deque(real_items, maxlen=maxlen)
    if optree.is_namedtuple_class(cls):
        return tuple.__new__(cls, real_items)
    if optree.is_structseq_class(cls):
        return cls(real_items)
    return unsupported(what, f"a collection of type {cls.__qualname__}")


# --- PyTreeSpec and methodcaller as Dynamo variables ------------------------------

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

        def __init__(self, value: Any, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.value = value

    return HoldingVariable


@_class_once
def spec_variable_class() -> type:
    """Dynamo's variable for a real optree.PyTreeSpec: a constant of the graph."""

    @internals.with_slot_names
    class TreeSpecVariable(_holding_variable_class()):  # type: ignore[misc]
        """A real optree.PyTreeSpec; what depends on the spec alone is run while tracing."""

        def __repr__(self) -> str:
            return f"TreeSpecVariable({self.value!r})"

        def python_type(self) -> type:
            return type(self.value)

        def is_python_constant(self) -> bool:
            return True

        def as_python_constant(self) -> Any:
            return self.value

        @breaks_on_error("PyTreeSpec.reconstruct")
        def reconstruct(self, codegen: Any) -> None:
            internals.load_global(codegen, "__dtc_treespec", self.value)

        @breaks_on_error("PyTreeSpec attribute")
        def var_getattr(self, tx: Any, name: str) -> Any:
            if name in _SPEC_ATTRIBUTES:
                return wrap(tx, getattr(self.value, name))
            if name in _SPEC_CONSTANT_METHODS or name in _SPEC_TRACED_METHODS:
                return internals.kinds().GetAttr(self, name)
            return unsupported(f"PyTreeSpec.{name}", "an attribute this package does not read")

        @breaks_on_error("PyTreeSpec.call_method")
        def call_method(self, tx: Any, name: str, args: Any, kwargs: Any) -> Any:
            return _spec_method(tx, self.value, name, list(args), dict(kwargs))

        @breaks_on_error("PyTreeSpec.richcompare_impl")
        def richcompare_impl(self, tx: Any, other: Any, op: str) -> Any:
            if not other.is_python_constant():
                return wrap(tx, NotImplemented)
            return _spec_method(tx, self.value, op, [other], {})

        @breaks_on_error("PyTreeSpec.len_impl")
        def len_impl(self, tx: Any) -> Any:
            return wrap(tx, len(self.value))

        @breaks_on_error("PyTreeSpec.str_impl")
        def str_impl(self, tx: Any) -> Any:
            return wrap(tx, str(self.value))

        @breaks_on_error("PyTreeSpec.repr_impl")
        def repr_impl(self, tx: Any) -> Any:
            return wrap(tx, repr(self.value))

        @breaks_on_error("PyTreeSpec.bool_impl")
        def bool_impl(self, tx: Any) -> Any:
            return wrap(tx, bool(self.value))

        @breaks_on_error("PyTreeSpec.hash_impl")
        def hash_impl(self, tx: Any) -> tuple[int, bool]:
            try:
                return hash(self.value), False
            except TypeError as error:  # metadata that is not hashable
                return unsupported("PyTreeSpec.__hash__", f"optree raises {error!r}")

    return TreeSpecVariable


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
        def call_function(self, tx: Any, args: Any, kwargs: Any) -> Any:
            what = f"PyTreeSpec.{self.value.__name__}"
            if not args or not isinstance(args[0], spec_variable_class()):
                return unsupported(what, "a call on something other than a tree spec")
            return _spec_method(tx, args[0].value, self.value.__name__, list(args[1:]), kwargs)

    return SpecMethodVariable


@_class_once
def method_caller_class() -> type:
    """Dynamo's variable for an ``operator.methodcaller``, which Dynamo cannot call."""

    class MethodCallerVariable(_holding_variable_class()):  # type: ignore[misc]
        """``methodcaller(name, *args)(obj)``, traced as ``obj.name(*args)``."""

        def python_type(self) -> type:
            return operator.methodcaller

        @breaks_on_error("operator.methodcaller")
        def call_function(self, tx: Any, args: Any, kwargs: Any) -> Any:
            reduced = self.value.__reduce__()
            if reduced[0] is not operator.methodcaller or len(args) != 1 or kwargs:
                return unsupported("operator.methodcaller", "keyword arguments")
            name, *extra = reduced[1]
            method = internals.get_attribute(tx, args[0], name)
            return method.call_function(tx, [wrap(tx, value) for value in extra], {})

    return MethodCallerVariable


def _spec_method(tx: Any, spec: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
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
        try:
            pieces = spec.flatten_up_to(skeleton)
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return unsupported(what, f"optree raises {error!r}")
        return internals.new_list(
            [from_skeleton(tx, piece, reader.leaves, reader.by_id, spec) for piece in pieces]
        )
    if name in ("walk", "traverse", "transform"):
        return _spec_callbacks(tx, spec, name, args, kwargs)
    return unsupported(what, "arguments this package does not read")


def _spec_callbacks(tx: Any, spec: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
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

        def spec_of(variable: Any) -> Any:
            if not variable.is_python_constant() or not isinstance(
                variable.as_python_constant(), type(spec)
            ):
                return unsupported(what, "a callback that returns no tree spec known while tracing")
            return variable.as_python_constant()

        node_callback = leaf_callback = None
        if f_node is not None:
            node_callback = lambda s: spec_of(call(tx, f_node, wrap(tx, s)))  # noqa: E731
        if f_leaf is not None:
            leaf_callback = lambda s: spec_of(call(tx, f_leaf, wrap(tx, s)))  # noqa: E731
        return wrap(tx, spec.transform(node_callback, leaf_callback))
    if "leaves" not in bound:
        return unsupported(what, "no leaves")
    leaves = items(tx, bound["leaves"])
    slots = [Slot(index) for index in range(len(leaves))]

    def leaf(slot: Slot) -> Any:
        variable = leaves[slot.index]
        return variable if f_leaf is None else call(tx, f_leaf, variable)

    def as_variable(value: Any) -> Any:
        return value if is_variable(value) else from_skeleton(tx, value, [], {}, spec)

    if name == "walk" and f_node is not None:

        def node(node_type: Any, node_data: Any, children: Any) -> Any:
            parts = internals.new_tuple([as_variable(child) for child in children])
            return call(tx, f_node, wrap(tx, node_type), wrap(tx, node_data), parts)

        run = lambda: spec.walk(slots, node, leaf)  # noqa: E731
    else:  # walk without f_node rebuilds each node, as traverse does
        node_rebuilt = None if f_node is None else (lambda n: call(tx, f_node, as_variable(n)))
        run = lambda: spec.traverse(slots, node_rebuilt, leaf)  # noqa: E731
    try:
        result = run()
    except (ValueError, TypeError) as error:  # optree's own error, raised eagerly
        return unsupported(what, f"optree raises {error!r}")
    return as_variable(result)


#: optree's class checks, by name: the function that answers for an instance from its
#: class, or None where an instance (not a class) answers False.
_CLASS_CHECKS = {
    "is_namedtuple": "is_namedtuple",
    "is_namedtuple_instance": "is_namedtuple_class",
    "is_namedtuple_class": None,
    "namedtuple_fields": "namedtuple_fields",
    "is_structseq": "is_structseq",
    "is_structseq_instance": "is_structseq_class",
    "is_structseq_class": None,
    "structseq_fields": "structseq_fields",
}


def _class_check(name: str) -> Callable[..., Any]:
    """A handler for ``optree.<name>`` (a C function): the class of its argument is known
    while tracing, so the answer is (torch 2.5 has no polyfill of these; torch's own
    ``structseq_fields`` fails inside Dynamo on a structseq made in the graph)."""

    def handler(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        import optree

        what = f"optree.{name}"
        if len(args) != 1 or kwargs:
            return unsupported(what, "arguments this package does not read")
        variable = args[0].realize()
        try:
            cls = variable.python_type()
        except NotImplementedError:
            return unsupported(what, "a value whose class is unknown while tracing")
        check = name
        subject: Any = cls
        if issubclass(cls, type):  # a class itself
            subject = real(variable, what)
        elif _CLASS_CHECKS[name] is None:
            return internals.constant(False)
        else:
            check = _CLASS_CHECKS[name]
        try:
            result = getattr(optree, check)(subject)
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return unsupported(what, f"optree raises {error!r}")
        return wrap(tx, result)

    return handler


def registry_get(tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """``optree.register_pytree_node.get(cls, namespace=...)``: the class and namespace are
    known while tracing, so the entry is (optree's code compares ``sys.version_info``
    with a tuple, which Dynamo 2.12 and earlier cannot)."""
    import optree

    what = "optree.register_pytree_node.get"
    if len(args) != 1 or set(kwargs) - {"namespace"}:
        return unsupported(what, "arguments this package does not read")
    cls = real(args[0], what)
    namespace = real(kwargs["namespace"], what) if "namespace" in kwargs else ""
    if not isinstance(cls, type) or not isinstance(namespace, str):
        return unsupported(what, "a class and a namespace string are wanted")
    guard_registration(tx, cls, namespace)
    if cls in (dict, collections.defaultdict):
        guard_dict_order(tx, namespace)
    return wrap(tx, optree.register_pytree_node.get(cls, namespace=namespace))


#: Handlers by C function: each returns Dynamo's variable for the result, or breaks.
HANDLERS: dict[str, Callable[[Any, list[Any], dict[str, Any]], Any]] = {
    "optree._C.flatten": lambda tx, a, kw: _c_flatten(tx, a, kw, with_path=False),
    "optree._C.flatten_with_path": lambda tx, a, kw: _c_flatten(tx, a, kw, with_path=True),
    "optree._C.is_leaf": c_is_leaf,
    **{f"optree.{name}": _class_check(name) for name in _CLASS_CHECKS},
    "optree.register_pytree_node.get": registry_get,
    "optree._C.all_leaves": c_all_leaves,
    **{
        f"optree._C.{name}": _c_constant_fold(name)
        for name in ("make_leaf", "make_none", "make_from_collection", "is_dict_insertion_ordered")
    },
}
