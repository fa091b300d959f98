"""The mirrored libraries' functions as their modules defined them, captured on import.

The twins register at Dynamo's first frame, which may come long after a program has
wrapped a library function (``mock.patch.object(tree, "flatten", wraps=...)``, an
instrumentation library). What registers is the function the module itself defined: each
watched module's namespace is captured as it finishes importing (or, for a module
imported before the package was active, when it activates). Imports only the Dynamo
layer's runtime, which names no Dynamo and which autoload loads anyway.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from ._dynamo.runtime import half_imported

__all__ = ["MODULES", "capture", "capture_loaded", "original"]

#: The modules whose functions a substitution row names.
MODULES = (
    "tree",
    "optree",
    "optree._C",
    "optree.ops",
    "optree.registry",
    "torch.utils._pytree",
    "torch.utils._cxx_pytree",
    "keras.src.tree.torchtree_impl",
    "keras.src.tree.optree_impl",
)

_CAPTURED: dict[str, tuple[Any, dict[str, Any]]] = {}
#: What a module's namespace holds that a substitution row can name.
_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, type)


def capture(module: Any) -> None:
    """Keeps the namespace of ``module`` as it is now (a shallow copy), once per module
    object.

    >>> import types
    >>> module = types.ModuleType("optree.ops"); module.tree_map = len
    >>> capture(module); module.tree_map = max
    >>> original("optree.ops", "tree_map", module) is len
    True
    """
    name = getattr(module, "__name__", None)
    if name in MODULES and _CAPTURED.get(name, (None,))[0] is not module:
        # Its functions alone: a module may hold an object that must go when the module
        # goes (torch's _cxx_pytree holds optree's dict-order scope, entered at import).
        functions = {
            key: value for key, value in vars(module).items() if isinstance(value, _FUNCTIONS)
        }
        _CAPTURED[name] = (module, functions)


def capture_loaded() -> None:
    """Captures each watched module already imported and not captured yet. A module
    still importing is left alone: the package may activate inside its import (Keras's
    tree module imports torch, which autoloads the package), when its namespace lacks the
    functions defined below that import; such a module is read when its rows register.

    >>> import types
    >>> module = types.ModuleType("keras.src.tree.optree_impl")
    >>> module.__spec__ = types.SimpleNamespace(_initializing=True)
    >>> sys.modules[module.__name__] = module
    >>> capture_loaded(); module.traverse = len
    >>> original("keras.src.tree.optree_impl", "traverse", module) is len
    True
    >>> del sys.modules[module.__name__]
    """
    for name in MODULES:
        module = sys.modules.get(name)
        if module is not None and not half_imported(name):
            capture(module)


def original(module_name: str, name: str, module: Any) -> Any:
    """``module``'s ``name`` as the module defined it (a dotted name: an attribute of it);
    where the module was not captured, as it is now; None where it has none."""
    captured = _CAPTURED.get(module_name)
    first, *rest = name.split(".")
    if captured is not None and captured[0] is module:
        found = captured[1].get(first)
    else:
        found = getattr(module, first, None)
    for part in rest:
        found = getattr(found, part, None)
    return found
