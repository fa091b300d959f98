"""The registry: which original function each traceable twin stands in for.

Each :class:`Substitution` names an original by module and attribute, and the twin that
Dynamo traces in its place. :func:`install` registers them with
``torch.compiler.substitute_in_graph``; the originals themselves are never replaced, so
eager calls still run the C library, at the C library's cost.

>>> [s.original_name for s in DM_TREE][:3]
['tree.is_nested', 'tree.flatten', 'tree.flatten_with_path']
"""

from __future__ import annotations

import re
import sys
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import _dynamo, config, dmtree, optree_twins

__all__ = [
    "DM_TREE",
    "LIBRARIES",
    "OPTREE",
    "REGISTERED",
    "Substitution",
    "install",
    "uninstall",
]


@dataclass(frozen=True)
class Substitution:
    """One original function and the twin Dynamo traces in its place.

    For optree, the twin is optional: without one, Dynamo follows optree's own code
    (see :func:`_register_in_front_of_torch`).
    """

    library: str
    module: str
    name: str
    twin: Callable[..., Any] | None

    @property
    def original_name(self) -> str:
        """The original's import path, such as ``tree.flatten``."""
        return f"{self.module}.{self.name}"

    def original(self) -> Callable[..., Any] | None:
        """The original function, if its module is imported and has it, and the twin is
        needed there (a twin may say, as ``dtc_needed``, that only older versions need it).
        """
        module = sys.modules.get(self.module)
        needed = getattr(self.twin, "dtc_needed", None)
        if module is not None and needed is not None and not needed():
            return None
        found: Any = module
        for part in self.name.split("."):  # a function kept on another, such as x.get
            found = getattr(found, part, None)
        return found


def _dm_tree(name: str) -> Substitution:
    return Substitution("dm-tree", "tree", name, getattr(dmtree, name))


DM_TREE: tuple[Substitution, ...] = tuple(
    _dm_tree(name)
    for name in (
        "is_nested",
        "flatten",
        "flatten_with_path",
        "flatten_up_to",
        "flatten_with_path_up_to",
        "unflatten_as",
        "map_structure",
        "map_structure_with_path",
        "map_structure_up_to",
        "map_structure_with_path_up_to",
        "assert_same_structure",
        "traverse",
        "traverse_with_path",
        "_sequence_like",
        "_yield_sorted_items",
        "_yield_value",
        "_is_namedtuple",
        "_is_attrs",
        "_sorted",
        "_assert_shallow_structure",
    )
)


#: optree's C functions: this package traces them at Dynamo's variable level, giving
#: real PyTreeSpec objects. optree's public functions are Python code over these, which
#: Dynamo inlines; where torch has a polyfill of its own for one, this package puts
#: optree's own code back in front of it (with a fast path for common structures).
OPTREE: tuple[Substitution, ...] = (
    *(
        Substitution("optree", "optree._C", name, None)
        for name in (
            "flatten",
            "flatten_with_path",
            "is_leaf",
            "all_leaves",  # optree before 0.14
            "make_leaf",
            "make_none",
            "make_from_collection",
            "is_dict_insertion_ordered",
        )
    ),
    *(
        Substitution("optree", "optree", name, None)
        for name in (
            "tree_leaves",
            "tree_map",
            "tree_map_with_path",
            "tree_flatten",
            "tree_flatten_with_path",
            "tree_structure",
            "tree_unflatten",
            "tree_is_leaf",
            "treespec_leaf",
            "treespec_tuple",
            "treespec_dict",
            # C functions: torch 2.5 has no polyfill of these, and torch's own
            # structseq_fields fails inside Dynamo on a structseq made in the graph.
            "is_namedtuple",
            "is_namedtuple_instance",
            "is_namedtuple_class",
            "namedtuple_fields",
            "is_structseq",
            "is_structseq_instance",
            "is_structseq_class",
            "structseq_fields",
            # optree's code compares sys.version_info, which Dynamo 2.12 cannot.
            "register_pytree_node.get",
        )
    ),
    # torch's polyfills of these give a tuple where optree gives DictMetaData.
    *(
        Substitution("optree", "optree.registry", name, None)
        for name in ("_dict_flatten", "_dict_unflatten", "_none_unflatten")
    ),
    Substitution("optree", "optree", "tree_iter", optree_twins.tree_iter),
    # Dynamo 2.5 cannot call deque(..., maxlen=0), which optree's in-place maps do.
    Substitution("optree", "optree", "tree_map_", optree_twins.tree_map_),
    Substitution("optree", "optree", "tree_map_with_path_", optree_twins.tree_map_with_path_),
    Substitution(
        "optree", "optree", "tree_map_with_accessor_", optree_twins.tree_map_with_accessor_
    ),
    # Dynamo's max and min take a key function only over constant values.
    Substitution("optree", "optree", "tree_max", optree_twins.tree_max),
    Substitution("optree", "optree", "tree_min", optree_twins.tree_min),
    Substitution(
        "optree",
        "optree.ops",
        "_tree_broadcast_common_with_treespec",
        optree_twins.broadcast_common_with_treespec,
    ),
    Substitution("optree", "optree", "tree_broadcast_common", optree_twins.tree_broadcast_common),
)


#: Why a twin is not registered where this library and torch need none.
NO_TWIN_NEEDED = "no twin needed with this library and torch"

#: The torch releases (major, minor) that `make matrix-torch` passes; pyproject.toml
#: declares the same range. Outside it, the package warns once and does nothing: on
#: older releases Dynamo lacks what some calls need (docs/torch-versions.md).
TORCH_RANGE = ((2, 5), (2, 15))


def _torch_out_of_range() -> str | None:
    """Why this torch is not supported, or None."""
    version = str(getattr(sys.modules.get("torch"), "__version__", ""))
    found = re.match(r"(\d+)\.(\d+)", version)
    if config.any_torch or found is None:
        return None
    if TORCH_RANGE[0] <= (int(found[1]), int(found[2])) <= TORCH_RANGE[1]:
        return None
    (low_major, low_minor), (high_major, high_minor) = TORCH_RANGE
    return (
        f"torch {version} is outside the releases this package supports "
        f"({low_major}.{low_minor} to {high_major}.{high_minor})"
    )


def _is_dm_tree(module: Any) -> bool:
    # Another distribution could own the name "tree"; dm-tree has a C core named _tree.
    return hasattr(module, "_tree") and hasattr(module, "map_structure_up_to")


def _is_optree(module: Any) -> bool:
    return hasattr(module, "PyTreeSpec") and hasattr(module, "tree_map")


#: For each mirrored library: its distribution name, import name, check, substitutions.
LIBRARIES: dict[str, tuple[str, Callable[[Any], bool], tuple[Substitution, ...]]] = {
    "dm-tree": ("tree", _is_dm_tree, DM_TREE),
    "optree": ("optree", _is_optree, OPTREE),
}


def _do_nothing() -> None:
    """Stands in, while tracing, for twins' eager-only side effects (stderr, logging)."""


def _traced_depth_limit() -> int:
    return dmtree.TRACED_MAX_DEPTH


# Our own helpers whose side effects have no place in a graph.
_QUIET_WHILE_TRACING: tuple[Callable[[], None], ...] = (
    dmtree._warn_about_set,
    dmtree._check_types_deprecated,
)

#: What install() registered: original's import path -> (original, Dynamo's handle); the
#: handle is None where the registration is torch's own and only the fast path is ours.
REGISTERED: dict[str, tuple[Callable[..., Any], Callable[..., Any] | None]] = {}
#: Where the mode flag lives, as an import path; graphs guard on it.
MODE_FLAG = f"{config.__name__}.twins_enabled"
#: Registered originals whose graphs do not guard on the mode (torch's tables moved):
#: scopes then take effect only after torch._dynamo.reset().
UNGUARDED: set[str] = set()
#: Why a substitution is not registered, by the original's import path.
NOT_REGISTERED: dict[str, str] = {}
_helpers_registered: list[tuple[Callable[..., Any], Callable[..., Any]]] = []
#: Which groups of helper stand-ins install() has tried ("twins", "optree"): once each
#: ("optree" again after uninstall() takes its stand-ins back).
_helpers_tried: set[str] = set()
#: The stand-ins for optree's own key sort, taken back with optree's twins.
_optree_helpers: list[tuple[Callable[..., Any], Any]] = []
#: How to take back what install() gave Dynamo itself (a mappingproxy's type).
_undo_on_uninstall: list[Callable[[], None]] = []
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


def install(wait: bool = True) -> dict[str, str]:
    """Registers every twin whose library is imported. Idempotent.

    It waits for a compile in progress in another thread to end, unless ``wait`` is
    False (the post-import hook: the compiling thread may wait for that very import).
    Returns a map from each original's import path to what happened to it this time:
    ``"registered"``, or the reason it was not.
    """
    with _dynamo.compile_lock(wait), _lock:
        unsupported = _torch_out_of_range() or _dynamo.substitution_support()
        if not unsupported:
            _dynamo.probe()
        outcome: dict[str, str] = {}
        for library, (module_name, is_library, substitutions) in LIBRARIES.items():
            module = sys.modules.get(module_name)
            for substitution in substitutions:
                key = substitution.original_name
                if key in REGISTERED or NOT_REGISTERED.get(key, "").startswith(
                    ("this ", NO_TWIN_NEEDED)
                ):
                    continue  # registered, or this version of the library lacks or needs none
                if module is None and not unsupported:
                    continue  # status() says whether it is pending or not installed
                if unsupported:
                    reason = unsupported
                elif not is_library(module):
                    reason = f"the module {module_name!r} is not {library}"
                elif substitution.original() is None:
                    reason = f"this {library} has no {substitution.name}"
                    if hasattr(sys.modules.get(substitution.module), substitution.name):
                        reason = f"{NO_TWIN_NEEDED}: {library}'s own code is traced"
                else:
                    try:
                        reason = _register(substitution)
                    except Exception as error:  # noqa: BLE001 - Dynamo's internals moved
                        reason = f"left to torch: registering failed with {error!r}"
                if reason is None:
                    outcome[key] = "registered"
                    NOT_REGISTERED.pop(key, None)
                    _dynamo.LOG.debug("registered the twin of %s", key)
                else:
                    outcome[key] = NOT_REGISTERED[key] = reason
            if library == "dm-tree" and "registered" in outcome.values():
                _connect_dmtree(module)
        _install_helpers()
        if REGISTERED and not _undo_on_uninstall:
            try:
                undo = _dynamo.give_mapping_proxies_a_type()
            except Exception as error:  # noqa: BLE001 - Dynamo's internals moved
                _dynamo.LOG.debug("could not give mappingproxy variables a type: %r", error)
            else:
                if undo is not None:
                    _undo_on_uninstall.append(undo)
        return outcome


def _install_helpers() -> None:
    """Stand-ins for the twins' own helpers, once; and, while optree's twins are
    registered, for optree's key sort where Dynamo's own sort fails on it."""
    if REGISTERED and "twins" not in _helpers_tried:
        _helpers_tried.add("twins")
        try:
            helpers = _twin_helpers()
        except Exception as error:  # noqa: BLE001 - Dynamo's internals moved
            _dynamo.LOG.warning("could not make the twins' helpers' stand-ins: %r", error)
            helpers = []
        for helper in helpers:
            _helpers_registered.extend(_substitute_helpers([helper]))
    optree_registered = any(key.startswith("optree.") for key in REGISTERED)
    if optree_registered and "optree" not in _helpers_tried:
        _helpers_tried.add("optree")
        sort = getattr(sys.modules.get("optree.utils"), "total_order_sorted", None)
        if sort is None or _dynamo_can("sort_raises_cleanly"):
            return
        # optree's own flatten functions for dicts sort keys of any types. One unit: the
        # sort's stand-in calls total_order, which without its own would call the sort.
        try:
            pair = [
                (
                    optree_twins.total_order,
                    _breaking(optree_twins.total_order, _UNSORTED_KEYS),
                    True,
                ),
                (sort, optree_twins.total_order_sorted, False),
            ]
        except Exception as error:  # noqa: BLE001 - Dynamo's internals moved
            _dynamo.LOG.warning("could not stand in for optree's key sort: %r", error)
            return
        _optree_helpers.extend(_substitute_helpers(pair))


def _twin_helpers() -> list[tuple[Callable[..., Any], Callable[..., Any], bool]]:
    """(helper, stand-in, fold on constants) for the twins' own helpers."""
    helpers = [(helper, _do_nothing, False) for helper in _QUIET_WHILE_TRACING]
    helpers += [
        (dmtree._depth_limit, _traced_depth_limit, False),
        (dmtree._has_attrs_fields, dmtree._has_attrs_fields_traced, False),
        (dmtree._attrs_field_names, dmtree._attrs_field_names_folded, True),
    ]
    if not _dynamo_can("sort_raises_cleanly"):
        helpers.append((dmtree._sorted_keys, dmtree._sorted_keys_checked, False))
    if not _dynamo_can("defaultdict_leaves_graph"):
        helpers.append(
            (
                dmtree._defaultdict_like,
                _breaking(dmtree._defaultdict_like, _dynamo.DEFAULTDICT_LEFT_AS_DICT),
                False,
            )
        )
    elif not _dynamo_can("defaultdict_takes_items"):
        helpers.append((dmtree._defaultdict_like, dmtree._defaultdict_like_copied, False))
    return helpers


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


def _dynamo_can(reading: str) -> bool:
    """One of the seam's readings of what Dynamo traces by itself (``sort_raises_cleanly``,
    ``defaultdict_takes_items``); False, so that the twins work around it, where reading
    fails."""
    try:
        return bool(getattr(_dynamo, reading)())
    except Exception as error:  # noqa: BLE001 - Dynamo's internals moved: work around
        _dynamo.LOG.debug("reading Dynamo's %s failed: %r", reading, error)
        return False


def _connect_dmtree(module: Any) -> None:
    """Tells the twins what only a process with dm-tree and torch has."""
    import torch

    dmtree._connect(module.MAP_TO_NONE, torch.Tensor, torch.nn.Parameter)


def _clone(function: Any, module: str | None = None) -> Any:
    """A copy of a Python function, which Dynamo traces as it traced the original.

    With another ``module`` name, torch's own tree_map fast path, which knows optree's
    functions by name and module, leaves the copy to be traced as plain code.
    """
    copy = types.FunctionType(
        function.__code__,
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


def _register(substitution: Substitution) -> str | None:
    original = substitution.original()
    name = substitution.original_name
    if substitution.library == "optree":
        return _register_in_front_of_torch(original, name, substitution.twin)
    try:
        handle = _dynamo.substitute(original, _gate(substitution.twin, name))
    except ValueError as error:  # something else already handles it
        return f"already handled elsewhere: {error}"
    REGISTERED[name] = (original, handle)
    if not _dynamo.route(original, name, MODE_FLAG):
        UNGUARDED.add(name)
    return None


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
    original: Any, name: str, twin: Callable[..., Any] | None = None
) -> str | None:
    """Puts this package's handling of an optree function in front of torch's own.

    While the mode is on, Dynamo tries the fast path, if there is one, then our way:
    ``twin`` if given, else optree's own Python code (a copy of the original, which
    meets this package's C layer). With the mode off, or after a fast path's fallback
    where there is no way of ours, it goes torch's way: torch's polyfill, or the
    original traced as plain code (a C function: a graph break, as without the package).
    """
    unexpected = "left to torch: its Dynamo internals are not as this package expects"
    if (
        _dynamo.optree_layer_off()
        or _dynamo.routing_support()
        or not _dynamo.hook_builder(MODE_FLAG)
    ):
        return unexpected
    python_code = isinstance(original, types.FunctionType)
    ours = (twin or _clone(original, module=f"{__name__}.own_code")) if python_code else None
    handle = torch_way = None
    if original not in _dynamo.torch_polyfills():  # no registration of torch's
        stand_in = _clone(original) if python_code else _untraced(name)
        try:
            handle = _dynamo.substitute(original, stand_in)
        except ValueError as error:
            return f"already handled elsewhere: {error}"
        torch_way = stand_in if python_code else None
    if not _dynamo.route(original, name, MODE_FLAG, torch_way, ours):
        if handle is not None:
            _dynamo.unsubstitute(original, handle)
        return unexpected
    REGISTERED[name] = (original, handle)
    return None


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
        if not any(key.startswith("optree.") for key in REGISTERED):
            _dynamo.unhook_builder()  # tree specs coming in: torch's way again
            while _optree_helpers:
                _dynamo.unsubstitute(*_optree_helpers.pop())
            _helpers_tried.discard("optree")
        while not REGISTERED and _undo_on_uninstall:
            _undo_on_uninstall.pop()()
        if unguarded_removed:
            _dynamo.reset_compiled_code()
    return stuck
