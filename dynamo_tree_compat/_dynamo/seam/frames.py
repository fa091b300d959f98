"""Dynamo's check of each new frame, as this package hooks it: kept apart from
:mod:`.patches` so that the hook costs a process that imports Dynamo and never compiles
one small import."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import internals

__all__ = ["before_each_frame"]


def before_each_frame(action: Callable[[], bool]) -> None:
    """Runs ``action`` as Dynamo takes up each new frame, before it traces (its frame
    check), until ``action`` returns True: a moment where this package can compile a
    trial of its own, as it cannot while torch's own imports are half done."""
    owner, name = internals.tensor_check()
    original = getattr(owner, name)
    state = {"done": False, "running": False}

    def has_tensor_in_frame(frame: Any) -> bool:
        if not state["done"] and not state["running"]:
            state["running"] = True
            try:
                state["done"] = bool(action())
            except Exception:  # noqa: BLE001 - never in the way of the user's compile
                state["done"] = True
            finally:
                state["running"] = False
        return original(frame)

    setattr(owner, name, has_tensor_in_frame)
