"""Dynamo's check of each new frame, as this package hooks it: kept apart from
:mod:`.patches` so that the hook costs a process that imports Dynamo and never compiles
one small import."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from . import internals

__all__ = ["before_each_frame"]


def before_each_frame(action: Callable[[], bool], captures_too: bool = False) -> None:
    """Runs ``action`` as Dynamo takes up each new frame, before it traces (its frame
    check), until ``action`` returns True: a moment where this package can compile a
    trial of its own, as it cannot while torch's own imports are half done. With
    ``captures_too``, also as ``torch.export`` captures a graph, which skips that check
    (where Dynamo has one function that traces both: :func:`.internals.frame_compiler`)."""
    hooks = [internals.tensor_check()]
    if captures_too and (compiler := internals.frame_compiler()) is not None:
        hooks.append(compiler)
    state = {"done": False, "running": False}

    def run_action() -> None:
        if not state["done"] and not state["running"]:
            state["running"] = True
            try:
                state["done"] = bool(action())
            except Exception:  # noqa: BLE001 - never in the way of the user's compile
                state["done"] = True
            finally:
                state["running"] = False

    for owner, name in hooks:
        setattr(owner, name, _first_running(run_action, getattr(owner, name)))


def _first_running(run_action: Callable[[], None], original: Any) -> Any:
    @functools.wraps(original)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        run_action()
        return original(*args, **kwargs)

    return hooked
