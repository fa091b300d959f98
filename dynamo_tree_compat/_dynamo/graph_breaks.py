"""Dynamo's graph-break log, read: where each break happened and why.

Used by the CLI (the live check, ``explain``) and the tests; nothing here runs while
Dynamo traces.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from . import internals, patches
from .internals import GRAPH_BREAK_LOGGER

__all__ = ["GraphBreak", "GraphBreakRecorder", "parse_graph_break"]


class GraphBreak:
    """One graph break, as Dynamo's ``graph_breaks`` log reports it."""

    __slots__ = ("frames", "location", "message", "reason")

    def __init__(self, location: str, reason: str, message: str, frames: list[str]) -> None:
        self.location = location
        self.reason = reason
        self.message = message
        self.frames = frames

    def __repr__(self) -> str:
        return f"GraphBreak({self.location!r}, {self.reason!r})"

    @property
    def library(self) -> str:
        """Which tree library the break comes from: "dm-tree", "optree", "torch pytree",
        or "-", judged by its report."""
        message = self.message
        if "dynamo-tree-compat is disabled here" in message:
            return "dm-tree"  # a twin's gate, breaking because the mode is off
        if "module: tree," in message or f"{os.sep}tree{os.sep}__init__.py" in message:
            return "dm-tree"
        if "optree" in message:
            return "optree"
        if "_pytree" in message:
            return "torch pytree"
        return "-"

    @property
    def call_site(self) -> str:
        """The innermost user frame of the break, skipping this package's own frames."""
        for frame in reversed(self.frames):
            if not _is_machinery(frame):
                return frame
        if not _is_machinery(self.location):
            return self.location
        return "(repeat: Dynamo reports a call site once)"


# The twins' frames, which a break's report names but a user did not write.
_MACHINERY_FILES = (
    os.path.join("dynamo_tree_compat", "installer.py"),
    os.path.join("dynamo_tree_compat", "_dynamo", "internals.py"),  # a break naming its reason
    os.path.join("dynamo_tree_compat", "_dynamo", "patches.py"),  # graph_break(msg=) on 2.5
)
_MACHINERY_DIRS = (os.path.join("dynamo_tree_compat", "dmtree") + os.sep,)


def _is_machinery(frame: str) -> bool:
    path = frame.rpartition(":")[0]
    return path.endswith(_MACHINERY_FILES) or any(part in path for part in _MACHINERY_DIRS)


def parse_graph_break(message: str) -> GraphBreak:
    r"""Reads the location, the cause and the user frames from one log message.

    >>> parse_graph_break(
    ...     "Graph Break Reason: Observed exception\nDeveloper debug context: "
    ...     'raised exception KeyError([ConstantVariable(str: "k")])'
    ... ).reason
    'raises KeyError("k")'
    >>> parse_graph_break("Graph break in user code at f.py:3\nReason: Unsupported: why").reason
    'why'
    """
    location, reason, frames = internals.read_graph_break(message)
    return GraphBreak(location, reason, message, frames)


class GraphBreakRecorder(logging.Handler):
    """Collects Dynamo's graph-break reports while active, without printing them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.breaks: list[GraphBreak] = []
        self._saved: tuple[int, bool] | None = None
        self._undo: Callable[[], None] = lambda: None

    def emit(self, record: logging.LogRecord) -> None:
        self.breaks.append(parse_graph_break(internals.graph_break_report(record)))

    def __enter__(self) -> GraphBreakRecorder:
        logger = logging.getLogger(GRAPH_BREAK_LOGGER)
        self._saved = (logger.level, logger.propagate)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(self)
        try:
            self._undo = patches.log_every_graph_break()
        except Exception:  # noqa: BLE001 - Dynamo's internals moved: repeats go unread
            self._undo = lambda: None
        return self

    def __exit__(self, *exc_info: object) -> None:
        logger = logging.getLogger(GRAPH_BREAK_LOGGER)
        logger.removeHandler(self)
        self._undo()
        if self._saved is not None:
            logger.level, logger.propagate = self._saved
