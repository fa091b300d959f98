"""Outside the seam, no module reads an attribute of Dynamo's objects, whatever its name.

The static seam test (``test_seam.py``) knows the names on its list; this one watches
every attribute read while a workload of every library's calls traces, fast paths on and
off. Each read of an attribute of one of Dynamo's variables, translators, output graphs,
sources, builders or code generators, made by a package module outside
``_dynamo/seam/``, is a finding, unless the attribute is the package's own: declared (an
annotation) by one of the package's classes that the object is an instance of. Guarded
reads of what a variable holds (``seam/reads.py``) are then the only way to its items.
"""

from __future__ import annotations

import collections
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch._dynamo.codegen import PyCodegen
from torch._dynamo.output_graph import OutputGraph
from torch._dynamo.source import Source
from torch._dynamo.symbolic_convert import InstructionTranslatorBase
from torch._dynamo.variables.base import VariableTracker
from torch._dynamo.variables.builder import VariableBuilder

import dynamo_tree_compat
from dynamo_tree_compat import config
from tests.helpers import optree_calls
from tests.helpers.breadth import WIDE
from tests.helpers.dynamo_support import with_a_graph_op
from tests.helpers.reuse import CALLS, CHANGES

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

PACKAGE = str(pathlib.Path(dynamo_tree_compat.__file__).resolve().parent) + "/"
SEAM = PACKAGE + "_dynamo/seam/"
WATCHED = (VariableTracker, InstructionTranslatorBase, OutputGraph, Source, VariableBuilder)
WATCHED += (PyCodegen,)
STRUCTURES = ("a dict gains a key, deeper", "a namedtuple of another class")
STRUCTURES += tuple(name for name in ("a deque's maxlen changes",) if name in CHANGES)


def _own(receiver: Any, name: str) -> bool:
    """Whether ``name`` is declared by one of the package's own classes of ``receiver``."""
    return any(
        name in vars(cls).get("__annotations__", {})
        for cls in type(receiver).__mro__
        if cls.__module__.startswith("dynamo_tree_compat")
    )


@pytest.fixture
def reads_outside_the_seam() -> Iterator[collections.Counter[tuple[str, str, str]]]:
    found: collections.Counter[tuple[str, str, str]] = collections.Counter()
    saved = {cls: cls.__dict__.get("__getattribute__") for cls in WATCHED}

    def watch(cls: type) -> None:
        original = cls.__getattribute__

        def watched(self: Any, name: str) -> Any:
            path = sys._getframe(1).f_code.co_filename
            if path.startswith(PACKAGE) and not path.startswith(SEAM) and not _own(self, name):
                found[(path[len(PACKAGE) :], type(self).__name__, name)] += 1
            return original(self, name)

        cls.__getattribute__ = watched  # type: ignore[method-assign]

    for cls in WATCHED:
        watch(cls)
    try:
        yield found
    finally:
        for cls, before in saved.items():
            if before is None:
                del cls.__getattribute__
            else:
                cls.__getattribute__ = before  # type: ignore[method-assign]


#: With the fast paths off, the calls whose reading then differs (the twins', and optree's
#: own code over the C layer, which the fast-path run covers for every other call).
_WITHOUT_FAST_PATHS = {
    "dm-tree": set(CALLS["dm-tree"]),
    "optree": {"tree_map", "tree_flatten_with_path", "tree_structure"},
    "torch pytree": {"tree_map", "tree_flatten", "tree_unflatten", "tree_map_with_path"},
    "keras.tree": set(),
}


def _workload(fast: bool) -> None:
    """Every call of every library on a few structures (one each, in turn, in make test's
    profile), and every optree call and spec method (without the fast paths, the calls
    whose reading then differs); errors are the calls' own (compared elsewhere)."""
    for library, calls in CALLS.items():
        for place, (name, call) in enumerate(calls.items()):
            if not fast and name not in _WITHOUT_FAST_PATHS[library]:
                continue
            torch._dynamo.reset()
            compiled = torch.compile(with_a_graph_op(call), backend="eager")
            # make test's profile: each call on one of the structures, in turn.
            for structure in STRUCTURES if WIDE else STRUCTURES[place % len(STRUCTURES) :][:1]:
                for make in CHANGES[structure]:
                    try:
                        compiled(make())
                    except Exception:  # noqa: BLE001 - the call's own error
                        continue
    for call in {**optree_calls.CALLS, **optree_calls.METHODS}.values() if fast else ():
        torch._dynamo.reset()
        try:
            torch.compile(call, backend="eager")(torch.ones(1), torch.ones(1), [])
        except Exception:  # noqa: BLE001 - the call's own error
            continue


@pytest.mark.parametrize("fast", [True, False], ids=["fast paths", "no fast paths"])
def test_no_read_of_dynamos_objects_outside_the_seam(
    fast: bool, reads_outside_the_seam: collections.Counter[tuple[str, str, str]]
) -> None:
    dynamo_tree_compat.install()
    saved, config.fast_path = config.fast_path, fast
    try:
        _workload(fast)
    finally:
        config.fast_path = saved
    assert not reads_outside_the_seam, sorted(reads_outside_the_seam)


def test_the_watch_sees_a_read_outside_the_seam(
    reads_outside_the_seam: collections.Counter[tuple[str, str, str]],
) -> None:
    """A planted read, from a package module outside the seam, is found."""
    from dynamo_tree_compat._dynamo.common import reading

    planted = compile("variable.items", reading.__file__, "eval")
    variable = torch._dynamo.variables.ConstantVariable.create(1)
    try:
        eval(planted, {"variable": variable})
    except Exception:  # noqa: BLE001 - a constant has no items: the read is what counts
        pass
    assert ("_dynamo/common/reading.py", "ConstantVariable", "items") in reads_outside_the_seam
