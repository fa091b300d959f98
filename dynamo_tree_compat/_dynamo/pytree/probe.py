"""torch pytree's fast-path probe: it reads a tiny structure once, outside any trace."""

from __future__ import annotations

from ..common.probing import tiny
from ..seam import making
from .fast import _flat
from .spec import known_spec, wrap_known

__all__ = ["fast_path"]


def fast_path() -> None:
    import torch.utils._pytree as pytree

    structure = making.new_list([making.constant(None), tiny()])
    skeleton, leaves, spec = _flat(structure)
    expected = pytree.tree_structure([None, [1, (2.0, [3])]])
    if skeleton != [0, [1, (2, [3])]] or len(leaves) != 4 or spec != expected:
        raise AssertionError("the torch pytree fast path read the probe structure wrongly")
    if known_spec(wrap_known(spec)) is not spec:
        raise AssertionError("the torch pytree fast path's spec variable lost its spec")
