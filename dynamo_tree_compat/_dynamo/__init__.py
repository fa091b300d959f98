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
    "break_where_a_generator_leaves",
    "capabilities_settled",
    "compile_lock",
    "count_graphs",
    "counted",
    "counters",
    "for_a_tree",
    "forget_skips",
    "give_mapping_proxies_a_type",
    "graph_break_function",
    "half_imported",
    "has",
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

#: Each name, and the module that defines it under that same name.
_CONTRACT: dict[str, str] = {
    "DEFAULTDICT_LEFT_AS_DICT": "common.reading",
    "FAST_PATHS": "handlers",
    "OPTREE_C_LAYER": "handlers",
    "FAST_PATH_MAX_DEPTH": "common.reading",
    "OPTREE_MAX_DEPTH": "common.reading",
    "HOOKS_OFF": "runtime",
    "LOG": "runtime",
    "STATS": "runtime",
    "write_json_whole": "runtime",
    "Event": "runtime",
    "counted": "runtime",
    "DYNAMO_MODULE": "seam.lock",
    "compile_lock": "seam.lock",
    "forget_skips": "seam.patches",
    "for_a_tree": "common.scope",
    "half_imported": "runtime",
    "register_log_name": "seam.lock",
    "SUBSTITUTE_UNAVAILABLE": "registration",
    "route": "registration",
    "routing_support": "registration",
    "substitute": "registration",
    "substitute_in_graph": "seam.frames",
    "substitution_support": "registration",
    "torch_polyfills": "registration",
    "unroute": "registration",
    "unsubstitute": "registration",
    "hook_builder": "builder_hooks",
    "unhook_builder": "builder_hooks",
    "is_builder_hooked": "builder_hooks",
    "probe": "probes",
    "layer_off": "probes",
    "PYTREE_COPIES_FILE": "pytree",
    "graph_break_function": "seam.patches",
    "lookup_backend": "seam.internals",
    "reset_compiled_code": "seam.internals",
    "give_mapping_proxies_a_type": "seam.patches",
    "keep_set_subclasses_whole": "seam.sets",
    "break_on_iterating_a_number": "seam.constants",
    "break_where_a_generator_leaves": "seam.patches",
    "GraphBreakRecorder": "graph_breaks",
    "counters": "seam.internals",
    "count_graphs": "seam.patches",
    "load": "seam.internals",
    "has": "seam.capabilities",
    "Capability": "runtime",
    "capabilities_settled": "seam.capabilities",
    "before_each_frame": "seam.frames",
}


def __getattr__(name: str) -> Any:
    if name not in _CONTRACT:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_CONTRACT[name]}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
