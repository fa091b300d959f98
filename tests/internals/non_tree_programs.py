"""Programs that call no tree function, for ``test_only_tree_calls.py``.

Run as a script: ``python tests/internals/non_tree_programs.py OUT.json``; the test runs
it with the package active and with ``DYNAMO_TREE_COMPAT=0``. Each program is compiled
(eager backend) and called twice; what it reports is Dynamo's count of graphs and graph
breaks, and how each call ended. The package may touch only what a tree function reads,
so the counts must not differ.
"""

from __future__ import annotations

import collections
import json
import operator
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optree
import torch
import tree  # noqa: F401 - loaded, so that the package registers everything it has

#: Each program: (the function to compile, what makes its arguments for one call).
PROGRAMS: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]] = {}


def program(make: Callable[[], tuple[Any, ...]]) -> Callable[[Callable[..., Any]], Any]:
    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        PROGRAMS[function.__name__] = (function, make)
        return function

    return register


class Logger:
    """RLlib's MetricsLogger keeps its stats in deques with a maxlen, appended to in the
    learner's update."""

    def __init__(self) -> None:
        self.stats = collections.deque([0.0], maxlen=3)


LOGGER = Logger()


@program(lambda: (torch.ones(2),))
def deque_attribute_appended(x: torch.Tensor) -> torch.Tensor:
    LOGGER.stats.append(x.sum())
    return x + 1


@program(lambda: (collections.deque([1], maxlen=2), torch.ones(2)))
def deque_passed_in_appended(queue: collections.deque, x: torch.Tensor) -> Any:
    queue.append(x)
    return x * 2, queue.maxlen


@program(lambda: (torch.ones(2),))
def deque_made_with_maxlen(x: torch.Tensor) -> Any:
    queue = collections.deque([x], maxlen=2)
    queue.append(x + 1)
    queue.append(x + 2)
    return list(queue), queue.maxlen


class Tracked(set):
    """A set subclass with an ``__init__`` of its own, as Keras's TrackedSet has."""

    def __init__(self, values: Any = None) -> None:
        self.tracker = None
        super().__init__(values or [])


@program(lambda: (torch.ones(2),))
def set_subclass_made(x: torch.Tensor) -> Any:
    made = Tracked([1])
    made.add(2)
    return made, x + 1


@program(lambda: (Tracked([1]), torch.ones(2)))
def set_subclass_filled(tracked: Tracked, x: torch.Tensor) -> torch.Tensor:
    tracked.add(3)
    return x + len(tracked)


class Liar:
    """An object whose ``__class__`` claims a container its type is not."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return list


@program(lambda: (Liar(), torch.ones(2)))
def object_lying_about_its_class(liar: Any, x: torch.Tensor) -> Any:
    return x + 1, liar


SPEC = optree.tree_structure({"a": 1, "b": (2, 3)})


@program(lambda: (SPEC, torch.ones(2)))
def spec_passed_through(spec: Any, x: torch.Tensor) -> Any:
    return [spec, x + 1]


@program(lambda: (torch.ones(2),))
def spec_global_returned(x: torch.Tensor) -> Any:
    return {"spec": SPEC}, x - 1


@program(lambda: (operator.methodcaller("upper"), torch.ones(2)))
def method_caller_called(caller: Any, x: torch.Tensor) -> Any:
    return caller("abc"), x + 1


@program(lambda: (types.MappingProxyType({"a": 1}), torch.ones(2)))
def mappingproxy_read(proxy: Any, x: torch.Tensor) -> Any:
    return x + proxy["a"], isinstance(proxy, types.MappingProxyType)


@program(lambda: (torch.ones(2),))
def iter_of_a_number(x: torch.Tensor) -> torch.Tensor:
    try:
        iter(5)  # type: ignore[call-overload]
    except TypeError:
        return x + 1
    return x


def _deep(depth: int) -> Any:
    nested: Any = [torch.ones(1)]
    for _ in range(depth):
        nested = [nested]
    return nested


@program(lambda: (_deep(2000), torch.ones(2)))
def deep_list_passed_in(nested: Any, x: torch.Tensor) -> torch.Tensor:
    return x + 1


def _moved_to_end() -> tuple[Any, ...]:
    ordered = collections.OrderedDict(a=torch.ones(2), b=torch.ones(2))
    ordered.move_to_end("a")
    return ordered, torch.ones(2)


@program(_moved_to_end)
def ordereddict_reordered_read(ordered: Any, x: torch.Tensor) -> Any:
    """Dynamo's own guard reads the dict beneath an OrderedDict; the package guards an
    OrderedDict's own order only where a tree function reads it."""
    return [(key, value + x) for key, value in ordered.items()]


def _ending(function: Callable[..., Any], args: tuple[Any, ...]) -> str:
    try:
        function(*args)
    except Exception as error:  # noqa: BLE001 - how it ended is what is compared
        return type(error).__name__
    return "returned"


def run() -> dict[str, Any]:
    from torch._dynamo.utils import counters

    found = {}
    for name, (function, make) in PROGRAMS.items():
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(function, backend="eager")
        endings = [_ending(compiled, make()) for _ in range(2)]
        found[name] = {
            "graphs": counters["stats"]["unique_graphs"],
            "breaks": sum(counters["graph_break"].values()),
            "endings": endings,
        }
    return found


if __name__ == "__main__":
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    Path(sys.argv[1]).write_text(json.dumps(run(), indent=1))
