"""Dynamo's internals, as this package reads them: the one seam where torch versions differ.

Every Dynamo class, attribute and function the package touches is looked up here, keyed
by what is present rather than by version string. The rest of ``_dynamo`` calls these
functions and never reads a Dynamo attribute itself, so supporting a new torch means
editing this file alone. Lookups that fail raise :class:`Missing`, which callers treat
as "this hook is not available here".
"""

from __future__ import annotations

import dis
import functools
import importlib
import inspect
import types
from collections.abc import Callable
from typing import Any

__all__ = [
    "Missing",
    "constant",
    "dict_class",
    "dict_entries",
    "dynamo_errors",
    "graph_break",
    "guard_constant",
    "guard_id",
    "guard_type",
    "install_global",
    "is_fullgraph",
    "kinds",
    "new_dict",
    "new_list",
    "new_tuple",
    "registration_tables",
    "skip_frame",
    "sources",
]

#: The name of Dynamo's graph-break log.
GRAPH_BREAK_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"


class Missing(Exception):
    """What this package reads is not in this torch's Dynamo."""


def _cached(function: Callable[[], Any]) -> Callable[[], Any]:
    """Caches a successful lookup; a failure (Dynamo half imported) may pass later."""
    found: list[Any] = []

    @functools.wraps(function)
    def cached() -> Any:
        if not found:
            found.append(function())
        return found[0]

    return cached


@_cached
def kinds() -> types.SimpleNamespace:
    """Dynamo's variable classes the package reads and builds. Raises :class:`Missing`."""
    try:
        import torch
        from torch._dynamo import variables
        from torch._dynamo.variables import functions, misc
        from torch._dynamo.variables.base import VariableTracker

        try:
            from torch._dynamo.variables.base import ValueMutationNew as new
        except ImportError:  # torch 2.5 marks new containers with MutableLocal
            from torch._dynamo.variables.base import MutableLocal as new
        return types.SimpleNamespace(
            Base=VariableTracker,
            List=variables.ListVariable,
            Tuple=variables.TupleVariable,
            Dict=variables.ConstDictVariable,
            Tensor=variables.TensorVariable,
            Constant=variables.ConstantVariable,
            Symbol=variables.SymNodeVariable,
            Deleted=variables.DeletedVariable,
            Function=variables.UserFunctionVariable,
            NestedFunction=variables.NestedUserFunctionVariable,
            Polyfilled=variables.PolyfilledFunctionVariable,
            GetAttr=variables.GetAttrVariable,
            UserObject=variables.UserDefinedObjectVariable,
            # Instances of a user class, and of plain `object` (dm-tree's MAP_TO_NONE).
            objects=tuple(
                cls
                for cls in (variables.UserDefinedObjectVariable, getattr(misc, "ObjectVariable", 0))
                if isinstance(cls, type)
            ),
            new=new,
            new_keyword="mutation_type" if new.__name__ == "ValueMutationNew" else "mutable_local",
            tensor_types=(torch.Tensor, torch.nn.Parameter),
            callables=(
                functions.BaseUserFunctionVariable,
                variables.TorchInGraphFunctionVariable,
                variables.BuiltinVariable,
                variables.FunctoolsPartialVariable,
                variables.PolyfilledFunctionVariable,
            ),
            dict_takes_user_cls="user_cls"
            in inspect.signature(variables.ConstDictVariable.__init__).parameters,
        )
    except (ImportError, AttributeError, TypeError, ValueError) as error:
        raise Missing(f"Dynamo's variable classes: {error}") from error


def _mutable() -> dict[str, Any]:
    """The keyword that marks a container as made while tracing."""
    k = kinds()
    return {k.new_keyword: k.new()}


def new_list(items: list[Any]) -> Any:
    """A list made while tracing."""
    return kinds().List(list(items), **_mutable())


def new_tuple(items: list[Any]) -> Any:
    """A tuple made while tracing."""
    return kinds().Tuple(list(items))


def new_dict(items: dict[Any, Any]) -> Any:
    """A plain dict made while tracing, from key variables (or key trackers) to values."""
    k = kinds()
    if k.dict_takes_user_cls:
        return k.Dict(items, user_cls=dict, **_mutable())
    return k.Dict(items, **_mutable())


def constant(value: Any) -> Any:
    """A constant variable."""
    return kinds().Constant.create(value)


def sequence_items(variable: Any) -> list[Any]:
    """The item variables of a list or tuple variable."""
    return list(variable.items)


def constant_value(variable: Any) -> Any:
    """The value a ConstantVariable holds."""
    return variable.value


#: Flags of code that :func:`trivial_call` leaves to Dynamo.
_NOT_TRIVIAL = (
    inspect.CO_VARARGS
    | inspect.CO_VARKEYWORDS
    | inspect.CO_GENERATOR
    | inspect.CO_COROUTINE
    | inspect.CO_ASYNC_GENERATOR
    | inspect.CO_ITERABLE_COROUTINE
)
_SETUP_OPS = frozenset({"RESUME", "NOP", "CACHE", "EXTENDED_ARG", "NOT_TAKEN"})
_LOAD_ARGUMENT = frozenset({"LOAD_FAST", "LOAD_FAST_BORROW", "LOAD_FAST_CHECK"})
_LOAD_CONSTANT = frozenset({"LOAD_CONST", "LOAD_SMALL_INT"})
_CONSTANTS = (type(None), bool, int, float, str, bytes)
_TRIVIAL_BODIES: dict[types.CodeType, tuple[str, Any] | None] = {}


def _trivial_body(code: types.CodeType) -> tuple[str, Any] | None:
    """``("argument", index)`` or ``("constant", value)`` where the code does nothing but
    return that; None for any other code."""
    if code.co_flags & _NOT_TRIVIAL or code.co_kwonlyargcount or code.co_cellvars:
        return None
    if code.co_freevars:
        return None
    ops = [op for op in dis.get_instructions(code) if op.opname not in _SETUP_OPS]
    if len(ops) == 1 and ops[0].opname == "RETURN_CONST":
        value = ops[0].argval
    elif len(ops) == 2 and ops[1].opname == "RETURN_VALUE":
        if ops[0].opname in _LOAD_ARGUMENT and ops[0].arg < code.co_argcount:
            return ("argument", ops[0].arg)
        if ops[0].opname not in _LOAD_CONSTANT:
            return None
        value = ops[0].argval
    else:
        return None
    return ("constant", value) if type(value) in _CONSTANTS else None


def trivial_call(function: Any, args: list[Any]) -> Any:
    """The result of a call of a Python function that only returns one of its arguments
    or a constant (``lambda x: x``, ``lambda _: None``), without inlining it: its body has
    no effect to trace. None for any other call, which Dynamo then inlines."""
    try:
        k = kinds()
        function = function.realize()
        if type(function) not in (k.Function, k.NestedFunction):
            return None
        if getattr(function, "is_constant", False):
            return None
        code = function.get_code()
        if code not in _TRIVIAL_BODIES:
            _TRIVIAL_BODIES[code] = _trivial_body(code)
        body = _TRIVIAL_BODIES[code]
        if body is None or len(args) != code.co_argcount:
            return None
        return args[body[1]] if body[0] == "argument" else constant(body[1])
    except Exception:  # noqa: BLE001 - Dynamo's classes moved: inline as usual
        return None


def object_value(variable: Any) -> Any:
    """The Python object an object variable stands for; None for other variables."""
    if isinstance(variable, kinds().objects):
        return getattr(variable, "value", None)
    return None


def function_of(variable: Any) -> Any:
    """The Python function a function variable stands for."""
    return variable.fn


@_cached
def _generic_getattr() -> Callable[..., Any] | None:
    try:  # torch 2.15: Dynamo's PyObject_GetAttr
        from torch._dynamo.variables.object_protocol import generic_getattr
    except ImportError:
        return None
    return generic_getattr


def get_attribute(tx: Any, variable: Any, name: str) -> Any:
    """``variable.name`` while tracing, as Dynamo's own attribute access does it."""
    generic = _generic_getattr()
    if generic is not None:
        return generic(tx, variable, name)
    return variable.var_getattr(tx, name)


def default_factory(tx: Any, variable: Any) -> Any:
    """A defaultdict variable's ``default_factory``: the variable Dynamo's defaultdict
    keeps (read as an attribute, Dynamo 2.10 and earlier fail or answer with a variable
    of no type); else read as an attribute."""
    held = getattr(variable, "default_factory", None)
    if isinstance(held, kinds().Base):
        return held
    return get_attribute(tx, variable, "default_factory")


#: Names a variable class's slot methods go by, across torch versions: this package's
#: variables define the first of each row, and :func:`with_slot_names` adds the others.
_RICHCOMPARE_NAMES = ("richcompare_impl", "tp_richcompare_impl")
_SLOT_NAMES: tuple[tuple[str, ...], ...] = (
    ("var_getattr", "tp_getattro_impl"),
    _RICHCOMPARE_NAMES,
    ("bool_impl", "nb_bool_impl"),
    ("repr_impl", "tp_repr_impl"),
    ("str_impl", "tp_str_impl"),
    ("len_impl", "sq_length", "mp_length", "sq_length_impl", "mp_length_impl"),
)


def with_slot_names(cls: type) -> type:
    """Gives a variable class each slot method under every name some torch calls it."""
    for first, *others in _SLOT_NAMES:
        method = cls.__dict__.get(first)
        if method is not None:
            for name in others:
                setattr(cls, name, method)
    return cls


def dict_class(variable: Any) -> type:
    """The Python class of a ConstDictVariable (its ``user_cls`` before torch 2.15)."""
    user_cls = getattr(variable, "user_cls", None)
    return user_cls if isinstance(user_cls, type) else variable.python_type()


def dict_entries(variable: Any) -> list[tuple[Any, Any, Any]]:
    """``(key variable, key tracker, value variable)`` of a dict variable, in its order."""
    return [(tracker.vt, tracker, value) for tracker, value in variable.items.items()]


def is_fullgraph(tx: Any) -> bool:
    """Whether a graph break would be an error in this trace (``fullgraph=True``)."""
    # one_graph (torch 2.8 and before, and later as fullgraph's own flag) and
    # error_on_graph_break (2.9 on): either set means an error; neither found, assume one.
    flags = [getattr(tx, name, None) for name in ("one_graph", "error_on_graph_break")]
    if all(flag is None for flag in flags):
        return True
    return any(bool(flag) for flag in flags)


@_cached
def _unimplemented() -> tuple[Callable[..., Any], bool]:
    try:
        from torch._dynamo.exc import unimplemented
    except ImportError as error:
        raise Missing(f"torch._dynamo.exc.unimplemented: {error}") from error
    return unimplemented, "gb_type" in inspect.signature(unimplemented).parameters


def graph_break(gb_type: str, context: str, explanation: str, hint: str) -> Any:
    """Ends the graph at the user's call (Dynamo's ``Unsupported``); never returns."""
    unimplemented, structured = _unimplemented()
    if structured:
        unimplemented(gb_type=gb_type, context=context, explanation=explanation, hints=[hint])
    unimplemented(f"{gb_type}: {explanation}")  # torch 2.5: one message
    raise AssertionError("unimplemented returned")  # pragma: no cover


def skip_frame(message: str, tx: Any = None) -> Any:
    """Runs the frame being traced eagerly. Raises :class:`Missing` where Dynamo cannot."""
    from torch._dynamo import exc

    skip = getattr(exc, "SkipFrame", None)
    if not isinstance(skip, type):
        raise Missing("torch._dynamo.exc.SkipFrame")
    if inlined_break_resumes(tx):
        end_frame(tx, message)
    raise skip(message)


@_cached
def inlined_skip_becomes_break() -> bool:
    """Whether Dynamo turns a frame skip raised inside an inlined call into a graph break
    (before torch 2.11), read off what its inliner catches."""
    try:
        from torch._dynamo.symbolic_convert import InliningInstructionTranslator

        return "SkipFrame" in InliningInstructionTranslator.inline_call_.__code__.co_names
    except Exception:  # noqa: BLE001 - moved: a later Dynamo, which lets the skip through
        return False


def inlined_break_resumes(tx: Any) -> bool:
    """Whether ``tx`` traces an inlined call, on a Dynamo that resumes after a graph break
    there (see :func:`inlined_skip_becomes_break`). Resuming, such a Dynamo realizes every
    variable of the frame, and recurses without end through a structure that contains
    itself, or past Python's limit through a deep one: :func:`end_frame` instead.
    """
    return (
        tx is not None and getattr(tx, "parent", None) is not None and inlined_skip_becomes_break()
    )


def end_frame(tx: Any, message: str) -> Any:
    """Ends the whole frame ``tx`` belongs to, with no partial graph: it runs eagerly."""
    tx.output.root_tx.one_graph = True  # the break below then reaches the frame's top
    return graph_break("dynamo-tree-compat runs this frame eagerly", message, message, "")


@_cached
def break_recurses_on_cycles() -> bool:
    """Whether a graph break makes Dynamo realize the frame's variables without end when
    a structure contains itself (before torch 2.11). Tried once on a list variable that
    holds itself, outside any trace.
    """
    try:
        lazy = importlib.import_module("torch._dynamo.variables.lazy")
        loop = new_list([])
        loop.items.append(loop)
        lazy.LazyVariableTracker.realize_all(loop)
    except RecursionError:
        return True
    except Exception:  # noqa: BLE001 - moved: a later Dynamo
        return False
    return False


@_cached
def defaultdict_takes_items() -> bool:
    """Whether Dynamo traces ``defaultdict(factory, items)`` (torch 2.10 on). Before, its
    call to the class takes the factory alone, and only a builtin container or a
    function: a factory read in traced code is not one. Read off the code of the class
    variable's call; True where that code is not found (later Dynamos).
    """
    try:
        user_defined = importlib.import_module("torch._dynamo.variables.user_defined")
        source = inspect.getsource(user_defined.UserDefinedClassVariable.call_function)
    except Exception:  # noqa: BLE001 - moved: a later Dynamo
        return True
    start = source.find("self.value is collections.defaultdict")
    return start < 0 or "len(args) <= 1" not in source[start : start + 200]


@_cached
def deque_keeps_maxlen() -> bool:
    """Whether Dynamo's deque variable holds a ``maxlen`` (torch 2.6 on). Before, Dynamo
    cannot call ``deque(..., maxlen=...)``, which optree's ``tree_map_`` does. True where
    the class is not found (later Dynamos)."""
    try:
        lists = importlib.import_module("torch._dynamo.variables.lists")
        parameters = inspect.signature(lists.DequeVariable.__init__).parameters
    except Exception:  # noqa: BLE001 - moved: a later Dynamo
        return True
    return "maxlen" in parameters


@_cached
def defaultdict_leaves_graph() -> bool:
    """Whether a defaultdict made while tracing leaves the graph as a defaultdict (torch
    2.8 on). Before, Dynamo rebuilds it with its dict's code, as a plain dict: a wrong
    result, torch's own. Read off the rebuilding code of its variable; True where that
    code is not found (later Dynamos).
    """
    try:
        dicts = importlib.import_module("torch._dynamo.variables.dicts")
        rebuild = dicts.DefaultDictVariable.reconstruct
        if rebuild is not dicts.ConstDictVariable.reconstruct:
            return True
    except Exception:  # noqa: BLE001 - moved: a later Dynamo
        return True
    try:
        source = inspect.getsource(rebuild)
    except Exception:  # noqa: BLE001 - not readable: assume the worst, break the graph
        return False
    return "OrderedDict" not in source or "defaultdict" in source


def give_mapping_proxies_a_type() -> Callable[[], None] | None:
    """Dynamo 2.7 and earlier cannot tell a mappingproxy variable's type: ``type()`` and
    ``isinstance()`` on one end tracing with a UserError. Gives its class the answer later
    Dynamos give, ``types.MappingProxyType``. Returns how to undo that; None where the
    class answers by itself, or is not found.
    """
    try:
        dicts = importlib.import_module("torch._dynamo.variables.dicts")
        proxies = dicts.MappingProxyVariable
        if proxies.python_type is not kinds().Base.python_type:
            return None
    except Exception:  # noqa: BLE001 - moved: nothing to give
        return None

    def python_type(self: Any) -> type:
        return types.MappingProxyType

    previous = proxies.__dict__.get("python_type")
    proxies.python_type = python_type

    def undo() -> None:
        if proxies.__dict__.get("python_type") is not python_type:
            return  # replaced since: not ours to take back
        if previous is None:
            del proxies.python_type
        else:
            proxies.python_type = previous

    return undo


@_cached
def sort_raises_cleanly() -> bool:
    """Whether Dynamo's ``sorted()`` raises a TypeError from comparing keys as the user's
    error (torch 2.11 on). Before, the TypeError escapes Dynamo's own code: an internal
    error. Read off the code of ``list.sort``'s variable; False where it is not found.
    """
    try:
        lists = importlib.import_module("torch._dynamo.variables.lists")
        source = inspect.getsource(lists.ListVariable.call_method)
    except Exception:  # noqa: BLE001 - not found: the twins check keys themselves
        return False
    start = source.find('name == "sort"')
    end = source.find("if name ==", start + 1)
    return start >= 0 and "raise_observed_exception" in source[start:end]


@_cached
def dynamo_errors() -> tuple[type[BaseException], ...]:
    """Dynamo's own exceptions: a user error seen while tracing, or a graph break.

    They pass through this package's guards untouched; any other error in the package's
    code while tracing makes the call step aside.
    """
    try:
        from torch._dynamo.exc import TorchDynamoException
    except ImportError:  # pragma: no cover - every torch this package supports has it
        return ()
    return (TorchDynamoException,)


@_cached
def sources() -> types.SimpleNamespace:
    """Dynamo's guard sources and guard kinds. Raises :class:`Missing`."""
    try:
        from torch._dynamo import source
        from torch._dynamo.guards import GuardBuilder, install_guard

        found = types.SimpleNamespace(
            Attr=source.AttrSource,
            Global=source.GlobalSource,
            # torch 2.6 and later; without it, no guard on a spec's contents
            CallNoArgs=getattr(source, "CallFunctionNoArgsSource", None),
            install=install_guard,
            CONSTANT_MATCH=GuardBuilder.CONSTANT_MATCH,
            TYPE_MATCH=GuardBuilder.TYPE_MATCH,
            ID_MATCH=GuardBuilder.ID_MATCH,
        )
    except (ImportError, AttributeError) as error:
        raise Missing(f"Dynamo's guard sources: {error}") from error
    return found


def guard_constant(source: Any) -> None:
    """Guards on the value at ``source`` (by ``==``)."""
    s = sources()
    s.install(source.make_guard(s.CONSTANT_MATCH))


def guard_type(source: Any) -> None:
    """Guards on the type of the value at ``source``."""
    s = sources()
    s.install(source.make_guard(s.TYPE_MATCH))


def guard_id(source: Any) -> None:
    """Guards on the identity of the value at ``source``."""
    s = sources()
    s.install(source.make_guard(s.ID_MATCH))


def install_global(tx: Any, prefix: str, value: Any) -> str:
    """Installs ``value`` as a global of the compiled code; returns its name."""
    return tx.output.install_global_by_id(prefix, value)


def build(tx: Any, name: str, value: Any) -> Any:
    """Dynamo's variable for ``value``, read through the global ``name`` (so what it holds
    has a source, and guards)."""
    from torch._dynamo.variables.builder import VariableBuilder

    return VariableBuilder(tx, sources().Global(name))(value)


def resolve_source(tx: Any, source: Any) -> Any:
    """The real value behind a source, or :class:`Missing` where Dynamo cannot say."""
    resolve = getattr(tx.output, "resolve_source_value", None)
    if resolve is not None:
        return resolve(source)
    # Without it (2.5, 2.6 and 2.7 among the releases checked): the source's name, which
    # is Dynamo's own guard expression, read in the root frame as its guards read it.
    try:
        from torch._dynamo.guards import CLOSURE_VARS

        root = tx.output.root_tx
        scope = {**CLOSURE_VARS, "L": root.f_locals, "G": root.f_globals}
        return eval(source.name(), scope)
    except Exception as error:
        raise Missing(f"the value of {source!r}: {error!r}") from error


def deque_lost_maxlen(variable: Any) -> bool:
    """Whether Dynamo's deque variable holds its ``maxlen`` as the constant None."""
    current = getattr(variable, "maxlen", None)
    if not (hasattr(current, "is_python_constant") and current.is_python_constant()):
        return False  # not Dynamo's deque variable as this package knows it
    return current.as_python_constant() is None


def set_deque_maxlen(variable: Any, maxlen: int) -> None:
    """Puts a deque variable's ``maxlen`` back (see :func:`deque_lost_maxlen`)."""
    variable.maxlen = constant(maxlen)


def load_global(codegen: Any, prefix: str, value: Any) -> None:
    """Makes ``codegen`` load ``value`` as a global of the compiled code."""
    name = install_global(codegen.tx, prefix, value)
    codegen.append_output(codegen.create_load_global(name, add=True))


def nonvar_fields(*names: str) -> set[str]:
    """A VariableTracker subclass's ``_nonvar_fields``, with ``names`` added."""
    return {*names, *kinds().Base._nonvar_fields}


def registration_tables() -> tuple[dict[Any, Any], Any, dict[Any, Any], dict[Any, Any]]:
    """The tables ``substitute_in_graph`` writes to: (id dispatch, polyfilled ids or None
    on torch 2.5, rule map, polyfill handlers). Raises :class:`Missing`."""
    try:
        from torch._dynamo import trace_rules
        from torch._dynamo.variables import PolyfilledFunctionVariable
        from torch._dynamo.variables.builder import VariableBuilder

        id_dispatch = VariableBuilder._id_dispatch()
        rule_map = trace_rules.get_torch_obj_rule_map()
        handlers = PolyfilledFunctionVariable._get_polyfill_handlers()
    except (ImportError, AttributeError, TypeError) as error:
        raise Missing(f"substitute_in_graph's tables: {error}") from error
    polyfilled_ids = getattr(trace_rules, "_polyfilled_function_ids", None)
    if not (
        isinstance(id_dispatch, dict)
        and isinstance(rule_map, dict)
        and isinstance(handlers, dict)
        and (
            polyfilled_ids is None
            or (
                callable(getattr(polyfilled_ids, "add", None))
                and callable(getattr(polyfilled_ids, "remove", None))
            )
        )
    ):
        raise Missing("substitute_in_graph's tables are of another shape")
    return id_dispatch, polyfilled_ids, rule_map, handlers


def builder_wrap() -> tuple[Any, str]:
    """(owner, name) of the function Dynamo's builder makes a variable of a value with."""
    from torch._dynamo.variables.builder import VariableBuilder

    if not callable(getattr(VariableBuilder, "_wrap", None)):
        raise Missing("VariableBuilder._wrap")
    return VariableBuilder, "_wrap"


def sourceless_create() -> tuple[Any, str]:
    """(owner, name) of the function Dynamo makes a variable of a value without a source
    with; raises :class:`Missing` where it has moved."""
    from torch._dynamo.variables.builder import SourcelessBuilder

    if not callable(getattr(SourcelessBuilder, "create", None)):
        raise Missing("SourcelessBuilder.create")
    return SourcelessBuilder, "create"


def compares_through_polyfills() -> bool:
    """Whether Dynamo traces ``a != b`` on other objects through its Python polyfills,
    which read ``type(a).__ne__`` (torch 2.12 and earlier), rather than through a
    variable's richcompare slot (2.13 on)."""
    base = kinds().Base
    return not any(hasattr(base, name) for name in _RICHCOMPARE_NAMES)


def call_no_args_source(source: Any) -> Any:
    """The source of ``source()``, for a guard. Raises :class:`Missing` on torch 2.5."""
    call = sources().CallNoArgs
    if call is None:
        raise Missing("torch._dynamo.source.CallFunctionNoArgsSource")
    return call(source)


def root_code(tx: Any) -> Any:
    """The code object of the frame Dynamo is converting (not of an inlined call)."""
    return tx.output.root_tx.f_code


def skip_keeps_graphs() -> bool:
    """Whether Dynamo marks a code to run eagerly beside its compiled graphs (exec
    strategies, torch 2.7 on). Before, the mark replaces them: a code marked in one mode
    (a graph break inside a ``with`` block) compiles again in the other."""
    from torch._dynamo import eval_frame

    return getattr(eval_frame, "set_code_exec_strategy", None) is not None


def unskip_code(code: Any) -> None:
    """Makes Dynamo consider ``code`` again after it marked the code to run eagerly for
    good, keeping its compiled graphs.

    Where Dynamo has no exec strategies (torch 2.6 and earlier), its skip mark replaces
    a code's compiled graphs: a code with graphs has no mark, and is left alone; one
    without is reset, which drops nothing.
    """
    if skip_keeps_graphs():
        from torch._dynamo import eval_frame
        from torch._dynamo.types import FrameAction, FrameExecStrategy

        strategy = FrameExecStrategy(FrameAction.DEFAULT, FrameAction.DEFAULT)
        eval_frame.set_code_exec_strategy(code, strategy)
        return
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list, reset_code

    if not _debug_get_cache_entry_list(code):
        reset_code(code)


def builder_tx(builder: Any) -> Any:
    """The translator a VariableBuilder builds for."""
    return builder.tx


def tensor_check() -> tuple[Any, str]:
    """(owner, name) of Dynamo's check of a new frame for tensors."""
    from torch._dynamo import convert_frame

    if not callable(getattr(convert_frame, "has_tensor_in_frame", None)):
        raise Missing("convert_frame.has_tensor_in_frame")
    return convert_frame, "has_tensor_in_frame"


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
        unimplemented, structured = _unimplemented()
    except Exception:  # noqa: BLE001 - ours: never an internal error
        return
    if structured:
        graph_break("Graph break", "", message, "")
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


def reset_compiled_code() -> None:
    """Drops compiled graphs so that none traced with a removed twin runs again."""
    import torch._dynamo

    torch._dynamo.reset()


def lookup_backend(name: str) -> Callable[..., Any]:
    """The compiler behind a ``torch.compile(backend=name)`` string."""
    from torch._dynamo import lookup_backend as lookup

    return lookup(name)
