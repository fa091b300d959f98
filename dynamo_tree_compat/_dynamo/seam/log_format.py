"""Dynamo's graph-break log: its name, and its records read in any supported release's
wording (no Dynamo import: the records are text)."""

from __future__ import annotations

import functools
import logging
import re

__all__ = ["GRAPH_BREAK_LOGGER", "graph_break_report", "read_graph_break"]

#: The name of Dynamo's graph-break log.
GRAPH_BREAK_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"


# Dynamo's graph-break log, whose format each release words its own way.
@functools.cache
def _report_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    # Compiled on first use: most programs never read the log.
    return (
        re.compile(r"Graph break.*? in user code at (.+):(\d+)"),
        re.compile(r"User-inserted graph break\. Message: (.+)"),
        re.compile(r'File "(.+)", line (\d+), in (\S+)'),
    )


# Lines that lead in to the cause of a graph break, rather than say it.
_PREAMBLES = ("Encountered graph break when attempting", "Failed to handle graph break gracefully")


def read_graph_break(message: str) -> tuple[str, str, list[str]]:
    """(location, reason, user frames) of one report in Dynamo's graph-break log, in the
    format of any supported release.

    >>> read_graph_break("Graph break in user code at f.py:3\\nReason: Unsupported: why")
    ('f.py:3', 'why', [])
    """
    location_pattern, user_message_pattern, frame_pattern = _report_patterns()
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
    return location, reason, frames


def graph_break_report(record: logging.LogRecord) -> str:
    """The text of one graph-break log record (Dynamo 2.5 keeps the reason in the
    exception it logs with)."""
    message = record.getMessage()
    raised = record.exc_info[1] if record.exc_info else None
    if raised is not None:
        message += f"\nReason: {type(raised).__name__}: {raised}"
    return message
