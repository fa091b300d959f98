"""Every use of TorchDynamo's private state, in one place, behind version checks.

Dynamo's internals change between torch releases. Each function here checks that what
it touches looks as expected and, where it does not, reports failure instead of raising;
the callers then fall back to leaving torch as it is.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "SUBSTITUTE_UNAVAILABLE",
    "GraphBreak",
    "GraphBreakRecorder",
    "graph_break_function",
    "guard_on_flag",
    "lookup_backend",
    "register_log_name",
    "reset_compiled_code",
    "substitute",
    "substitution_support",
    "torch_polyfills",
    "unsubstitute",
]

SUBSTITUTE_UNAVAILABLE = "torch is older than 2.5: it has no torch.compiler.substitute_in_graph"
LOG_NAME = "dynamo_tree_compat"
LOG = logging.getLogger(LOG_NAME)


def substitution_support() -> str | None:
    """None if this torch can register twins, else the reason why not."""
    import torch.compiler

    if not hasattr(torch.compiler, "substitute_in_graph"):
        return SUBSTITUTE_UNAVAILABLE
    return None


def substitute(original: Callable[..., Any], twin: Callable[..., Any]) -> Callable[..., Any]:
    """Registers ``twin`` to be traced wherever Dynamo meets ``original``.

    Returns the handle Dynamo made, which :func:`unsubstitute` needs. Raises
    ValueError if something already handles ``original``.
    """
    from torch.compiler import substitute_in_graph

    # Our gates take (*args, **kwargs); tests compare each twin's signature instead.
    return substitute_in_graph(original, skip_signature_check=True)(twin)


def _registration_tables() -> tuple[dict[Any, Any], Any, dict[Any, Any], dict[Any, Any]] | None:
    """The four tables substitute_in_graph writes to, or None if they have moved."""
    try:
        from torch._dynamo.trace_rules import _polyfilled_function_ids, get_torch_obj_rule_map
        from torch._dynamo.variables import PolyfilledFunctionVariable
        from torch._dynamo.variables.builder import VariableBuilder

        tables = (
            VariableBuilder._id_dispatch(),
            _polyfilled_function_ids,
            get_torch_obj_rule_map(),
            PolyfilledFunctionVariable._get_polyfill_handlers(),
        )
    except (ImportError, AttributeError, TypeError):
        return None
    id_dispatch, polyfilled_ids, rule_map, handlers = tables
    if not (
        isinstance(id_dispatch, dict)
        and isinstance(rule_map, dict)
        and isinstance(handlers, dict)
        and callable(getattr(polyfilled_ids, "add", None))
        and callable(getattr(polyfilled_ids, "remove", None))
    ):
        return None
    return tables


def guard_on_flag(original: Callable[..., Any], flag_path: tuple[str, ...]) -> bool:
    """Makes every graph that meets ``original`` guard on a module-level flag.

    ``flag_path`` names the flag from an importable top-level module, such as
    ``("dynamo_tree_compat", "activation", "twins_enabled")``. The twin reads the flag
    too, but where Dynamo retraces a frame after a graph break inside the twin it does
    not enter the twin again, so that read alone leaves no guard behind. A guard added
    when Dynamo first meets the original, at the call site, always holds. Returns
    False, changing nothing, if torch's tables are not as expected.
    """
    tables = _registration_tables()
    if tables is None:
        return False
    id_dispatch = tables[0]
    dispatch = id_dispatch.get(id(original))
    try:
        from torch._dynamo.guards import GuardBuilder, install_guard
        from torch._dynamo.source import AttrSource, ImportSource
    except ImportError:
        return False
    if dispatch is None or not hasattr(GuardBuilder, "CONSTANT_MATCH"):
        return False

    def dispatch_with_flag_guard(builder: Any, value: Any) -> Any:
        LOG.debug(
            "Dynamo met %s.%s: tracing its twin",
            getattr(value, "__module__", "?"),
            getattr(value, "__qualname__", value),
        )
        source: Any = ImportSource(flag_path[0])
        for name in flag_path[1:]:
            source = AttrSource(source, name)
        install_guard(source.make_guard(GuardBuilder.CONSTANT_MATCH))
        return dispatch(builder, value)

    id_dispatch[id(original)] = dispatch_with_flag_guard
    return True


def unsubstitute(original: Callable[..., Any], handle: Callable[..., Any]) -> bool:
    """Undoes :func:`substitute`; False (and nothing changed) if torch's tables moved."""
    tables = _registration_tables()
    if tables is None:
        return False
    id_dispatch, polyfilled_ids, rule_map, handlers = tables
    if handlers.get(original) is not handle:
        return False
    for key in (original, handle):
        id_dispatch.pop(id(key), None)
        if id(key) in polyfilled_ids():
            polyfilled_ids.remove(id(key))
        rule_map.pop(key, None)
        handlers.pop(key, None)
    return True


def reset_compiled_code() -> None:
    """Drops compiled graphs so that none traced with a removed twin runs again."""
    import torch._dynamo

    torch._dynamo.reset()


def graph_break_function() -> Callable[[], None]:
    """Dynamo's ``graph_break``: traced, it ends the graph; run eagerly, it does nothing."""
    import torch._dynamo

    return torch._dynamo.graph_break


def torch_polyfills() -> dict[Any, Any]:
    """The functions torch itself traces through polyfills: original -> handler."""
    tables = _registration_tables()
    return dict(tables[3]) if tables is not None else {}


def register_log_name() -> bool:
    """Registers ``TORCH_LOGS=+dynamo_tree_compat``; torch parses TORCH_LOGS after autoload."""
    try:
        from torch._logging._internal import log_registry, register_log
    except ImportError:
        return False
    if LOG_NAME not in log_registry.log_alias_to_log_qnames:
        register_log(LOG_NAME, [LOG_NAME])
    return True


def lookup_backend(name: str) -> Callable[..., Any]:
    """The compiler behind a ``torch.compile(backend=name)`` string."""
    from torch._dynamo import lookup_backend as lookup

    return lookup(name)


# --- Reading Dynamo's graph-break log --------------------------------------------------

_GRAPH_BREAK_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    # Compiled on first use: this module loads with the autoload entry point.
    return (
        re.compile(r"Graph break.*? in user code at (.+):(\d+)"),
        re.compile(r"User-inserted graph break\. Message: (.+)"),
        re.compile(r'File "(.+)", line (\d+), in (\S+)'),
    )


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


def parse_graph_break(message: str) -> GraphBreak:
    """Reads the location, the cause and the user frames from one log message."""
    location_pattern, user_message_pattern, frame_pattern = _patterns()
    found = location_pattern.search(message)
    location = f"{found.group(1)}:{found.group(2)}" if found else "<unknown>"
    reason = "<unknown>"
    lines = message.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("Graph Break Reason:"):
            candidates = [line.removeprefix("Graph Break Reason:").strip(), *lines[index + 1 :]]
            for candidate in candidates:
                text = candidate.strip()
                if text and not text.startswith("Encountered graph break when attempting"):
                    reason = text
                    break
            break
    user_message = user_message_pattern.search(message)
    if user_message and user_message.group(1).strip() != "None":
        reason = user_message.group(1).strip()
    frames = [f"{path}:{line}" for path, line, _ in frame_pattern.findall(message)]
    return GraphBreak(location, reason, message, frames)


class GraphBreakRecorder(logging.Handler):
    """Collects Dynamo's graph-break reports while active, without printing them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.breaks: list[GraphBreak] = []
        self._saved: tuple[int, bool] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.breaks.append(parse_graph_break(record.getMessage()))

    def __enter__(self) -> GraphBreakRecorder:
        logger = logging.getLogger(_GRAPH_BREAK_LOGGER)
        self._saved = (logger.level, logger.propagate)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logger = logging.getLogger(_GRAPH_BREAK_LOGGER)
        logger.removeHandler(self)
        if self._saved is not None:
            logger.level, logger.propagate = self._saved
