"""Every private TorchDynamo access of the package, behind one seam, in layers.

The rest of the package uses the names in ``__all__`` below, through this package
(``from . import _dynamo``; ``_dynamo.route(...)``). Each loads its module on first use,
so that ``import torch`` (autoload) loads only :mod:`.runtime` and :mod:`.seam.lock`
(which activation imports itself); the command line and the pytest plugin read
:mod:`.graph_breaks` directly.

The layers, each importing only those before it (``tests/internals/test_layout.py``):

1. :mod:`.runtime`: logging, counters, the hooks turned off. Names nothing of Dynamo.
2. :mod:`.seam`: the only folder that imports or names ``torch._dynamo`` or touches a
   Dynamo object's attributes (reads, constructors, patches, capabilities, the lock, the
   log format). Supporting a new torch means editing this folder alone.
3. :mod:`.common`: what the libraries share: reading structures from variables, guards,
   skeletons, constants held by the graph, trivial bodies.
4. :mod:`.dmtree`, :mod:`.optree`, :mod:`.pytree`: one folder per mirrored library (its
   fast path, readers, spec variables and probe). They never import each other.
5. :mod:`.probes`, :mod:`.graph_breaks`: each library's probe run once, and Dynamo's
   graph-break records.
6. :mod:`.handlers`, :mod:`.builder_hooks`: the handler table and the one guard every
   handler runs behind; the hooks on Dynamo's variable builder.
7. :mod:`.registration`: ``substitute_in_graph``, and routing originals to handlers.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "DEFAULTDICT_LEFT_AS_DICT",
    "DYNAMO_MODULE",
    "FAST_PATHS",
    "FAST_PATH_MAX_DEPTH",
    "HOOKS_OFF",
    "LOG",
    "OPTREE_C_LAYER",
    "OPTREE_MAX_DEPTH",
    "PYTREE_COPIES_FILE",
    "STATS",
    "SUBSTITUTE_UNAVAILABLE",
    "Capability",
    "Event",
    "GraphBreakRecorder",
    "before_each_frame",
    "break_on_iterating_a_number",
    "capabilities_settled",
    "capability",
    "compile_lock",
    "count_graphs",
    "counted",
    "counters",
    "for_a_tree",
    "forget_skips",
    "give_mapping_proxies_a_type",
    "graph_break_function",
    "half_imported",
    "hook_builder",
    "is_builder_hooked",
    "keep_set_subclasses_whole",
    "layer_off",
    "load",
    "lookup_backend",
    "probe",
    "register_log_name",
    "reset_compiled_code",
    "route",
    "routing_support",
    "substitute",
    "substitute_in_graph",
    "substitution_support",
    "torch_polyfills",
    "unhook_builder",
    "unroute",
    "unsubstitute",
    "write_json_whole",
]

# name -> (module, attribute there)
_CONTRACT: dict[str, tuple[str, str]] = {
    "DEFAULTDICT_LEFT_AS_DICT": ("common.reading", "DEFAULTDICT_LEFT_AS_DICT"),
    "FAST_PATHS": ("handlers", "FAST_PATHS"),
    "OPTREE_C_LAYER": ("handlers", "OPTREE_C_LAYER"),
    "FAST_PATH_MAX_DEPTH": ("common.reading", "FAST_PATH_MAX_DEPTH"),
    "OPTREE_MAX_DEPTH": ("common.reading", "OPTREE_MAX_DEPTH"),
    "HOOKS_OFF": ("runtime", "HOOKS_OFF"),
    "LOG": ("runtime", "LOG"),
    "STATS": ("runtime", "STATS"),
    "write_json_whole": ("runtime", "write_json_whole"),
    "Event": ("runtime", "Event"),
    "counted": ("runtime", "counted"),
    "DYNAMO_MODULE": ("seam.lock", "DYNAMO_MODULE"),
    "compile_lock": ("seam.lock", "compile_lock"),
    "forget_skips": ("seam.patches", "forget_skips"),
    "for_a_tree": ("common.scope", "for_a_tree"),
    "half_imported": ("runtime", "half_imported"),
    "register_log_name": ("seam.lock", "register_log_name"),
    "SUBSTITUTE_UNAVAILABLE": ("registration", "SUBSTITUTE_UNAVAILABLE"),
    "route": ("registration", "route"),
    "routing_support": ("registration", "routing_support"),
    "substitute": ("registration", "substitute"),
    "substitute_in_graph": ("seam.frames", "substitute_in_graph"),
    "substitution_support": ("registration", "substitution_support"),
    "torch_polyfills": ("registration", "torch_polyfills"),
    "unroute": ("registration", "unroute"),
    "unsubstitute": ("registration", "unsubstitute"),
    "hook_builder": ("builder_hooks", "hook"),
    "unhook_builder": ("builder_hooks", "unhook"),
    "is_builder_hooked": ("builder_hooks", "is_hooked"),
    "probe": ("probes", "probe"),
    "layer_off": ("probes", "layer_off"),
    "PYTREE_COPIES_FILE": ("pytree", "COPIES_FILE"),
    "graph_break_function": ("seam.patches", "graph_break_function"),
    "lookup_backend": ("seam.internals", "lookup_backend"),
    "reset_compiled_code": ("seam.internals", "reset_compiled_code"),
    "give_mapping_proxies_a_type": ("seam.patches", "give_mapping_proxies_a_type"),
    "keep_set_subclasses_whole": ("seam.sets", "keep_set_subclasses_whole"),
    "break_on_iterating_a_number": ("seam.constants", "break_on_iterating_a_number"),
    "GraphBreakRecorder": ("graph_breaks", "GraphBreakRecorder"),
    "counters": ("seam.internals", "counters"),
    "count_graphs": ("seam.patches", "count_graphs"),
    "load": ("seam.internals", "load"),
    "capability": ("seam.capabilities", "has"),
    "Capability": ("runtime", "Capability"),
    "capabilities_settled": ("seam.capabilities", "settled"),
    "before_each_frame": ("seam.frames", "before_each_frame"),
}


def __getattr__(name: str) -> Any:
    if name not in _CONTRACT:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _CONTRACT[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)


def __dir__() -> list[str]:
    return sorted(__all__)
