"""The installer: registers the table's twins with Dynamo, and takes them back.

:func:`install` goes through :mod:`.substitutions` row by row and has Dynamo trace each
twin (or, for optree, this package's handling) in place of its original, where this
torch is a supported release, the library is imported, and the row is needed with this
library and Dynamo. What happened to each row is an :class:`~.outcomes.Outcome`, kept in
:data:`REGISTERED` or :data:`NOT_REGISTERED`. The originals themselves are never replaced.

>>> row = Substitution("dm-tree", "tree", "flatten", None, unless_present="sys.maxsize")
>>> needed(row), needed(Substitution("dm-tree", "tree", "flatten", None))
(False, True)
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from . import _dynamo, config, outcomes
from ._dynamo import Capability
from .outcomes import TORCH_RANGE, Kind, Outcome
from .substitutions import CXX_PYTREE, LIBRARIES, LIBRARY_OF, Substitution
from .twins import dmtree
from .twins import keras as keras_twins
from .twins import optree as optree_twins

__all__ = [
    "MODE_FLAG",
    "NOT_REGISTERED",
    "PROGRESS",
    "REGISTERED",
    "TORCH_RANGE",
    "UNGUARDED",
    "Progress",
    "install",
    "needed",
    "torch_out_of_range",
    "uninstall",
]


def torch_out_of_range() -> Outcome | None:
    """Why this torch is not supported, or None (see :func:`.outcomes.torch_out_of_range`)."""
    return outcomes.torch_out_of_range(config.any_torch)


def _substitution_unavailable() -> Outcome | None:
    """Why this torch cannot register twins at all, or None."""
    reason = _dynamo.substitution_support()
    return None if reason is None else Outcome(Kind.SUBSTITUTION_UNAVAILABLE, detail=reason)


def _dynamo_can(capability: Capability) -> bool:
    """Whether this Dynamo can do ``capability`` (``_dynamo.has``); False, so
    that the twins work around it, where asking fails."""
    try:
        return bool(_dynamo.has(capability))
    except Exception as error:  # noqa: BLE001 - Dynamo's internals moved: work around
        _dynamo.LOG.debug("asking Dynamo whether it can %s failed: %r", capability, error)
        return False


def _registered_libraries() -> set[str]:
    """The libraries with an original registered now."""
    return {LIBRARY_OF[key] for key in REGISTERED if key in LIBRARY_OF}


def needed(substitution: Substitution) -> bool:
    """Whether ``substitution``'s twin is needed with this library and Dynamo, as its
    row's ``unless_dynamo`` and ``unless_present`` say."""
    if substitution.unless_present is not None:
        module, _, name = substitution.unless_present.rpartition(".")
        try:
            if hasattr(importlib.import_module(module), name):
                return False
        except ImportError:
            pass
    unless = substitution.unless_dynamo
    if unless is None:
        return True
    return not all(map(_dynamo_can, (unless,) if isinstance(unless, Capability) else unless))


def _do_nothing() -> None:
    """Stands in, while tracing, for twins' eager-only side effects (stderr, logging)."""


def _traced_depth_limit() -> int:
    return dmtree.TRACING_HELPERS.traced_max_depth


#: What install() registered: original's import path -> (original, Dynamo's handle); the
#: handle is None where the registration is torch's own and only the fast path is ours.
REGISTERED: dict[str, tuple[Callable[..., Any], Callable[..., Any] | None]] = {}
#: Where the mode flag lives, as an import path; graphs guard on it.
MODE_FLAG = f"{config.__name__}.twins_enabled"
#: Registered originals whose graphs do not guard on the mode (torch's tables moved):
#: scopes then take effect only after torch._dynamo.reset().
UNGUARDED: set[str] = set()
#: Why a substitution is not registered, by the original's import path.
NOT_REGISTERED: dict[str, Outcome] = {}


@dataclasses.dataclass
class Progress:
    """What :func:`install` has done beyond the registrations, so that it does it once
    and :func:`uninstall` and :func:`settle` can take it back."""

    helpers_tried: set[str] = dataclasses.field(default_factory=set)
    """Which groups of helper stand-ins were tried ("twins", "optree"): once each
    ("optree" again after uninstall() takes its stand-ins back)."""
    optree_helpers: list[tuple[Callable[..., Any], Any]] = dataclasses.field(default_factory=list)
    """The stand-ins for optree's own key sort, taken back with optree's twins."""
    twin_helpers: list[tuple[Callable[..., Any], Any]] = dataclasses.field(default_factory=list)
    """The stand-ins for the twins' helpers."""
    provisional: bool = False
    """Whether those were chosen on safe answers to capabilities that could not be asked
    yet (:func:`settle` chooses again)."""
    settle_hooked: bool = False
    """Whether Dynamo's check of each new frame calls :func:`settle`."""
    patched: bool = False
    """Whether Dynamo's variables are patched (undone by uninstall())."""
    undo_on_uninstall: list[Callable[[], None]] = dataclasses.field(default_factory=list)
    """How to take back what install() gave Dynamo itself (a mappingproxy's type)."""


#: This process's progress, changed under :data:`_lock`.
PROGRESS = Progress()
_lock = threading.RLock()


def _gate(twin: Callable[..., Any], original_name: str) -> Callable[..., Any]:
    """Wraps ``twin`` so that, with the mode off, tracing breaks at the user's call."""
    graph_break = _dynamo.graph_break_function()
    reason = f"{original_name} runs untraced: dynamo-tree-compat is disabled here"

    def gate(*args: Any, **kwargs: Any) -> Any:
        # Dynamo guards on this flag, so toggling the mode recompiles.
        if not config.twins_enabled:
            graph_break(msg=reason)
        return twin(*args, **kwargs)

    gate.__name__ = gate.__qualname__ = twin.__name__
    gate.__doc__ = twin.__doc__
    return gate


def install(wait: bool = True) -> dict[str, Outcome]:
    """Registers every twin whose library is imported. Idempotent.

    It waits for a compile in progress in another thread to end, unless ``wait`` is
    False (the post-import hook: the compiling thread may wait for that very import).
    Returns what happened this time to each original it tried, by its import path.
    """
    if wait and _dynamo.half_imported(_dynamo.DYNAMO_MODULE):
        # Another thread is importing Dynamo: its modules are half made, and that thread's
        # post-import hook registers the twins once they are whole.
        return {}
    with _dynamo.compile_lock(wait), _lock:
        unsupported = torch_out_of_range() or _substitution_unavailable()
        if unsupported is None:
            _dynamo.probe()
        outcomes: dict[str, Outcome] = {}
        for name, library in LIBRARIES.items():
            module_name, is_library = library.module, library.is_library
            module = sys.modules.get(module_name)
            for substitution in library.rows:
                key = substitution.original_name
                if key in REGISTERED or (key in NOT_REGISTERED and NOT_REGISTERED[key].settled):
                    continue  # registered, or this version of the library lacks or needs none
                if module is None and unsupported is None:
                    # status() says whether it is pending or not installed; an outcome
                    # from an earlier try (this torch unsupported then) no longer holds.
                    NOT_REGISTERED.pop(key, None)
                    continue
                outcome = unsupported or _attempt(substitution, module_name, module, is_library)
                outcomes[key] = outcome
                if outcome.kind is Kind.REGISTERED:
                    NOT_REGISTERED.pop(key, None)
                    _dynamo.LOG.debug("registered the twin of %s", key)
                else:
                    NOT_REGISTERED[key] = outcome
            if name == "dm-tree" and any(o.kind is Kind.REGISTERED for o in outcomes.values()):
                _connect_dmtree(module)
        _install_helpers()
        # Open answers are asked before Dynamo's first frame, never at import.
        if PROGRESS.provisional and not PROGRESS.settle_hooked:
            PROGRESS.settle_hooked = True
            try:
                _dynamo.before_each_frame(settle)
            except Exception as error:  # noqa: BLE001 - Dynamo's internals moved
                _dynamo.LOG.debug("could not wait for Dynamo's first frame: %r", error)
        if REGISTERED and not PROGRESS.patched:
            PROGRESS.patched = True
            _patch_dynamo()
        return outcomes


def _for_a_tree() -> bool:
    """Whether a workaround applies now: the mode is on, and a tree function reads what
    Dynamo handles (see ``_dynamo.for_a_tree``)."""
    return config.twins_enabled and _dynamo.for_a_tree()


def _patch_dynamo() -> None:
    """Gives mappingproxy variables a type, keeps set subclasses whole, and makes
    ``iter()`` of a number, and optree's ``tree_iter`` twin leaving the graph, end the
    graph, where this Dynamo needs it. Never raises: what cannot be patched is left as
    it is."""
    patches: dict[str, Callable[[], Callable[[], None] | None]] = {
        "give mappingproxy variables a type": lambda: _dynamo.give_mapping_proxies_a_type(
            _for_a_tree
        ),
        "keep set subclasses whole": lambda: _dynamo.keep_set_subclasses_whole(
            lambda: config.twins_enabled
        ),
        "break on iter() of a number": lambda: _dynamo.break_on_iterating_a_number(_for_a_tree),
        "break where tree_iter's generator leaves the graph": (
            lambda: _dynamo.break_where_a_generator_leaves(
                lambda code: config.twins_enabled and code is optree_twins.tree_iter.__code__
            )
        ),
    }
    for what, patch in patches.items():
        try:
            undo = patch()
        except Exception as error:  # noqa: BLE001 - Dynamo's internals moved
            _dynamo.LOG.debug("could not %s: %r", what, error)
        else:
            if undo is not None:
                PROGRESS.undo_on_uninstall.append(undo)


def _attempt(
    substitution: Substitution, module_name: str, module: Any, is_library: Callable[[Any], bool]
) -> Outcome:
    """Registers one row, where its library is the one named and the row is needed."""
    library = substitution.library
    if not is_library(module):
        return Outcome(Kind.NOT_THE_LIBRARY, library, module_name)
    original = substitution.original()
    if original is None:
        return Outcome(Kind.LIBRARY_LACKS_IT, library, substitution.name)
    written_for = substitution.written_for
    if written_for and keras_twins.fingerprint(original) not in written_for:
        return Outcome(Kind.OTHER_CODE, library, substitution.name)
    if not needed(substitution):
        return Outcome(Kind.NO_TWIN_NEEDED, library)
    try:
        return _register(substitution)
    except Exception as error:  # noqa: BLE001 - Dynamo's internals moved
        return Outcome(Kind.FAILED, library, substitution.original_name, repr(error))


def _install_helpers() -> None:
    """Stand-ins for the twins' own helpers, once; and, while optree's twins are
    registered, for optree's key sort where Dynamo's own sort fails on it."""
    if REGISTERED and "twins" not in PROGRESS.helpers_tried:
        PROGRESS.helpers_tried.add("twins")
        try:
            helpers = _twin_helpers()
        except Exception as error:  # noqa: BLE001 - Dynamo's internals moved
            _dynamo.LOG.warning("could not make the twins' helpers' stand-ins: %r", error)
            helpers = []
        for helper in helpers:
            PROGRESS.twin_helpers.extend(_substitute_helpers([helper]))
        PROGRESS.provisional = not _settled()
    optree_registered = "optree" in _registered_libraries()
    if optree_registered and "optree" not in PROGRESS.helpers_tried:
        PROGRESS.helpers_tried.add("optree")
        sort = getattr(sys.modules.get("optree.utils"), "total_order_sorted", None)
        if sort is None or _dynamo_can(Capability.SORT_RAISES_CLEANLY):
            return
        # optree's own flatten functions for dicts sort keys of any types. One unit: the
        # sort's stand-in calls total_order, which without its own would call the sort.
        try:
            unit = [
                (
                    optree_twins.total_order,
                    _breaking(optree_twins.total_order, _UNSORTED_KEYS),
                    True,
                ),
                (sort, optree_twins.total_order_sorted, False),
            ]
            # Its caller for a dict's items passes a key Dynamo 2.5 cannot call.
            try:
                from optree.registry import _sorted_items
            except ImportError:  # an optree without it sorts in its flatten functions
                pass
            else:
                unit.append((_sorted_items, optree_twins.sorted_items, False))
        except Exception as error:  # noqa: BLE001 - Dynamo's internals moved
            _dynamo.LOG.warning("could not stand in for optree's key sort: %r", error)
            return
        PROGRESS.optree_helpers.extend(_substitute_helpers(unit))


def _twin_helpers() -> list[tuple[Callable[..., Any], Callable[..., Any], bool]]:
    """(helper, stand-in, fold on constants) for the twins' own helpers."""
    helpers = dmtree.TRACING_HELPERS
    stand_ins: list[tuple[Callable[..., Any], Callable[..., Any], bool]] = [
        (helpers.warn_about_set, _do_nothing, False),
        (helpers.check_types_deprecated, _do_nothing, False),
        (helpers.depth_limit, _traced_depth_limit, False),
        (helpers.has_attrs_fields, helpers.has_attrs_fields_traced, True),
        (helpers.attrs_field_names, helpers.attrs_field_names_traced, False),
        (helpers.attrs_field_names_known, helpers.attrs_field_names_unknown, True),
    ]
    if not _dynamo_can(Capability.SORT_RAISES_CLEANLY):
        stand_ins.append((helpers.sorted_keys, helpers.sorted_keys_checked, False))
    if not _dynamo_can(Capability.DEFAULTDICT_LEAVES_GRAPH):
        breaking = _breaking(helpers.defaultdict_like, _dynamo.DEFAULTDICT_LEFT_AS_DICT)
        stand_ins.append((helpers.defaultdict_like, breaking, False))
    elif not _dynamo_can(Capability.DEFAULTDICT_TAKES_ITEMS):
        stand_ins.append((helpers.defaultdict_like, helpers.defaultdict_like_copied, False))
    return stand_ins


def _settled(ask: bool = False) -> bool:
    """Whether every capability has its answer; ``ask``: trials compile for those open
    (never at import: before Dynamo's first frame, see :func:`settle`)."""
    try:
        return bool(_dynamo.capabilities_settled(ask=ask))
    except Exception:  # noqa: BLE001 - Dynamo's internals moved: nothing to wait for
        return True


def provisional() -> bool:
    """Whether the helpers' stand-ins were chosen on answers still open (see settle)."""
    return PROGRESS.provisional


def settle() -> bool:
    """Chooses the helpers' stand-ins again once every capability can be asked: torch's
    first ``torch.compile`` imports Dynamo halfway through importing inductor, where no
    trial can compile; Dynamo's check of the first frame calls this. Returns whether all
    is settled now."""
    if not PROGRESS.provisional:
        return True
    with _dynamo.compile_lock(False) as held, _lock:
        if not held or not _settled(ask=True):
            return False
        PROGRESS.provisional = False
        _retire_unneeded()
        while PROGRESS.twin_helpers:
            _dynamo.unsubstitute(*PROGRESS.twin_helpers.pop())
        while PROGRESS.optree_helpers:
            _dynamo.unsubstitute(*PROGRESS.optree_helpers.pop())
        PROGRESS.helpers_tried.difference_update(("twins", "optree"))
        _install_helpers()
        return True


def _retire_unneeded() -> None:
    """Takes back the twins registered on a safe answer that Dynamo, asked at last, does
    not need (before Dynamo has compiled anything with them)."""
    for library in LIBRARIES.values():
        for substitution in library.rows:
            key = substitution.original_name
            if key not in REGISTERED or substitution.unless_dynamo is None or needed(substitution):
                continue
            original, handle = REGISTERED[key]
            removed = (
                _dynamo.unroute(original)
                if handle is None
                else _dynamo.unsubstitute(original, handle)
            )
            if removed:
                del REGISTERED[key]
                UNGUARDED.discard(key)
                NOT_REGISTERED[key] = Outcome(Kind.NO_TWIN_NEEDED, substitution.library)


def _substitute_helpers(
    helpers: list[tuple[Callable[..., Any], Callable[..., Any], bool]],
) -> list[tuple[Callable[..., Any], Any]]:
    """Has Dynamo trace each stand-in for its helper (folded on constants where asked), all
    or none: returns (helper, Dynamo's handle) for each, or nothing where one failed."""
    done: list[tuple[Callable[..., Any], Any]] = []
    for helper, stand_in, fold in helpers:
        try:
            done.append((helper, _dynamo.substitute(helper, stand_in, fold)))
        except Exception as error:  # noqa: BLE001 - the helpers are then traced as they are
            _dynamo.LOG.warning("could not stand in for %s while tracing: %r", helper, error)
            for registered, handle in done:
                _dynamo.unsubstitute(registered, handle)
            return []
    return done


def _connect_dmtree(module: Any) -> None:
    """Tells the twins what only a process with dm-tree and torch has."""
    import torch

    dmtree.connect(module.MAP_TO_NONE, torch.Tensor, torch.nn.Parameter)


def _in_file(code: types.CodeType, filename: str) -> types.CodeType:
    """``code``, and every code object it holds (its inner functions'), as if read from
    ``filename``.

    >>> _in_file(_in_file.__code__, "elsewhere.py").co_filename
    'elsewhere.py'
    """
    consts = tuple(
        _in_file(const, filename) if isinstance(const, types.CodeType) else const
        for const in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


def _clone(function: Any, module: str | None = None, filename: str | None = None) -> Any:
    """A copy of a Python function, which Dynamo traces as it traced the original; with
    ``filename``, read from there (Dynamo skips the original's file).

    With another ``module`` name, torch's own tree_map fast path, which knows optree's
    functions by name and module, leaves the copy to be traced as plain code.

    >>> copy = _clone(_traced_depth_limit, module="elsewhere")
    >>> copy is _traced_depth_limit, copy(), copy.__module__
    (False, 1000, 'elsewhere')
    """
    code = function.__code__ if filename is None else _in_file(function.__code__, filename)
    copy = types.FunctionType(
        code,
        function.__globals__,
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__qualname__ = function.__qualname__
    copy.__module__ = module or function.__module__
    copy.__doc__ = function.__doc__
    return copy


def _register(substitution: Substitution) -> Outcome:
    original = substitution.original()
    name = substitution.original_name
    if substitution.library in ("optree", "torch pytree"):
        return _register_in_front_of_torch(original, name, substitution.twin, substitution.library)
    twin = substitution.twin
    try:
        handle = _dynamo.substitute(original, _gate(twin, name))
    except ValueError as error:  # something else already handles it
        return Outcome(Kind.ALREADY_HANDLED, substitution.library, name, str(error))
    REGISTERED[name] = (original, handle)
    if not _dynamo.route(original, name, MODE_FLAG):
        UNGUARDED.add(name)
    return Outcome(Kind.REGISTERED, substitution.library, name)


def _breaking(original: Callable[..., Any], reason: str) -> Callable[..., Any]:
    """What Dynamo meets for ``original`` where it must not trace it: a graph break naming
    ``reason``, so that the user's call runs eagerly (used where Dynamo would return a
    defaultdict made in the graph as a plain dict, torch 2.7, or would let a sort's
    TypeError escape on keys that are not constants, torch 2.10 and earlier)."""
    graph_break = _dynamo.graph_break_function()

    def breaking(*args: Any, **kwargs: Any) -> Any:
        graph_break(msg=reason)
        return original(*args, **kwargs)  # eagerly: never, it is traced

    return breaking


#: Why optree's key sort breaks the graph on keys that are not constants.
_UNSORTED_KEYS = (
    "dynamo-tree-compat does not sort these dict keys in the graph: they are not "
    "constants, and this Dynamo's sort fails on keys that do not compare"
)


def _untraced(name: str) -> Callable[..., Any]:
    """What Dynamo meets for an optree C function while the mode is off: a graph break."""
    graph_break = _dynamo.graph_break_function()
    reason = f"{name} is C code Dynamo does not trace: dynamo-tree-compat is disabled here"

    def untraced(*args: Any, **kwargs: Any) -> None:
        graph_break(msg=reason)

    return untraced


def _register_in_front_of_torch(
    original: Any, name: str, twin: Callable[..., Any] | None = None, library: str = "optree"
) -> Outcome:
    """Puts this package's handling of an optree function in front of torch's own.

    While the mode is on, Dynamo tries the fast path, if there is one, then our way:
    ``twin`` if given, else optree's own Python code (a copy of the original, which
    meets this package's C layer). With the mode off, or after a fast path's fallback
    where there is no way of ours, it goes torch's way: torch's polyfill, or the
    original traced as plain code (a C function: a graph break, as without the package).
    """
    left_to_torch = Outcome(Kind.LEFT_TO_TORCH, library, name)
    if (
        _dynamo.layer_off(library)
        or _dynamo.routing_support()
        or not _dynamo.hook_builder(MODE_FLAG)
    ):
        return left_to_torch
    python_code = isinstance(original, types.FunctionType)
    # torch's optree-backed pytree: Dynamo before 2.6 skips its file
    filename = _dynamo.PYTREE_COPIES_FILE if name.startswith(f"{CXX_PYTREE}.") else None
    ours = (
        (twin or _clone(original, module=f"{__name__}.own_code", filename=filename))
        if python_code
        else None
    )
    handle = torch_way = None
    if original not in _dynamo.torch_polyfills():  # no registration of torch's
        stand_in = _clone(original) if python_code else _untraced(name)
        try:
            handle = _dynamo.substitute(original, stand_in)
        except ValueError as error:
            return Outcome(Kind.ALREADY_HANDLED, library, name, str(error))
        torch_way = stand_in if python_code else None
    if not _dynamo.route(original, name, MODE_FLAG, torch_way, ours):
        if handle is not None:
            _dynamo.unsubstitute(original, handle)
        return left_to_torch
    REGISTERED[name] = (original, handle)
    return Outcome(Kind.REGISTERED, library, name)


def uninstall() -> list[str]:
    """Removes every registration install() made; returns those torch would not let go.

    Graphs traced with the twins guard on the mode, which is off after uninstalling, so
    they recompile; Dynamo is reset only where a registration had no such guard, since
    torch 2.13 can crash when torch._dynamo.reset() runs while another thread runs
    compiled code.
    """
    with _dynamo.compile_lock(), _lock:
        stuck = []
        unguarded_removed = False
        for key, (original, handle) in list(REGISTERED.items()):
            if handle is None:  # torch's own registration, with our fast path in front
                removed = _dynamo.unroute(original)
            else:
                removed = _dynamo.unsubstitute(original, handle)
            if removed:
                del REGISTERED[key]
                unguarded_removed |= key in UNGUARDED
                UNGUARDED.discard(key)
            else:
                stuck.append(key)
        if "optree" not in _registered_libraries():
            _dynamo.unhook_builder()  # tree specs coming in: torch's way again
            while PROGRESS.optree_helpers:
                _dynamo.unsubstitute(*PROGRESS.optree_helpers.pop())
            PROGRESS.helpers_tried.discard("optree")
        if not REGISTERED:
            while PROGRESS.undo_on_uninstall:
                PROGRESS.undo_on_uninstall.pop()()
            PROGRESS.patched = False
        if unguarded_removed:
            _dynamo.reset_compiled_code()
    return stuck
