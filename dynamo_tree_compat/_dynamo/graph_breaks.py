"""Dynamo's graph-break log, read: where each break happened and why.

Used by the CLI (the live check, ``explain``) and the tests; nothing here runs while
Dynamo traces.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable

from . import internals
from .internals import GRAPH_BREAK_LOGGER

__all__ = ["GraphBreak", "GraphBreakRecorder", "parse_graph_break"]


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    # Compiled on first use: most programs never read the log.
    return (
        re.compile(r"Graph break.*? in user code at (.+):(\d+)"),
        re.compile(r"User-inserted graph break\. Message: (.+)"),
        re.compile(r'File "(.+)", line (\d+), in (\S+)'),
    )


# Lines that lead in to the cause of a graph break, rather than say it.
_PREAMBLES = ("Encountered graph break when attempting", "Failed to handle graph break gracefully")


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
    os.path.join("dynamo_tree_compat", "substitutions.py"),
    os.path.join("dynamo_tree_compat", "_dynamo", "internals.py"),  # a break naming its reason
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
    location_pattern, user_message_pattern, frame_pattern = _patterns()
    found = location_pattern.search(message)
    frames = [f"{path}:{line}" for path, line, _ in frame_pattern.findall(message)]
    # Dynamo 2.5 names no location but the user frames, innermost last.
    location = f"{found.group(1)}:{found.group(2)}" if found else (frames or ["<unknown>"])[-1]
    reason = "<unknown>"
    lines = message.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("Graph Break Reason:"):
            candidates = [line.removeprefix("Graph Break Reason:").strip(), *lines[index + 1 :]]
            for candidate in candidates:
                text = candidate.strip()
                if text and not text.startswith(_PREAMBLES):
                    reason = text
                    break
            break
        if line.startswith("Reason: "):  # torch 2.6 and earlier: "Reason: Unsupported: ..."
            reason = line.removeprefix("Reason: ").removeprefix("Unsupported: ").strip()
            break
    raised = re.search(r"Developer debug context: raised exception (.+)", message)
    if reason == "Observed exception" and raised:
        # Dynamo before 2.12 shows the arguments as its variables: [ConstantVariable(str: "m")]
        shown = re.sub(r'\[ConstantVariable\(str: (".*")\)\]', r"\1", raised.group(1).strip())
        reason = f"raises {shown}"
    user_message = user_message_pattern.search(message)
    if user_message and user_message.group(1).strip() != "None":
        reason = user_message.group(1).strip()
    return GraphBreak(location, reason, message, frames)


class GraphBreakRecorder(logging.Handler):
    """Collects Dynamo's graph-break reports while active, without printing them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.breaks: list[GraphBreak] = []
        self._saved: tuple[int, bool] | None = None
        self._undo: Callable[[], None] = lambda: None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        raised = record.exc_info[1] if record.exc_info else None
        if raised is not None:  # Dynamo 2.5: the reason is the exception's
            message += f"\nReason: {type(raised).__name__}: {raised}"
        self.breaks.append(parse_graph_break(message))

    def __enter__(self) -> GraphBreakRecorder:
        logger = logging.getLogger(GRAPH_BREAK_LOGGER)
        self._saved = (logger.level, logger.propagate)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(self)
        try:
            self._undo = internals.log_every_graph_break()
        except Exception:  # noqa: BLE001 - Dynamo's internals moved: repeats go unread
            self._undo = lambda: None
        return self

    def __exit__(self, *exc_info: object) -> None:
        logger = logging.getLogger(GRAPH_BREAK_LOGGER)
        logger.removeHandler(self)
        self._undo()
        if self._saved is not None:
            logger.level, logger.propagate = self._saved
