"""The status report: versions, mode, how the package was activated, coverage.

Kept apart from :mod:`activation`, which loads into every program that imports torch,
so that defining the report costs nothing until someone asks for it.
"""

from __future__ import annotations

import enum
import inspect
import sys
from dataclasses import dataclass, field
from importlib import metadata
from typing import NamedTuple

from . import _dynamo, activation, config
from .outcomes import Kind, Outcome

__all__ = ["CoverageRow", "Layer", "Status", "coverage", "coverage_rows", "status"]


@dataclass(frozen=True)
class Status:
    """Where the package stands in this process: see :func:`status`."""

    #: Versions of Python, torch and the mirrored libraries (None: not installed).
    versions: dict[str, str | None]
    #: "on" if traced tree calls use the twins now, else "off".
    mode: str
    #: "import", "autoload" or "install()"; None if not activated.
    activated_by: str | None
    #: Whether DYNAMO_TREE_COMPAT=0 is set.
    switched_off: bool
    #: Whether torch._dynamo is imported (the twins register only then).
    dynamo_imported: bool
    #: For each original: registered, or why not.
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    #: Private hooks turned off for this process (their probe failed), with why.
    hooks_off: dict[str, str] = field(default_factory=dict)
    #: Traced calls that stepped aside after an unexpected error in this package's code.
    stepped_aside: int = 0

    @property
    def functions(self) -> dict[str, str]:
        """For each original: "registered", or why not, in words."""
        return {name: str(outcome) for name, outcome in self.outcomes.items()}

    def __str__(self) -> str:
        lines = [f"{name}: {version or 'not installed'}" for name, version in self.versions.items()]
        how = self.activated_by or ("off (DYNAMO_TREE_COMPAT=0)" if self.switched_off else "off")
        lines += [f"mode: {self.mode}", f"activated by: {how}"]
        lines += [f"  {name}: {state}" for name, state in self.functions.items()]
        lines += [f"hook off: {hook}: {why}" for hook, why in self.hooks_off.items()]
        if self.stepped_aside:
            lines.append(f"calls that stepped aside: {self.stepped_aside}")
        return "\n".join(lines)


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def status() -> Status:
    """A structured report: versions, mode, how the package was activated, coverage.

    Takes nothing; returns a :class:`Status` (a frozen dataclass): ``mode`` (``"on"`` or
    ``"off"`` here and now), ``functions`` (each original's import path -> registered,
    pending, not installed, ...), ``outcomes`` (the same, with the reason), the libraries'
    ``versions``, ``activated_by``, ``switched_off``, ``hooks_off`` and ``stepped_aside``.
    It first registers what is pending, as tracing would. Never raises for a library
    that is missing or failed: that is an outcome.

    >>> import torch._dynamo, tree, dynamo_tree_compat  # registered once both are loaded
    >>> report = dynamo_tree_compat.status()
    >>> report.mode, report.functions["tree.flatten"], report.outcomes["tree.flatten"].kind
    ('on', 'registered', <Kind.REGISTERED: 'registered'>)
    """
    activation.register_pending()
    versions = {"python": sys.version.split()[0]}
    for distribution in ("torch", "dm-tree", "optree"):
        versions[distribution] = _version(distribution)
    return Status(
        versions=versions,
        mode="on" if config.twins_enabled else "off",
        activated_by=activation.STATE.activated_by,
        switched_off=activation.switched_off(),
        dynamo_imported=activation.DYNAMO_MODULE in sys.modules,
        outcomes=_outcomes(),
        hooks_off=dict(_dynamo.HOOKS_OFF),
        stepped_aside=sum(_dynamo.counted(_dynamo.Event.STEPPED_ASIDE).values()),
    )


def _not_installed(library: str, module_name: str) -> Outcome:
    """Why a library's module cannot be imported: the library is missing, or the package
    that holds it (Keras, for one of its tree layers) has no such module.

    >>> str(_not_installed("keras.tree", "json.torchtree_impl"))
    'unavailable: this json has no json.torchtree_impl'
    >>> str(_not_installed("optree", "optree_not_here"))
    'unavailable: optree is not installed'
    """
    package = module_name.partition(".")[0]
    if package != module_name and activation.importable(package):
        return Outcome(Kind.NOT_INSTALLED, library, detail=f"this {package} has no {module_name}")
    return Outcome(Kind.NOT_INSTALLED, library)


def _outcomes() -> dict[str, Outcome]:
    """Each original's outcome: the installer's, or, where it has not tried, why not."""
    from . import installer, substitutions

    outcomes = {}
    for library, entry in substitutions.LIBRARIES.items():
        module_name = entry.module
        for substitution in entry.rows:
            name = substitution.original_name
            if name in installer.UNGUARDED:
                outcomes[name] = Outcome(Kind.REGISTERED_UNGUARDED, library, name)
            elif name in installer.REGISTERED:
                outcomes[name] = Outcome(Kind.REGISTERED, library, name)
            elif name in installer.NOT_REGISTERED:
                outcomes[name] = installer.NOT_REGISTERED[name]
            elif not activation.importable(module_name):
                outcomes[name] = _not_installed(library, module_name)
            elif not activation.STATE.armed:
                outcomes[name] = Outcome(Kind.NOT_ACTIVATED, library)
            else:  # torch's pytree is loaded with torch: its rows wait for Dynamo
                waits_for = (
                    "torch._dynamo loads"
                    if library == "torch pytree"
                    else f"torch._dynamo and {module_name} load"
                )
                outcomes[name] = Outcome(Kind.PENDING, library, waits_for)
    return outcomes


class Layer(enum.Enum):
    """How a function traces, as the doctor's summary counts it (its value)."""

    TWIN = "twin"
    FAST_PATH_TWIN = "fast path, else twin"
    FAST_PATH = "fast path, else optree's code"
    FAST_PATH_TORCH = "fast path, else torch's code"
    DYNAMO_OWN = "Dynamo's own fast path"
    #: torch's optree-backed pytree: its code over optree, as Dynamo traces it or a copy
    TORCH_CODE = "torch's code over optree"
    C_LAYER = "C layer (optree._C)"
    OWN_CODE = "optree's own code over the C layer"
    TORCH_POLYFILL = "torch's polyfill"
    STATEFUL = "not traced (changes optree's state)"
    #: This version of the library has no such function: left out of the counts.
    ABSENT = "not in this version"
    NOT_COVERED = "not covered"


class CoverageRow(NamedTuple):
    """One function: its library, its import path, how it traces, and that in words."""

    library: str
    function: str
    layer: Layer
    state: str


def coverage() -> list[tuple[str, str, str]]:
    """``(library, function, how it traces)`` for every dm-tree, optree and torch-pytree
    function the package knows.

    >>> import torch._dynamo, tree
    >>> [row for row in coverage() if row[1] == "tree.flatten"]
    [('dm-tree', 'tree.flatten', 'twin: traced by this package')]
    """
    return [(row.library, row.function, row.state) for row in coverage_rows()]


def coverage_rows() -> list[CoverageRow]:
    """:func:`coverage`, with each function's :class:`Layer`.

    >>> import torch._dynamo, tree
    >>> [row.layer for row in coverage_rows() if row.function == "tree.flatten"]
    [<Layer.FAST_PATH_TWIN: 'fast path, else twin'>]
    """
    outcomes = _outcomes()
    rows = [
        _twin_row(name, outcome)
        for name, outcome in outcomes.items()
        if outcome.library == "dm-tree"
    ]
    rows += _optree_coverage(outcomes)
    rows += [
        _pytree_row(name, outcome)
        for name, outcome in outcomes.items()
        if outcome.library == "torch pytree"
    ]
    rows += [  # Keras's tree layers: twins, as dm-tree's
        _twin_row(name, outcome)
        for name, outcome in outcomes.items()
        if outcome.library.startswith("keras.tree")
    ]
    return rows


def _pytree_row(name: str, outcome: Outcome) -> CoverageRow:
    """torch's own pytree: this package's fast path where Dynamo has none of its own; its
    optree-backed module (``_cxx_pytree``): a copy of torch's code, over optree, where
    Dynamo skips the module or its own tree_map answers wrong."""
    from .substitutions import CXX_PYTREE

    copy = name.startswith(f"{CXX_PYTREE}.")
    if outcome.registered:
        if copy:
            state = "torch's own code (a copy Dynamo traces), over optree, traced"
            return CoverageRow("torch pytree", name, Layer.TORCH_CODE, state)
        state = "this package's fast path, else torch's own code, traced"
        return CoverageRow("torch pytree", name, Layer.FAST_PATH_TORCH, state)
    if outcome.kind is Kind.NO_TWIN_NEEDED:
        if copy:
            state = "left to Dynamo, which traces torch's code, over optree"
            return CoverageRow("torch pytree", name, Layer.TORCH_CODE, state)
        return CoverageRow("torch pytree", name, Layer.DYNAMO_OWN, "left to Dynamo's fast path")
    return CoverageRow("torch pytree", name, _not_registered(outcome), str(outcome))


def _twin_row(name: str, outcome: Outcome) -> CoverageRow:
    """A library whose rows are twins (dm-tree, Keras's tree layers)."""
    if not outcome.registered:
        return CoverageRow(outcome.library, name, _not_registered(outcome), str(outcome))
    layer = Layer.FAST_PATH_TWIN if name in _dynamo.FAST_PATHS else Layer.TWIN
    state = "twin: traced by this package" if outcome.kind is Kind.REGISTERED else str(outcome)
    return CoverageRow(outcome.library, name, layer, state)


def _not_registered(outcome: Outcome) -> Layer:
    return Layer.ABSENT if outcome.kind is Kind.LIBRARY_LACKS_IT else Layer.NOT_COVERED


#: optree calls that change its registry or dict-order mode: left to Dynamo inside a
#: compiled region, where they may break the graph; graphs compiled before are guarded.
OPTREE_STATEFUL = frozenset(
    {"register_pytree_node", "register_pytree_node_class", "unregister_pytree_node"}
    | {"dict_insertion_ordered"}
)
_C_LAYER = "this package: optree's C code, run on the structure's containers while tracing"
_OWN_CODE = "optree's own code, inlined by Dynamo, over this package's C layer"


def _optree_coverage(outcomes: dict[str, Outcome]) -> list[CoverageRow]:
    try:
        import optree
    except ImportError:
        missing = Outcome(Kind.NOT_INSTALLED, "optree")
        return [CoverageRow("optree", "optree.*", Layer.NOT_COVERED, str(missing))]
    from . import installer, substitutions

    polyfilled = _dynamo.torch_polyfills()
    c_layer_outcome = outcomes.get("optree._C.flatten")
    c_layer = c_layer_outcome is not None and c_layer_outcome.registered
    twins = {s.original_name for s in substitutions.OPTREE if s.twin is not None}
    # Registered over torch's own registration (a polyfill), rather than in place of none.
    kept = {key for key, (_, handle) in installer.REGISTERED.items() if handle is None}
    rows = []
    for key, outcome in sorted(outcomes.items()):
        if not key.startswith("optree.") or key.count(".") < 2:  # optree's internals
            continue
        if not outcome.registered:
            rows.append(CoverageRow("optree", key, _not_registered(outcome), str(outcome)))
        elif key.startswith("optree.registry."):
            state = "optree's own code, in place of torch's polyfill"
            rows.append(CoverageRow("optree", key, Layer.OWN_CODE, state))
        elif key in twins:
            rows.append(CoverageRow("optree", key, Layer.TWIN, "twin by this package"))
        else:
            rows.append(CoverageRow("optree", key, Layer.C_LAYER, _C_LAYER))
    for name in optree.__all__:
        value = getattr(optree, name, None)
        if not callable(value) or inspect.isclass(value):
            continue
        key = f"optree.{name}"
        outcome = outcomes.get(key)
        by_torch = outcome is None and value in polyfilled
        layer, state = _optree_layer(key, outcome, by_torch, c_layer, twins, kept)
        rows.append(CoverageRow("optree", key, layer, state))
    return rows


def _optree_layer(
    key: str,
    outcome: Outcome | None,
    by_torch: bool,
    c_layer: bool,
    twins: set[str],
    kept: set[str],
) -> tuple[Layer, str]:
    """How one of optree's public functions traces, given its outcome (None: no row in
    the table), whether torch has a polyfill of it, and whether the C layer is on."""
    if outcome is not None and outcome.registered:
        if key in _dynamo.OPTREE_C_LAYER:
            return (
                Layer.C_LAYER,
                f"{_C_LAYER}, in place of torch's polyfill" if key in kept else _C_LAYER,
            )
        if key in twins:
            return Layer.TWIN, "twin by this package"
        if key in _dynamo.FAST_PATHS:
            return (
                Layer.FAST_PATH,
                f"fast path by this package for dicts, lists, tuples, None; else {_OWN_CODE}",
            )
        if key in kept:
            return Layer.OWN_CODE, f"{_OWN_CODE}, in place of torch's polyfill"
        return Layer.OWN_CODE, _OWN_CODE
    if outcome is None and key.removeprefix("optree.") in OPTREE_STATEFUL:
        state = "changes optree's state: may break the graph; graphs made before are guarded"
        return Layer.STATEFUL, state
    if outcome is None and by_torch:
        return Layer.TORCH_POLYFILL, "torch: traced through torch's own polyfill"
    if (outcome is None or outcome.kind is Kind.NO_TWIN_NEEDED) and c_layer:
        return Layer.OWN_CODE, _OWN_CODE
    if outcome is None:
        return Layer.NOT_COVERED, "not covered by this package: Dynamo may break the graph"
    return _not_registered(outcome), str(outcome)
