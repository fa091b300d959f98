"""The compile lock, logging and counters: all that loads with ``import torch``.

This module stays light (no torch import at load time): torch's autoload entry point
imports it for :func:`compile_lock` and :func:`register_log_name`.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import sys
import threading
from collections.abc import Iterator

__all__ = [
    "HOOKS_OFF",
    "LOG",
    "LOG_NAME",
    "STATS",
    "compile_lock",
    "forget_skips",
    "half_imported",
    "register_log_name",
    "step_aside",
    "traced",
    "turn_off",
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

#: Counts by ``"<event>:<function>"``: ``taken`` and ``fallback`` (fast paths), ``break``,
#: ``skip frame`` and ``cycle`` (graph breaks by design), ``stepped aside`` (an
#: unexpected error in this package's code while tracing; the call went the other way).
STATS: collections.Counter[str] = collections.Counter()

#: Private hooks turned off for this process: hook name -> why.
HOOKS_OFF: dict[str, str] = {}

#: Code objects Dynamo traced through a registered original since the mode last changed:
#: Dynamo may have marked one to run eagerly for good (a graph break it could not resume
#: from), a mark that must not outlive the mode. By id, with the code object held so
#: that the id stays its own.
TRACED_CODE: dict[int, object] = {}
_MAX_TRACED_CODE = 10_000

_REENTRANT_LOCK = type(threading.RLock())
_logged: set[str] = set()


def step_aside(where: str, error: BaseException) -> None:
    """Counts an unexpected error in this package's code while tracing; logs it once.

    >>> before = STATS["stepped aside:example"]
    >>> step_aside("example", KeyError("x"))
    >>> STATS["stepped aside:example"] - before
    1
    """
    STATS["stepped aside:" + where] += 1
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


def forget_skips() -> None:
    """On a change of mode: lets Dynamo consider again the code it traced in the mode
    that ends, so that a skip it decided then does not outlive that mode. Never raises.
    """
    if not TRACED_CODE:
        return
    codes = list(TRACED_CODE.values())
    TRACED_CODE.clear()
    try:
        from . import patches

        for code in codes:
            patches.unskip_code(code)
    except Exception as error:  # noqa: BLE001 - runs inside the user's `with` statement
        step_aside("forgetting skipped frames", error)


@contextlib.contextmanager
def compile_lock(wait: bool = True) -> Iterator[bool]:
    """Holds Dynamo's compile lock, if Dynamo is loaded: no frame is mid-compile inside.

    Dynamo compiles one frame at a time under this lock, and checks a frame's guards
    before it lets go. Changing the mode or the registrations under it means no compile
    ever sees half a change. With ``wait=False`` it goes on without the lock when another
    thread holds it. Yields whether the lock is held.

    >>> import torch._dynamo
    >>> with compile_lock() as held, compile_lock(wait=False) as again:  # reentrant
    ...     held, again
    (True, True)
    """
    module = sys.modules.get("torch._dynamo.convert_frame")
    lock = getattr(module, "compile_lock", None)
    if not isinstance(lock, _REENTRANT_LOCK):  # a plain Lock would deadlock when nested
        yield False
        return
    held = lock.acquire(blocking=wait)
    try:
        yield held
    finally:
        if held:
            lock.release()


def register_log_name() -> bool:
    """Registers ``TORCH_LOGS=+dynamo_tree_compat``; torch parses TORCH_LOGS after autoload."""
    try:
        from torch._logging._internal import log_registry, register_log
    except ImportError:
        return False
    if LOG_NAME not in log_registry.log_alias_to_log_qnames:
        register_log(LOG_NAME, [LOG_NAME])
    return True
