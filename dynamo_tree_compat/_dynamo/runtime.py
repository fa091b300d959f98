"""Logging, counters and the hooks turned off: the bottom layer, loaded with ``import torch``.

This module stays light (no torch import at load time) and names nothing of Dynamo:
torch's autoload entry point loads it, with :mod:`.seam.lock`.
"""

from __future__ import annotations

import collections
import enum
import logging
import sys
from typing import NamedTuple

__all__ = [
    "HANDLING",
    "HOOKS_OFF",
    "LOG",
    "LOG_NAME",
    "STATS",
    "TRACED_CODE",
    "Capability",
    "Counted",
    "Event",
    "count",
    "counted",
    "half_imported",
    "step_aside",
    "traced",
    "turn_off",
    "write_json_whole",
]


def half_imported(module_name: str) -> bool:
    """Whether a module is in ``sys.modules`` but still being imported (by this thread
    or another): its code has not finished running.

    >>> half_imported("sys"), half_imported("no such module")
    (False, False)
    """
    spec = getattr(sys.modules.get(module_name), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


LOG_NAME = "dynamo_tree_compat"
LOG = logging.getLogger(LOG_NAME)


class Capability(enum.Enum):
    """A question about this Dynamo that a workaround depends on; ``seam/capabilities.py``
    declares how each is asked, its safe answer and the releases where it is true.

    Code names a member, never a string, so a misspelt name fails where it is read, and
    ``tests/internals/test_capabilities.py`` checks every ``Capability.`` in the source.
    The value is the name in the disk cache, the reports and the docs.

    >>> Capability("deque_keeps_maxlen") is Capability.DEQUE_KEEPS_MAXLEN
    True
    """

    SORT_RAISES_CLEANLY = "sort_raises_cleanly"
    DEFAULTDICT_TAKES_ITEMS = "defaultdict_takes_items"
    DEFAULTDICT_LEAVES_GRAPH = "defaultdict_leaves_graph"
    DEQUE_KEEPS_MAXLEN = "deque_keeps_maxlen"
    INLINED_SKIP_BECOMES_BREAK = "inlined_skip_becomes_break"
    BREAK_RECURSES_ON_CYCLES = "break_recurses_on_cycles"
    SKIP_KEEPS_GRAPHS = "skip_keeps_graphs"
    COMPARES_THROUGH_POLYFILLS = "compares_through_polyfills"
    TREE_MAP_FAST_PATH = "tree_map_fast_path"
    TREE_MAP_WITH_PATH_FAST_PATH = "tree_map_with_path_fast_path"
    TREE_MAP_ONLY_FAST_PATH = "tree_map_only_fast_path"
    TREE_MAP_FAST_PATH_KEEPS_DEFAULTDICT = "tree_map_fast_path_keeps_defaultdict"
    TREE_MAP_FAST_PATH_GUARDS_KEY_ORDER = "tree_map_fast_path_guards_key_order"
    SET_SUBCLASS_KEEPS_CONTENTS = "set_subclass_keeps_contents"
    ITER_OF_A_NUMBER_RAISES = "iter_of_a_number_raises"
    GENERATORS_RUN_TO_THE_END = "generators_run_to_the_end"
    CXX_PYTREE_INLINED = "cxx_pytree_inlined"


class Event(enum.Enum):
    """What happened to a traced call, as :data:`STATS` counts it."""

    TAKEN = "taken"  # a fast path or handler gave the result
    FALLBACK = "fallback"  # a fast path handed the call on
    BREAK = "break"  # a graph break by design: the call runs eagerly
    SKIP_FRAME = "skip frame"  # the whole frame runs eagerly
    CYCLE = "cycle"  # a structure that contains itself
    STEPPED_ASIDE = "stepped aside"  # an unexpected error of ours: the other way


class Counted(NamedTuple):
    """One kind of :data:`STATS` count: an event, and the function or place it names."""

    event: Event
    what: str


#: Counts of what happened to traced calls.
STATS: collections.Counter[Counted] = collections.Counter()


def count(event: Event, what: str) -> None:
    """Counts ``event`` for ``what``."""
    STATS[Counted(event, what)] += 1


def counted(event: Event) -> collections.Counter[str]:
    """The counts of ``event``, by what they name.

    >>> count(Event.CYCLE, "example"); counted(Event.CYCLE)["example"] >= 1
    True
    """
    return collections.Counter(
        {found.what: number for found, number in STATS.items() if found.event is event}
    )


#: How many of this package's handlers are running now (one compile at a time: Dynamo's
#: compile lock): while one is, what Dynamo builds is read for a tree function.
HANDLING: list[int] = [0]

#: Private hooks turned off for this process: hook name -> why.
HOOKS_OFF: dict[str, str] = {}

#: Code objects Dynamo traced through a registered original since the mode last changed:
#: Dynamo may have marked one to run eagerly for good (a graph break it could not resume
#: from), a mark that must not outlive the mode. By id, with the code object held so
#: that the id stays its own.
TRACED_CODE: dict[int, object] = {}
_MAX_TRACED_CODE = 10_000

_logged: set[str] = set()


def step_aside(where: str, error: BaseException) -> None:
    """Counts an unexpected error in this package's code while tracing; logs it once.

    >>> before = counted(Event.STEPPED_ASIDE)["example"]
    >>> step_aside("example", KeyError("x"))
    >>> counted(Event.STEPPED_ASIDE)["example"] - before
    1
    """
    count(Event.STEPPED_ASIDE, where)
    if where not in _logged:
        _logged.add(where)
        LOG.warning(
            "%s: %s: %s; this call goes the other way (the twin, or torch's own handling)",
            where,
            type(error).__name__,
            error,
            exc_info=LOG.isEnabledFor(logging.DEBUG),
        )


def turn_off(hook: str, why: str) -> None:
    """Turns a private hook off for the process, with the reason ``status()`` shows.

    >>> turn_off("example", "a probe failed"); HOOKS_OFF.pop("example")
    'a probe failed'
    """
    if hook not in HOOKS_OFF:
        HOOKS_OFF[hook] = why
        LOG.warning("turned off %s: %s", hook, why)


def traced(code: object) -> None:
    """Remembers a code object that Dynamo traced through a registered original."""
    if len(TRACED_CODE) < _MAX_TRACED_CODE:
        TRACED_CODE[id(code)] = code


def write_json_whole(path: str, data: object) -> bool:
    """Writes ``data`` as JSON to a new file beside ``path``, then moves it into place:
    concurrent writers and readers never see half a file. Returns whether it was
    written; never raises for the file system.

    >>> import tempfile, os, json
    >>> folder = tempfile.mkdtemp()
    >>> write_json_whole(os.path.join(folder, "a", "x.json"), [1]), os.listdir(folder + "/a")
    (True, ['x.json'])
    """
    import contextlib
    import json
    import os
    import tempfile

    folder = os.path.dirname(path)
    temporary = None
    try:
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(data, file)
        os.replace(temporary, path)
        return True
    except OSError:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.remove(temporary)
        return False
