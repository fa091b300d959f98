"""Whether Dynamo reads a value for a tree function now: the scope of every workaround.

The package changes how Dynamo handles a value only where a tree function reads it: in
one of this package's handlers, or in a frame of a tree library's own code (dm-tree's
twin, optree, torch's pytree, Keras's tree layer) that Dynamo traces. Code that calls no
tree function traces exactly as without the package.
"""

from __future__ import annotations

import os
import sys

from ..runtime import HANDLING
from ..seam import internals
from ..seam.types import Translator

__all__ = ["TREE_MODULES", "for_a_tree", "is_tree_file"]

#: Modules whose code is a tree library's: a package's whole folder, a module's file.
TREE_MODULES = (
    "optree",
    "tree",
    "keras.src.tree",
    "torch.utils._pytree",
    "torch.utils._cxx_pytree",
    "dynamo_tree_compat._dynamo.pytree",  # the copies of _cxx_pytree's functions
    *internals.DYNAMO_TREE_MODULES,
    "dynamo_tree_compat.twins",
)

_ANSWERS: dict[str, bool] = {}
_PLACES: list[tuple[str, ...]] = [()]


def _places() -> tuple[str, ...]:
    """The folders and files of the tree modules loaded now."""
    found = []
    for name in TREE_MODULES:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if not path:
            continue
        if os.path.basename(path) == "__init__.py":
            found.append(os.path.dirname(path) + os.sep)
        else:
            found.append(path)
    return tuple(found)


def is_tree_file(filename: str) -> bool:
    """Whether code from ``filename`` is a tree library's (of those loaded).

    >>> import optree
    >>> is_tree_file(optree.ops.__file__), is_tree_file(os.__file__)
    (True, False)
    """
    places = _places()
    if places != _PLACES[0]:
        _PLACES[0] = places
        _ANSWERS.clear()
    answer = _ANSWERS.get(filename)
    if answer is None:
        answer = _ANSWERS[filename] = filename.startswith(places)
    return answer


def for_a_tree(tx: Translator = None) -> bool:
    """Whether what Dynamo reads now is read for a tree function: one of this package's
    handlers runs, or the innermost frame traced is a tree library's code."""
    if HANDLING[0]:
        return True
    code = internals.innermost_code(tx)
    return code is not None and is_tree_file(code.co_filename)
