"""The status report: versions, mode, how the package was activated, coverage.

Kept apart from :mod:`activation`, which loads into every program that imports torch,
so that defining the report costs nothing until someone asks for it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import metadata

from . import activation

__all__ = ["Status", "status"]


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

    def __str__(self) -> str:
        lines = [f"{name}: {version or 'not installed'}" for name, version in self.versions.items()]
        how = self.activated_by or ("off (DYNAMO_TREE_COMPAT=0)" if self.switched_off else "off")
        lines += [f"mode: {self.mode}", f"activated by: {how}"]
        lines += [f"  {name}: {state}" for name, state in self.functions.items()]
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
        mode="on" if activation.twins_enabled else "off",
        activated_by=activation.activated_by,
        switched_off=activation.switched_off(),
        dynamo_imported=activation.DYNAMO_MODULE in sys.modules,
        functions=functions,
    )
