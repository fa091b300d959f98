"""What this torch's Dynamo can do, asked by trying it: the one place for such questions.

Each capability is a question the package's workarounds depend on. Most are asked by
compiling a tiny function (``backend="eager"``) once, outside any trace, and looking at
what comes back; one by trying a variable outside a trace; two by what Dynamo has.
Never by reading Dynamo's source text, which a refactor can change without changing
behaviour. Answers are cached for the process; ``tests/internals/test_capabilities.py``
pins each release's answers, so that a change is a failure there, not a silent switch.

A trial leaves no trace: Dynamo's counters are put back and its graph-break log is
silenced while it runs. Where a trial cannot run now (Dynamo is tracing, another
thread holds the compile lock, or a torch module is half imported, as while torch's
own imports import Dynamo), the answer is :data:`SAFE`, which keeps the workaround, and
the question is asked again next time (:func:`settled` says whether any is open). Where
a trial fails, the answer is :data:`SAFE` for good.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ..runtime import half_imported
from . import internals, making
from .lock import compile_lock
from .log_format import GRAPH_BREAK_LOGGER

__all__ = ["NAMES", "SAFE", "answers", "has", "settled"]


def _sorted_mixed_keys(x: Any) -> Any:
    try:
        sorted({"a": x, 1: x})
    except TypeError:
        return x + 1
    return x - 1


def _defaultdict_with_items(x: Any) -> Any:
    return collections.defaultdict(int, [("a", x)])["a"] + 1


def _defaultdict_made(x: Any) -> Any:
    made = collections.defaultdict(list)
    made["a"] = x + 1
    return made


def _deque_with_maxlen(x: Any) -> Any:
    queue = collections.deque([x, x + 1], maxlen=1)
    return queue[0], queue.maxlen


def _skip_from_inside(context: Any) -> None:
    raise internals.skip_frame_error()("dynamo-tree-compat: a capability trial")


def _inlined_skip(y: Any) -> Any:
    _COMPTIME[0](_skip_from_inside)
    return y


def _outer_of_inlined_skip(x: Any) -> Any:
    y = x + 1
    _inlined_skip(y)
    return y * 2


#: Dynamo's ``comptime``, as a module global that traced code reads with a source.
_COMPTIME: list[Any] = [None]


def _traced(function: Callable[..., Any], fullgraph: bool = True) -> tuple[Any, int]:
    """``function(torch.ones(1))`` compiled: (its result, the graphs compiled)."""
    import torch

    graphs: list[int] = []

    def backend(graph: Any, inputs: Any) -> Any:
        graphs.append(1)
        return graph.forward

    result = torch.compile(function, backend=backend, fullgraph=fullgraph)(torch.ones(1))
    return result, len(graphs)


def _sort_raises_cleanly() -> bool:
    """``sorted()`` of keys that cannot be compared raises Python's TypeError as the
    user's, which the traced code catches (torch 2.11 on)."""
    result, _ = _traced(_sorted_mixed_keys)
    return float(result) == 2.0


def _defaultdict_takes_items() -> bool:
    """``defaultdict(factory, items)`` traces (torch 2.10 on; before, only the factory)."""
    result, _ = _traced(_defaultdict_with_items)
    return float(result) == 2.0


def _defaultdict_leaves_graph() -> bool:
    """A defaultdict made in the graph leaves it as a defaultdict (torch 2.8 on)."""
    result, _ = _traced(_defaultdict_made)
    return type(result) is collections.defaultdict and result.default_factory is list


def _deque_keeps_maxlen() -> bool:
    """``deque(..., maxlen=n)`` traces and keeps its maxlen (torch 2.6 on)."""
    (first, maxlen), _ = _traced(_deque_with_maxlen)
    return float(first) == 2.0 and maxlen == 1


def _inlined_skip_becomes_break() -> bool:
    """A frame skip raised inside an inlined call becomes a graph break, and the frame
    compiles around it (before torch 2.11); later, the whole frame is skipped."""
    _COMPTIME[0] = internals.comptime()
    result, graphs = _traced(_outer_of_inlined_skip, fullgraph=False)
    return float(result) == 4.0 and graphs > 0


def _break_recurses_on_cycles() -> bool:
    """Realizing a list variable that holds itself recurses without end (before torch
    2.11): a graph break with such a structure would. Tried outside a trace."""
    loop = making.new_list([])
    internals.read(loop, "items").append(loop)
    try:
        internals.realize_all(loop)
    except RecursionError:
        return True
    return False


def _skip_keeps_graphs() -> bool:
    """Dynamo marks a code to run eagerly beside its compiled graphs (exec strategies,
    torch 2.7 on); before, the mark replaces them. Asked by what Dynamo has."""
    return internals.has_exec_strategies()


def _compares_through_polyfills() -> bool:
    """``a != b`` on other objects goes through Python polyfills that read
    ``type(a).__ne__`` (torch 2.12 and earlier), not a variable's richcompare slot.
    Asked by what Dynamo's variables have."""
    base = internals.kinds().Base
    return not any(hasattr(base, name) for name in internals.RICHCOMPARE_NAMES)


def _tree_map_fast_path() -> bool:
    """Dynamo maps torch's pytree at the variable level (``tree_map``, torch 2.10 on),
    rather than inlining ``torch.utils._pytree`` leaf by leaf. Asked by what Dynamo's
    variables have."""
    return hasattr(internals.kinds().Base, "call_tree_map")


def _tree_map_with_path_fast_path() -> bool:
    """Dynamo's fast path also takes ``tree_map_with_path`` (torch 2.12 on)."""
    return _tree_map_fast_path() and hasattr(
        internals.kinds().Function, "_is_tree_map_with_path_function"
    )


def _tree_map_only_fast_path() -> bool:
    """Dynamo's fast path also takes ``tree_map_only`` (torch 2.10 on)."""
    return _tree_map_fast_path() and hasattr(
        internals.kinds().Function, "_rewrite_tree_map_only_call"
    )


#: Each capability: how it is asked, and whether that compiles a trial function.
_QUESTIONS: dict[str, tuple[Callable[[], bool], bool]] = {
    "sort_raises_cleanly": (_sort_raises_cleanly, True),
    "defaultdict_takes_items": (_defaultdict_takes_items, True),
    "defaultdict_leaves_graph": (_defaultdict_leaves_graph, True),
    "deque_keeps_maxlen": (_deque_keeps_maxlen, True),
    "inlined_skip_becomes_break": (_inlined_skip_becomes_break, True),
    "break_recurses_on_cycles": (_break_recurses_on_cycles, False),
    "skip_keeps_graphs": (_skip_keeps_graphs, False),
    "compares_through_polyfills": (_compares_through_polyfills, False),
    "tree_map_fast_path": (_tree_map_fast_path, False),
    "tree_map_with_path_fast_path": (_tree_map_with_path_fast_path, False),
    "tree_map_only_fast_path": (_tree_map_only_fast_path, False),
}
#: The capabilities' names.
NAMES = tuple(_QUESTIONS)
#: The answer that keeps each workaround, where a capability cannot be asked.
SAFE: dict[str, bool] = {
    "sort_raises_cleanly": False,
    "defaultdict_takes_items": False,
    "defaultdict_leaves_graph": False,
    "deque_keeps_maxlen": False,
    "inlined_skip_becomes_break": True,
    "break_recurses_on_cycles": True,
    "skip_keeps_graphs": False,
    "compares_through_polyfills": True,
    "tree_map_fast_path": True,
    "tree_map_with_path_fast_path": True,
    "tree_map_only_fast_path": True,
}
_ANSWERS: dict[str, bool] = {}


#: Not empty while a trial compiles: its graphs are not the program's.
TRIALS: list[bool] = []


@contextlib.contextmanager
def _unseen() -> Iterator[None]:
    """Puts Dynamo's counters back, and keeps the graph-break log quiet, around a trial."""
    counters = internals.counters()
    saved = copy.deepcopy(dict(counters))
    log = logging.getLogger(GRAPH_BREAK_LOGGER)
    disabled, log.disabled = log.disabled, True
    TRIALS.append(True)
    try:
        yield
    finally:
        TRIALS.pop()
        log.disabled = disabled
        counters.clear()
        counters.update(saved)


def _importing_torch() -> bool:
    """Whether a torch module is half imported: a compile now would meet it half made."""
    return any(half_imported(name) for name in list(sys.modules) if name.startswith("torch"))


def _ask(name: str) -> bool | None:
    """The answer, or None where the trial cannot run now."""
    question, compiles = _QUESTIONS[name]
    if not compiles:
        try:
            return bool(question())
        except Exception:  # noqa: BLE001 - Dynamo cannot say: keep the workaround
            return SAFE[name]
    try:
        internals.load()  # the compile lock is Dynamo's
        if internals.is_tracing() or _importing_torch():
            return None
    except Exception:  # noqa: BLE001 - the seam cannot say: do not compile now
        return None
    with compile_lock(wait=False) as held:
        if not held:
            return None
        with _unseen():
            try:
                return bool(question())
            except ImportError:  # a module torch imports lazily is half made: not now
                return None
            except Exception:  # noqa: BLE001 - Dynamo cannot do it: keep the workaround
                return SAFE[name]


def has(name: str) -> bool:
    """Whether this Dynamo can do ``name``, one of :data:`NAMES`; asked once, on first
    use (the safe answer, not kept, where it cannot be asked now).

    >>> has("no such thing")
    Traceback (most recent call last):
    ...
    ValueError: no Dynamo capability named 'no such thing'
    """
    if name not in _QUESTIONS:
        raise ValueError(f"no Dynamo capability named {name!r}")
    if name not in _ANSWERS:
        answer = _ask(name)
        if answer is None:
            return SAFE[name]
        _ANSWERS[name] = answer
    return _ANSWERS[name]


def settled() -> bool:
    """Whether every capability has its answer (asking those not asked yet).

    Where not, the answers given so far include safe ones to ask again later.
    """
    answers()
    return all(name in _ANSWERS for name in NAMES)


def answers() -> dict[str, bool]:
    """Every capability's answer, asked where not yet."""
    return {name: has(name) for name in NAMES}
