"""Dynamo's check of each new frame, as this package hooks it, and what it asks where
Dynamo is imported and nothing has compiled yet. Self-contained (it imports nothing of
the seam but its package), so that a process that imports Dynamo and never compiles
pays one small import."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from . import Missing

__all__ = ["before_each_frame", "frame_compiler", "substitute_in_graph", "tensor_check"]


def tensor_check() -> tuple[Any, str]:
    """(owner, name) of Dynamo's check of a new frame for tensors."""
    from torch._dynamo import convert_frame

    if not callable(getattr(convert_frame, "has_tensor_in_frame", None)):
        raise Missing("convert_frame.has_tensor_in_frame")
    return convert_frame, "has_tensor_in_frame"


def frame_compiler() -> tuple[Any, str] | None:
    """(owner, name) of the function through which both ``torch.compile`` and the graph
    capture of ``torch.export`` (which skips the tensor check) trace a frame, where this
    Dynamo has one (torch 2.10 on); None elsewhere."""
    from torch._dynamo import convert_frame

    if callable(getattr(convert_frame, "compile_frame", None)):
        return convert_frame, "compile_frame"
    return None


def substitute_in_graph() -> Callable[..., Any]:
    """``torch.compiler.substitute_in_graph``; :class:`~.Missing` before torch 2.5."""
    import torch.compiler

    found = getattr(torch.compiler, "substitute_in_graph", None)
    if found is None:
        raise Missing("torch.compiler.substitute_in_graph")
    return found


def before_each_frame(action: Callable[[], bool], captures_too: bool = False) -> None:
    """Runs ``action`` as Dynamo takes up each new frame, before it traces (its frame
    check), until ``action`` returns True: a moment where this package can compile a
    trial of its own, as it cannot while torch's own imports are half done. With
    ``captures_too``, also as ``torch.export`` captures a graph, which skips that check
    (where Dynamo has one function that traces both: :func:`frame_compiler`)."""
    hooks = [tensor_check()]
    if captures_too and (compiler := frame_compiler()) is not None:
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
