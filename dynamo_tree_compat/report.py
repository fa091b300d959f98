"""The status report: versions, mode, how the package was activated, coverage.

Kept apart from :mod:`activation`, which loads into every program that imports torch,
so that defining the report costs nothing until someone asks for it.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass, field
from importlib import metadata

from . import _dynamo, activation, config

__all__ = ["Status", "coverage", "status"]


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
    #: For each original: "registered", or why not.
    functions: dict[str, str] = field(default_factory=dict)
    #: Private hooks turned off for this process (their probe failed), with why.
    hooks_off: dict[str, str] = field(default_factory=dict)
    #: Traced calls that stepped aside after an unexpected error in this package's code.
    stepped_aside: int = 0

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

    >>> import dynamo_tree_compat
    >>> report = dynamo_tree_compat.status()
    >>> report.mode in ("on", "off"), "tree.flatten" in report.functions
    (True, True)
    """
    from . import substitutions

    versions = {"python": sys.version.split()[0]}
    for distribution in ("torch", "dm-tree", "optree"):
        versions[distribution] = _version(distribution)
    functions = {}
    for library, (module_name, _, table) in substitutions.LIBRARIES.items():
        for substitution in table:
            name = substitution.original_name
            if name in substitutions.UNGUARDED:
                functions[name] = "registered (scopes apply after torch._dynamo.reset())"
            elif name in substitutions.REGISTERED:
                functions[name] = "registered"
            elif name in substitutions.NOT_REGISTERED:
                functions[name] = substitutions.NOT_REGISTERED[name]
            elif not activation.importable(module_name):
                functions[name] = f"unavailable: {library} is not installed"
            elif not activation.armed:
                functions[name] = "not registered: the package is not activated"
            else:
                functions[name] = f"pending: registers once torch._dynamo and {module_name} load"
    return Status(
        versions=versions,
        mode="on" if config.twins_enabled else "off",
        activated_by=activation.activated_by,
        switched_off=activation.switched_off(),
        dynamo_imported=activation.DYNAMO_MODULE in sys.modules,
        functions=functions,
        hooks_off=dict(_dynamo.HOOKS_OFF),
        stepped_aside=sum(
            count for key, count in _dynamo.STATS.items() if key.startswith("stepped aside:")
        ),
    )


def coverage() -> list[tuple[str, str, str]]:
    """``(library, function, how it traces)`` for every dm-tree and optree function.

    >>> rows = coverage()
    >>> ("dm-tree", "tree.flatten") in [row[:2] for row in rows]
    True
    """
    states = status().functions
    rows = [
        ("dm-tree", name, "twin: traced by this package" if state == "registered" else state)
        for name, state in states.items()
        if name.startswith("tree.")
    ]
    rows += _optree_coverage(states)
    return rows


#: optree calls that change its registry or dict-order mode: left to Dynamo inside a
#: compiled region, where they may break the graph; graphs compiled before are guarded.
OPTREE_STATEFUL = frozenset(
    {"register_pytree_node", "register_pytree_node_class", "unregister_pytree_node"}
    | {"dict_insertion_ordered"}
)
_C_LAYER = "this package: optree's C code, run on the structure's containers while tracing"
_OWN_CODE = "optree's own code, inlined by Dynamo, over this package's C layer"


def _optree_coverage(states: dict[str, str]) -> list[tuple[str, str, str]]:
    try:
        import optree
    except ImportError:
        return [("optree", "optree.*", "unavailable: optree is not installed")]
    from . import _dynamo, substitutions

    polyfilled = _dynamo.torch_polyfills()
    c_layer = states.get("optree._C.flatten") == "registered"
    twins = {s.original_name for s in substitutions.OPTREE if s.twin is not None}
    # Registered over torch's own registration (a polyfill), rather than in place of none.
    kept = {key for key, (_, handle) in substitutions.REGISTERED.items() if handle is None}
    rows = []
    for key, state in sorted(states.items()):
        if not key.startswith("optree.") or key.count(".") < 2:  # optree's internals
            continue
        if state == "registered":
            state = "twin by this package" if key in twins else _C_LAYER
            if key.startswith("optree.registry."):
                state = "optree's own code, in place of torch's polyfill"
        rows.append(("optree", key, state))
    for name in optree.__all__:
        value = getattr(optree, name, None)
        if not callable(value) or inspect.isclass(value):
            continue
        key = f"optree.{name}"
        state = states.get(key)
        if state == "registered" and key in _dynamo.OPTREE_C_LAYER:
            state = f"{_C_LAYER}, in place of torch's polyfill" if key in kept else _C_LAYER
        elif state == "registered" and key in twins:
            state = "twin by this package"
        elif state == "registered" and key in _dynamo.FAST_PATHS:
            state = f"fast path by this package for dicts, lists, tuples, None; else {_OWN_CODE}"
        elif state == "registered" and key in kept:
            state = f"{_OWN_CODE}, in place of torch's polyfill"
        elif state == "registered":
            state = _OWN_CODE
        elif state is None and name in OPTREE_STATEFUL:
            state = "changes optree's state: may break the graph; graphs made before are guarded"
        elif state is None and value in polyfilled:
            state = "torch: traced through torch's own polyfill"
        elif (state is None or state.startswith(substitutions.NO_TWIN_NEEDED)) and c_layer:
            state = _OWN_CODE
        elif state is None:
            state = "not covered by this package: Dynamo may break the graph"
        rows.append(("optree", key, state))
    return rows
