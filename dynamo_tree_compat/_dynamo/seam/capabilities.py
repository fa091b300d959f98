"""What this torch's Dynamo can do, asked by trying it: the one place for such questions.

Each capability is a question the package's workarounds depend on. Most are asked by
compiling a tiny function (``backend="eager"``) outside any trace, and looking at what
comes back; one by trying a variable outside a trace; the rest by what Dynamo has.
Never by reading Dynamo's source text, which a refactor can change without changing
behaviour.

Nothing compiles when Dynamo or a tree library is imported. For the releases the torch
matrix tests, the answers ship as data (:func:`known_answers`), and the matrix proves
on each that the trials still give them (``tests/internals/test_capabilities.py``). For
a build nobody has seen, the questions that need no compile are asked on first use; the
trials compile once, outside any trace, before Dynamo's first frame
(:func:`capabilities_settled` with ``ask=True``), and their answers are cached on disk per
torch build (:data:`ENV_CACHE_DIR`; a corrupt or foreign file means asking again).

A trial leaves no trace: Dynamo's counters are put back and its graph-break log is
silenced while it runs. Until a capability has its answer, or where a trial cannot run
now (Dynamo is tracing, another thread holds the compile lock, or a torch module is half
imported), the answer is the question's ``safe`` one, which keeps the workaround. Where a
trial fails (older Dynamos fail on what they cannot do), it is the safe one for good.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import json
import logging
import os
import re
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

from ..runtime import Capability, half_imported, write_json_whole
from . import internals, making
from .lock import compile_lock
from .log_format import GRAPH_BREAK_LOGGER

C = Capability

__all__ = [
    "ENV_ASK",
    "ENV_CACHE_DIR",
    "KNOWN_RELEASES",
    "QUESTIONS",
    "TRIALS_RUN",
    "Capability",
    "Question",
    "answers",
    "capabilities_settled",
    "has",
    "known_answers",
    "lacks",
    "trial",
]


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


class _TrialSet(set):
    """A set subclass, as Keras's TrackedSet is one."""


def _set_subclass_filled(x: Any) -> Any:
    made = _TrialSet([1])
    made.add(2)
    return made, x + 1


def _iterate_a_number(x: Any) -> Any:
    try:
        iter(5)  # type: ignore[call-overload]
    except TypeError:
        return x + 1
    return x


def _reads_to(box: list[int]) -> Iterator[int]:
    box.append(1)
    yield 1
    box.append(2)
    yield 2


def _next_once(x: Any) -> Any:
    box: list[int] = []
    next(_reads_to(box))
    return x + len(box)


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


def _cxx_pytree_inlined() -> bool:
    """Dynamo traces ``torch.utils._cxx_pytree`` (torch 2.6 on; before, it skips every
    call of it). Asked by Dynamo's rules for the module's file, which is not imported."""
    import importlib.util

    spec = importlib.util.find_spec("torch.utils._cxx_pytree")
    return spec is not None and bool(spec.origin) and internals.inlines_file(spec.origin)


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


def _tree_map_copy() -> Callable[[Any], Any]:
    """A function that maps ``leaf + 1`` over a tree with a copy of torch's ``tree_map``,
    which Dynamo's fast path knows by name and module and this package's routing, by
    identity, does not."""
    import torch.utils._pytree as pytree

    original = pytree.tree_map
    same_name = types.FunctionType(
        original.__code__, original.__globals__, original.__name__, original.__defaults__
    )
    same_name.__kwdefaults__ = original.__kwdefaults__

    def trial(tree: Any) -> Any:
        return same_name(lambda leaf: leaf + 1, tree)

    return trial


def _tree_map_fast_path_keeps_defaultdict() -> bool:
    """Dynamo's tree_map fast path hands back a defaultdict that comes in as a
    defaultdict (not torch 2.15, which returns a plain dict: every map of its fast path
    then goes this package's way). False where there is no fast path."""
    if not _tree_map_fast_path():
        return False
    import torch

    result = torch.compile(_tree_map_copy(), backend="eager", fullgraph=True)(
        collections.defaultdict(list, {"a": torch.ones(1)})
    )
    return type(result) is collections.defaultdict


def _tree_map_fast_path_guards_key_order() -> bool:
    """A graph of Dynamo's tree_map fast path is not reused for a dict whose keys come in
    another order (torch 2.13 and 2.15 reuse it, and answer in the old order). False
    where there is no fast path."""
    if not _tree_map_fast_path():
        return False
    import torch

    compiled = torch.compile(_tree_map_copy(), backend="eager", fullgraph=True)
    compiled({"a": torch.ones(1), "b": torch.ones(1)})
    return list(compiled({"b": torch.ones(1), "a": torch.ones(1)})) == ["b", "a"]


def _set_subclass_keeps_contents() -> bool:
    """A set subclass made and filled in the graph leaves it with what it holds (not
    torch 2.13, which rebuilds it empty; older Dynamos break the graph instead)."""
    (made, _), _ = _traced(_set_subclass_filled)
    return type(made) is _TrialSet and made == {1, 2}


def _iter_of_a_number_raises() -> bool:
    """``iter()`` of a constant that is not iterable raises the user's TypeError (not
    torch 2.5, which fails inside with ``InternalTorchDynamoError``)."""
    result, _ = _traced(_iterate_a_number)
    return float(result) == 2.0


def _generators_run_to_the_end() -> bool:
    """A generator traced in the graph runs to its end where it is first read, and one
    that leaves the graph is a ``tuple_iterator`` (torch 2.5 and 2.6); later, to its next
    ``yield`` only, as in Python. A trial that fails answers True."""
    result, _ = _traced(_next_once)
    return float(result) != 2.0


@dataclasses.dataclass(frozen=True)
class Question:
    """How a capability is asked, what keeps its workaround, where it is known true."""

    #: Asks this Dynamo; True where it can.
    ask: Callable[[], bool]
    #: Whether asking compiles a trial function (then only before Dynamo's first frame).
    compiles: bool
    #: The answer that keeps the workaround, where the capability cannot be asked.
    safe: bool
    #: The first and the last minor release of torch 2 where it is true, as the matrix
    #: saw them (None: none).
    true_on: tuple[int, int] | None


#: Each capability, declared once. To add one: a member of ``Capability`` (runtime.py),
#: its question here, its releases in ``tests/internals/test_capabilities.py``'s
#: ``TRUE_ON`` (the test runs the trial on each release of the matrix), and its row in
#: docs/torch-versions.md.
QUESTIONS: dict[Capability, Question] = {
    C.SORT_RAISES_CLEANLY: Question(_sort_raises_cleanly, True, False, (11, 15)),
    C.DEFAULTDICT_TAKES_ITEMS: Question(_defaultdict_takes_items, True, False, (10, 15)),
    C.DEFAULTDICT_LEAVES_GRAPH: Question(_defaultdict_leaves_graph, True, False, (8, 15)),
    C.DEQUE_KEEPS_MAXLEN: Question(_deque_keeps_maxlen, True, False, (6, 15)),
    C.INLINED_SKIP_BECOMES_BREAK: Question(_inlined_skip_becomes_break, True, True, (5, 10)),
    C.BREAK_RECURSES_ON_CYCLES: Question(_break_recurses_on_cycles, False, True, (5, 10)),
    C.SKIP_KEEPS_GRAPHS: Question(_skip_keeps_graphs, False, False, (7, 15)),
    C.COMPARES_THROUGH_POLYFILLS: Question(_compares_through_polyfills, False, True, (5, 12)),
    C.TREE_MAP_FAST_PATH: Question(_tree_map_fast_path, False, True, (10, 15)),
    C.TREE_MAP_WITH_PATH_FAST_PATH: Question(_tree_map_with_path_fast_path, False, True, (12, 15)),
    C.TREE_MAP_ONLY_FAST_PATH: Question(_tree_map_only_fast_path, False, True, (10, 15)),
    C.TREE_MAP_FAST_PATH_KEEPS_DEFAULTDICT: Question(
        _tree_map_fast_path_keeps_defaultdict, True, False, (10, 14)
    ),
    C.TREE_MAP_FAST_PATH_GUARDS_KEY_ORDER: Question(
        _tree_map_fast_path_guards_key_order, True, False, None
    ),
    C.SET_SUBCLASS_KEEPS_CONTENTS: Question(_set_subclass_keeps_contents, True, False, (15, 15)),
    C.ITER_OF_A_NUMBER_RAISES: Question(_iter_of_a_number_raises, True, False, (13, 15)),
    # safe: no twin of optree's lazy iterator; optree's own runs, after a graph break
    C.GENERATORS_RUN_TO_THE_END: Question(_generators_run_to_the_end, True, True, (5, 6)),
    # safe: this package's copies of torch's optree-backed pytree functions, traced
    C.CXX_PYTREE_INLINED: Question(_cxx_pytree_inlined, False, False, (6, 15)),
}
_ANSWERS: dict[Capability, bool] = {}
#: Whether the shipped or cached answers were looked up in this process.
_LOOKED_UP: list[bool] = []
#: The trials that compiled in this process, by the capability's name.
TRIALS_RUN: list[str] = []

#: Set to ``1`` to ignore the shipped answers, as on a build nobody has seen: answers come
#: from the disk cache, else from trying (``DYNAMO_TREE_COMPAT_CACHE_DIR=0`` as well: always
#: from trying).
ENV_ASK = "DYNAMO_TREE_COMPAT_ASK_DYNAMO"
#: Where the answers for builds nobody has seen are cached; default
#: ``$XDG_CACHE_HOME/dynamo-tree-compat`` (``~/.cache``). ``0``: no cache.
ENV_CACHE_DIR = "DYNAMO_TREE_COMPAT_CACHE_DIR"

#: The releases the torch matrix tests, whose answers ship as data.
KNOWN_RELEASES = (
    "2.5.1", "2.6.0", "2.7.1", "2.8.0", "2.9.1", "2.10.0",
    "2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0",
)  # fmt: skip
#: Local version labels of the official builds (``+cpu``, ``+cu126``): the same Dynamo.
_OFFICIAL_BUILD = re.compile(r"^(cpu|cu\d+|rocm[\d.]+|xpu)?$")


def known_answers(version: str) -> dict[Capability, bool] | None:
    """The answers for a torch release the matrix tests, in an official build; None for
    any other build.

    >>> known = known_answers("2.13.0+cpu"), known_answers("2.9.1")
    >>> known[0][C.TREE_MAP_FAST_PATH], known[1][C.SORT_RAISES_CLEANLY]
    (True, False)
    >>> known_answers("2.16.0"), known_answers("2.13.0+git1234"), known_answers("2.13.0a0")
    (None, None, None)
    """
    release, _, local = version.partition("+")
    if release not in KNOWN_RELEASES or not _OFFICIAL_BUILD.match(local):
        return None
    minor = int(release.split(".")[1])
    return {
        capability: question.true_on is not None
        and question.true_on[0] <= minor <= question.true_on[1]
        for capability, question in QUESTIONS.items()
    }


def _build() -> str:
    """This torch build: its version and the commit it was built from."""
    import torch

    return f"{torch.__version__}@{getattr(torch.version, 'git_version', '')}"


def _cache_file() -> str | None:
    folder = os.environ.get(ENV_CACHE_DIR, "")
    if folder == "0":
        return None
    if not folder:
        home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(home, "dynamo-tree-compat")
    name = re.sub(r"[^A-Za-z0-9.@_-]", "_", _build())
    return os.path.join(folder, f"capabilities-{name}.json")


def _read_cache() -> dict[Capability, bool] | None:
    """The cached answers for this build; None where there are none, or the file is
    corrupt, or another build's or another version of this package's."""
    path = _cache_file()
    try:
        with open(path or "", encoding="utf-8") as file:
            data = json.load(file)
        found = {Capability(name): answer for name, answer in data["answers"].items()}
        if data["build"] != _build() or set(found) != set(Capability):
            return None
        if not all(type(answer) is bool for answer in found.values()):
            return None
        return found
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write_cache(found: dict[Capability, bool]) -> None:
    """Caches this build's answers: written whole to a new file, then moved into place,
    so that concurrent writers and readers never see half a file. Never raises."""
    path = _cache_file()
    if path is not None:
        answered = {capability.value: answer for capability, answer in found.items()}
        write_json_whole(path, {"build": _build(), "answers": answered})


def _look_up() -> None:
    """Takes the shipped answers for this release, or the cached ones for this build,
    once per process."""
    if _LOOKED_UP:
        return
    _LOOKED_UP.append(True)
    try:
        import torch

        shipped = os.environ.get(ENV_ASK, "").strip() != "1"
        found = (shipped and known_answers(torch.__version__)) or _read_cache()
    except Exception:  # noqa: BLE001 - no answers to take: ask
        found = None
    for capability, answer in (found or {}).items():
        _ANSWERS.setdefault(capability, answer)


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


def _member(capability: Capability) -> Capability:
    """``capability``, checked to be a member: a string is refused, so that no misspelt
    name passes."""
    if not isinstance(capability, Capability):
        raise TypeError(f"expected a Capability member, got {capability!r}")
    return capability


def trial(capability: Capability) -> bool | None:
    """The answer of ``capability``'s own question, asked now whatever is known or
    cached; None where it cannot be asked now."""
    question = QUESTIONS[_member(capability)]
    if not question.compiles:
        try:
            return bool(question.ask())
        except Exception:  # noqa: BLE001 - Dynamo cannot say: keep the workaround
            return question.safe
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
            TRIALS_RUN.append(capability.value)
            try:
                return bool(question.ask())
            except ImportError:  # a module torch imports lazily is half made: not now
                return None
            except Exception:  # noqa: BLE001 - Dynamo cannot do it: keep the workaround
                return question.safe


def has(capability: Capability) -> bool:
    """Whether this Dynamo can do ``capability``. Never compiles: a trial's capability
    not answered yet gives the safe answer (:func:`capabilities_settled` asks).

    >>> has("deque_keeps_maxlen")
    Traceback (most recent call last):
    ...
    TypeError: expected a Capability member, got 'deque_keeps_maxlen'
    """
    if _member(capability) not in _ANSWERS:
        _look_up()
    if capability not in _ANSWERS and not QUESTIONS[capability].compiles:
        answer = trial(capability)
        if answer is not None:
            _ANSWERS[capability] = answer
    return _ANSWERS.get(capability, QUESTIONS[capability].safe)


def lacks(capability: Capability) -> bool:
    """Whether a workaround for ``capability`` applies now: this Dynamo cannot do it (see
    :func:`has`), and no trial is compiling, which must meet Dynamo as it is.

    >>> lacks(C.DEQUE_KEEPS_MAXLEN) is not has(C.DEQUE_KEEPS_MAXLEN)
    True
    """
    return not TRIALS and not has(capability)


def capabilities_settled(ask: bool = False) -> bool:
    """Whether every capability has its answer. With ``ask``, the trials not run yet
    compile now (where they can), and a full set of their answers is cached on disk."""
    answers()
    if ask and not all(capability in _ANSWERS for capability in Capability):
        for capability in Capability:
            if capability not in _ANSWERS:
                answer = trial(capability)
                if answer is not None:
                    _ANSWERS[capability] = answer
        if all(capability in _ANSWERS for capability in Capability):
            _write_cache(dict(_ANSWERS))
    return all(capability in _ANSWERS for capability in Capability)


def answers() -> dict[str, bool]:
    """Every capability's answer now, by its name (safe ones where not answered yet);
    compiles nothing."""
    return {capability.value: has(capability) for capability in Capability}
