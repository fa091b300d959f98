"""Dynamo's graph-break log, read: where each break happened and why.

Used by the CLI (the live check, ``explain``) and the tests; nothing here runs while
Dynamo traces.
"""

from __future__ import annotations

import logging
import os
import pathlib
import re
import sysconfig
from collections.abc import Callable

from ..substitutions import library_of_function
from .seam import internals, patches
from .seam.log_format import GRAPH_BREAK_LOGGER, graph_break_report, read_graph_break

__all__ = [
    "OWN_BREAK",
    "TREE_LIBRARIES",
    "GraphBreak",
    "GraphBreakRecorder",
    "attribute",
    "cause_text",
    "owner",
    "parse_graph_break",
    "shorten",
]


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
        """Whose code caused the break, by :func:`attribute`."""
        return attribute(self.message, self.location)

    @property
    def call_site(self) -> str:
        """The innermost user frame of the break, skipping this package's own frames."""
        for frame in reversed(self.frames):
            if not _is_machinery(frame):
                return frame
        if not _is_machinery(self.location):
            return self.location
        return "(repeat: Dynamo reports a call site once)"


def _package_path(module_file: str) -> str:
    """A module's path from the package's folder on: the end of a frame's path."""
    parts = pathlib.Path(os.path.normpath(module_file)).parts
    start = len(parts) - 1 - parts[::-1].index("dynamo_tree_compat")
    return os.path.join(*parts[start:])


# The twins' frames, which a break's report names but a user did not write: the
# installer's, a break naming its reason (internals), graph_break(msg=) on 2.5 (patches).
_MACHINERY_FILES = tuple(
    _package_path(file)
    for file in (
        os.path.join(os.path.dirname(__file__), os.pardir, "installer.py"),
        internals.__file__,
        patches.__file__,
    )
)
_MACHINERY_DIRS = (os.path.join("dynamo_tree_compat", "twins", "dmtree") + os.sep,)


def _is_machinery(frame: str) -> bool:
    """Whether a frame (``path:line``) is the package's own machinery.

    >>> _is_machinery(patches.__file__ + ":165"), _is_machinery("model.py:3")
    (True, False)
    """
    path = frame.rpartition(":")[0]
    return path.endswith(_MACHINERY_FILES) or any(part in path for part in _MACHINERY_DIRS)


#: The libraries this package makes traceable, as :func:`attribute` names them.
TREE_LIBRARIES = ("dm-tree", "optree", "torch pytree", "keras.tree")
_GATE = re.compile(r"(\S+) runs untraced: dynamo-tree-compat is disabled here")
#: The causes of the breaks the package itself makes, where it steps aside or works
#: around a Dynamo that cannot do something: the package's, whatever file they are in.
OWN_BREAK = re.compile(
    r"dynamo-tree-compat (stepped aside|runs this frame eagerly|runs the call in Python|"
    r"does not build|does not sort)"
)
_FRAME_LINE = re.compile(r'^\s*File "')
# Products that share one top-level package, named as users know them.
_PRODUCTS = ((f"ray{os.sep}rllib{os.sep}", "RLlib"),)
_SITE_DIRS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
#: The standard library's folder: its code is Python's, not the user's.
_STDLIB = os.path.join(sysconfig.get_paths()["stdlib"], "")


def _tree_library_named(report: str) -> str:
    """The tree library whose function the report's cause names (a skipped function, a C
    call Dynamo cannot trace), or ""."""
    if "module: tree," in report or f"{os.sep}tree{os.sep}__init__.py" in report:
        return "dm-tree"
    if "optree" in report:
        return "optree"
    return "torch pytree" if "_pytree" in report else ""


def cause_text(message: str) -> str:
    """A report without its traceback: the cause, Dynamo's explanation and context."""
    kept, in_frame = [], False
    for line in message.splitlines():
        if _FRAME_LINE.match(line):
            in_frame = True
        elif not (in_frame and line.startswith("    ")):
            in_frame = False
            kept.append(line)
    return "\n".join(kept)


def owner(path: str) -> str:
    """The library a source file belongs to, as explain shows it.

    >>> owner("/x/site-packages/tree/__init__.py:428"), owner("/x/site-packages/keras/a.py")
    ('dm-tree', 'keras')
    >>> owner("/x/site-packages/ray/rllib/core/learner.py"), owner("model.py:3")
    ('RLlib', 'your code')
    >>> owner(os.__file__ + ":10"), owner("/x/site-packages/keras/src/tree/tree_api.py")
    ('Python', 'keras.tree')
    """
    path = path.rpartition(":")[0] if path.rpartition(":")[2].isdigit() else path
    ours = f"dynamo_tree_compat{os.sep}"
    if ours in path:
        twins = os.path.join(f"{ours}twins", "")
        if f"{twins}dmtree{os.sep}" in path:
            return "dm-tree"  # a dm-tree twin's own code
        if path.endswith(f"{twins}keras.py"):
            return "keras.tree"
        return "optree" if path.endswith(f"{twins}optree.py") else "dynamo-tree-compat"
    if os.path.join("keras", "src", "tree", "") in path:
        return "keras.tree"
    if path.endswith(os.path.join("torch", "utils", "_pytree.py")):
        return "torch pytree"
    for product_dir, product in _PRODUCTS:
        if product_dir in path:
            return product
    for site in _SITE_DIRS:
        if site in path:
            top = path.split(site, 1)[1].split(os.sep, 1)[0].removesuffix(".py")
            return {"tree": "dm-tree"}.get(top, top)
    if path.startswith(_STDLIB):
        return "Python"
    return "your code"


def attribute(message: str, location: str) -> str:
    """Whose code caused a break: the tree library named by a twin's gate or by the
    cause (a skipped tree function), else the library of the innermost frame. A break in
    a user's function never counts as a tree library's because a tree call is on the
    stack.

    >>> attribute("Reason: skipped, module: tree, qualname: flatten", "model.py:4")
    'dm-tree'
    >>> attribute("Reason: Unsupported context manager", "/v/site-packages/tree/x.py:1")
    'dm-tree'
    >>> attribute("Reason: Unsupported context manager", "model.py:4")
    'your code'
    >>> attribute("Reason: dynamo-tree-compat stepped aside: f", "/v/site-packages/keras/x.py:1")
    'dynamo-tree-compat'
    """
    gate = _GATE.search(message)
    if gate and library_of_function(gate.group(1)):
        return library_of_function(gate.group(1))
    if OWN_BREAK.search(cause_text(message)):
        return "dynamo-tree-compat"
    where = owner(location)
    if where in TREE_LIBRARIES or where == "dynamo-tree-compat":
        return where
    return _tree_library_named(cause_text(message)) or where


def shorten(location: str) -> str:
    """A source location as a user reads it: relative to its site-packages, or to the
    working directory.

    >>> shorten("/v/lib/python3.11/site-packages/ray/rllib/core/learner.py:12")
    'ray/rllib/core/learner.py:12'
    """
    for site in _SITE_DIRS:
        if site in location:
            return location.split(site, 1)[1]
    here = os.getcwd() + os.sep
    return location.removeprefix(here)


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
    location, reason, frames = read_graph_break(message)
    return GraphBreak(location, reason, message, frames)


class GraphBreakRecorder(logging.Handler):
    """Collects Dynamo's graph-break reports while active, without printing them."""

    def __init__(self, on_break: Callable[[], None] | None = None) -> None:
        super().__init__(logging.DEBUG)
        self.breaks: list[GraphBreak] = []
        self._on_break = on_break
        self._saved: tuple[int, bool] | None = None
        self._undo: Callable[[], None] = lambda: None

    def emit(self, record: logging.LogRecord) -> None:
        self.breaks.append(parse_graph_break(graph_break_report(record)))
        if self._on_break is not None:
            self._on_break()

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
