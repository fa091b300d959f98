"""optree's C functions at Dynamo's variable level: the handlers of the C layer.

Each handler stands in for one C function of optree (``optree._C.flatten``, the class
checks, the registry's ``get``, ...) while Dynamo traces optree's own Python code: it
reads its arguments through :mod:`.optree_reader`, runs optree's C code on a skeleton or
on values known while tracing, and returns Dynamo's variable for the result, or breaks
the graph (the call then runs eagerly, in optree's C code).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from ..common.guards import guard_dict_order, guard_registration, guard_registry
from ..common.reading import is_variable, tree_options, unsupported
from ..seam import internals, making, reads
from ..seam.types import Handler, Translator, Variable
from .reader import Reader, default_factory, deque_maxlen, items, mapping, real
from .spec import wrap

__all__ = ["HANDLERS", "c_all_leaves", "c_is_leaf", "registry_get"]


def _c_options(
    args: list[Variable], kwargs: dict[str, Variable], what: str
) -> tuple[Any, Any, bool, str]:
    """(tree, predicate or None, none_is_leaf, namespace) of a call to optree._C."""
    names = ("tree", "leaf_predicate", "none_is_leaf", "namespace")
    if len(args) > 4 or set(kwargs) - set(names[len(args) :]):
        return unsupported(what, "arguments this package does not read")
    bound = dict(zip(names, args)) | kwargs
    if "tree" not in bound:
        return unsupported(what, "no tree")
    return (bound["tree"], *tree_options(bound, what, strict=False))


def _c_flatten(
    tx: Translator, args: list[Variable], kwargs: dict[str, Variable], with_path: bool
) -> Any:
    what = "optree._C.flatten_with_path" if with_path else "optree._C.flatten"
    tree, predicate, none_is_leaf, namespace = _c_options(args, kwargs, what)
    reader = Reader(tx, predicate, none_is_leaf, namespace, what)
    _, leaves, spec, paths = reader.flatten(tree, with_path)
    flat = [making.new_list(leaves), wrap(tx, spec)]
    if with_path:
        flat.insert(0, wrap(tx, paths))
    return making.new_tuple(flat)


def c_is_leaf(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``optree._C.is_leaf``."""
    tree, predicate, none_is_leaf, namespace = _c_options(args, kwargs, "optree._C.is_leaf")
    reader = Reader(tx, predicate, none_is_leaf, namespace, "optree._C.is_leaf")
    return making.constant(reader.classify(internals.call(tree, "realize"))[0] is None)


def c_all_leaves(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``optree._C.all_leaves`` (optree before 0.14): whether every item is a leaf."""
    what = "optree._C.all_leaves"
    if not args:
        return unsupported(what, "no iterable")
    answers = [
        reads.constant_value(c_is_leaf(tx, [item, *args[1:]], kwargs))
        for item in items(tx, args[0])
    ]
    return making.constant(all(answers))


def _c_constant_fold(name: str) -> Callable[..., Any]:
    """A handler that runs optree._C.<name> while tracing, on arguments known then."""

    def handler(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
        import optree._C

        what = f"optree._C.{name}"
        namespace = ""
        if name == "make_from_collection":
            given = args[2] if len(args) > 2 else kwargs.get("namespace")
            namespace = "" if given is None else real(given, what)
            if type(namespace) is not str:
                return unsupported(what, "a namespace string is wanted")
            if args:
                args = [_collection_of_specs(tx, args[0], what, namespace), *args[1:]]
        real_args = [real(a, what) if is_variable(a) else a for a in args]
        real_kwargs = {key: real(value, what) for key, value in kwargs.items()}
        if name == "is_dict_insertion_ordered":
            namespace = real_args[0] if real_args else real_kwargs.get("namespace", "")
            guard_dict_order(tx, namespace if type(namespace) is str else "")
        elif name == "make_from_collection":  # its dict order, and its spec's namespace
            guard_dict_order(tx, namespace)
        try:
            result = getattr(optree._C, name)(*real_args, **real_kwargs)
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return unsupported(what, f"optree raises {error!r}")
        return wrap(tx, result)

    return handler


def _collection_of_specs(tx: Translator, variable: Variable, what: str, namespace: str) -> Any:
    """A collection (one level of containers) whose children are tree specs, made real;
    a leaf (its class no node in ``namespace``), known while tracing, as it is: optree
    then makes a leaf's spec (and warns that it was given a leaf)."""
    import optree

    variable = internals.realized(variable)
    try:
        cls = internals.call(variable, "python_type")
    except NotImplementedError:
        return unsupported(what, "a collection Dynamo cannot read")
    if issubclass(cls, dict):
        real_mapping = {
            key: real(value, what) for key, value in mapping(tx, variable, what).items()
        }
        if cls is collections.defaultdict:
            return collections.defaultdict(default_factory(tx, variable, what), real_mapping)
        return cls(real_mapping) if cls is not dict else real_mapping
    if cls is type(None):
        return None
    if optree.register_pytree_node.get(cls, namespace=namespace) is None:
        guard_registration(tx, cls, namespace)
        return real(variable, what)
    real_items = [real(item, what) for item in items(tx, variable)]
    if cls in (list, tuple):
        return cls(real_items)
    if cls is collections.deque:
        return collections.deque(real_items, maxlen=deque_maxlen(tx, variable, what))
    if optree.is_namedtuple_class(cls):
        return tuple.__new__(cls, real_items)
    if optree.is_structseq_class(cls):
        return cls(real_items)
    return unsupported(what, f"a collection of type {cls.__qualname__}")


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

    def handler(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
        import optree

        what = f"optree.{name}"
        if len(args) != 1 or kwargs:
            return unsupported(what, "arguments this package does not read")
        variable = internals.call(args[0], "realize")
        try:
            cls = internals.call(variable, "python_type")
        except NotImplementedError:
            return unsupported(what, "a value whose class is unknown while tracing")
        check = name
        subject: Any = cls
        if issubclass(cls, type):  # a class itself
            subject = real(variable, what)
        elif _CLASS_CHECKS[name] is None:
            return making.constant(False)
        else:
            check = _CLASS_CHECKS[name]
        try:
            result = getattr(optree, check)(subject)
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return unsupported(what, f"optree raises {error!r}")
        return wrap(tx, result)

    return handler


def registry_get(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``optree.register_pytree_node.get(cls, namespace=...)``: the class and namespace are
    known while tracing, so the entry is (optree's code compares ``sys.version_info``
    with a tuple, which Dynamo 2.12 and earlier cannot)."""
    import optree

    what = "optree.register_pytree_node.get"
    if len(args) > 1 or set(kwargs) - {"namespace"}:
        return unsupported(what, "arguments this package does not read")
    cls = real(args[0], what) if args else None
    namespace = real(kwargs["namespace"], what) if "namespace" in kwargs else ""
    if not isinstance(namespace, str):
        return unsupported(what, "a namespace string is wanted")
    if cls is None:  # the whole registry of the namespace (optree 0.14 on): a new dict
        try:
            found = optree.register_pytree_node.get(*[None] * len(args), namespace=namespace)
        except TypeError as error:  # optree 0.13 wants a class
            return unsupported(what, f"optree raises {error!r}")
        guard_registry(tx, namespace)
        guard_dict_order(tx, namespace)
        if type(found) is not dict:
            return wrap(tx, found)
        return making.new_dict([(wrap(tx, key), wrap(tx, entry)) for key, entry in found.items()])
    if not isinstance(cls, type):
        return unsupported(what, "a class and a namespace string are wanted")
    guard_registration(tx, cls, namespace)
    if cls in (dict, collections.defaultdict):
        guard_dict_order(tx, namespace)
    return wrap(tx, optree.register_pytree_node.get(cls, namespace=namespace))


#: Handlers by C function: each returns Dynamo's variable for the result, or breaks.
HANDLERS: dict[str, Handler] = {
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
