"""The table: which original function each traceable twin stands in for.

One row per original: its library, where it lives, the twin Dynamo traces in its place,
and when the row is not needed. :mod:`.installer` registers the rows with
``torch.compiler.substitute_in_graph``; the originals themselves are never replaced, so
eager calls still run the C library, at the C library's cost. Whether a fast path comes
first is the Dynamo layer's table (``_dynamo.FAST_PATHS``, by the original's name).

To add a function: its twin (``twins/``: ``dmtree/``, ``optree.py``, ``keras.py``), with
the original's signature; its row below, with ``unless_dynamo`` where some Dynamo traces
the original right; its calls in the tests' tables (``tests/helpers/reuse.py``, and the
library's compile tests); its line in docs/coverage.md.
To add a capability: see ``_dynamo/seam/capabilities.QUESTIONS``. To add a torch
release: its answers in ``tests/internals/test_capabilities.py`` (``TRUE_ON``) and
``KNOWN_RELEASES``, seen by running the matrix on it (``make matrix-torch
TORCH=<version>``), and its row in docs/torch-versions.md.

>>> [s.original_name for s in DM_TREE][:3]
['tree.is_nested', 'tree.flatten', 'tree.flatten_with_path']
>>> [s.name for s in OPTREE if s.unless_dynamo is Capability.DEQUE_KEEPS_MAXLEN]
['tree_map_', 'tree_map_with_path_', 'tree_map_with_accessor_']
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import originals
from ._dynamo import Capability
from .twins import dmtree
from .twins import keras as keras_twins
from .twins import optree as optree_twins

C = Capability

__all__ = [
    "CXX_PYTREE",
    "DM_TREE",
    "KERAS_OPTREE",
    "KERAS_TORCHTREE",
    "LIBRARIES",
    "LIBRARY_OF",
    "OPTREE",
    "Library",
    "Substitution",
    "library_of_function",
]


@dataclass(frozen=True)
class Substitution:
    """One original function and the twin Dynamo traces in its place.

    For optree, the twin is optional: without one, Dynamo follows optree's own code over
    this package's C layer, put in front of torch's own handling.
    """

    library: str
    module: str
    #: The original's name in its module; dotted for a function kept on another (x.get).
    name: str
    twin: Callable[..., Any] | None
    #: Dynamo capabilities (``_dynamo.has``), one or several, under all of which
    #: the twin is not needed: Dynamo then follows the library's own code.
    unless_dynamo: Capability | tuple[Capability, ...] | None = None
    #: An import path whose presence in this library version makes the twin unneeded.
    unless_present: str | None = None
    #: Fingerprints (``twins.keras.fingerprint``) of the originals' code the twin mirrors;
    #: empty where the twin follows the library's documented behaviour instead.
    written_for: frozenset[str] = frozenset()

    @property
    def original_name(self) -> str:
        """The original's import path, such as ``tree.flatten``."""
        return f"{self.module}.{self.name}"

    def original(self) -> Callable[..., Any] | None:
        """The original function, if its module is imported and has it: as the module
        defined it (see :mod:`.originals`), whatever wraps it now."""
        module = sys.modules.get(self.module)
        return None if module is None else originals.original(self.module, self.name, module)


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
            "tree_map_with_accessor",
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
    # torch's polyfills of these give a tuple where optree gives DictMetaData; Dynamo
    # reads a deque that comes in without its maxlen.
    *(
        Substitution("optree", "optree.registry", name, None)
        for name in ("_dict_flatten", "_dict_unflatten", "_none_unflatten", "_deque_flatten")
    ),
    # A generator, lazy as optree's iterator: where Dynamo runs a generator to its end,
    # optree's own iterator runs instead, after a graph break.
    Substitution(
        "optree", "optree", "tree_iter", optree_twins.tree_iter, C.GENERATORS_RUN_TO_THE_END
    ),
    # Dynamo 2.5 cannot call deque(..., maxlen=0), which optree's in-place maps do.
    *(
        Substitution("optree", "optree", name, getattr(optree_twins, name), C.DEQUE_KEEPS_MAXLEN)
        for name in ("tree_map_", "tree_map_with_path_", "tree_map_with_accessor_")
    ),
    # Dynamo's max and min take a key function only over constant values.
    Substitution("optree", "optree", "tree_max", optree_twins.tree_max),
    Substitution("optree", "optree", "tree_min", optree_twins.tree_min),
    # Dynamo's sum of values known while tracing fails inside Dynamo where an addition
    # raises (an internal error): the twin adds one by one there.
    Substitution("optree", "optree", "tree_sum", optree_twins.tree_sum),
    Substitution(
        "optree",
        "optree.ops",
        "_tree_broadcast_common_with_treespec",
        optree_twins.broadcast_common_with_treespec,
    ),
    # optree before 0.20 makes the placeholder object() here; later, in the helper above.
    Substitution(
        "optree",
        "optree",
        "tree_broadcast_common",
        optree_twins.tree_broadcast_common,
        unless_present="optree.ops._tree_broadcast_common_with_treespec",
    ),
)


def _keras(module: str, name: str, twin: str) -> Substitution:
    return Substitution(
        "keras.tree",
        module,
        name,
        getattr(keras_twins, twin),
        written_for=keras_twins.WRITTEN_FOR[twin],
    )


#: Keras's own tree layer over torch's pytree (Keras 3.12 on, torch backend): every
#: function of the layer reaches these two, which walk one level with an identity test.
KERAS_TORCHTREE: tuple[Substitution, ...] = (
    _keras(
        "keras.src.tree.torchtree_impl", "_dict_to_ordered_dict", "torchtree_dict_to_ordered_dict"
    ),
    _keras("keras.src.tree.torchtree_impl", "traverse", "torchtree_traverse"),
)

#: The same layer over optree (Keras 3.1 to 3.11 on torch, and other backends).
KERAS_OPTREE: tuple[Substitution, ...] = (
    _keras("keras.src.tree.optree_impl", "traverse", "optree_traverse"),
)


def _is_dm_tree(module: Any) -> bool:
    # Another distribution could own the name "tree"; dm-tree has a C core named _tree.
    return hasattr(module, "_tree") and hasattr(module, "map_structure_up_to")


def _is_optree(module: Any) -> bool:
    return hasattr(module, "PyTreeSpec") and hasattr(module, "tree_map")


#: torch's own pytree where Dynamo inlines it leaf by leaf: the maps before Dynamo's own
#: fast path for each (torch 2.10; 2.12 for the path map) and where that fast path gives
#: a wrong answer (a defaultdict returned as a plain dict, 2.15; a graph reused for keys
#: in another order, 2.13 and 2.15), the other calls on every release (that fast path
#: maps only).
_RIGHT_FAST_PATH = (C.TREE_MAP_FAST_PATH_KEEPS_DEFAULTDICT, C.TREE_MAP_FAST_PATH_GUARDS_KEY_ORDER)
#: torch's optree-backed pytree module, whose rows the installer and the report tell apart.
CXX_PYTREE = "torch.utils._cxx_pytree"
TORCH_PYTREE: tuple[Substitution, ...] = (
    Substitution("torch pytree", "torch.utils._pytree", "tree_map", None, _RIGHT_FAST_PATH),
    Substitution(
        "torch pytree",
        "torch.utils._pytree",
        "tree_map_with_path",
        None,
        (C.TREE_MAP_WITH_PATH_FAST_PATH, *_RIGHT_FAST_PATH),
    ),
    Substitution(
        "torch pytree",
        "torch.utils._pytree",
        "tree_map_only",
        None,
        (C.TREE_MAP_ONLY_FAST_PATH, *_RIGHT_FAST_PATH),
    ),
    *(
        Substitution("torch pytree", "torch.utils._pytree", name, None)
        for name in (
            "tree_leaves",
            "tree_flatten",
            "tree_structure",
            "tree_unflatten",
            "tree_flatten_with_path",
            "tree_leaves_with_path",
            # Dynamo reads a deque that comes in without its maxlen.
            "_deque_flatten",
        )
    ),
    # torch's optree-backed pytree, Python code over optree, whose file Dynamo skips
    # before torch 2.6: a copy read from another file (the installer), over this
    # package's optree coverage. Its maps also where Dynamo's own tree_map fast path
    # takes them and answers wrong.
    *(
        Substitution(
            "torch pytree",
            CXX_PYTREE,
            name,
            None,
            (C.CXX_PYTREE_INLINED, *_RIGHT_FAST_PATH),
        )
        for name in ("tree_map", "tree_map_only", "tree_map_with_path")
    ),
    *(
        Substitution("torch pytree", CXX_PYTREE, name, None, C.CXX_PYTREE_INLINED)
        for name in (
            "tree_flatten",
            "tree_unflatten",
            "tree_iter",
            "tree_leaves",
            "tree_structure",
            "tree_map_",
            "map_only",
            "tree_map_only_",
            "tree_all",
            "tree_any",
            "tree_all_only",
            "tree_any_only",
            "broadcast_prefix",
            "_broadcast_to_and_flatten",
            "tree_flatten_with_path",
            "tree_leaves_with_path",
        )
    ),
)


def _is_torch_pytree(module: Any) -> bool:
    return hasattr(module, "SUPPORTED_NODES") and hasattr(module, "tree_map")


def _is_keras_tree_layer(module: Any) -> bool:
    return hasattr(module, "traverse") and hasattr(module, "register_tree_node_class")


class Library(NamedTuple):
    """A mirrored library: where its functions live, how to tell that a module of that
    name is it, and its rows.

    >>> LIBRARIES["dm-tree"].module, LIBRARIES["dm-tree"].rows[0].original_name
    ('tree', 'tree.is_nested')
    """

    module: str
    """Import name of the module that holds the originals."""
    is_library: Callable[[Any], bool]
    """Whether a module imported under that name is the library (not a namesake)."""
    rows: tuple[Substitution, ...]
    """Its substitutions."""


#: Each mirrored library, by the name the reports give it.
LIBRARIES: dict[str, Library] = {
    "dm-tree": Library("tree", _is_dm_tree, DM_TREE),
    "optree": Library("optree", _is_optree, OPTREE),
    "torch pytree": Library("torch.utils._pytree", _is_torch_pytree, TORCH_PYTREE),
    "keras.tree": Library("keras.src.tree.torchtree_impl", _is_keras_tree_layer, KERAS_TORCHTREE),
    "keras.tree (optree)": Library(
        "keras.src.tree.optree_impl", _is_keras_tree_layer, KERAS_OPTREE
    ),
}

#: Each original's library, by its import path: a name says nothing of its library.
LIBRARY_OF: dict[str, str] = {
    row.original_name: name for name, library in LIBRARIES.items() for row in library.rows
}


def library_of_function(qualified_name: str) -> str:
    """The mirrored library whose module (in :data:`LIBRARIES`) holds a function named by
    its qualified name, or "".

    >>> library_of_function("optree.ops.tree_map"), library_of_function("treelike.f")
    ('optree', '')
    """
    found = ""
    for name, library in LIBRARIES.items():
        module = library.module
        if qualified_name.startswith(module + ".") and len(module) > len(found):
            found, library_found = module, name
    return library_found if found else ""
