"""Capability probes: each private hook is tried once on a tiny structure.

They run when the package first registers (Dynamo and a mirrored library are both
loaded), outside any trace, and take a few milliseconds. A hook whose probe fails is
turned off for the process, with the reason, in :data:`~.runtime.HOOKS_OFF`; the twins
or torch's own handling then do its work. At trace time every handler still runs
behind the guard in :mod:`.handlers`, for what a probe cannot see.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from .dmtree import probe as dmtree_probe
from .optree import probe as optree_probe
from .pytree import probe as pytree_probe
from .runtime import HOOKS_OFF, turn_off
from .seam import internals

__all__ = [
    "BUILDER_HOOKS",
    "DMTREE_FAST_PATH",
    "OPTREE_C_LAYER",
    "OPTREE_FAST_PATH",
    "TORCH_PYTREE_FAST_PATH",
    "is_on",
    "layer_off",
    "probe",
]

DMTREE_FAST_PATH = "dm-tree fast path"
OPTREE_FAST_PATH = "optree fast path"
OPTREE_C_LAYER = "optree C layer"
TORCH_PYTREE_FAST_PATH = "torch pytree fast path"
BUILDER_HOOKS = "builder hooks"

_probed: set[str] = set()


def _builder_hooks() -> None:
    internals.builder_wrap()
    internals.sources()


_PROBES: dict[str, tuple[str, Callable[[], None]]] = {
    DMTREE_FAST_PATH: ("tree", dmtree_probe.fast_path),
    OPTREE_FAST_PATH: ("optree", optree_probe.fast_path),
    OPTREE_C_LAYER: ("optree", optree_probe.c_layer),
    TORCH_PYTREE_FAST_PATH: ("torch.utils._pytree", pytree_probe.fast_path),
    BUILDER_HOOKS: ("torch.utils._pytree", _builder_hooks),  # loaded with torch
}


def probe() -> dict[str, str]:
    """Runs each loaded library's probes, once per process; returns the hooks turned off,
    with why.

    >>> import torch._dynamo, tree, optree
    >>> probe()  # every hook passed its probe
    {}
    """
    for hook, (module, run) in _PROBES.items():
        if hook in _probed or module not in sys.modules:
            continue  # a library's probes run once it is loaded
        _probed.add(hook)
        try:
            run()
        except Exception as error:  # noqa: BLE001 - a probe must never raise
            turn_off(hook, f"its probe failed: {type(error).__name__}: {error}")
    return dict(HOOKS_OFF)


def layer_off(library: str) -> str | None:
    """Why what this package puts in front of torch's handling of ``library`` ("optree":
    the C layer; "torch pytree": the fast path) is off, its probe or the builder hooks'
    having failed; None where it is on."""
    own = OPTREE_C_LAYER if library == "optree" else TORCH_PYTREE_FAST_PATH
    for hook in (own, BUILDER_HOOKS):
        if hook in HOOKS_OFF:
            return f"{hook}: {HOOKS_OFF[hook]}"
    return None


def is_on(hook: str) -> bool:
    """Whether ``hook`` passed its probe (or has not been probed)."""
    return hook not in HOOKS_OFF
