"""Every private TorchDynamo access of the package, behind one seam.

The contract: the rest of the package uses only the names in ``__all__`` below, through
this package (``from . import _dynamo``; ``_dynamo.route(...)``). Each loads its module
on first use, so that ``import torch`` (autoload) loads only :mod:`.runtime`.

One module per concern:

- :mod:`.internals`: the seam. Every Dynamo class, attribute and function read,
  looked up by what is present; :mod:`.patches`, its other half, every change made
  to Dynamo. Supporting a new torch means editing these two alone.
- :mod:`.capabilities`: what this Dynamo can do, asked by trying it.
- :mod:`.runtime`: the compile lock, logging, counters (light: loads with autoload).
- :mod:`.registration`: ``substitute_in_graph``, and routing originals to handlers.
- :mod:`.guards`: what a traced graph guards on.
- :mod:`.reading`: the shared helpers for reading structures from variables.
- :mod:`.handlers`: the handler table, and the one guard every handler runs behind.
- :mod:`.dmtree_fast`, :mod:`.optree_fast`: fast paths for common structures.
- :mod:`.optree_reader`: structures read from variables as optree's C code sees them.
- :mod:`.optree_spec`: optree's PyTreeSpec (and ``operator.methodcaller``) as variables.
- :mod:`.optree_c`: optree's C functions, handled at the variable level.
- :mod:`.builder_hooks`: hooks on Dynamo's variable builder and frame check.
- :mod:`.probes`: tries each hook once, and turns off those that fail.
- :mod:`.graph_breaks`: Dynamo's graph-break log, read.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "DEFAULTDICT_LEFT_AS_DICT",
    "FAST_PATHS",
    "FAST_PATH_MAX_DEPTH",
    "HOOKS_OFF",
    "LOG",
    "OPTREE_C_LAYER",
    "OPTREE_MAX_DEPTH",
    "STATS",
    "SUBSTITUTE_UNAVAILABLE",
    "GraphBreakRecorder",
    "before_each_frame",
    "capabilities_settled",
    "capability",
    "compile_lock",
    "count_graphs",
    "counters",
    "give_mapping_proxies_a_type",
    "graph_break_function",
    "half_imported",
    "hook_builder",
    "is_builder_hooked",
    "layer_off",
    "load",
    "lookup_backend",
    "probe",
    "register_log_name",
    "reset_compiled_code",
    "route",
    "routing_support",
    "substitute",
    "substitution_support",
    "torch_polyfills",
    "unhook_builder",
    "unroute",
    "unsubstitute",
]

# name -> (module, attribute there)
_CONTRACT: dict[str, tuple[str, str]] = {
    "DEFAULTDICT_LEFT_AS_DICT": ("reading", "DEFAULTDICT_LEFT_AS_DICT"),
    "FAST_PATHS": ("handlers", "FAST_PATHS"),
    "OPTREE_C_LAYER": ("handlers", "OPTREE_C_LAYER"),
    "FAST_PATH_MAX_DEPTH": ("reading", "FAST_PATH_MAX_DEPTH"),
    "OPTREE_MAX_DEPTH": ("reading", "OPTREE_MAX_DEPTH"),
    "HOOKS_OFF": ("runtime", "HOOKS_OFF"),
    "LOG": ("runtime", "LOG"),
    "STATS": ("runtime", "STATS"),
    "compile_lock": ("runtime", "compile_lock"),
    "half_imported": ("runtime", "half_imported"),
    "register_log_name": ("runtime", "register_log_name"),
    "SUBSTITUTE_UNAVAILABLE": ("registration", "SUBSTITUTE_UNAVAILABLE"),
    "route": ("registration", "route"),
    "routing_support": ("registration", "routing_support"),
    "substitute": ("registration", "substitute"),
    "substitution_support": ("registration", "substitution_support"),
    "torch_polyfills": ("registration", "torch_polyfills"),
    "unroute": ("registration", "unroute"),
    "unsubstitute": ("registration", "unsubstitute"),
    "hook_builder": ("builder_hooks", "hook"),
    "unhook_builder": ("builder_hooks", "unhook"),
    "is_builder_hooked": ("builder_hooks", "is_hooked"),
    "probe": ("probes", "probe"),
    "layer_off": ("probes", "layer_off"),
    "graph_break_function": ("patches", "graph_break_function"),
    "lookup_backend": ("internals", "lookup_backend"),
    "reset_compiled_code": ("internals", "reset_compiled_code"),
    "give_mapping_proxies_a_type": ("patches", "give_mapping_proxies_a_type"),
    "GraphBreakRecorder": ("graph_breaks", "GraphBreakRecorder"),
    "counters": ("internals", "counters"),
    "count_graphs": ("patches", "count_graphs"),
    "load": ("internals", "load"),
    "capability": ("capabilities", "has"),
    "capabilities_settled": ("capabilities", "settled"),
    "before_each_frame": ("patches", "before_each_frame"),
}


def __getattr__(name: str) -> Any:
    if name not in _CONTRACT:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _CONTRACT[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)


def __dir__() -> list[str]:
    return sorted(__all__)
