"""The structure every library's probe reads."""

from __future__ import annotations

from ..seam import making

__all__ = ["tiny"]


def tiny() -> object:
    """``[1, (2.0, [3])]`` as Dynamo's variables, made outside a trace (a dict variable
    needs a trace: the guard in :mod:`.handlers` covers dicts)."""
    inner = making.new_tuple([making.constant(2.0), making.new_list([making.constant(3)])])
    return making.new_list([making.constant(1), inner])
