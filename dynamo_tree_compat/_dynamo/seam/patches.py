"""Dynamo's internals, as this package changes them: the seam's other half.

:mod:`.internals` reads Dynamo; this module writes into it: it gives this package's
variable classes the slot names each release calls, a mappingproxy variable its type,
clears a frame's skip mark, ends a frame, and makes Dynamo
log every graph break. Each change is undone by what it returns, or is the package's
own class. Where releases differ, the choice is made by :mod:`.capabilities`.
"""

from __future__ import annotations

import importlib
import inspect
import types
from collections.abc import Callable
from typing import Any

from ..runtime import TRACED_CODE, Capability, step_aside
from . import capabilities, internals
from .types import Translator, Variable

__all__ = [
    "break_where_a_generator_leaves",
    "count_graphs",
    "end_frame",
    "forget_skips",
    "give_mapping_proxies_a_type",
    "graph_break_function",
    "log_every_graph_break",
    "put_own",
    "replace",
    "set_class",
    "skip_frame",
    "unskip_code",
    "with_slot_names",
]


def replace(owner: Any, name: str, new: Any) -> Any:
    """Puts ``new`` in place of Dynamo's ``owner.name`` (a hook); returns what was there,
    as stored (a class's staticmethod stays one), for putting back with this again."""
    stored = vars(owner).get(name) if isinstance(owner, type) else None
    before = getattr(owner, name) if stored is None else stored
    setattr(owner, name, new)
    return before


def set_class(variable: Variable, cls: type) -> None:
    """Makes one of Dynamo's variables an instance of ``cls``, a subclass of its class
    that this package made."""
    variable.__class__ = cls


def skip_frame(message: str, tx: Translator = None) -> Any:
    """Runs the frame being traced eagerly. Raises :class:`~.internals.Missing` where
    Dynamo cannot."""
    skip = internals.skip_frame_error()
    if inlined_break_resumes(tx):
        end_frame(tx, message)
    raise skip(message)


def inlined_break_resumes(tx: Translator) -> bool:
    """Whether ``tx`` traces an inlined call, on a Dynamo that resumes after a graph break
    there (capability ``inlined_skip_becomes_break``). Resuming, such a Dynamo realizes
    every variable of the frame, and recurses without end through a structure that
    contains itself, or past Python's limit through a deep one: :func:`end_frame` instead.
    """
    return internals.is_inlined(tx) and capabilities.has(Capability.INLINED_SKIP_BECOMES_BREAK)


def with_slot_names(cls: type) -> type:
    """Gives a variable class each slot method under every name some torch calls it."""
    for first, *others in internals.SLOT_NAMES:
        method = cls.__dict__.get(first)
        if method is not None:
            for name in others:
                setattr(cls, name, method)
    return cls


def give_mapping_proxies_a_type(applies: Callable[[], bool]) -> Callable[[], None] | None:
    """Dynamo 2.7 and earlier cannot tell a mappingproxy variable's type: ``type()`` and
    ``isinstance()`` on one end tracing with a UserError. While ``applies()`` (a tree
    function reads it), its class gives the answer later Dynamos give,
    ``types.MappingProxyType``. Returns how to undo that; None where the class answers by
    itself, or is not found.
    """
    try:
        dicts = importlib.import_module("torch._dynamo.variables.dicts")
        proxies = dicts.MappingProxyVariable
        original = proxies.python_type
        if original is not internals.kinds().Base.python_type:
            return None
    except Exception:  # noqa: BLE001 - moved: nothing to give
        return None

    def python_type(self: Any) -> type:
        if applies():
            return types.MappingProxyType
        return original(self)

    return put_own(proxies, "python_type", python_type)


def break_where_a_generator_leaves(is_ours: Callable[[Any], bool]) -> Callable[[], None] | None:
    """Dynamo reads a generator that a compiled function returns to its end, into a
    look-alike iterator (a tuple_iterator). Where the generator's code is one that
    ``is_ours`` accepts (a twin's), the graph ends there instead, and the frame runs
    eagerly: the caller gets the library's own iterator. Returns how to undo it; None
    where this Dynamo has no such step (a generator that leaves a graph there is read
    whole elsewhere, or not at all).
    """
    try:
        owner = importlib.import_module("torch._dynamo.symbolic_convert").InstructionTranslator
        original = owner.__dict__["replace_tos_if_return_is_generator"]
        functions = importlib.import_module("torch._dynamo.variables.functions")
        generators = functions.LocalGeneratorObjectVariable
    except Exception:  # noqa: BLE001 - moved: nothing to change
        return None

    def replace_tos_if_return_is_generator(self: Any) -> Any:
        leaving = None
        try:
            stack = internals.read(self, "stack", None) or [None]
            if isinstance(stack[-1], generators) and is_ours(internals.call(stack[-1], "get_code")):
                leaving = internals.call(stack[-1], "get_name")
        except internals.dynamo_errors():
            raise
        except Exception as error:  # noqa: BLE001 - ours: Dynamo's own step stands
            step_aside("the check of a generator leaving the graph", error)
        if leaving is not None:
            internals.graph_break(
                "a twin's generator leaves the graph",
                leaving,
                "Dynamo would read it whole into another kind of iterator; the library's "
                "own iterator is made eagerly instead.",
                "Read the iterator inside the compiled function, or return a list of it.",
            )
        return original(self)

    return put_own(owner, "replace_tos_if_return_is_generator", replace_tos_if_return_is_generator)


def put_own(owner: type, name: str, new: Any) -> Callable[[], None]:
    """Makes ``new`` the class ``owner``'s own attribute ``name``; returns how to undo
    that, which puts back what the class itself held (or nothing), unless something has
    replaced ``new`` since.

    >>> class Owner:
    ...     pass
    >>> undo = put_own(Owner, "answer", 42)
    >>> Owner.answer, undo(), hasattr(Owner, "answer")
    (42, None, False)
    """
    previous = owner.__dict__.get(name)
    setattr(owner, name, new)

    def undo() -> None:
        if owner.__dict__.get(name) is not new:
            return  # replaced since: not ours to take back
        if previous is None:
            delattr(owner, name)
        else:
            setattr(owner, name, previous)

    return undo


def unskip_code(code: Any) -> None:
    """Makes Dynamo consider ``code`` again after it marked the code to run eagerly for
    good, keeping its compiled graphs.

    Where Dynamo has no exec strategies (torch 2.6 and earlier), its skip mark replaces
    a code's compiled graphs: a code with graphs has no mark, and is left alone; one
    without is reset, which drops nothing.
    """
    if capabilities.has(Capability.SKIP_KEEPS_GRAPHS):
        from torch._dynamo import eval_frame
        from torch._dynamo.types import FrameAction, FrameExecStrategy

        strategy = FrameExecStrategy(FrameAction.DEFAULT, FrameAction.DEFAULT)
        eval_frame.set_code_exec_strategy(code, strategy)
        return
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list, reset_code

    if not _debug_get_cache_entry_list(code):
        reset_code(code)


def end_frame(tx: Translator, message: str) -> Any:
    """Ends the whole frame ``tx`` belongs to, with no partial graph: it runs eagerly."""
    internals.end_one_graph(tx)  # the break below then reaches the frame's top
    return internals.graph_break("dynamo-tree-compat runs this frame eagerly", message, message, "")


def graph_break_function() -> Callable[..., None]:
    """Dynamo's ``graph_break``, called as ``graph_break(msg=...)``: traced, it ends the
    graph naming ``msg``; run eagerly, it does nothing. (Where ``graph_break`` takes no
    message, torch 2.6 and earlier, the message goes through Dynamo's ``comptime``.)"""
    import torch._dynamo

    graph_break = torch._dynamo.graph_break
    if "msg" in inspect.signature(graph_break).parameters:
        return graph_break
    global _comptime, _bare_graph_break
    try:
        from torch._dynamo.comptime import comptime
    except ImportError:  # no way to name the reason: the bare graph break

        def without_message(msg: str = "") -> None:
            graph_break()

        return without_message
    _comptime, _bare_graph_break = comptime, graph_break
    return _graph_break_naming


#: Dynamo's ``comptime`` and ``graph_break``, where ``_graph_break_naming`` uses them:
#: module globals, so that Dynamo meets them with a source and knows them.
_comptime: Any = None
_bare_graph_break: Any = None


def _graph_break_naming(msg: str = "") -> None:
    """``graph_break(msg=...)`` for a Dynamo whose graph_break takes no message."""
    _comptime(_break_naming_msg)  # traced: raises Dynamo's Unsupported, naming msg
    _bare_graph_break()  # where that could not: a graph break all the same


def _break_naming_msg(context: Any) -> None:
    """Run by Dynamo as it traces ``_graph_break_naming`` (``comptime``): the graph
    break, naming the caller's ``msg``. Where it cannot, it returns, and the bare graph
    break follows."""
    try:
        message = str(context.get_local("msg").as_python_constant())
    except Exception:  # noqa: BLE001 - ours: a break all the same, without the reason
        message = "graph break"
    try:
        unimplemented, structured = internals._unimplemented()
    except Exception:  # noqa: BLE001 - ours: never an internal error
        return
    if structured:
        internals.graph_break("Graph break", "", message, "")
    unimplemented(message)


def log_every_graph_break() -> Callable[[], None]:
    """Makes Dynamo log every graph break in full, not once per source line (Dynamo 2.5
    logs repeats elsewhere, without the words "Graph break"). Returns how to undo it."""
    from torch._dynamo import utils

    checker = getattr(utils, "graph_break_dup_warning_checker", None)
    if checker is None or "add" in vars(checker):
        return lambda: None

    def add(key: Any) -> bool:
        return True

    checker.add = add

    def undo() -> None:
        if vars(checker).get("add") is add:
            del checker.add

    return undo


def count_graphs(
    on_graph: Callable[[], None] | None = None,
) -> tuple[Callable[[], int], Callable[[], None]]:
    """Counts the graphs Dynamo compiles from now on, whatever backend compiles them and
    even if the program clears Dynamo's counters: returns (the count so far, undo).
    ``on_graph`` is called after each new graph.

    Dynamo adds one to ``counters["stats"]["unique_graphs"]`` per graph; the stats
    counter becomes one that also keeps a running total outside ``counters``. The
    graphs of this package's capability trials do not count.
    """
    import collections

    stats = internals.counters()
    seen = [0]

    class Tally(collections.Counter):  # type: ignore[type-arg]
        def __setitem__(self, key: Any, value: Any) -> None:
            added = 0
            if key == "unique_graphs" and isinstance(value, int) and not capabilities.TRIALS:
                added = max(0, value - self.get(key, 0))
                seen[0] += added
            super().__setitem__(key, value)
            if added and on_graph is not None:
                on_graph()

    factory = stats.default_factory
    current = Tally()
    dict.update(current, stats["stats"])  # the count so far, without counting it
    stats["stats"] = current
    stats.default_factory = Tally  # a program's counters.clear() makes a Tally again

    def undo() -> None:
        stats.default_factory = factory
        stats["stats"] = collections.Counter(stats["stats"])

    return lambda: seen[0], undo


def forget_skips() -> None:
    """On a change of mode: lets Dynamo consider again the code it traced in the mode
    that ends, so that a skip it decided then does not outlive that mode. Never raises.
    """
    if not TRACED_CODE:
        return
    codes = list(TRACED_CODE.values())
    TRACED_CODE.clear()
    try:
        for code in codes:
            unskip_code(code)
    except Exception as error:  # noqa: BLE001 - runs inside the user's `with` statement
        step_aside("forgetting skipped frames", error)
