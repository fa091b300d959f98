"""What happened to each original: registered, or why not, as data.

Every module that decides something from an outcome reads its :class:`Kind`; the words
a person reads are rendered from it here alone, by ``str()``. It imports nothing of the
package but :mod:`.config`, so every module can use it without an import cycle.

>>> outcome = Outcome(Kind.LIBRARY_LACKS_IT, "optree", "all_leaves")
>>> str(outcome), outcome.settled, outcome.registered
('this optree has no all_leaves', True, False)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from . import config
from .config import TORCH_RANGE

__all__ = ["TORCH_RANGE", "Kind", "Outcome", "torch_out_of_range"]


class Kind(enum.Enum):
    """What happened to one original, or why nothing did."""

    #: A twin or a handler of this package is registered for it.
    REGISTERED = "registered"
    #: Registered, but its graphs do not guard on the mode (Dynamo's tables moved).
    REGISTERED_UNGUARDED = "registered, unguarded"
    #: Dynamo follows the library's own code here: the row's need is not met.
    NO_TWIN_NEEDED = "no twin needed"
    #: This version of the library has no such function.
    LIBRARY_LACKS_IT = "library lacks it"
    #: The module under the library's import name is another distribution.
    NOT_THE_LIBRARY = "not the library"
    #: The original's code is not the code its twin mirrors (another release).
    OTHER_CODE = "other code"
    #: It registers once Dynamo and the library are both imported.
    PENDING = "pending"
    #: The library is not installed.
    NOT_INSTALLED = "not installed"
    #: The package is not activated (switched off, and no scope is open).
    NOT_ACTIVATED = "not activated"
    #: This torch is outside the supported releases: the package does nothing.
    TORCH_OUT_OF_RANGE = "torch out of range"
    #: This torch has no ``substitute_in_graph``: the package does nothing.
    SUBSTITUTION_UNAVAILABLE = "substitution unavailable"
    #: A hook this needs is off, or Dynamo's internals are not as expected.
    LEFT_TO_TORCH = "left to torch"
    #: Something else (torch, another package) already substitutes for it.
    ALREADY_HANDLED = "already handled elsewhere"
    #: Registering raised: Dynamo's internals moved.
    FAILED = "failed"


# One template per kind; the fields are Outcome's.
_MESSAGES: dict[Kind, str] = {
    Kind.REGISTERED: "registered",
    Kind.REGISTERED_UNGUARDED: "registered (scopes apply after torch._dynamo.reset())",
    Kind.NO_TWIN_NEEDED: (
        "no twin needed with this library and torch: {library}'s own code is traced"
    ),
    Kind.LIBRARY_LACKS_IT: "this {library} has no {name}",
    Kind.NOT_THE_LIBRARY: "the module {name!r} is not {library}",
    Kind.OTHER_CODE: (
        "this {library}'s {name} is not the code its twin mirrors: its own code is traced"
    ),
    Kind.PENDING: "pending: registers once {name}",
    Kind.NOT_INSTALLED: "unavailable: {library} is not installed",
    Kind.NOT_ACTIVATED: "not registered: the package is not activated",
    Kind.TORCH_OUT_OF_RANGE: (
        "torch {name} is outside the releases this package supports ({detail})"
    ),
    Kind.SUBSTITUTION_UNAVAILABLE: "{detail}",
    Kind.LEFT_TO_TORCH: "left to torch: its Dynamo internals are not as this package expects",
    Kind.ALREADY_HANDLED: "already handled elsewhere: {detail}",
    Kind.FAILED: "left to torch: registering failed with {detail}",
}

#: Outcomes that hold for the rest of the process: install() does not try these again.
_SETTLED = frozenset({Kind.NO_TWIN_NEEDED, Kind.LIBRARY_LACKS_IT, Kind.OTHER_CODE})
#: Outcomes that say this torch cannot have the package at all: activation warns once.
_TORCH_UNSUPPORTED = frozenset({Kind.TORCH_OUT_OF_RANGE, Kind.SUBSTITUTION_UNAVAILABLE})


@dataclass(frozen=True)
class Outcome:
    """One original's outcome, and what its message names.

    >>> str(Outcome(Kind.NOT_THE_LIBRARY, "dm-tree", "tree"))
    "the module 'tree' is not dm-tree"
    >>> str(Outcome(Kind.TORCH_OUT_OF_RANGE, name="2.16.0", detail="2.5 to 2.15"))
    'torch 2.16.0 is outside the releases this package supports (2.5 to 2.15)'
    >>> Outcome(Kind.TORCH_OUT_OF_RANGE).torch_unsupported, Outcome(Kind.PENDING).settled
    (True, False)
    """

    kind: Kind
    #: The mirrored library, by its distribution name ("dm-tree", "optree").
    library: str = ""
    #: What the message names: a function, the library's module, or torch's version.
    name: str = ""
    #: The rest: an error, the supported releases, or the Dynamo layer's own reason.
    detail: str = ""

    @property
    def registered(self) -> bool:
        """Whether this package handles the original now."""
        return self.kind in (Kind.REGISTERED, Kind.REGISTERED_UNGUARDED)

    @property
    def settled(self) -> bool:
        """Whether it holds for the process: this library lacks the original, or needs no
        twin for it with this Dynamo."""
        return self.kind in _SETTLED

    @property
    def torch_unsupported(self) -> bool:
        """Whether this torch cannot have the package at all."""
        return self.kind in _TORCH_UNSUPPORTED

    def __str__(self) -> str:
        if self.kind is Kind.NOT_INSTALLED and self.detail:  # the package has no such module
            return f"unavailable: {self.detail}"
        return _MESSAGES[self.kind].format(library=self.library, name=self.name, detail=self.detail)


def torch_out_of_range(any_torch: bool = False) -> Outcome | None:
    """Why the imported torch is not supported, or None (also where ``any_torch``, or
    torch is not imported or has no release number). Cheap: Dynamo waits on nothing.

    >>> torch_out_of_range(any_torch=True) is None
    True
    """
    if config.torch_in_range(any_torch):
        return None
    (low_major, low_minor), (high_major, high_minor) = TORCH_RANGE
    supported = f"{low_major}.{low_minor} to {high_major}.{high_minor}"
    return Outcome(Kind.TORCH_OUT_OF_RANGE, name=config.torch_release()[0], detail=supported)
