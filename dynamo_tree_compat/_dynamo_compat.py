"""Every use of TorchDynamo's private state, in one place, behind version checks.

Dynamo's internals change between torch releases. Each function here checks that what
it touches looks as expected and, where it does not, reports failure instead of raising;
the callers then fall back to leaving torch as it is.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import logging
import operator
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "FAST_PATHS",
    "FAST_PATH_STATS",
    "SUBSTITUTE_UNAVAILABLE",
    "GraphBreak",
    "GraphBreakRecorder",
    "compile_lock",
    "graph_break_function",
    "guard_on_flag",
    "lookup_backend",
    "register_log_name",
    "reset_compiled_code",
    "substitute",
    "substitution_support",
    "torch_polyfills",
    "unsubstitute",
]

SUBSTITUTE_UNAVAILABLE = "torch is older than 2.5: it has no torch.compiler.substitute_in_graph"
LOG_NAME = "dynamo_tree_compat"
LOG = logging.getLogger(LOG_NAME)


def substitution_support() -> str | None:
    """None if this torch can register twins, else the reason why not."""
    import torch.compiler

    if not hasattr(torch.compiler, "substitute_in_graph"):
        return SUBSTITUTE_UNAVAILABLE
    return None


def substitute(original: Callable[..., Any], twin: Callable[..., Any]) -> Callable[..., Any]:
    """Registers ``twin`` to be traced wherever Dynamo meets ``original``.

    Returns the handle Dynamo made, which :func:`unsubstitute` needs. Raises
    ValueError if something already handles ``original``.
    """
    from torch.compiler import substitute_in_graph

    # Our gates take (*args, **kwargs); tests compare each twin's signature instead.
    return substitute_in_graph(original, skip_signature_check=True)(twin)


def _registration_tables() -> tuple[dict[Any, Any], Any, dict[Any, Any], dict[Any, Any]] | None:
    """The four tables substitute_in_graph writes to, or None if they have moved."""
    try:
        from torch._dynamo.trace_rules import _polyfilled_function_ids, get_torch_obj_rule_map
        from torch._dynamo.variables import PolyfilledFunctionVariable
        from torch._dynamo.variables.builder import VariableBuilder

        tables = (
            VariableBuilder._id_dispatch(),
            _polyfilled_function_ids,
            get_torch_obj_rule_map(),
            PolyfilledFunctionVariable._get_polyfill_handlers(),
        )
    except (ImportError, AttributeError, TypeError):
        return None
    id_dispatch, polyfilled_ids, rule_map, handlers = tables
    if not (
        isinstance(id_dispatch, dict)
        and isinstance(rule_map, dict)
        and isinstance(handlers, dict)
        and callable(getattr(polyfilled_ids, "add", None))
        and callable(getattr(polyfilled_ids, "remove", None))
    ):
        return None
    return tables


def guard_on_flag(
    original: Callable[..., Any],
    flag_path: tuple[str, ...],
    fast_path: str | None = None,
    torch_way: Callable[..., Any] | None = None,
    our_way: Callable[..., Any] | None = None,
) -> bool:
    """Makes every graph that meets ``original`` guard on a module-level flag.

    ``flag_path`` names the flag from an importable top-level module, such as
    ``("dynamo_tree_compat", "activation", "twins_enabled")``. The twin reads the flag
    too, but where Dynamo retraces a frame after a graph break inside the twin it does
    not enter the twin again, so that read alone leaves no guard behind. A guard added
    when Dynamo first meets the original, at the call site, always holds.

    ``fast_path`` names a handler in :data:`FAST_PATHS` that Dynamo tries, while the
    flag is on, before it traces the twin. Where the fast path is off or falls back,
    ``torch_way`` (a copy of the original), if given, is called as Dynamo calls any
    Python function, torch's own fast paths included, instead of the registered twin.
    ``our_way``, if given, is called the same way while the flag is on, before
    ``torch_way``. Returns False, changing nothing, if torch's tables are not as expected.
    """
    tables = _registration_tables()
    if tables is None:
        return False
    id_dispatch = tables[0]
    dispatch = id_dispatch.get(id(original))
    try:
        from torch._dynamo.guards import GuardBuilder
        from torch._dynamo.source import AttrSource, ImportSource  # noqa: F401 - present? _guard_flag uses them
    except ImportError:
        return False
    if dispatch is None or not hasattr(GuardBuilder, "CONSTANT_MATCH"):
        return False
    wanted = fast_path is not None or our_way is not None
    fast_class = _fast_variable_class() if wanted else None
    if wanted and fast_class is None:
        return False
    if fast_class is not None:
        name = fast_path or f"{original.__module__}.{original.__name__}"
        _FAST_HANDLERS[id(original)] = (original, name, flag_path, torch_way, our_way)

    def dispatch_with_flag_guard(builder: Any, value: Any) -> Any:
        LOG.debug(
            "Dynamo met %s.%s: tracing its twin",
            getattr(value, "__module__", "?"),
            getattr(value, "__qualname__", value),
        )
        _guard_flag(flag_path)
        variable = dispatch(builder, value)
        if fast_class is not None and type(variable) is fast_class.__base__:
            variable.__class__ = fast_class
        return variable

    _PREVIOUS_DISPATCH.setdefault(id(original), (original, dispatch))
    id_dispatch[id(original)] = dispatch_with_flag_guard
    return True


# id(original) -> (original, the dispatch guard_on_flag replaced)
_PREVIOUS_DISPATCH: dict[int, tuple[Callable[..., Any], Any]] = {}


def unhook(original: Callable[..., Any]) -> bool:
    """Undoes :func:`guard_on_flag` where the registration itself is torch's."""
    tables = _registration_tables()
    entry = _PREVIOUS_DISPATCH.get(id(original))
    if tables is None or entry is None or entry[0] is not original:
        return False  # nothing changed: the registration stays whole, fast path included
    del _PREVIOUS_DISPATCH[id(original)]
    _FAST_HANDLERS.pop(id(original), None)
    tables[0][id(original)] = entry[1]
    return True


def unsubstitute(original: Callable[..., Any], handle: Callable[..., Any]) -> bool:
    """Undoes :func:`substitute`; False (and nothing changed) if torch's tables moved."""
    tables = _registration_tables()
    if tables is None:
        return False
    id_dispatch, polyfilled_ids, rule_map, handlers = tables
    if handlers.get(original) is not handle:
        return False
    _PREVIOUS_DISPATCH.pop(id(original), None)
    _FAST_HANDLERS.pop(id(original), None)
    for key in (original, handle):
        id_dispatch.pop(id(key), None)
        if id(key) in polyfilled_ids():
            polyfilled_ids.remove(id(key))
        rule_map.pop(key, None)
        handlers.pop(key, None)
    return True


_REENTRANT_LOCK = type(threading.RLock())


@contextlib.contextmanager
def compile_lock(wait: bool = True) -> Iterator[bool]:
    """Holds Dynamo's compile lock, if Dynamo is loaded: no frame is mid-compile inside.

    Dynamo compiles one frame at a time under this lock, and checks a frame's guards
    before it lets go. Changing the mode or the registrations under it means no compile
    ever sees half a change. With ``wait=False`` it goes on without the lock when another
    thread holds it. Yields whether the lock is held.

    >>> with compile_lock() as held:
    ...     isinstance(held, bool)
    True
    """
    module = sys.modules.get("torch._dynamo.convert_frame")
    lock = getattr(module, "compile_lock", None)
    if not isinstance(lock, _REENTRANT_LOCK):  # a plain Lock would deadlock when nested
        yield False
        return
    held = lock.acquire(blocking=wait)
    try:
        yield held
    finally:
        if held:
            lock.release()


def reset_compiled_code() -> None:
    """Drops compiled graphs so that none traced with a removed twin runs again."""
    import torch._dynamo

    torch._dynamo.reset()


def graph_break_function() -> Callable[[], None]:
    """Dynamo's ``graph_break``: traced, it ends the graph; run eagerly, it does nothing."""
    import torch._dynamo

    return torch._dynamo.graph_break


def torch_polyfills() -> dict[Any, Any]:
    """The functions torch itself traces through polyfills: original -> handler."""
    tables = _registration_tables()
    return dict(tables[3]) if tables is not None else {}


def register_log_name() -> bool:
    """Registers ``TORCH_LOGS=+dynamo_tree_compat``; torch parses TORCH_LOGS after autoload."""
    try:
        from torch._logging._internal import log_registry, register_log
    except ImportError:
        return False
    if LOG_NAME not in log_registry.log_alias_to_log_qnames:
        register_log(LOG_NAME, [LOG_NAME])
    return True


def lookup_backend(name: str) -> Callable[..., Any]:
    """The compiler behind a ``torch.compile(backend=name)`` string."""
    from torch._dynamo import lookup_backend as lookup

    return lookup(name)


# --- The fast path: common tree calls done at Dynamo's variable level ----------------
#
# Tracing a Python twin costs Dynamo an interpreted step per bytecode. For the common
# case (exact dicts, lists and tuples of tensors and constants) the handlers below read
# the structure straight from Dynamo's variables, as torch's own tree_map fast path
# does, and build the result the twin would. Anything else, anywhere in the structure,
# makes the whole call go the other way (the twin, or torch's own way for optree),
# before any user code is traced.

#: Tests turn this off to force the plain twin; it applies to graphs compiled after.
FAST_PATH_ON = True
#: Counts of "taken:<original>" and "fallback:<original>", for tests and the CLI.
FAST_PATH_STATS: collections.Counter[str] = collections.Counter()
#: Deeper structures go to the twin, which has its own limit and error.
FAST_PATH_MAX_DEPTH = 100
# id(original) -> (original, name in FAST_PATHS, path of the mode flag, torch's way or None,
# our way or None)
_FAST_HANDLERS: dict[int, tuple[Callable[..., Any], str, tuple[str, ...], Any, Any]] = {}
_KEY_TYPES = frozenset({str, int, float, bool, bytes})
_CONSTANT_LEAF_TYPES = frozenset({int, float, bool, complex, str, bytes, type(None)})
_LEAF, _LIST, _TUPLE, _DICT = range(4)


class _Fallback(Exception):
    """The structure holds something the fast path does not reproduce exactly."""


def _flag_is_on(flag_path: tuple[str, ...]) -> bool:
    value: Any = sys.modules.get(flag_path[0])
    for name in flag_path[1:]:
        value = getattr(value, name, False)
    return bool(value)


def _cache_success(function: Callable[[], Any]) -> Callable[[], Any]:
    """Caches a result that is not None: a failure (Dynamo half imported) may pass."""
    found: list[Any] = []

    @functools.wraps(function)
    def cached() -> Any:
        if not found:
            result = function()
            if result is None:
                return None
            found.append(result)
        return found[0]

    return cached


@_cache_success
def _kinds() -> types.SimpleNamespace | None:
    """Dynamo's variable classes the fast path reads and builds, or None if moved."""
    try:
        import torch
        from torch._dynamo import variables
        from torch._dynamo.variables.base import ValueMutationNew

        return types.SimpleNamespace(
            List=variables.ListVariable,
            Tuple=variables.TupleVariable,
            Dict=variables.ConstDictVariable,
            Tensor=variables.TensorVariable,
            Constant=variables.ConstantVariable,
            Symbol=variables.SymNodeVariable,
            Deleted=variables.DeletedVariable,
            Function=variables.UserFunctionVariable,
            new=ValueMutationNew,
            tensor_types=(torch.Tensor, torch.nn.Parameter),
            callables=(
                variables.BaseUserFunctionVariable,
                variables.TorchInGraphFunctionVariable,
                variables.BuiltinVariable,
                variables.FunctoolsPartialVariable,
                variables.PolyfilledFunctionVariable,
            ),
        )
    except (ImportError, AttributeError):
        return None


@_cache_success
def _fast_variable_class() -> type | None:
    """A PolyfilledFunctionVariable that tries the fast path first, or None if moved."""
    try:
        from torch._dynamo.variables import PolyfilledFunctionVariable
    except ImportError:
        return None
    kinds = _kinds()
    if kinds is None or not callable(getattr(PolyfilledFunctionVariable, "call_function", None)):
        return None

    class FastPathFunctionVariable(PolyfilledFunctionVariable):  # type: ignore[misc, valid-type]
        """A registered original whose common cases need no tracing of its twin."""

        def call_function(self, tx: Any, args: Any, kwargs: Any) -> Any:
            entry = _FAST_HANDLERS.get(id(self.fn))
            if not entry or entry[0] is not self.fn:
                return super().call_function(tx, args, kwargs)
            flag_on = _flag_is_on(entry[2])
            name = entry[1]
            if flag_on and name in FAST_PATHS and (FAST_PATH_ON or name in CORE_PATHS):
                try:
                    result = FAST_PATHS[name](kinds, tx, list(args), dict(kwargs))
                except _Cycle:  # run eagerly, the call raises optree's own error
                    _graph_break(
                        "cycle",
                        "optree call on a structure that contains itself",
                        name,
                        f"{name} raises RecursionError: {OPTREE_RECURSION}",
                        "Do not nest a container inside itself.",
                    )
                except _Fallback:
                    FAST_PATH_STATS["fallback:" + name] += 1
                else:
                    FAST_PATH_STATS["taken:" + name] += 1
                    return result
            if flag_on and entry[4] is not None:  # optree's own Python code, our C layer
                return kinds.Function(entry[4]).call_function(tx, args, kwargs)
            if entry[3] is not None:  # torch's own way, as without this package
                return kinds.Function(entry[3]).call_function(tx, args, kwargs)
            return super().call_function(tx, args, kwargs)

    return FastPathFunctionVariable


def fast_path_support() -> bool:
    """Whether this torch's Dynamo has what the fast path reads and builds."""
    return _fast_variable_class() is not None and _registration_tables() is not None


def _node(k: Any, variable: Any, sort: bool = True) -> tuple[int, Any, list[Any] | None, list[Any]]:
    """(kind, variable, dict keys as (key, tracker), children).

    Dict keys come sorted, as dm-tree takes them, or with ``sort=False`` in insertion
    order (optree's C code then orders them itself).
    """
    variable = variable.realize()
    cls = type(variable)
    if cls is k.List or cls is k.Tuple:
        return (_LIST if cls is k.List else _TUPLE), variable, None, variable.items
    if cls is k.Dict and variable.user_cls is dict:
        entries = []
        for tracker, value in variable.items.items():
            key_variable = tracker.vt
            if isinstance(value, k.Deleted) or not key_variable.is_python_constant():
                raise _Fallback
            key = key_variable.as_python_constant()
            if type(key) not in _KEY_TYPES:
                raise _Fallback
            entries.append((key, tracker, value))
        try:
            if sort:
                entries.sort(key=lambda entry: entry[0])
        except TypeError:  # unsortable keys: the twin raises dm-tree's error
            raise _Fallback from None
        return _DICT, variable, [entry[:2] for entry in entries], [entry[2] for entry in entries]
    if (
        (cls is k.Tensor and variable.python_type() in k.tensor_types)
        or (cls is k.Constant and type(variable.value) in _CONSTANT_LEAF_TYPES)
        or cls is k.Symbol
    ):
        return _LEAF, variable, None, []
    raise _Fallback


def _walk(k: Any, roots: list[Any], paths: list[Any] | None) -> tuple[Any, list[list[Any]]]:
    """Checks that ``roots`` have one structure; returns (skeleton, leaves by position).

    If ``paths`` is a list, it receives each leaf's path, as a tuple of the variables
    of its keys and indices.
    """
    leaves: list[list[Any]] = []
    index_variables: dict[int, Any] = {}  # path entries are shared variables, made once

    def index_variable(index: int) -> Any:
        if index not in index_variables:
            index_variables[index] = k.Constant.create(index)
        return index_variables[index]

    def visit(variables_: list[Any], depth: int, path: tuple[Any, ...]) -> Any:
        kind, first, keys, children = _node(k, variables_[0])
        others = [_node(k, other) for other in variables_[1:]]
        if kind == _LEAF:
            if any(other[0] != _LEAF for other in others):
                raise _Fallback
            leaves.append([first, *(other[1] for other in others)])
            if paths is not None:
                paths.append(path)
            return len(leaves) - 1
        if depth >= FAST_PATH_MAX_DEPTH:
            raise _Fallback
        for other in others:
            if other[0] != kind or len(other[3]) != len(children):
                raise _Fallback
            if keys is not None and [key for key, _ in keys] != [key for key, _ in other[2]]:
                raise _Fallback
        parts = []
        for index, child in enumerate(children):
            if paths is None:
                step = path
            else:
                step = path + (keys[index][1].vt if keys else index_variable(index),)
            parts.append(visit([child, *(other[3][index] for other in others)], depth + 1, step))
        return kind, first, keys, parts

    return visit(roots, 0, ()), leaves


def _rebuild(k: Any, skeleton: Any, results: list[Any]) -> Any:
    """The skeleton's containers, rebuilt around ``results`` (as dm-tree's unflatten_as)."""
    if type(skeleton) is int:
        return results[skeleton]
    kind, first, keys, parts = skeleton
    items = [_rebuild(k, part, results) for part in parts]
    if kind == _LIST:
        return k.List(items, mutation_type=k.new())
    if kind == _TUPLE:
        return k.Tuple(items)
    by_tracker = {tracker: item for (_, tracker), item in zip(keys, items)}
    return k.Dict(
        {tracker: by_tracker[tracker] for tracker in first.items},
        user_cls=dict,
        mutation_type=k.new(),
    )


def _path(k: Any, path: tuple[Any, ...]) -> Any:
    return k.Tuple(list(path))


def _only(kwargs: dict[str, Any], allowed: set[str]) -> None:
    if set(kwargs) - allowed or not all(v.is_python_constant() for v in kwargs.values()):
        raise _Fallback


def _is_nested(k: Any, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if kwargs or len(args) != 1:
        raise _Fallback
    return k.Constant.create(_node(k, args[0])[0] != _LEAF)


def _flatten(k: Any, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if kwargs or len(args) != 1:
        raise _Fallback
    _, leaves = _walk(k, args, None)
    return k.List([leaf[0] for leaf in leaves], mutation_type=k.new())


def _flatten_with_path(k: Any, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if kwargs or len(args) != 1:
        raise _Fallback
    paths: list[Any] = []
    _, leaves = _walk(k, args, paths)
    pairs = [k.Tuple([_path(k, path), leaf[0]]) for path, leaf in zip(paths, leaves)]
    return k.List(pairs, mutation_type=k.new())


def _assert_same_structure(k: Any, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    _only(kwargs, {"check_types"})
    if (
        len(args) + len(kwargs) > 3
        or len(args) < 2
        or not all(a.is_python_constant() for a in args[2:])
    ):
        raise _Fallback
    _walk(k, args[:2], None)  # same exact kinds, lengths and keys: check_types is moot
    return k.Constant.create(None)


def _map(k: Any, tx: Any, args: list[Any], kwargs: dict[str, Any], with_path: bool) -> Any:
    _only(kwargs, {"check_types"})
    if len(args) < 2 or not isinstance(args[0], k.callables):
        raise _Fallback
    func = args[0]
    paths: list[Any] | None = [] if with_path else None
    skeleton, leaves = _walk(k, args[1:], paths)
    # Everything is checked before the first call of func: from here on, no fallback.
    if paths is None:
        results = [func.call_function(tx, leaf, {}) for leaf in leaves]
    else:
        results = [
            func.call_function(tx, [_path(k, path), *leaf], {}) for path, leaf in zip(paths, leaves)
        ]
    return _rebuild(k, skeleton, results)


# optree: the structure is read from Dynamo's variables into a skeleton of plain Python
# containers whose leaves are numbers; optree's own C code, run on the skeleton while
# tracing, then says the order of the leaves, their paths and the result's containers.
# Dict order depends on optree's dict_insertion_ordered mode, so the graph guards on it.

#: Probes of optree's dict order mode, by namespace; Dynamo's guards call them.
_ORDER_PROBES: dict[str, Callable[[], bool]] = {}
_SIGNATURES: dict[Any, inspect.Signature] = {}


def _guard_dict_order(namespace: str) -> None:
    import optree._C
    from torch._dynamo.guards import GuardBuilder, install_guard
    from torch._dynamo.source import (
        AttrSource,
        CallFunctionNoArgsSource,
        DictGetItemSource,
        ImportSource,
    )

    if namespace not in _ORDER_PROBES:
        _ORDER_PROBES[namespace] = functools.partial(
            optree._C.is_dict_insertion_ordered, namespace, inherit_global_namespace=True
        )
    probes = AttrSource(AttrSource(ImportSource(LOG_NAME), "_dynamo_compat"), "_ORDER_PROBES")
    source = CallFunctionNoArgsSource(DictGetItemSource(probes, namespace))
    install_guard(source.make_guard(GuardBuilder.CONSTANT_MATCH))


def _constant(variable: Any, default: Any, kind: type) -> Any:
    if variable is None:
        return default
    if not variable.is_python_constant() or type(variable.as_python_constant()) is not kind:
        raise _Fallback
    return variable.as_python_constant()


def _optree_options(original: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The bound arguments, if is_leaf is None and the options are constants."""
    if original not in _SIGNATURES:
        _SIGNATURES[original] = inspect.signature(original)
    try:
        bound = _SIGNATURES[original].bind(*args, **kwargs).arguments
    except TypeError:  # optree raises its own error
        raise _Fallback from None
    is_leaf = bound.get("is_leaf")
    if is_leaf is not None and not (
        is_leaf.is_python_constant() and is_leaf.as_python_constant() is None
    ):
        raise _Fallback
    none_is_leaf = _constant(bound.get("none_is_leaf"), False, bool)
    namespace = _constant(bound.get("namespace"), "", str)
    return bound, {"none_is_leaf": none_is_leaf, "namespace": namespace}


#: optree's own message when a structure contains itself.
OPTREE_RECURSION = "Maximum recursion depth exceeded during flattening the tree."


class _Cycle(Exception):
    """The structure contains itself: optree raises RecursionError (torch's way loops)."""


def _skeleton(
    k: Any, variable: Any, none_is_leaf: bool, leaves: list[Any], above: list[Any]
) -> Any:
    """Plain containers like the structure's, with leaf numbers for leaves.

    ``above`` holds the containers on the way down, to tell a structure that contains
    itself (torch's own handling would loop on it) from one that is merely deep.
    """
    kind, first, keys, children = _node(k, variable, sort=False)
    if kind == _LEAF:
        if not none_is_leaf and type(first) is k.Constant and first.value is None:
            return None
        leaves.append(first)
        return len(leaves) - 1
    if any(first is container for container in above):
        raise _Cycle
    if len(above) >= FAST_PATH_MAX_DEPTH:
        raise _Fallback
    above.append(first)
    parts = [_skeleton(k, child, none_is_leaf, leaves, above) for child in children]
    above.pop()
    if kind == _LIST:
        return parts
    if kind == _TUPLE:
        return tuple(parts)
    return {key: part for (key, _), part in zip(keys or [], parts)}


def _variable(k: Any, skeleton: Any, values: list[Any]) -> Any:
    """Dynamo's variable for a skeleton, leaf numbers replaced by ``values``."""
    cls = type(skeleton)
    if cls is int:
        return values[skeleton]
    if skeleton is None:
        return k.Constant.create(None)
    if cls is list:
        return k.List([_variable(k, item, values) for item in skeleton], mutation_type=k.new())
    if cls is tuple:
        return k.Tuple([_variable(k, item, values) for item in skeleton])
    items = {k.Constant.create(key): _variable(k, item, values) for key, item in skeleton.items()}
    return k.Dict(items, user_cls=dict, mutation_type=k.new())


def _flat(k: Any, variable: Any, options: dict[str, Any]) -> tuple[Any, list[Any], Any]:
    """(skeleton, leaf variables in optree's order, the real PyTreeSpec)."""
    import optree

    leaves: list[Any] = []
    skeleton = _skeleton(k, variable, options["none_is_leaf"], leaves, [])
    _guard_dict_order(options["namespace"])
    order, spec = optree.tree_flatten(skeleton, **options)
    return skeleton, [leaves[index] for index in order], spec


def _tree_leaves(k: Any, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    import optree

    bound, options = _optree_options(optree.tree_leaves, args, kwargs)
    _, leaves, _ = _flat(k, bound["tree"], options)
    return k.List(leaves, mutation_type=k.new())


def _tree_map(k: Any, tx: Any, args: list[Any], kwargs: dict[str, Any], with_path: bool) -> Any:
    import optree

    original = optree.tree_map_with_path if with_path else optree.tree_map
    bound, options = _optree_options(original, args, kwargs)
    func = bound["func"]
    if not isinstance(func, k.callables):
        raise _Fallback
    skeleton, leaves, spec = _flat(k, bound["tree"], options)
    columns = [leaves]
    for rest in bound.get("rests", ()):
        _, rest_leaves, rest_spec = _flat(k, rest, options)
        if rest_spec != spec:  # a prefix or a mismatch: optree's own rules, untouched
            raise _Fallback
        columns.append(rest_leaves)
    rows = [list(row) for row in zip(*columns)]
    if with_path:
        paths = optree.tree_paths(skeleton, **options)
        rows = [[_path(k, tuple(map(k.Constant.create, p))), *row] for p, row in zip(paths, rows)]
    # Everything is checked before the first call of func: from here on, no fallback.
    results = [func.call_function(tx, row, {}) for row in rows]
    return _variable(k, spec.unflatten(range(len(results))), results)


# --- optree's C layer, done at Dynamo's variable level -------------------------------
#
# optree's public functions are Python code over a few C functions (flatten, is_leaf,
# make_*) and the C class PyTreeSpec. Dynamo inlines the Python code; the handlers below
# stand in for the C part. A structure's tree spec never depends on the values of its
# leaves, only on its containers, so each handler reads the containers from Dynamo's
# variables into a skeleton (real containers holding numbered slots) and runs optree's
# own C code on the skeleton while tracing. Specs are then real ``optree.PyTreeSpec``
# objects: constants of the graph, equal to eager's, and returned to the caller as such.


class _Slot:
    """A numbered placeholder for one leaf in a skeleton: optree takes it as a leaf."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<leaf {self.index}>"


#: Deeper structures end in a graph break; the call then runs eagerly, in optree's C code.
OPTREE_MAX_DEPTH = 200
_BUILTIN_LEAF_TYPES = frozenset({int, float, bool, complex, str, bytes, type(None)})
#: optree's own node types, which cannot be registered again.
_BUILTIN_NODE_TYPES = frozenset(
    {tuple, list, dict, collections.OrderedDict, collections.defaultdict, collections.deque}
)


def _graph_break(count: str, gb_type: str, what: str, explanation: str, hint: str) -> Any:
    """Ends the graph at the user's call, counted as ``count:what``; it then runs eagerly."""
    from torch._dynamo.exc import unimplemented

    FAST_PATH_STATS[f"{count}:{what}"] += 1
    unimplemented(gb_type=gb_type, context=what, explanation=explanation, hints=[hint])


def _unsupported(what: str, why: str) -> Any:
    """Ends the graph here: the call then runs eagerly, in optree's own C code."""
    return _graph_break(
        "break",
        "optree call dynamo-tree-compat does not trace",
        what,
        f"{what}: {why}. It runs eagerly instead, with optree's own result.",
        "See the coverage table in dynamo-tree-compat's README.",
    )


def _too_deep(tx: Any, what: str) -> Any:
    """Past OPTREE_MAX_DEPTH: with fullgraph, the graph break naming it. Without, the
    whole frame runs eagerly (from then on): resuming after a graph break would have
    Dynamo's own code recurse over the structure, deeper than Python allows.
    """
    from torch._dynamo import exc

    why = f"the structure is deeper than {OPTREE_MAX_DEPTH}"
    fullgraph = getattr(tx, "one_graph", True) or getattr(tx, "error_on_graph_break", True)
    if fullgraph or not isinstance(getattr(exc, "SkipFrame", None), type):
        return _unsupported(what, why)
    FAST_PATH_STATS["skip frame:" + what] += 1
    raise exc.SkipFrame(f"{what}: {why}; dynamo-tree-compat runs this frame eagerly")


def _real(variable: Any, what: str) -> Any:
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
    return _unsupported(what, f"{type(variable).__name__} is not known while tracing")


def _is_variable(value: Any) -> bool:
    from torch._dynamo.variables.base import VariableTracker

    return isinstance(value, VariableTracker)


def _wrap(tx: Any, value: Any) -> Any:
    """Dynamo's variable for a Python value that exists while tracing (a constant)."""
    import optree
    from torch._dynamo.source import GlobalSource
    from torch._dynamo.variables.builder import VariableBuilder

    k = _kinds()
    cls = type(value)
    if cls is optree.PyTreeSpec:
        return _spec_variable_class()(value)
    if cls in _BUILTIN_LEAF_TYPES:
        return k.Constant.create(value)
    if cls is list:
        return k.List([_wrap(tx, item) for item in value], mutation_type=k.new())
    if cls is tuple:
        return k.Tuple([_wrap(tx, item) for item in value])
    # Through a global, so that what the value holds (a function's closure) has a source.
    name = tx.output.install_global_by_id("__dtc_constant", value)
    return VariableBuilder(tx, GlobalSource(name))(value)


def _call(tx: Any, function: Any, *args: Any) -> Any:
    """Traces ``function(*args)``; a Python function or a variable, with variable args."""
    callee = function if _is_variable(function) else _wrap(tx, function)
    return callee.call_function(tx, list(args), {})


def _items(tx: Any, variable: Any) -> list[Any]:
    """The items of any iterable variable, as Python's list() would give them."""
    k = _kinds()
    if type(variable) in (k.List, k.Tuple):  # read directly: no call to trace
        return list(variable.items)
    listed = _call(tx, list, variable)
    if type(listed) is not _kinds().List:
        return _unsupported("optree", "an iterable Dynamo cannot list")
    return list(listed.items)


def _mapping(tx: Any, variable: Any, what: str) -> dict[Any, Any]:
    """A dict variable's items: real keys, in insertion order, to value variables."""
    k = _kinds()
    if type(variable) is k.Dict:  # read directly: no call to trace
        items = [(tracker.vt, value) for tracker, value in variable.items.items()]
        if not any(isinstance(value, k.Deleted) for _, value in items):
            return {_real(key, what): value for key, value in items}
    pairs = [_items(tx, pair) for pair in _items(tx, variable.call_method(tx, "items", [], {}))]
    return {_real(key, what): value for key, value in pairs}


def _registry_probe(cls: type, namespace: str) -> Callable[[], tuple[int, int] | None]:
    import optree

    def probe() -> tuple[int, int] | None:
        # The functions, not the entry: optree before 0.14 makes a new entry per lookup.
        entry = optree.register_pytree_node.get(cls, namespace=namespace)
        return None if entry is None else (id(entry.flatten_func), id(entry.unflatten_func))

    return probe


#: Probes of optree's registry, by class and namespace; Dynamo's guards call them.
_REGISTRY_PROBES: dict[str, Callable[[], tuple[int, int] | None]] = {}


def _guard_registration(cls: type, namespace: str) -> None:
    """Recompiles when ``cls`` is registered or unregistered with optree later."""
    from torch._dynamo.guards import GuardBuilder, install_guard
    from torch._dynamo.source import (
        AttrSource,
        CallFunctionNoArgsSource,
        DictGetItemSource,
        ImportSource,
    )

    key = f"{cls.__module__}.{cls.__qualname__}@{id(cls)}|{namespace}"
    if key not in _REGISTRY_PROBES:
        _REGISTRY_PROBES[key] = _registry_probe(cls, namespace)
    probes = AttrSource(AttrSource(ImportSource(LOG_NAME), "_dynamo_compat"), "_REGISTRY_PROBES")
    source = CallFunctionNoArgsSource(DictGetItemSource(probes, key))
    install_guard(source.make_guard(GuardBuilder.CONSTANT_MATCH))


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


class _Reader:
    """Reads a structure's containers from Dynamo's variables, as optree would see them.

    ``skeleton()`` gives real containers with a :class:`_Slot` for each leaf, and
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

    def leaf(self, variable: Any) -> _Slot:
        slot = _Slot(len(self.leaves))
        self.leaves.append(variable)
        return slot

    def classify(self, variable: Any) -> tuple[Any, type | None, Any]:
        """(node kind, class, registry entry); the kind is None for a leaf, as optree says.

        None is a node of kind NONE unless ``none_is_leaf``.
        """
        import optree

        k = _kinds()
        if self.predicate is not None:
            said = _call(self.tx, self.predicate, variable)
            if not said.is_python_constant():
                return _unsupported(self.what, "is_leaf returned a value unknown while tracing")
            if said.as_python_constant():
                return None, None, None
        try:
            cls = variable.python_type()
        except NotImplementedError:
            return None, None, None
        if cls is type(None):
            return (None if self.none_is_leaf else optree.PyTreeKind.NONE), cls, None
        if cls in _BUILTIN_LEAF_TYPES or issubclass(cls, k.tensor_types):
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
            _guard_registration(cls, self.namespace)
        return kind, cls, entry

    def skeleton(self, variable: Any, depth: int = 0) -> Any:
        variable = variable.realize()
        kind, cls, entry = self.classify(variable)
        if kind is None:
            return self.leaf(variable)
        if cls is type(None):
            return None
        if depth >= OPTREE_MAX_DEPTH:
            return _too_deep(self.tx, self.what)
        node = self.node(variable, cls, kind, entry, depth)
        self.by_id[id(node)] = variable
        return node

    def node(self, variable: Any, cls: type, kind: Any, entry: Any, depth: int) -> Any:
        import optree

        Kind = optree.PyTreeKind
        tx = self.tx
        if kind in (Kind.DICT, Kind.ORDEREDDICT, Kind.DEFAULTDICT):
            self.dict_met = True
            values = _mapping(tx, variable, self.what)
            # Children are read in optree's order, as is_leaf and flatten functions see them.
            parts = {key: self.skeleton(values[key], depth + 1) for key in self.order(kind, values)}
            pairs = [(key, parts[key]) for key in values]
            if kind == Kind.DEFAULTDICT:
                factory = _real(variable.var_getattr(tx, "default_factory"), self.what)
                return collections.defaultdict(factory, pairs)
            return cls(pairs) if kind == Kind.ORDEREDDICT else dict(pairs)
        if kind == Kind.CUSTOM:
            return self.custom(variable, entry, depth)
        parts = [self.skeleton(item, depth + 1) for item in _items(tx, variable)]
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
        return _unsupported(self.what, f"optree's node kind {kind} is new to this package")

    def maxlen(self, variable: Any) -> int | None:
        """A deque's maxlen; Dynamo drops it from a deque that comes in from outside."""
        resolve = getattr(self.tx.output, "resolve_source_value", None)
        if variable.source is not None and resolve is not None:
            from torch._dynamo.guards import GuardBuilder, install_guard
            from torch._dynamo.source import AttrSource

            maxlen = AttrSource(variable.source, "maxlen")
            install_guard(maxlen.make_guard(GuardBuilder.CONSTANT_MATCH))
            return resolve(variable.source).maxlen
        return _real(variable.var_getattr(self.tx, "maxlen"), self.what)

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
                return _unsupported(self.what, "a methodcaller with arguments")
            output = variable.var_getattr(tx, method).call_function(tx, [], {})
        else:
            output = _call(tx, flatten, variable)
        parts = _items(tx, output)
        if len(parts) not in (2, 3):
            return _unsupported(self.what, "a flatten function that returns neither 2 nor 3 items")
        children = [self.skeleton(child, depth + 1) for child in _items(tx, parts[0])]
        metadata = _real(parts[1], self.what)
        try:
            return entry.unflatten_func(metadata, children)
        except Exception as error:  # noqa: BLE001 - the user's function, on placeholders
            return _unsupported(
                self.what, f"the unflatten function fails on placeholders: {error!r}"
            )

    def flatten(self, tree: Any, with_path: bool) -> tuple[Any, list[Any], Any, Any]:
        """(skeleton, leaf variables in optree's order, real spec, paths or None)."""
        import optree

        skeleton = self.skeleton(tree)
        if self.dict_met:
            _guard_dict_order(self.namespace)
        options = {"none_is_leaf": self.none_is_leaf, "namespace": self.namespace}
        try:
            if with_path:
                paths, slots, spec = optree.tree_flatten_with_path(skeleton, **options)
            else:
                (slots, spec), paths = optree.tree_flatten(skeleton, **options), None
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return _unsupported(self.what, f"optree raises {error!r}")
        if sorted(slot.index for slot in slots) != list(range(len(self.leaves))):
            return _unsupported(self.what, "a custom node flattens its placeholders differently")
        return skeleton, [self.leaves[slot.index] for slot in slots], spec, paths


def _from_skeleton(tx: Any, value: Any, leaves: list[Any], by_id: dict[int, Any], spec: Any) -> Any:
    """Dynamo's variable for a skeleton value: a leaf, a container read, or one rebuilt."""
    import optree

    k = _kinds()
    if type(value) is _Slot:
        return leaves[value.index]
    if _is_variable(value):  # a callback's result, inside a node optree's C code built
        return value
    if value is None:
        return k.Constant.create(None)
    if id(value) in by_id:
        return by_id[id(value)]
    children, metadata, _, unflatten = optree.tree_flatten_one_level(
        value, none_is_leaf=spec.none_is_leaf, namespace=spec.namespace
    )
    parts = [_from_skeleton(tx, child, leaves, by_id, spec) for child in children]
    cls = type(value)
    if cls is list:
        return k.List(parts, mutation_type=k.new())
    if cls is tuple:
        return k.Tuple(parts)
    if cls is dict:
        keys = [_wrap(tx, key) for key in value]
        by_key = dict(zip(metadata, parts))
        return k.Dict(
            {key: by_key[raw] for key, raw in zip(keys, value)},
            user_cls=dict,
            mutation_type=k.new(),
        )
    if cls in (collections.OrderedDict, collections.defaultdict):  # in the skeleton's order
        by_key = dict(zip(metadata[-1] if cls is collections.defaultdict else metadata, parts))
        ordered = k.List([by_key[key] for key in value], mutation_type=k.new())
        keys = _wrap(tx, list(value))
        if cls is collections.OrderedDict:
            return _call(tx, _make_ordereddict, keys, ordered)
        return _call(tx, _make_defaultdict, _wrap(tx, value.default_factory), keys, ordered)
    return _call(tx, unflatten, _wrap(tx, metadata), k.List(parts, mutation_type=k.new()))


def _make_ordereddict(keys: list[Any], values: list[Any]) -> Any:
    """An OrderedDict of the given keys and values, as Dynamo traces it."""
    return collections.OrderedDict(zip(keys, values))


def _make_defaultdict(factory: Any, keys: list[Any], values: list[Any]) -> Any:
    """A defaultdict of the given keys and values, as Dynamo traces it."""
    mapping = collections.defaultdict(factory)
    for key, value in zip(keys, values):
        mapping[key] = value
    return mapping


def _unflatten(tx: Any, spec: Any, leaves_variable: Any, what: str) -> Any:
    leaves = _items(tx, leaves_variable)
    try:
        skeleton = spec.unflatten([_Slot(index) for index in range(len(leaves))])
    except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
        return _unsupported(what, f"optree raises {error!r}")
    return _from_skeleton(tx, skeleton, leaves, {}, spec)


def _bool(variable: Any, what: str) -> bool:
    value = _real(variable, what)
    if type(value) is not bool:
        return _unsupported(what, "none_is_leaf is not a bool")
    return value


def _c_options(args: list[Any], kwargs: dict[str, Any], what: str) -> tuple[Any, Any, bool, str]:
    """(tree, predicate or None, none_is_leaf, namespace) of a call to optree._C."""
    names = ("tree", "leaf_predicate", "none_is_leaf", "namespace")
    if len(args) > 4 or set(kwargs) - set(names[len(args) :]):
        return _unsupported(what, "arguments this package does not read")
    bound = dict(zip(names, args)) | kwargs
    if "tree" not in bound:
        return _unsupported(what, "no tree")
    predicate = bound.get("leaf_predicate")
    if (
        predicate is not None
        and predicate.is_python_constant()
        and predicate.as_python_constant() is None
    ):
        predicate = None
    none_is_leaf = _bool(bound["none_is_leaf"], what) if "none_is_leaf" in bound else False
    namespace = _real(bound["namespace"], what) if "namespace" in bound else ""
    if type(namespace) is not str:
        return _unsupported(what, "the namespace is not a str")
    return bound["tree"], predicate, none_is_leaf, namespace


def _c_flatten(k: Any, tx: Any, args: list[Any], kwargs: dict[str, Any], with_path: bool) -> Any:
    what = "optree._C.flatten_with_path" if with_path else "optree._C.flatten"
    tree, predicate, none_is_leaf, namespace = _c_options(args, kwargs, what)
    reader = _Reader(tx, predicate, none_is_leaf, namespace, what)
    _, leaves, spec, paths = reader.flatten(tree, with_path)
    flat = [k.List(leaves, mutation_type=k.new()), _wrap(tx, spec)]
    if with_path:
        flat.insert(0, _wrap(tx, paths))
    return k.Tuple(flat)


def _c_is_leaf(k: Any, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    tree, predicate, none_is_leaf, namespace = _c_options(args, kwargs, "optree._C.is_leaf")
    reader = _Reader(tx, predicate, none_is_leaf, namespace, "optree._C.is_leaf")
    return k.Constant.create(reader.classify(tree.realize())[0] is None)


def _c_all_leaves(k: Any, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """optree._C.all_leaves (optree before 0.14): whether every item is a leaf."""
    what = "optree._C.all_leaves"
    if not args:
        return _unsupported(what, "no iterable")
    items = _items(tx, args[0])
    answers = [_c_is_leaf(k, tx, [item, *args[1:]], kwargs).value for item in items]
    return k.Constant.create(all(answers))


def _c_constant_fold(name: str) -> Callable[..., Any]:
    """A handler that runs optree._C.<name> while tracing, on arguments known then."""

    def handler(k: Any, tx: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        import optree._C

        what = f"optree._C.{name}"
        if name == "make_from_collection" and args:
            args = [_collection_of_specs(tx, args[0], what), *args[1:]]
        real_args = [_real(a, what) if _is_variable(a) else a for a in args]
        real_kwargs = {key: _real(value, what) for key, value in kwargs.items()}
        if name == "is_dict_insertion_ordered":
            namespace = real_args[0] if real_args else real_kwargs.get("namespace", "")
            _guard_dict_order(namespace if type(namespace) is str else "")
        try:
            result = getattr(optree._C, name)(*real_args, **real_kwargs)
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return _unsupported(what, f"optree raises {error!r}")
        return _wrap(tx, result)

    return handler


def _collection_of_specs(tx: Any, variable: Any, what: str) -> Any:
    """A collection (one level of containers) whose children are tree specs, made real."""
    variable = variable.realize()
    try:
        cls = variable.python_type()
    except NotImplementedError:
        return _unsupported(what, "a collection Dynamo cannot read")
    import optree

    if issubclass(cls, dict):
        mapping = {key: _real(value, what) for key, value in _mapping(tx, variable, what).items()}
        if cls is collections.defaultdict:
            factory = _real(variable.var_getattr(tx, "default_factory"), what)
            return collections.defaultdict(factory, mapping)
        return cls(mapping) if cls is not dict else mapping
    if cls is type(None):
        return None
    items = [_real(item, what) for item in _items(tx, variable)]
    if cls in (list, tuple):
        return cls(items)
    if cls is collections.deque:
        return collections.deque(items, maxlen=_real(variable.var_getattr(tx, "maxlen"), what))
    if optree.is_namedtuple_class(cls):
        return tuple.__new__(cls, items)
    if optree.is_structseq_class(cls):
        return cls(items)
    return _unsupported(what, f"a collection of type {cls.__qualname__}")


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


@_cache_success
def _holding_variable_class() -> type | None:
    """A Dynamo variable that holds one real Python object, ``value``, or None if moved."""
    try:
        from torch._dynamo.variables.base import VariableTracker
    except ImportError:
        return None

    class HoldingVariable(VariableTracker):  # type: ignore[misc, valid-type]
        """Holds a real object, which Dynamo must not walk as it walks variables."""

        _nonvar_fields = {"value", *VariableTracker._nonvar_fields}  # noqa: RUF012 - as Dynamo declares it

        def __init__(self, value: Any, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.value = value

    return HoldingVariable


@_cache_success
def _spec_variable_class() -> type | None:
    """Dynamo's variable for a real optree.PyTreeSpec: a constant of the graph."""
    base = _holding_variable_class()
    try:
        from torch._dynamo.variables.misc import GetAttrVariable
    except ImportError:
        return None
    if base is None:
        return None

    class TreeSpecVariable(base):  # type: ignore[misc, valid-type]
        """A real optree.PyTreeSpec; what depends on the spec alone is run while tracing."""

        def __repr__(self) -> str:
            return f"TreeSpecVariable({self.value!r})"

        def python_type(self) -> type:
            return type(self.value)

        def is_python_constant(self) -> bool:
            return True

        def as_python_constant(self) -> Any:
            return self.value

        def reconstruct(self, codegen: Any) -> None:
            name = codegen.tx.output.install_global_by_id("__dtc_treespec", self.value)
            codegen.append_output(codegen.create_load_global(name, add=True))

        def var_getattr(self, tx: Any, name: str) -> Any:
            if name in _SPEC_ATTRIBUTES:
                return _wrap(tx, getattr(self.value, name))
            if name in _SPEC_CONSTANT_METHODS or name in _SPEC_TRACED_METHODS:
                return GetAttrVariable(self, name)
            return _unsupported(f"PyTreeSpec.{name}", "an attribute this package does not read")

        def call_method(self, tx: Any, name: str, args: Any, kwargs: Any) -> Any:
            return _spec_method(tx, self.value, name, list(args), dict(kwargs))

        def richcompare_impl(self, tx: Any, other: Any, op: str) -> Any:
            if not other.is_python_constant():
                return _wrap(tx, NotImplemented)
            return _spec_method(tx, self.value, op, [other], {})

        def len_impl(self, tx: Any) -> Any:
            return _wrap(tx, len(self.value))

        sq_length = mp_length = len_impl

        def str_impl(self, tx: Any) -> Any:
            return _wrap(tx, str(self.value))

        def repr_impl(self, tx: Any) -> Any:
            return _wrap(tx, repr(self.value))

        def bool_impl(self, tx: Any) -> Any:
            return _wrap(tx, bool(self.value))

        def hash_impl(self, tx: Any) -> tuple[int, bool]:
            try:
                return hash(self.value), False
            except TypeError as error:  # metadata that is not hashable
                return _unsupported("PyTreeSpec.__hash__", f"optree raises {error!r}")

    return TreeSpecVariable


@_cache_success
def _method_caller_class() -> type | None:
    """Dynamo's variable for an ``operator.methodcaller``, which Dynamo cannot call."""
    base = _holding_variable_class()
    if base is None:
        return None

    class MethodCallerVariable(base):  # type: ignore[misc, valid-type]
        """``methodcaller(name, *args)(obj)``, traced as ``obj.name(*args)``."""

        def python_type(self) -> type:
            return operator.methodcaller

        def call_function(self, tx: Any, args: Any, kwargs: Any) -> Any:
            reduced = self.value.__reduce__()
            if reduced[0] is not operator.methodcaller or len(args) != 1 or kwargs:
                return _unsupported("operator.methodcaller", "keyword arguments")
            name, *extra = reduced[1]
            method = args[0].var_getattr(tx, name)
            return method.call_function(tx, [_wrap(tx, value) for value in extra], {})

    return MethodCallerVariable


def _spec_method(tx: Any, spec: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    what = f"PyTreeSpec.{name}"
    if name in _SPEC_CONSTANT_METHODS:
        real_args = [_real(a, what) for a in args]
        real_kwargs = {key: _real(value, what) for key, value in kwargs.items()}
        try:
            result = getattr(spec, name)(*real_args, **real_kwargs)
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return _unsupported(what, f"optree raises {error!r}")
        return _wrap(tx, result)
    if name == "unflatten" and len(args) == 1 and not kwargs:
        return _unflatten(tx, spec, args[0], what)
    if name == "flatten_up_to" and len(args) == 1 and not kwargs:
        reader = _Reader(tx, None, spec.none_is_leaf, spec.namespace, what)
        skeleton = reader.skeleton(args[0])
        if reader.dict_met:
            _guard_dict_order(spec.namespace)
        try:
            pieces = spec.flatten_up_to(skeleton)
        except Exception as error:  # noqa: BLE001 - optree's own error, raised eagerly
            return _unsupported(what, f"optree raises {error!r}")
        k = _kinds()
        items = [_from_skeleton(tx, piece, reader.leaves, reader.by_id, spec) for piece in pieces]
        return k.List(items, mutation_type=k.new())
    if name in ("walk", "traverse", "transform"):
        return _spec_callbacks(tx, spec, name, args, kwargs)
    return _unsupported(what, "arguments this package does not read")


def _spec_callbacks(tx: Any, spec: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """walk, traverse and transform: optree's C code, calling back into Dynamo's tracing.

    While tracing, the C code passes Dynamo's variables around as opaque leaves; each
    callback traces the user's function on them.
    """
    what = f"PyTreeSpec.{name}"
    names = ("f_node", "f_leaf") if name == "transform" else ("leaves", "f_node", "f_leaf")
    if len(args) > len(names) or set(kwargs) - set(names[len(args) :]):
        return _unsupported(what, "arguments this package does not read")
    bound: dict[str, Any] = dict(zip(names, args)) | kwargs
    f_node, f_leaf = (
        None if v is None or (v.is_python_constant() and v.as_python_constant() is None) else v
        for v in (bound.get("f_node"), bound.get("f_leaf"))
    )
    if name == "transform":

        def spec_of(variable: Any) -> Any:
            if not variable.is_python_constant() or not isinstance(
                variable.as_python_constant(), type(spec)
            ):
                return _unsupported(
                    what, "a callback that returns no tree spec known while tracing"
                )
            return variable.as_python_constant()

        node_callback = leaf_callback = None
        if f_node is not None:
            node_callback = lambda s: spec_of(_call(tx, f_node, _wrap(tx, s)))  # noqa: E731
        if f_leaf is not None:
            leaf_callback = lambda s: spec_of(_call(tx, f_leaf, _wrap(tx, s)))  # noqa: E731
        return _wrap(tx, spec.transform(node_callback, leaf_callback))
    if "leaves" not in bound:
        return _unsupported(what, "no leaves")
    leaves = _items(tx, bound["leaves"])
    slots = [_Slot(index) for index in range(len(leaves))]

    def leaf(slot: _Slot) -> Any:
        variable = leaves[slot.index]
        return variable if f_leaf is None else _call(tx, f_leaf, variable)

    def as_variable(value: Any) -> Any:
        return value if _is_variable(value) else _from_skeleton(tx, value, [], {}, spec)

    if name == "walk" and f_node is not None:

        def node(node_type: Any, node_data: Any, children: Any) -> Any:
            parts = _kinds().Tuple([as_variable(child) for child in children])
            return _call(tx, f_node, _wrap(tx, node_type), _wrap(tx, node_data), parts)

        call = lambda: spec.walk(slots, node, leaf)  # noqa: E731
    else:  # walk without f_node rebuilds each node, as traverse does
        node_rebuilt = None if f_node is None else (lambda n: _call(tx, f_node, as_variable(n)))
        call = lambda: spec.traverse(slots, node_rebuilt, leaf)  # noqa: E731
    try:
        result = call()
    except (ValueError, TypeError) as error:  # optree's own error, raised eagerly
        return _unsupported(what, f"optree raises {error!r}")
    return as_variable(result)


def _guard_flag(flag_path: tuple[str, ...]) -> None:
    """Makes the graph being traced guard on the module-level flag at ``flag_path``."""
    from torch._dynamo.guards import GuardBuilder, install_guard
    from torch._dynamo.source import AttrSource, ImportSource

    source: Any = ImportSource(flag_path[0])
    for name in flag_path[1:]:
        source = AttrSource(source, name)
    install_guard(source.make_guard(GuardBuilder.CONSTANT_MATCH))


_SPEC_HOOK: list[tuple[Any, str, Any]] = []  # (owner, name, what it was before the hook)


def hook_spec_inputs(flag_path: tuple[str, ...]) -> bool:
    """Makes Dynamo read a real optree.PyTreeSpec it meets (an input, a global) as ours.

    The graph guards on the spec's ``repr`` (optree's spec equality shows there) and on
    the mode flag. Returns False, changing nothing, where Dynamo's builder has moved.
    """
    import optree

    spec_class = _spec_variable_class()
    caller_class = _method_caller_class()
    try:
        from torch._dynamo.guards import GuardBuilder, install_guard
        from torch._dynamo.source import AttrSource, CallFunctionNoArgsSource  # noqa: F401
        from torch._dynamo.variables.builder import VariableBuilder
        from torch._dynamo.variables.user_defined import UserDefinedObjectVariable
    except ImportError:
        return False
    wrap = getattr(VariableBuilder, "_wrap", None)
    if spec_class is None or caller_class is None or not callable(wrap):
        return False
    if not hasattr(GuardBuilder, "TYPE_MATCH") or not hasattr(GuardBuilder, "ID_MATCH"):
        return False
    if _SPEC_HOOK:
        return True

    def _wrap_with_specs(builder: Any, value: Any) -> Any:
        if type(value) is operator.methodcaller and _flag_is_on(flag_path):
            # optree's flatten function for @register_pytree_node_class classes.
            install_guard(builder.source.make_guard(GuardBuilder.ID_MATCH))
            _guard_flag(flag_path)
            return caller_class(value, source=builder.source)
        if type(value) is optree.PyTreeSpec and _flag_is_on(flag_path):
            source = builder.source
            install_guard(source.make_guard(GuardBuilder.TYPE_MATCH))
            install_guard(_spec_text_source(source).make_guard(GuardBuilder.CONSTANT_MATCH))
            _guard_flag(flag_path)
            return spec_class(value, source=source)
        if type(value) is optree.PyTreeSpec:
            _guard_flag(flag_path)
        if _lies_about_its_class(value) and _flag_is_on(flag_path):
            # Dynamo takes it for the container it claims to be, and fails on it.
            install_guard(builder.source.make_guard(GuardBuilder.TYPE_MATCH))
            _guard_flag(flag_path)
            return UserDefinedObjectVariable(value, source=builder.source)
        if type(value) is collections.deque and value.maxlen is not None:
            if _flag_is_on(flag_path) and builder.source is not None:
                return _with_maxlen(wrap(builder, value), builder.source, value.maxlen, flag_path)
        try:
            return wrap(builder, value)
        except RecursionError:  # Dynamo's builder recurses through a list that comes in
            if not isinstance(value, (list, tuple, dict)) or not _flag_is_on(flag_path):
                raise
            return _too_deep(builder.tx, "a structure that comes in")

    _SPEC_HOOK.append((VariableBuilder, "_wrap", wrap))
    VariableBuilder._wrap = _wrap_with_specs
    _hook_tensor_check(flag_path)
    return True


def _hook_tensor_check(flag_path: tuple[str, ...]) -> None:
    """Dynamo asks of each new frame whether it holds a tensor, recursing through its
    arguments: through a structure nested deeper than Python allows, that raises
    RecursionError out of Dynamo's frame callback. While the mode is on, the answer is
    then yes: Dynamo tries the frame, and this package, meeting the structure, runs the
    frame eagerly (see ``_too_deep``), where optree gives its own result or error.
    """
    try:
        from torch._dynamo import convert_frame
    except ImportError:
        return
    original = getattr(convert_frame, "has_tensor_in_frame", None)
    if not callable(original):
        return

    def has_tensor_in_frame(frame: Any) -> bool:
        try:
            return original(frame)
        except RecursionError:
            if not _flag_is_on(flag_path):
                raise
            return True

    _SPEC_HOOK.append((convert_frame, "has_tensor_in_frame", original))
    convert_frame.has_tensor_in_frame = has_tensor_in_frame


def _lies_about_its_class(value: Any) -> bool:
    """An object whose ``__class__`` claims a container its type is not (optree, by its
    type, takes it for a leaf)."""
    containers = (list, tuple, dict, set, frozenset)
    return not issubclass(type(value), containers) and isinstance(value, containers)


def _with_maxlen(variable: Any, source: Any, maxlen: int, flag_path: tuple[str, ...]) -> Any:
    """Dynamo builds a deque that comes in without its maxlen: ``deque.maxlen`` then reads
    None, in optree's own deque flatten function too. This puts it back, guarded.
    """
    from torch._dynamo.guards import GuardBuilder, install_guard
    from torch._dynamo.source import AttrSource
    from torch._dynamo.variables import ConstantVariable

    current = getattr(variable, "maxlen", None)
    if not (hasattr(current, "is_python_constant") and current.is_python_constant()):
        return variable  # not Dynamo's deque variable as this package knows it
    if current.as_python_constant() is None:
        install_guard(AttrSource(source, "maxlen").make_guard(GuardBuilder.CONSTANT_MATCH))
        _guard_flag(flag_path)
        variable.maxlen = ConstantVariable.create(maxlen)
    return variable


def _spec_text_source(source: Any) -> Any:
    """A guard's source for ``repr(spec.__getstate__())``: all a spec holds, in order.

    Two specs can be equal, with equal ``repr``, and still unflatten a dict's keys in
    different orders; optree's pickled state keeps that order. (Where a spec has no
    ``__getstate__``, its ``repr`` stands in.)
    """
    import optree
    from torch._dynamo.source import AttrSource, CallFunctionNoArgsSource

    if hasattr(optree.PyTreeSpec, "__getstate__"):
        state = CallFunctionNoArgsSource(AttrSource(source, "__getstate__"))
        return CallFunctionNoArgsSource(AttrSource(state, "__repr__"))
    return CallFunctionNoArgsSource(AttrSource(source, "__repr__"))


def unhook_spec_inputs() -> None:
    """Undoes :func:`hook_spec_inputs`."""
    while _SPEC_HOOK:
        owner, name, original = _SPEC_HOOK.pop()
        setattr(owner, name, original)


#: optree's C layer: always taken while the mode is on (FAST_PATH_ON does not apply).
CORE_PATHS = frozenset(
    {
        "optree._C.flatten",
        "optree._C.flatten_with_path",
        "optree._C.is_leaf",
        "optree._C.all_leaves",
        "optree._C.make_leaf",
        "optree._C.make_none",
        "optree._C.make_from_collection",
        "optree._C.is_dict_insertion_ordered",
    }
)


def _tree_flatten(k: Any, tx: Any, args: list[Any], kwargs: dict[str, Any], name: str) -> Any:
    import optree

    bound, options = _optree_options(getattr(optree, name), args, kwargs)
    skeleton, leaves, spec = _flat(k, bound["tree"], options)
    if name == "tree_structure":
        return _wrap(tx, spec)
    flat = [k.List(leaves, mutation_type=k.new()), _wrap(tx, spec)]
    if name == "tree_flatten_with_path":
        flat.insert(0, _wrap(tx, optree.tree_paths(skeleton, **options)))
    return k.Tuple(flat)


#: Handlers by original: each returns Dynamo's variable for the result, or raises _Fallback.
FAST_PATHS: dict[str, Callable[[Any, Any, list[Any], dict[str, Any]], Any]] = {
    "tree.is_nested": _is_nested,
    "tree.flatten": _flatten,
    "tree.flatten_with_path": _flatten_with_path,
    "tree.assert_same_structure": _assert_same_structure,
    "tree.map_structure": lambda k, tx, a, kw: _map(k, tx, a, kw, with_path=False),
    "tree.map_structure_with_path": lambda k, tx, a, kw: _map(k, tx, a, kw, with_path=True),
    "optree.tree_leaves": _tree_leaves,
    "optree.tree_map": lambda k, tx, a, kw: _tree_map(k, tx, a, kw, with_path=False),
    "optree.tree_map_with_path": lambda k, tx, a, kw: _tree_map(k, tx, a, kw, with_path=True),
    **{
        f"optree.{name}": functools.partial(_tree_flatten, name=name)
        for name in ("tree_flatten", "tree_structure", "tree_flatten_with_path")
    },
    "optree._C.flatten": lambda k, tx, a, kw: _c_flatten(k, tx, a, kw, with_path=False),
    "optree._C.flatten_with_path": lambda k, tx, a, kw: _c_flatten(k, tx, a, kw, with_path=True),
    "optree._C.is_leaf": _c_is_leaf,
    "optree._C.all_leaves": _c_all_leaves,
    **{
        f"optree._C.{name}": _c_constant_fold(name)
        for name in ("make_leaf", "make_none", "make_from_collection", "is_dict_insertion_ordered")
    },
}


# --- Reading Dynamo's graph-break log --------------------------------------------------

_GRAPH_BREAK_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    # Compiled on first use: this module loads with the autoload entry point.
    return (
        re.compile(r"Graph break.*? in user code at (.+):(\d+)"),
        re.compile(r"User-inserted graph break\. Message: (.+)"),
        re.compile(r'File "(.+)", line (\d+), in (\S+)'),
    )


# Lines that lead in to the cause of a graph break, rather than say it.
_PREAMBLES = ("Encountered graph break when attempting", "Failed to handle graph break gracefully")


class GraphBreak:
    """One graph break, as Dynamo's ``graph_breaks`` log reports it."""

    __slots__ = ("frames", "location", "message", "reason")

    def __init__(self, location: str, reason: str, message: str, frames: list[str]) -> None:
        self.location = location
        self.reason = reason
        self.message = message
        self.frames = frames

    def __repr__(self) -> str:
        return f"GraphBreak({self.location!r}, {self.reason!r})"


def parse_graph_break(message: str) -> GraphBreak:
    """Reads the location, the cause and the user frames from one log message."""
    location_pattern, user_message_pattern, frame_pattern = _patterns()
    found = location_pattern.search(message)
    location = f"{found.group(1)}:{found.group(2)}" if found else "<unknown>"
    reason = "<unknown>"
    lines = message.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("Graph Break Reason:"):
            candidates = [line.removeprefix("Graph Break Reason:").strip(), *lines[index + 1 :]]
            for candidate in candidates:
                text = candidate.strip()
                if text and not text.startswith(_PREAMBLES):
                    reason = text
                    break
            break
    raised = re.search(r"Developer debug context: raised exception (.+)", message)
    if reason == "Observed exception" and raised:
        reason = f"raises {raised.group(1).strip()}"
    user_message = user_message_pattern.search(message)
    if user_message and user_message.group(1).strip() != "None":
        reason = user_message.group(1).strip()
    frames = [f"{path}:{line}" for path, line, _ in frame_pattern.findall(message)]
    return GraphBreak(location, reason, message, frames)


class GraphBreakRecorder(logging.Handler):
    """Collects Dynamo's graph-break reports while active, without printing them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.breaks: list[GraphBreak] = []
        self._saved: tuple[int, bool] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.breaks.append(parse_graph_break(record.getMessage()))

    def __enter__(self) -> GraphBreakRecorder:
        logger = logging.getLogger(_GRAPH_BREAK_LOGGER)
        self._saved = (logger.level, logger.propagate)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logger = logging.getLogger(_GRAPH_BREAK_LOGGER)
        logger.removeHandler(self)
        if self._saved is not None:
            logger.level, logger.propagate = self._saved
