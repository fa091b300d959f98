"""A deque's ``maxlen``, where a tree library's own Python code reads it.

Dynamo builds a deque that comes into a compiled function without its ``maxlen``: in
traced code ``deque.maxlen`` reads None, and a tree library that rebuilds the deque
(torch's pytree, optree's registry) would give it back unbounded. These handlers stand
in for the libraries' deque flatten functions and read the ``maxlen`` through the seam,
guarded. Only those reads change: a deque that no tree function reads is Dynamo's own.
"""

from __future__ import annotations

from typing import Any

from ..seam import internals, making, reads
from ..seam.types import Handler, Translator, Variable
from .reading import Fallback

__all__ = ["HANDLERS"]


def _deque_and_maxlen(args: list[Variable], kwargs: dict[str, Variable], tx: Translator) -> Any:
    """(the deque's variable, its maxlen); Fallback where the call is not ``f(deque)`` or
    this Dynamo keeps no maxlen (the library's own code then runs, as without this)."""
    if len(args) != 1 or kwargs:
        raise Fallback
    deque = internals.realized(args[0])
    try:
        return deque, reads.deque_maxlen(tx, deque)
    except internals.Missing:
        raise Fallback from None


def torch_deque_flatten(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``torch.utils._pytree._deque_flatten``: ``(list(d), d.maxlen)``."""
    deque, maxlen = _deque_and_maxlen(args, kwargs, tx)
    items = making.new_list(reads.iterated(tx, deque))
    return making.new_tuple([items, making.constant(maxlen)])


def optree_deque_flatten(tx: Translator, args: list[Variable], kwargs: dict[str, Variable]) -> Any:
    """``optree.registry._deque_flatten``: ``(d, d.maxlen)``."""
    deque, maxlen = _deque_and_maxlen(args, kwargs, tx)
    return making.new_tuple([deque, making.constant(maxlen)])


#: Handlers by original, always on while the mode is (they correct a wrong value).
HANDLERS: dict[str, Handler] = {
    "torch.utils._pytree._deque_flatten": torch_deque_flatten,
    "optree.registry._deque_flatten": optree_deque_flatten,
}
