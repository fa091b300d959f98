"""optree's probes: its fast path and its C layer each read a tiny structure once,
outside any trace."""

from __future__ import annotations

from ..common.probing import tiny
from ..common.skeletons import skeleton_of, variable_of
from ..seam import making
from .reader import Reader
from .spec import method_caller_class, spec_variable_class

__all__ = ["c_layer", "fast_path"]


def fast_path() -> None:
    """Reads the tiny structure with the fast path's skeleton, and back."""
    import optree

    leaves: list[object] = []
    skeleton = skeleton_of(tiny(), False, leaves, [])
    order, spec = optree.tree_flatten(skeleton)
    if order != [0, 1, 2] or spec.num_leaves != 3:
        raise AssertionError("the optree fast path read the probe structure wrongly")
    variable_of(spec.unflatten(range(3)), leaves)


def c_layer() -> None:
    """Makes the C layer's variable classes and classifies a list."""
    import optree

    spec_variable_class()(optree.tree_structure([1]))
    method_caller_class()
    reader = Reader(None, None, False, "", "probe")
    kind = reader.classify(making.new_list([making.constant(1)]))[0]
    if kind != optree.PyTreeKind.LIST:
        raise AssertionError(f"optree's C layer classified a list as {kind}")
