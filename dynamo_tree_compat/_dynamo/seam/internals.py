"""Dynamo's internals, as this package reads them: where torch versions differ.

Every Dynamo class, attribute and function the package reads is looked up here, keyed
by what is present rather than by version string. Where nothing varies between
releases, attributes of Dynamo's objects are read through one generic accessor,
:func:`read` (and :func:`call`), over the names in :data:`READS`. Lookups that fail
raise :class:`Missing`, which callers treat as "this hook is not available here".
"""

from __future__ import annotations

import functools
import importlib
import inspect
import types
from collections.abc import Callable
from typing import Any

from . import Missing
from .types import Codegen, Source, Translator, Variable

__all__ = [
    "DYNAMO_TREE_MODULES",
    "READS",
    "Missing",
    "built",
    "call",
    "counters",
    "dict_class",
    "dict_entries",
    "dynamo_errors",
    "graph_break",
    "guard_constant",
    "guard_id",
    "guard_type",
    "inlines_file",
    "install_global",
    "is_fullgraph",
    "kinds",
    "raise_user_error",
    "read",
    "realized",
    "registration_tables",
    "skip_frame_error",
    "sources",
]

#: Names a variable class's slot methods go by, across torch versions: this package's
#: variables define the first of each row, and :func:`.patches.with_slot_names` adds the others.
RICHCOMPARE_NAMES = ("richcompare_impl", "tp_richcompare_impl")


SLOT_NAMES: tuple[tuple[str, ...], ...] = (
    ("var_getattr", "tp_getattro_impl"),
    RICHCOMPARE_NAMES,
    ("bool_impl", "nb_bool_impl"),
    ("repr_impl", "tp_repr_impl"),
    ("str_impl", "tp_str_impl"),
    ("len_impl", "sq_length", "mp_length", "sq_length_impl", "mp_length_impl"),
)


#: Dynamo's own tree code: its polyfills of torch's pytree and of optree.
DYNAMO_TREE_MODULES = ("torch._dynamo.polyfills.pytree",)

#: Every attribute of Dynamo's objects (variables, translators, builders, sources) that
#: the package reads through :func:`read` and :func:`call`: where nothing varies between
#: releases, one generic accessor serves, and fault injection breaks each name in turn.
READS = frozenset(
    {
        "as_python_constant",
        "call_function",
        "call_method",
        "evaluate_expr",
        "fn",
        "get_code",
        "get_name",
        "is_python_constant",
        "items",
        "python_type",
        "realize",
        "source",
        "stack",
        "tx",
        "value",
    }
)


#: What :func:`read` reads with: the builtin (a Python function here would cost a frame
#: per read, thousands per fast-path call); fault injection puts a failing one here.
_get: Callable[[Any, str], Any] = getattr


def read(owner: Any, name: str, *default: Any) -> Any:
    """``owner.name`` for one of Dynamo's objects, ``name`` one of :data:`READS`; with
    ``default``, that where the attribute is absent, else :class:`Missing`.

    >>> read(types.SimpleNamespace(source=None), "source") is None
    True
    >>> read(object(), "source", "absent")
    'absent'
    """
    if name not in READS:
        raise ValueError(f"{name!r} is not among the attributes the seam reads")
    try:
        return _get(owner, name)
    except AttributeError as error:
        if default:
            return default[0]
        raise Missing(f"{type(owner).__name__}.{name}") from error


def call(owner: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``owner.name(*args, **kwargs)`` for a method of Dynamo's objects (see :func:`read`).

    >>> call(types.SimpleNamespace(realize=lambda: 3), "realize")
    3
    """
    return read(owner, name)(*args, **kwargs)


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
            # Other values a structure may hold as a leaf: classes, modules, functions (not a
            # partial: its variable names functools.partial for a subclass too).
            leaf_objects=tuple(
                cls
                for cls in (
                    variables.UserDefinedObjectVariable,
                    getattr(misc, "ObjectVariable", 0),
                    getattr(variables, "UserDefinedClassVariable", 0),
                    getattr(variables, "NNModuleVariable", 0),
                    getattr(variables, "UnspecializedNNModuleVariable", 0),
                    functions.BaseUserFunctionVariable,
                    variables.TorchInGraphFunctionVariable,
                    variables.BuiltinVariable,
                )
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


def function_code(function: Any) -> types.CodeType | None:
    """The code of a plain Python function variable (not a constant one); None for any
    other callable, or where Dynamo's classes moved."""
    try:
        k = kinds()
        function = function.realize()
        if type(function) not in (k.Function, k.NestedFunction):
            return None
        if getattr(function, "is_constant", False):
            return None
        return function.get_code()
    except Exception:  # noqa: BLE001 - Dynamo's classes moved: inline as usual
        return None


#: Variable classes whose ``realize`` is the base class's (it returns the variable).
_REALIZED: set[type] = set()


def function_caller(function: Callable[..., Any]) -> Callable[..., Any]:
    """Dynamo's ``call_function`` of a Python function's variable: ``(tx, args, kwargs)``
    traces a call of ``function``."""
    return read(kinds().Function(function), "call_function")


def call_function(
    variable: Variable, tx: Translator, args: list[Variable], kwargs: dict[str, Variable]
) -> Any:
    """Traces a call of the callable ``variable`` stands for."""
    return _get(variable, "call_function")(tx, args, kwargs)


def realized(variable: Variable) -> Any:
    """What a variable stands for: a lazy one realized (``realize``), any other itself."""
    cls = type(variable)
    if cls in _REALIZED:
        return variable
    if getattr(cls, "realize", None) is kinds().Base.realize:
        _REALIZED.add(cls)
        return variable
    return call(variable, "realize")


def built(variable: Variable) -> Any:
    """What a variable stands for where Dynamo has built it; None for a lazy variable not
    built yet (building it would install guards that no read asked for)."""
    is_realized = getattr(variable, "is_realized", None)
    if is_realized is not None and not is_realized():
        return None
    return realized(variable)


def object_value(variable: Variable) -> Any:
    """The Python object an object variable stands for; None for other variables."""
    if isinstance(variable, kinds().objects):
        return getattr(variable, "value", None)
    return None


@_cached
def _generic_getattr() -> Callable[..., Any] | None:
    try:  # torch 2.15: Dynamo's PyObject_GetAttr
        from torch._dynamo.variables.object_protocol import generic_getattr
    except ImportError:
        return None
    return generic_getattr


def get_attribute(tx: Translator, variable: Variable, name: str) -> Any:
    """``variable.name`` while tracing, as Dynamo's own attribute access does it."""
    generic = _generic_getattr()
    if generic is not None:
        return generic(tx, variable, name)
    return variable.var_getattr(tx, name)


def default_factory(tx: Translator, variable: Variable) -> Any:
    """A defaultdict variable's ``default_factory``: the variable Dynamo's defaultdict
    keeps (read as an attribute, Dynamo 2.10 and earlier fail or answer with a variable
    of no type); else read as an attribute."""
    held = getattr(variable, "default_factory", None)
    if isinstance(held, kinds().Base):
        return held
    return get_attribute(tx, variable, "default_factory")


def dict_class(variable: Variable) -> type:
    """The Python class of a ConstDictVariable (its ``user_cls`` before torch 2.15)."""
    user_cls = getattr(variable, "user_cls", None)
    return user_cls if isinstance(user_cls, type) else variable.python_type()


def dict_entries(variable: Variable) -> list[tuple[Any, Any, Any]]:
    """``(key variable, key tracker, value variable)`` of a dict variable, in its order."""
    return [(tracker.vt, tracker, value) for tracker, value in variable.items.items()]


def is_fullgraph(tx: Translator) -> bool:
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


def raise_user_error(tx: Translator, error: type[BaseException], message: str) -> Any:
    """Raises ``error(message)`` in the traced program, as its own code would (Dynamo's
    observed exception); never returns."""
    from torch._dynamo.exc import raise_observed_exception

    raise_observed_exception(error, tx, args=[message])
    raise AssertionError("raise_observed_exception returned")  # pragma: no cover


def skip_frame_error() -> type[BaseException]:
    """Dynamo's ``SkipFrame``: raised while tracing, the frame runs eagerly."""
    from torch._dynamo import exc

    skip = getattr(exc, "SkipFrame", None)
    if not isinstance(skip, type):
        raise Missing("torch._dynamo.exc.SkipFrame")
    return skip


def is_inlined(tx: Translator) -> bool:
    """Whether ``tx`` traces an inlined call rather than the frame Dynamo converts."""
    return tx is not None and getattr(tx, "parent", None) is not None


def end_one_graph(tx: Translator) -> None:
    """Makes the next graph break of ``tx``'s frame end the frame (its ``one_graph``)."""
    tx.output.root_tx.one_graph = True


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
            Item=source.GetItemSource,
            # torch 2.6 and later; without it, no guard on a spec's contents
            CallNoArgs=getattr(source, "CallFunctionNoArgsSource", None),
            install=install_guard,
            builder=GuardBuilder,
            CONSTANT_MATCH=GuardBuilder.CONSTANT_MATCH,
            TYPE_MATCH=GuardBuilder.TYPE_MATCH,
            ID_MATCH=GuardBuilder.ID_MATCH,
        )
    except (ImportError, AttributeError) as error:
        raise Missing(f"Dynamo's guard sources: {error}") from error
    return found


def guard_constant(source: Source) -> None:
    """Guards on the value at ``source`` (by ``==``)."""
    s = sources()
    s.install(source.make_guard(s.CONSTANT_MATCH))


def guard_type(source: Source) -> None:
    """Guards on the type of the value at ``source``."""
    s = sources()
    s.install(source.make_guard(s.TYPE_MATCH))


def guard_id(source: Source) -> None:
    """Guards on the identity of the value at ``source``."""
    s = sources()
    s.install(source.make_guard(s.ID_MATCH))


def guard_id_from_the_root(source: Source, value: Any) -> None:
    """Guards that the value at ``source`` is ``value`` (by identity), checked by the root
    of Dynamo's guard tree. A guard on an attribute of a dict whose keys Dynamo guards
    (a defaultdict's ``default_factory``) hangs under the dict's manager, which checks
    only its items: Dynamo 2.13 and 2.15 never evaluate it. Where this Dynamo cannot
    add a guard to the root, the plain identity guard."""
    expected = id(value)

    def create(builder: Any, guard: Any) -> None:
        name = guard.name
        code = f"___check_obj_id({name() if callable(name) else name}, {expected})"
        builder.add_python_lambda_leaf_guard_to_root([code], [code])

    s = sources()
    from torch._dynamo.guards import GuardBuilder

    if not callable(getattr(GuardBuilder, "add_python_lambda_leaf_guard_to_root", None)):
        guard_id(source)
        return
    s.install(source.make_guard(create))


def install_global(tx: Translator, prefix: str, value: Any) -> str:
    """Installs ``value`` as a global of the compiled code; returns its name."""
    return tx.output.install_global_by_id(prefix, value)


def build(tx: Translator, name: str, value: Any) -> Any:
    """Dynamo's variable for ``value``, read through the global ``name`` (so what it holds
    has a source, and guards)."""
    return build_at(tx, sources().Global(name), value)


def build_at(tx: Translator, source: Source, value: Any) -> Any:
    """Dynamo's variable for ``value``, read at ``source``: guarded as Dynamo guards it."""
    from torch._dynamo.variables.builder import VariableBuilder

    return VariableBuilder(tx, source)(value)


def build_lazily(tx: Translator, prefix: str, values: list[Any]) -> list[Any]:
    """Dynamo's variables for ``values``, each built (as :func:`build` would) only where
    traced code uses it; all read through one global list, ``prefix`` its name's start."""
    from torch._dynamo.source import GetItemSource
    from torch._dynamo.variables.lazy import LazyVariableTracker

    held = sources().Global(install_global(tx, prefix, values))
    return [LazyVariableTracker.create(v, GetItemSource(held, i)) for i, v in enumerate(values)]


def resolve_source(tx: Translator, source: Source) -> Any:
    """The real value behind a source, or :class:`Missing` where Dynamo cannot say."""
    resolve = getattr(tx.output, "resolve_source_value", None)
    if resolve is not None:
        return resolve(source)
    # Without it (2.5, 2.6 and 2.7 among the releases checked): the source's name, which
    # is Dynamo's own guard expression, read in the root frame as its guards read it.
    try:
        from torch._dynamo import guards

        # a constant table (2.5, 2.6); built on first use (2.7)
        closure_vars = getattr(guards, "CLOSURE_VARS", None) or guards._get_closure_vars()
        root = tx.output.root_tx
        scope = {**closure_vars, "L": root.f_locals, "G": root.f_globals}
        return eval(source.name(), scope)
    except Exception as error:
        raise Missing(f"the value of {source!r}: {error!r}") from error


def emit_call(codegen: Codegen, count: int) -> None:
    """Makes ``codegen`` call what it pushed with ``count`` arguments, and drop the
    result."""
    from torch._dynamo.bytecode_transformation import create_call_function, create_instruction

    codegen.extend_output([*create_call_function(count, False), create_instruction("POP_TOP")])


def emitted(codegen: Codegen) -> int:
    """How many instructions ``codegen`` holds now (see :func:`take_back`)."""
    return len(codegen.get_instructions())


def take_back(codegen: Codegen, count: int) -> None:
    """Drops what ``codegen`` emitted after it held ``count`` instructions."""
    del codegen.get_instructions()[count:]


def dynamo_config() -> Any:
    """Dynamo's settings module (``torch._dynamo.config``)."""
    from torch._dynamo import config

    return config


def temporary_source_class() -> type:
    """Dynamo's source of a value made in the graph and kept in a local on the way out."""
    from torch._dynamo.source import TempLocalSource

    return TempLocalSource


def load_global(codegen: Codegen, prefix: str, value: Any) -> None:
    """Makes ``codegen`` load ``value`` as a global of the compiled code."""
    name = install_global(codegen.tx, prefix, value)
    codegen.append_output(codegen.create_load_global(name, add=True))


def push_call_of_global(codegen: Codegen, prefix: str, function: Callable[[], Any]) -> None:
    """Makes ``codegen`` push ``function()``: a global of the compiled code, called with
    no argument each time the code runs."""
    from torch._dynamo.bytecode_transformation import create_call_function

    codegen.add_push_null(lambda: load_global(codegen, prefix, function))
    codegen.extend_output(create_call_function(0, False))


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


def hook_point(owner: Any, name: str) -> Any:
    """What Dynamo has at a hook point that :func:`builder_wrap`, :func:`sourceless_create`
    or :func:`.frames.tensor_check` named: the function a hook then calls on."""
    return _get(owner, name)


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


def call_no_args_source(source: Source) -> Any:
    """The source of ``source()``, for a guard. Raises :class:`Missing` on torch 2.5."""
    call = sources().CallNoArgs
    if call is None:
        raise Missing("torch._dynamo.source.CallFunctionNoArgsSource")
    return call(source)


def innermost_code(tx: Translator = None) -> types.CodeType | None:
    """The code of the innermost frame Dynamo traces now (an inlined call's, or the frame
    it converts); None where it cannot say."""
    try:
        if tx is None:
            from torch._dynamo.symbolic_convert import InstructionTranslator

            tx = InstructionTranslator.current_tx()
        output = tx.output
        inner = getattr(output, "current_tx", None) or tx
        return inner.f_code
    except Exception:  # noqa: BLE001 - not tracing, or moved: it cannot say
        return None


def root_code(tx: Translator) -> Any:
    """The code object of the frame Dynamo is converting (not of an inlined call)."""
    return tx.output.root_tx.f_code


def reset_compiled_code() -> None:
    """Drops compiled graphs so that none traced with a removed twin runs again."""
    import torch._dynamo

    torch._dynamo.reset()


def has_exec_strategies() -> bool:
    """Whether Dynamo has per-code exec strategies (``set_code_exec_strategy``)."""
    from torch._dynamo import eval_frame

    return getattr(eval_frame, "set_code_exec_strategy", None) is not None


def inlines_file(filename: str) -> bool:
    """Whether Dynamo traces a call into code from ``filename`` (``trace_rules``), rather
    than skipping it."""
    from torch._dynamo import trace_rules

    return not trace_rules.check_file(filename, True).skipped


def load() -> None:
    """Imports Dynamo (the twins register once it is loaded)."""
    importlib.import_module("torch._dynamo")


def counters() -> Any:
    """Dynamo's event counters (``torch._dynamo.utils.counters``), by kind then event."""
    from torch._dynamo.utils import counters as found

    return found


def realize_all(variable: Variable) -> None:
    """Dynamo's ``LazyVariableTracker.realize_all``: builds every lazy variable inside."""
    lazy = importlib.import_module("torch._dynamo.variables.lazy")
    lazy.LazyVariableTracker.realize_all(variable)


def comptime() -> Any:
    """Dynamo's ``comptime``: a function traced code calls to run Python while tracing."""
    from torch._dynamo.comptime import comptime as found

    return found


def is_tracing() -> bool:
    """Whether Dynamo is tracing a frame now, in this thread."""
    from torch._guards import TracingContext

    return TracingContext.try_get() is not None


def lookup_backend(name: str) -> Callable[..., Any]:
    """The compiler behind a ``torch.compile(backend=name)`` string."""
    from torch._dynamo import lookup_backend as lookup

    return lookup(name)
