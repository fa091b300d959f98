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

from . import internals
from .runtime import HOOKS_OFF, turn_off

__all__ = [
    "BUILDER_HOOKS",
    "DMTREE_FAST_PATH",
    "OPTREE_C_LAYER",
    "OPTREE_FAST_PATH",
    "TORCH_PYTREE_FAST_PATH",
    "fast_path_hook",
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


def _tiny() -> object:
    """``[1, (2.0, [3])]`` as Dynamo's variables, made outside a trace (a dict variable
    needs a trace: the guard in :mod:`.handlers` covers dicts)."""
    inner = internals.new_tuple(
        [internals.constant(2.0), internals.new_list([internals.constant(3)])]
    )
    return internals.new_list([internals.constant(1), inner])


def _dmtree_fast_path() -> None:
    from .dmtree_fast import _rebuild, _walk

    structure = _tiny()
    skeleton, leaves = _walk([structure, structure], [])
    if len(leaves) != 3 or type(_rebuild(skeleton, [leaf[0] for leaf in leaves])) is not type(
        structure
    ):
        raise AssertionError("the dm-tree fast path read the probe structure wrongly")


def _optree_fast_path() -> None:
    import optree

    from .optree_fast import _skeleton, _variable

    leaves: list[object] = []
    skeleton = _skeleton(_tiny(), False, leaves, [])
    order, spec = optree.tree_flatten(skeleton)
    if order != [0, 1, 2] or spec.num_leaves != 3:
        raise AssertionError("the optree fast path read the probe structure wrongly")
    _variable(spec.unflatten(range(3)), leaves)


def _torch_pytree_fast_path() -> None:
    import torch.utils._pytree as pytree

    from .pytree_fast import _flat
    from .pytree_spec import known_spec, wrap_known

    structure = internals.new_list([internals.constant(None), _tiny()])
    skeleton, leaves, spec = _flat(structure)
    expected = pytree.tree_structure([None, [1, (2.0, [3])]])
    if skeleton != [0, [1, (2, [3])]] or len(leaves) != 4 or spec != expected:
        raise AssertionError("the torch pytree fast path read the probe structure wrongly")
    if known_spec(wrap_known(spec)) is not spec:
        raise AssertionError("the torch pytree fast path's spec variable lost its spec")


def _optree_c_layer() -> None:
    import optree

    from .optree_reader import Reader
    from .optree_spec import method_caller_class, spec_variable_class

    spec_variable_class()(optree.tree_structure([1]))
    method_caller_class()
    reader = Reader(None, None, False, "", "probe")
    kind = reader.classify(internals.new_list([internals.constant(1)]))[0]
    if kind != optree.PyTreeKind.LIST:
        raise AssertionError(f"optree's C layer classified a list as {kind}")


def _builder_hooks() -> None:
    internals.builder_wrap()
    internals.sources()


_PROBES: dict[str, tuple[str, Callable[[], None]]] = {
    DMTREE_FAST_PATH: ("tree", _dmtree_fast_path),
    OPTREE_FAST_PATH: ("optree", _optree_fast_path),
    OPTREE_C_LAYER: ("optree", _optree_c_layer),
    TORCH_PYTREE_FAST_PATH: ("torch.utils._pytree", _torch_pytree_fast_path),
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


def fast_path_hook(name: str) -> str:
    """The probe hook of the fast path that handles the original named ``name``."""
    if name.startswith("tree."):
        return DMTREE_FAST_PATH
    if name.startswith("torch.utils._pytree."):
        return TORCH_PYTREE_FAST_PATH
    return OPTREE_FAST_PATH


def is_on(hook: str) -> bool:
    """Whether ``hook`` passed its probe (or has not been probed)."""
    return hook not in HOOKS_OFF
