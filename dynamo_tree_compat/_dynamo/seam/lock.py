"""The seam's light half: what autoload and activation need before Dynamo loads.

It names Dynamo's modules without importing them, and imports nothing of the package
but :mod:`..runtime` (it loads with every ``import torch``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

from ..runtime import LOG_NAME

__all__ = ["DYNAMO_MODULE", "compile_lock", "register_log_name"]

#: The module whose import activation waits for.
DYNAMO_MODULE = "torch._dynamo"

_REENTRANT_LOCK = type(threading.RLock())


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
    module = sys.modules.get(DYNAMO_MODULE + ".convert_frame")
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
