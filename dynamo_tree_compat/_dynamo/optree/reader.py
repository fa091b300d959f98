"""Reading a structure from Dynamo's variables, as optree's C code would see it.

optree's public functions are Python code over a few C functions (flatten, is_leaf,
make_*) and the C class PyTreeSpec. Dynamo inlines the Python code; this package's C
layer stands in for the C part. A structure's tree spec never depends on the values of
its leaves, only on its containers, so :class:`Reader` reads the containers from
Dynamo's variables into a skeleton (real containers holding numbered slots), on which
optree's own C code runs while tracing; :func:`from_skeleton` maps results back to
Dynamo's variables. The handlers are in :mod:`.optree_c`, the spec variable in
:mod:`.optree_spec`.
"""

from __future__ import annotations

import collections
import inspect
import operator
from typing import Any

from ..common.guards import guard_dict_order, guard_registration
from ..common.reading import (
    CONSTANT_TYPES,
    DEFAULTDICT_LEFT_AS_DICT,
    NOT_CONSTANT,
    OPTREE_MAX_DEPTH,
    constant_or,
    is_none,
    is_variable,
    too_deep,
    unsupported,
)
from ..runtime import Capability
from ..seam import capabilities, internals, making, reads
from ..seam.types import Translator, Variable
from .records import Custom, Markers, Slot, custom_spec, traverse

__all__ = [
    "Reader",
    "call",
    "default_factory",
    "deque_maxlen",
    "from_skeleton",
    "items",
    "mapping",
    "real",
    "unflatten",
    "wrap",
]


def real(variable: Variable, what: str) -> Any:
    """The Python value behind a variable that must be known while tracing.

    Constants, classes and functions only: another object's contents may change from
    one call to the next (or while tracing) without a guard to see it.
    """
    variable = internals.realized(variable)
    if type(variable) is internals.kinds().Symbol:  # an int seen changing: its value,
        try:  # guarded, as Dynamo reads one that Python code needs whole
            value = internals.call(variable, "evaluate_expr")
        except Exception:  # noqa: BLE001 - one that depends on data: no value here
            return unsupported(what, "a number that depends on a tensor's data")
        if type(value) in (bool, int, float):
            return value
    value = constant_or(variable)
    if value is not NOT_CONSTANT:
        return value
    k = internals.kinds()
    if type(variable) in (k.List, k.Tuple):  # one that holds such an int: item by item
        items = [real(item, what) for item in reads.sequence_items(variable)]
        return items if type(variable) is k.List else tuple(items)
    for name in ("fn", "value"):
        try:
            value = internals.read(variable, name, None)
        except NotImplementedError:  # a container's value: what it holds is not constant
            continue
        if isinstance(value, type) or inspect.isroutine(value):
            return value
    return unsupported(what, f"{type(variable).__name__} is not known while tracing")


def wrap(tx: Translator, value: Any) -> Any:
    """Dynamo's variable for a Python value that exists while tracing (a constant)."""
    cls = type(value)
    if cls in CONSTANT_TYPES:
        return making.constant(value)
    if cls is list:
        return making.new_list([wrap(tx, item) for item in value])
    if cls is tuple:
        return making.new_tuple([wrap(tx, item) for item in value])
    # Through a global, so that what the value holds (a function's closure) has a source;
    # a tree spec this way gets the builder hook's spec variable (see optree_spec.wrap).
    return internals.build(tx, internals.install_global(tx, "__dtc_constant", value), value)


def call(tx: Translator, function: Any, *args: Any) -> Any:
    """Traces ``function(*args)``; a Python function or a variable, with variable args."""
    callee = function if is_variable(function) else wrap(tx, function)
    return internals.call(callee, "call_function", tx, list(args), {})


def items(tx: Translator, variable: Variable) -> list[Any]:
    """The items of any iterable variable, as Python's list() would give them."""
    k = internals.kinds()
    if type(variable) in (k.List, k.Tuple):  # read directly: no call to trace
        return reads.sequence_items(variable)
    try:
        listed = call(tx, list, variable)
    except NotImplementedError:  # Dynamo's own: a range() of an int it made symbolic
        return unsupported("optree", "an iterable Dynamo cannot list")
    if type(listed) is not k.List:
        return unsupported("optree", "an iterable Dynamo cannot list")
    return reads.sequence_items(listed)


def mapping(tx: Translator, variable: Variable, what: str) -> dict[Any, Any]:
    """A dict variable's items: real keys, in insertion order, to value variables."""
    k = internals.kinds()
    if type(variable) is k.Dict:  # read directly: no call to trace
        entries = reads.dict_entries(variable)
        if not any(isinstance(value, k.Deleted) for _, _, value in entries):
            return {real(key, what): value for key, _, value in entries}
    listed = internals.call(variable, "call_method", tx, "items", [], {})
    pairs = [items(tx, pair) for pair in items(tx, listed)]
    return {real(key, what): value for key, value in pairs}


def deque_maxlen(tx: Translator, variable: Variable, what: str) -> int | None:
    """A deque's maxlen (see ``reads.deque_maxlen``); a graph break where this Dynamo
    keeps none (2.5)."""
    try:
        return reads.deque_maxlen(tx, variable)
    except internals.Missing:
        return unsupported(what, "this Dynamo does not keep a deque's maxlen")


def default_factory(tx: Translator, variable: Variable, what: str) -> Any:
    """A defaultdict's factory: read through its source, guarded, where it has one; else
    the variable Dynamo keeps, known while tracing."""
    try:
        return reads.default_factory(tx, variable)
    except internals.Missing:
        return real(internals.default_factory(tx, variable), what)


#: optree's own node types, which cannot be registered again.
_BUILTIN_NODE_TYPES = frozenset(
    {tuple, list, dict, collections.OrderedDict, collections.defaultdict, collections.deque}
)


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
        # the entries every namedtuple and structseq class shares there
        collections.namedtuple: Kind.NAMEDTUPLE,
        getattr(optree.typing, "structseq", None): Kind.STRUCTSEQUENCE,
    }
    return builtin.get(entry.type, Kind.CUSTOM)


class Reader:
    """Reads a structure's containers from Dynamo's variables, as optree would see them.

    ``skeleton()`` gives real containers with a :class:`Slot` for each leaf, and
    remembers each container's variable, so that results of optree's C code on the
    skeleton map back to the user's own variables.
    """

    def __init__(
        self, tx: Translator, predicate: Any, none_is_leaf: bool, namespace: str, what: str
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
        self.markers = Markers()

    def leaf(self, variable: Variable) -> Slot:
        slot = Slot(len(self.leaves))
        self.leaves.append(variable)
        return slot

    def classify(self, variable: Variable) -> tuple[Any, type | None, Any]:
        """(node kind, class, registry entry); the kind is None for a leaf, as optree says.

        None is a node of kind NONE unless ``none_is_leaf``.
        """
        import optree

        if self.predicate is not None:
            said = call(self.tx, self.predicate, variable)
            answer = constant_or(said)
            if answer is NOT_CONSTANT:
                return unsupported(self.what, "is_leaf returned a value unknown while tracing")
            if answer:
                return None, None, None
        try:
            cls = internals.call(variable, "python_type")
        except NotImplementedError:
            return None, None, None
        if cls is type(None):
            return (None if self.none_is_leaf else optree.PyTreeKind.NONE), cls, None
        if cls in CONSTANT_TYPES or issubclass(cls, internals.kinds().tensor_types):
            return None, cls, None
        if cls not in _BUILTIN_NODE_TYPES:  # an object: its own class, not its base's
            named, cls = cls, reads.object_class(self.tx, variable)
            if cls is not named and optree.register_pytree_node.get(cls, namespace=self.namespace):
                return unsupported(
                    self.what,
                    f"Dynamo reads a {cls.__qualname__} as its base, {named.__qualname__}",
                )
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

    def skeleton(self, variable: Variable, depth: int = 0) -> Any:
        variable = internals.realized(variable)
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

    def node(self, variable: Variable, cls: type, kind: Any, entry: Any, depth: int) -> Any:
        import optree

        Kind = optree.PyTreeKind
        tx = self.tx
        if kind in (Kind.DICT, Kind.ORDEREDDICT, Kind.DEFAULTDICT):
            self.dict_met = True
            values = mapping(tx, variable, self.what)
            if kind == Kind.ORDEREDDICT:  # optree reads the dict beneath the order
                underneath = reads.keys_underneath(tx, variable)
                if underneath is not None and set(underneath) == set(values):
                    values = {key: values[key] for key in underneath}
            # Children are read in optree's order, as is_leaf and flatten functions see them.
            parts = {key: self.skeleton(values[key], depth + 1) for key in self.order(kind, values)}
            pairs = [(key, parts[key]) for key in values]
            if kind == Kind.DEFAULTDICT:
                factory = default_factory(tx, variable, self.what)
                return collections.defaultdict(factory, pairs)
            return cls(pairs) if kind == Kind.ORDEREDDICT else dict(pairs)
        if kind == Kind.CUSTOM:
            return self.custom(variable, cls, entry, depth)
        if kind == Kind.LIST and self.predicate is not None:
            parts = self.list_as_it_changes(variable, depth)
        else:
            parts = [self.skeleton(item, depth + 1) for item in items(tx, variable)]
        if kind == Kind.LIST:
            return parts
        if kind == Kind.TUPLE:
            return tuple(parts)
        if kind == Kind.NAMEDTUPLE:
            return tuple.__new__(cls, parts)
        if kind == Kind.DEQUE:
            return collections.deque(parts, maxlen=deque_maxlen(tx, variable, self.what))
        if kind == Kind.STRUCTSEQUENCE:
            return cls(parts)
        return unsupported(self.what, f"optree's node kind {kind} is new to this package")

    def list_as_it_changes(self, variable: Variable, depth: int) -> list[Any]:
        """A list's children as optree's C code reads them: its length once, then each
        item by index, after ``is_leaf`` ran on those before; a predicate that shrinks
        the list meets optree's IndexError."""
        parts = []
        for index in range(len(reads.sequence_items(variable))):
            now = reads.sequence_items(variable)
            if index >= len(now):
                internals.raise_user_error(self.tx, IndexError, "list index out of range")
            parts.append(self.skeleton(now[index], depth + 1))
        return parts

    def order(self, kind: Any, keys: dict[Any, Any]) -> list[Any]:
        import optree

        if kind == optree.PyTreeKind.ORDEREDDICT or optree._C.is_dict_insertion_ordered(
            self.namespace, inherit_global_namespace=True
        ):
            return list(keys)
        return optree.utils.total_order_sorted(list(keys))

    def custom(self, variable: Variable, cls: type, entry: Any, depth: int) -> Any:
        """A marker for a custom node (see :mod:`.records`): its flatten function traced,
        its unflatten function never called."""
        tx = self.tx
        flatten = entry.flatten_func
        if isinstance(flatten, operator.methodcaller):  # register_pytree_node_class
            _, (method, *rest) = flatten.__reduce__()[:2]
            if rest:
                return unsupported(self.what, "a methodcaller with arguments")
            bound = internals.get_attribute(tx, variable, method)
            output = internals.call(bound, "call_function", tx, [], {})
        else:
            output = call(tx, flatten, variable)
        parts = items(tx, output)
        if len(parts) not in (2, 3):
            return unsupported(self.what, "a flatten function that returns neither 2 nor 3 items")
        children = [self.skeleton(child, depth + 1) for child in items(tx, parts[0])]
        metadata = real(parts[1], self.what)
        entries = None
        if len(parts) == 3 and not is_none(parts[2]):
            entries = tuple(real(entry, self.what) for entry in items(tx, parts[2]))
            if len(entries) != len(children):  # optree's own error, raised eagerly
                return unsupported(self.what, "a flatten function's entries and children differ")
        return self.markers.add(children, Custom(cls, metadata, entries))

    def flatten(self, tree: Any, with_path: bool) -> tuple[Any, list[Any], Any, Any]:
        """(skeleton, leaf variables in optree's order, real spec, paths or None)."""
        import optree

        skeleton = self.skeleton(tree)
        if self.dict_met or self.namespace:  # a namespace's own mode shows in its specs
            guard_dict_order(self.tx, self.namespace)
        options = {"none_is_leaf": self.none_is_leaf, "namespace": self.namespace}
        try:
            slots, plain = optree.tree_flatten(skeleton, **options)
            spec = custom_spec(plain, skeleton, self.markers, self.namespace)
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return unsupported(self.what, f"optree raises {error!r}")
        paths = spec.paths() if with_path else None
        return skeleton, [self.leaves[slot.index] for slot in slots], spec, paths


def from_skeleton(
    tx: Translator,
    value: Any,
    leaves: list[Any],
    by_id: dict[int, Any],
    spec: Any,
    markers: Markers | None = None,
) -> Any:
    """Dynamo's variable for a skeleton value: a leaf, a container read, or one rebuilt (a
    custom node by its unflatten function, traced)."""
    import optree

    if type(value) is Slot:
        return leaves[value.index]
    if is_variable(value):  # a callback's result, inside a node optree's C code built
        return value
    if value is None:
        return making.constant(None)
    if id(value) in by_id:
        return by_id[id(value)]
    custom = None if markers is None else markers.get(value)
    if custom is not None:
        parts = [from_skeleton(tx, child, leaves, by_id, spec, markers) for child in value]
        entry = optree.register_pytree_node.get(custom.cls, namespace=spec.namespace)
        guard_registration(tx, custom.cls, spec.namespace)
        if entry is None:  # cannot be: the spec was made with the class registered
            return unsupported("optree", f"{custom.cls.__qualname__} is not registered")
        metadata = wrap(tx, custom.metadata)
        return call(tx, entry.unflatten_func, metadata, making.new_tuple(parts))
    children, metadata, _, unflatten_func = optree.tree_flatten_one_level(
        value, none_is_leaf=spec.none_is_leaf, namespace=spec.namespace
    )
    parts = [from_skeleton(tx, child, leaves, by_id, spec, markers) for child in children]
    cls = type(value)
    if cls is list:
        return making.new_list(parts)
    if cls is tuple:
        return making.new_tuple(parts)
    if cls is dict:
        by_key = dict(zip(metadata, parts))
        return making.new_dict({wrap(tx, key): by_key[key] for key in value})
    if cls in (collections.OrderedDict, collections.defaultdict):  # in the skeleton's order
        by_key = dict(zip(metadata[-1] if cls is collections.defaultdict else metadata, parts))
        ordered = making.new_list([by_key[key] for key in value])
        keys = wrap(tx, list(value))
        if cls is collections.OrderedDict:
            return call(tx, _make_ordereddict, keys, ordered)
        if not capabilities.has(Capability.DEFAULTDICT_LEAVES_GRAPH):
            return unsupported("optree: a defaultdict", DEFAULTDICT_LEFT_AS_DICT)
        return call(tx, _make_defaultdict, wrap(tx, value.default_factory), keys, ordered)
    return call(tx, unflatten_func, wrap(tx, metadata), making.new_list(parts))


def _make_ordereddict(keys: list[Any], values: list[Any]) -> Any:
    """An OrderedDict of the given keys and values, as Dynamo traces it."""
    return collections.OrderedDict(zip(keys, values))


def _make_defaultdict(factory: Any, keys: list[Any], values: list[Any]) -> Any:
    """A defaultdict of the given keys and values, as Dynamo traces it."""
    made = collections.defaultdict(factory)
    for key, value in zip(keys, values):
        made[key] = value
    return made


def unflatten(tx: Translator, spec: Any, leaves_variable: Any, what: str) -> Any:
    """``spec.unflatten(leaves)`` with leaves that are Dynamo's variables."""
    leaves = items(tx, leaves_variable)
    markers = Markers()
    try:
        skeleton = traverse(spec, [Slot(index) for index in range(len(leaves))], markers)
    except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
        return unsupported(what, f"optree raises {error!r}")
    return from_skeleton(tx, skeleton, leaves, {}, spec, markers)
