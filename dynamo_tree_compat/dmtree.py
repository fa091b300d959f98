"""A pure-Python drop-in for dm-tree's API: the dm-tree twins (:mod:`.twins.dmtree`),
public under this name, with the same functions, constants and errors.

>>> import dynamo_tree_compat.dmtree as tree
>>> from dynamo_tree_compat.twins import dmtree
>>> tree.flatten is dmtree.flatten, tree.flatten({"b": 1, "a": [2, 3]})
(True, [2, 3, 1])
"""

from typing import Any

from .twins import dmtree as _twins
from .twins.dmtree import *  # noqa: F403 - the twins' API, under this name
from .twins.dmtree import __all__ as __all__


def __getattr__(name: str) -> Any:
    # The rest of the twins' module too (its private helpers, its submodules), but not
    # its dunders: with the folder's __path__ this module would pass for a package, and
    # the twins' submodules would be imported again under this name.
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(_twins, name)
