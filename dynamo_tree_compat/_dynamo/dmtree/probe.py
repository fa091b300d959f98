"""The dm-tree fast path's probe: it reads a tiny structure once, outside any trace."""

from __future__ import annotations

from ..common.probing import tiny
from .fast import _rebuild, _walk

__all__ = ["fast_path"]


def fast_path() -> None:
    structure = tiny()
    skeleton, leaves = _walk([structure, structure], [])
    if len(leaves) != 3 or type(_rebuild(skeleton, [leaf[0] for leaf in leaves])) is not type(
        structure
    ):
        raise AssertionError("the dm-tree fast path read the probe structure wrongly")
