"""Reading structures from Dynamo's variables: the helpers every handler shares.

One definition each of the leaf types, the depth limits, the option parser, and the
ways a handler gives up: :class:`Fallback` (the call goes the other way, nothing traced
yet) or :func:`unsupported` (a graph break; the call then runs eagerly).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..runtime import Capability, Event, count, step_aside
from ..seam import capabilities, internals, making, patches, reads
from ..seam.types import Translator, Variable
from .bytecode import trivial_body_of

if TYPE_CHECKING:
    from torch._dynamo.variables.base import VariableTracker

Method = TypeVar("Method", bound=Callable[..., Any])

__all__ = [
    "CONSTANT_TYPES",
    "DEFAULTDICT_LEFT_AS_DICT",
    "DICT",
    "FAST_PATH_MAX_DEPTH",
    "LEAF",
    "LIST",
    "NOT_CONSTANT",
    "OPTREE_MAX_DEPTH",
    "TUPLE",
    "Cycle",
    "DictKey",
    "Fallback",
    "Node",
    "bind",
    "breaks_on_error",
    "call_func",
    "constant_or",
    "cycle_break",
    "dynamo_own_errors",
    "is_none",
    "is_variable",
    "made_once",
    "node",
    "reads_argument",
    "stepped_aside_break",
    "too_deep",
    "tree_options",
    "unsupported",
    "with_first",
]


def dynamo_own_errors() -> tuple[type[BaseException], ...]:
    """Dynamo's own exceptions (the user's error, a graph break), which pass this
    package's guards; none where the seam cannot name them, so that every exception
    then makes the call step aside, and the guard itself never fails.

    >>> [error.__name__ for error in dynamo_own_errors()]
    ['TorchDynamoException']
    """
    try:
        return internals.dynamo_errors()
    except Exception:  # noqa: BLE001 - the seam is broken: nothing passes
        return ()


#: Python types whose values Dynamo holds as constants: leaves for both libraries.
CONSTANT_TYPES = frozenset({int, float, bool, complex, str, bytes, type(None)})
#: Key types the fast paths read from a plain dict.
KEY_TYPES = frozenset({str, int, float, bool, bytes})
#: optree's fast path hands deeper structures to optree's own code (dm-tree's goes to
#: dmtree.TRACED_MAX_DEPTH).
FAST_PATH_MAX_DEPTH = 100
#: Deeper optree structures end in a graph break; the call then runs eagerly.
OPTREE_MAX_DEPTH = 200
#: optree's own message when a structure contains itself.
OPTREE_RECURSION = "Maximum recursion depth exceeded during flattening the tree."

#: Why a call that would build a defaultdict in the graph breaks it (torch 2.7).
DEFAULTDICT_LEFT_AS_DICT = (
    "dynamo-tree-compat does not build a defaultdict in the graph here: this Dynamo "
    "would return it as a plain dict"
)

LEAF, LIST, TUPLE, DICT = range(4)


class Fallback(Exception):
    """The structure holds something the fast path does not reproduce exactly."""


class Cycle(Exception):
    """The structure contains itself: optree raises RecursionError (torch's way loops)."""


class DictKey(NamedTuple):
    """A dict key as read: its value, Dynamo's tracker of it, and its variable."""

    key: Any
    tracker: Any
    variable: Variable


class Node(NamedTuple):
    """One node of a structure, read from Dynamo's variables."""

    kind: int  # LEAF, LIST, TUPLE or DICT
    variable: Variable  # the node's variable (realized)
    keys: list[DictKey] | None  # a dict's keys; None for other nodes
    children: list[Any]  # the children's variables; [] for a leaf


def node(
    variable: Variable, sort: bool = True, leaf: Callable[[Variable], bool] | None = None
) -> Node:
    """The node ``variable`` stands for.

    Dict keys come sorted, as dm-tree takes them, or with ``sort=False`` in insertion
    order (optree's C code then orders them itself). Raises :class:`Fallback` on
    anything but an exact list, tuple or dict, a tensor or a constant, or a value
    ``leaf`` says is a leaf (the library's own rule for other objects). Each
    :class:`Node` is made as a plain tuple is: a NamedTuple's own ``__new__`` is Python
    code, a frame per node of every structure read.
    """
    k = internals.kinds()
    variable = internals.realized(variable)
    cls = type(variable)
    if cls is k.List or cls is k.Tuple:
        kind = LIST if cls is k.List else TUPLE
        return tuple.__new__(Node, (kind, variable, None, reads.sequence_items(variable)))
    if cls is k.Dict and reads.dict_class(variable) is dict:
        entries = []
        for key_variable, tracker, value in reads.dict_entries(variable):
            if isinstance(value, k.Deleted):
                raise Fallback
            if type(key_variable) is k.Constant:
                key = reads.constant_value(key_variable)
            elif internals.call(key_variable, "is_python_constant"):
                key = internals.call(key_variable, "as_python_constant")
            else:
                raise Fallback
            if type(key) not in KEY_TYPES:
                raise Fallback
            entries.append((key, tracker, key_variable, value))
        try:
            if sort:
                entries.sort(key=lambda entry: entry[0])
        except TypeError:  # unsortable keys: the twin raises dm-tree's error
            raise Fallback from None
        keys = [DictKey(*entry[:3]) for entry in entries]
        return tuple.__new__(Node, (DICT, variable, keys, [entry[3] for entry in entries]))
    if (
        (cls is k.Tensor and internals.call(variable, "python_type") in k.tensor_types)
        or (cls is k.Constant and type(reads.constant_value(variable)) in CONSTANT_TYPES)
        or cls is k.Symbol
        or (leaf is not None and leaf(variable))
    ):
        return tuple.__new__(Node, (LEAF, variable, None, []))
    raise Fallback


def counted_break(event: Event, gb_type: str, what: str, explanation: str, hint: str) -> Any:
    """Ends the graph at the user's call, counted as ``event`` for ``what``; it then runs
    eagerly."""
    count(event, what)
    return internals.graph_break(gb_type, what, explanation, hint)


def unsupported(what: str, why: str, library: str = "optree") -> Any:
    """Ends the graph here: the call then runs eagerly, in the library's own C code."""
    return counted_break(
        Event.BREAK,
        f"{library} call dynamo-tree-compat does not trace",
        what,
        f"{what}: {why}. It runs eagerly instead, with {library}'s own result.",
        "See the coverage table in dynamo-tree-compat's docs/coverage.md.",
    )


def too_deep(
    tx: Translator, what: str, limit: int | str = OPTREE_MAX_DEPTH, library: str = "optree"
) -> Any:
    """Past ``limit`` (a depth, or what stops there): with fullgraph, the graph break
    naming it. Without, the whole frame runs eagerly (from then on): resuming after a
    graph break would have Dynamo's own code recurse over the structure, deeper than
    Python allows.
    """
    why = f"the structure is deeper than {limit}"
    if internals.is_fullgraph(tx):
        return unsupported(what, why, library)
    count(Event.SKIP_FRAME, what)
    _skip_frame(tx, f"{what}: {why}; dynamo-tree-compat runs this frame eagerly")
    return unsupported(what, why, library)  # where the frame cannot be skipped


def _skip_frame(tx: Translator, message: str) -> None:
    """Runs the whole frame eagerly: Dynamo's exception leaves here. Returns where this
    Dynamo cannot, or the attempt failed (then logged and counted)."""
    try:
        patches.skip_frame(message, tx)
    except dynamo_own_errors():
        raise
    except internals.Missing:
        pass
    except Exception as error:  # noqa: BLE001 - ours: a graph break instead
        step_aside("skipping the frame", error)


def stepped_aside_break(where: str, error: BaseException) -> Any:
    """An unexpected error of this package's code while tracing, logged and counted,
    ended as a graph break: the call then runs eagerly, with eager's result."""
    step_aside(where, error)
    return counted_break(
        Event.BREAK,
        "dynamo-tree-compat stepped aside",
        where,
        f"{where}: {type(error).__name__}: {error}. It runs eagerly instead.",
        "Report it to dynamo-tree-compat, with your torch version.",
    )


def breaks_on_error(where: str) -> Callable[[Method], Method]:
    """Guards a method of this package's Dynamo variables: an unexpected error in it (not
    Dynamo's own) becomes a graph break (see :func:`stepped_aside_break`)."""

    def decorate(method: Method) -> Method:
        @functools.wraps(method)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except dynamo_own_errors():
                raise
            except Exception as error:  # noqa: BLE001 - ours: never crash the trace
                return stepped_aside_break(where, error)

        return guarded  # type: ignore[return-value]

    return decorate


def cycle_break(what: str, tx: Translator = None) -> Any:
    """A structure that contains itself: run eagerly, the call raises optree's own error."""
    try:
        recurses = tx is not None and not internals.is_fullgraph(tx)
        recurses = recurses and capabilities.has(Capability.BREAK_RECURSES_ON_CYCLES)
    except Exception as error:  # noqa: BLE001 - ours: a graph break, as elsewhere
        step_aside("the check for a cycle's graph break", error)
        recurses = False
    if recurses:  # a graph break would have Dynamo recurse without end: skip the frame
        count(Event.CYCLE, what)
        _skip_frame(tx, f"{what} raises RecursionError: {OPTREE_RECURSION}")
    return counted_break(
        Event.CYCLE,
        "optree call on a structure that contains itself",
        what,
        f"{what} raises RecursionError: {OPTREE_RECURSION}",
        "Do not nest a container inside itself.",
    )


def is_variable(value: Any) -> bool:
    """Whether ``value`` is one of Dynamo's variables."""
    return isinstance(value, internals.kinds().Base)


def is_none(variable: Variable) -> bool:
    """Whether a variable is absent or the constant None."""
    return variable is None or constant_or(variable, ...) is None


#: What :func:`constant_or` gives, by default, for a variable that is no constant.
NOT_CONSTANT: Any = object()


def constant_or(variable: VariableTracker, default: Any = NOT_CONSTANT) -> Any:
    """The constant a variable stands for, or ``default`` where it is not one (a container
    that says it is one may hold a value Dynamo made symbolic: an int seen changing)."""
    if internals.call(variable, "is_python_constant"):
        try:
            return internals.call(variable, "as_python_constant")
        except NotImplementedError:  # Dynamo's AsPythonConstantNotImplementedError
            return default
    return default


def tree_options(bound: dict[str, Any], what: str, strict: bool) -> tuple[Any, bool, str]:
    """``(is_leaf variable or None, none_is_leaf, namespace)`` from an optree call's bound
    arguments. Options must be constants of their types: else, with ``strict``,
    :class:`Fallback`; without, a graph break.
    """
    predicate = bound.get("is_leaf", bound.get("leaf_predicate"))
    predicate = None if is_none(predicate) else predicate
    found: list[Any] = []
    for name, default, kind in (("none_is_leaf", False, bool), ("namespace", "", str)):
        variable = bound.get(name)
        value = default
        if variable is not None:
            value = constant_or(variable, None)
            if type(value) is not kind:
                if strict:
                    raise Fallback
                return unsupported(what, f"{name} is not a {kind.__name__} known while tracing")
        found.append(value)
    return predicate, found[0], found[1]


@dataclasses.dataclass
class _LastFunction:
    """The last function variable :func:`call_func` met (a map calls one per leaf), its
    trivial body (``bytecode.trivial_body_of``), and the shared constant it returns."""

    func: Any = None
    body: tuple[str, Any, int] | None = None
    shared: Any = None


_LAST = _LastFunction()


def call_func(tx: Translator, func: Any, args: list[Variable]) -> Any:
    """``func(*args)`` while tracing; one that only returns an argument or a constant is
    not inlined (see ``bytecode.trivial_body_of``)."""
    last = _LAST
    if last.func is not func:
        body = trivial_body_of(func)
        last.func, last.body = func, body
        last.shared = making.constant(body[1]) if body and body[0] == "constant" else None
    body = last.body
    if body is None or len(args) != body[2]:
        return internals.call_function(func, tx, args, {})
    return args[body[1]] if last.shared is None else last.shared


def made_once(make: Callable[..., Any]) -> Callable[..., Any]:
    """``make(*values)``, made once per distinct values (of the same types: 1 is not
    True) and shared: the variables of a path's keys and indices, which paths share.

    >>> index = made_once(lambda i: [i])
    >>> index(0) is index(0), index(1) == index(True), index(1) is index(True)
    (True, True, False)
    """
    made: dict[tuple[tuple[type, Any], ...], Any] = {}

    def once(*values: Any) -> Any:
        key = tuple((type(value), value) for value in values)
        if key not in made:
            made[key] = make(*values)
        return made[key]

    return once


def reads_argument(func: Any, index: int, count: int) -> bool:
    """Whether ``func``, called with ``count`` arguments, may read argument ``index``: not
    where it only returns another argument or a constant (see :func:`call_func`). What
    it never reads (a path, an accessor) need not be made.

    >>> reads_argument(None, 0, 2)  # not a function variable: it may read anything
    True
    """
    body = trivial_body_of(func)
    if body is None or body[2] != count:
        return True
    return body[0] == "argument" and body[1] == index


def with_first(func: Any, rows: list[list[Any]], make: Callable[[], list[Any]]) -> list[list[Any]]:
    """The arguments of ``func``'s calls, a row each, with a first one put before each row:
    ``make()``'s (one per row: paths, accessors), or where ``func`` never reads it, one
    placeholder for all, and nothing made.

    >>> with_first(None, [], list)
    []
    """
    if rows and not reads_argument(func, 0, len(rows[0]) + 1):
        unread = making.constant(None)
        return [[unread, *row] for row in rows]
    return [[first, *row] for first, row in zip(make(), rows)]


_SIGNATURES: dict[Any, inspect.Signature] = {}


def bind(original: Any, args: list[Variable], kwargs: dict[str, Variable]) -> dict[str, Any]:
    """A call's arguments by the original's parameter names; :class:`Fallback` where they
    do not bind (the original's own code then raises its own error)."""
    if original not in _SIGNATURES:
        _SIGNATURES[original] = inspect.signature(original)
    try:
        return dict(_SIGNATURES[original].bind(*args, **kwargs).arguments)
    except TypeError:
        raise Fallback from None
