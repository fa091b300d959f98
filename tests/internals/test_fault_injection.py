"""Fault injection: every Dynamo access of the package fails, one at a time, and traced
programs still give eager's results, never an InternalTorchDynamoError.

Every private Dynamo access goes through ``_dynamo/seam/``, so breaking
each of its functions in turn stands for each Dynamo class or attribute being renamed
or removed in a future torch. Faults while tracing make the call step aside to the twin
or to torch's own handling; faults while registering leave the library to torch.
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
import types
from collections.abc import Callable, Iterator
from typing import Any

import optree
import pytest
import torch
import tree

from dynamo_tree_compat import _dynamo, installer
from dynamo_tree_compat._dynamo.runtime import Capability
from dynamo_tree_compat._dynamo.seam import (
    capabilities,
    frames,
    internals,
    making,
    patches,
    reads,
    sets,
)
from tests.helpers.dynamo_support import needs_dynamo
from tests.helpers.structures import assert_identical

Point = collections.namedtuple("Point", "x y")
SPEC = optree.tree_structure({"b": 0, "a": (0, None)}, none_is_leaf=True)

# Not Dynamo accesses, or only used outside tracing by the CLI and activation.
NOT_READ_WHILE_TRACING = {"lookup_backend", "reset_compiled_code", "counters", "load"}
# Without these (a function variable's ``fn``, the generic accessor that reads it, or
# making Dynamo's variable this package's) the package cannot tell which function Dynamo
# met: every call goes torch's way,
# torch's own mistakes included.
ALL_TO_TORCH = {"fn", "read", "call", "set_class"}
_SEAM_MODULES = {
    "internals": internals,
    "reads": reads,
    "frames": frames,
    "making": making,
    "patches": patches,
    "sets": sets,
}
#: Every function of the seam's reads, constructors and patches, listed from the seam
#: itself, under the names the package calls them by.
SEAM = sorted(
    (short, name)
    for short, module in _SEAM_MODULES.items()
    for name, value in vars(module).items()
    if inspect.isfunction(value)
    and value.__module__ == module.__name__
    and not name.startswith("_")
    and name not in NOT_READ_WHILE_TRACING
)
#: Every attribute of Dynamo's objects the generic accessor reads.
READS = sorted(internals.READS)


def workload(x: torch.Tensor, queue: collections.deque[Any], *, torch_bugs: bool = True) -> Any:
    """dm-tree and optree calls of every layer: fast paths, twins, the C layer, specs.

    ``torch_bugs=False`` leaves out what torch itself gets wrong where the package leaves
    optree to it: its polyfill's spec is of another class, and its ``structseq_fields``
    polyfill raises an internal error on a structseq made in the graph.
    """
    nested = {"b": [x, x * 2], "a": (x + 1, {"c": x})}
    flat = tree.flatten(nested)
    doubled = tree.map_structure(lambda t: t * 2, nested)
    paths = [path for path, _ in tree.flatten_with_path(nested)]
    tree.assert_same_structure(nested, doubled)
    packed = tree.unflatten_as(Point(0, [0]), [x, x - 1])
    leaves, spec = optree.tree_flatten({"z": x, "y": [x, None]})
    mapped = optree.tree_map(lambda t: t + 1, {"k": (x, x)})
    rebuilt = SPEC.unflatten([x, x * 3, None])
    ordered = optree.tree_leaves(collections.OrderedDict(q=x, p=[x]))
    queued = optree.tree_leaves(queue)
    results = [flat, doubled, paths, packed, leaves, spec.num_leaves, mapped, rebuilt, ordered]
    if torch_bugs:
        results += [spec, optree.structseq_fields(torch.max(x.reshape(1, -1), 0))]
    return results, queued


def _inputs() -> tuple[torch.Tensor, collections.deque[Any]]:
    x = torch.arange(3.0)
    return x, collections.deque([x, x + 1], maxlen=4)


def _broken(name: str) -> Callable[..., Any]:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise AttributeError(f"injected: torch renamed what internals.{name} reads")

    return broken


@pytest.fixture
def fresh() -> Iterator[None]:
    torch._dynamo.reset()
    _dynamo.STATS.clear()
    yield
    torch._dynamo.reset()


def _compiled_like_eager(torch_bugs: bool = True) -> None:
    x, queue = _inputs()
    expected = workload(x, queue, torch_bugs=torch_bugs)
    try:
        compiled = torch.compile(workload, backend="eager")
        actual = compiled(*_inputs(), torch_bugs=torch_bugs)
    except torch._dynamo.exc.InternalTorchDynamoError as error:  # the worst bug we can ship
        pytest.fail(f"InternalTorchDynamoError: {error}")
    assert_identical(expected, actual)


def test_the_workload_traces_in_one_graph_without_faults(fresh: None) -> None:
    """The baseline: without faults the workload traces whole, through the handlers."""
    x, queue = _inputs()
    expected = workload(x, queue)
    actual = torch.compile(workload, backend="eager", fullgraph=True)(*_inputs())
    assert_identical(expected, actual)
    assert not _dynamo.counted(_dynamo.Event.STEPPED_ASIDE)


@pytest.mark.parametrize(("module", "name"), SEAM)
def test_a_broken_seam_function_while_tracing_steps_aside(
    module: str, name: str, fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each seam function raising while Dynamo traces: eager's result, no internal error."""
    monkeypatch.setattr(_SEAM_MODULES[module], name, _broken(name))
    _compiled_like_eager(torch_bugs=name not in ALL_TO_TORCH)


def _reading_broken(broken: str) -> Callable[[Any, str], Any]:
    def get(owner: Any, name: str) -> Any:
        if name == broken:
            raise AttributeError(f"injected: torch renamed {type(owner).__name__}.{name}")
        return getattr(owner, name)

    return get


@pytest.mark.parametrize("name", READS)
def test_a_renamed_attribute_while_tracing_steps_aside(
    name: str, fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each attribute the generic accessor reads, renamed in a future Dynamo: eager's
    result, no internal error."""
    monkeypatch.setattr(internals, "_get", _reading_broken(name))
    _compiled_like_eager(torch_bugs=name not in ALL_TO_TORCH)


@pytest.mark.parametrize("capability", list(Capability), ids=lambda c: c.value)
def test_a_capability_that_cannot_be_asked_keeps_its_workaround(
    capability: Capability, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capability whose trial fails, in Dynamo or in our own code, gives the answer that
    keeps the workaround; never an error."""
    question = capabilities.QUESTIONS[capability]
    broken = dataclasses.replace(question, ask=_broken(capability.value))
    monkeypatch.setitem(capabilities.QUESTIONS, capability, broken)
    monkeypatch.setattr(capabilities, "_ANSWERS", {})
    assert capabilities.trial(capability) is question.safe
    assert capabilities.has(capability) is question.safe


def _reached_by_install() -> list[tuple[str, str]]:
    """The seam functions that registering calls: for the others, a fault while
    registering is a fault while tracing, which the test above already injects."""
    reached: set[tuple[str, str]] = set()

    def recording(key: tuple[str, str], function: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            reached.add(key)
            return function(*args, **kwargs)

        return recorded

    originals = {key: getattr(_SEAM_MODULES[key[0]], key[1]) for key in SEAM}
    installer.uninstall()
    try:
        for key, function in originals.items():
            setattr(_SEAM_MODULES[key[0]], key[1], recording(key, function))
        installer.install()
    finally:
        installer.uninstall()
        for key, function in originals.items():
            setattr(_SEAM_MODULES[key[0]], key[1], function)
        installer.install()
    return sorted(reached)


REACHED_BY_INSTALL = _reached_by_install()


def test_registering_reaches_the_seam() -> None:
    """The registering faults below are not an empty list: installing reads Dynamo."""
    assert len(REACHED_BY_INSTALL) >= 3, REACHED_BY_INSTALL


@pytest.mark.parametrize(("module", "name"), REACHED_BY_INSTALL)
def test_a_broken_seam_function_while_registering_leaves_torch_working(
    module: str, name: str, fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each seam function raising while the package registers: eager's results too."""
    installer.uninstall()
    monkeypatch.setattr(_SEAM_MODULES[module], name, _broken(name))
    try:
        installer.install()
        _compiled_like_eager(torch_bugs=False)
    finally:
        installer.uninstall()
        monkeypatch.undo()
        installer.uninstall()  # what the fault kept from being undone, unguarded rows too
        installer.install()


def test_stepping_aside_is_counted_in_status(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import dynamo_tree_compat

    monkeypatch.setattr(reads, "dict_entries", _broken("dict_entries"))
    x = torch.ones(1)
    result = torch.compile(lambda x: tree.flatten({"b": x, "a": x}), backend="eager")(x)
    assert_identical(tree.flatten({"b": x, "a": x}), result)
    assert dynamo_tree_compat.status().stepped_aside >= 1


def _recursing(*args: Any, **kwargs: Any) -> Any:
    raise RecursionError("injected: Dynamo's own reading recursed too deep")


def test_a_recursion_error_while_reading_runs_the_frame_eagerly(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where Dynamo's own reading of a structure overflows the stack (torch 2.8, from about
    190 levels), the call is past the depth limit: the frame runs eagerly, and with
    fullgraph the graph break names it."""
    monkeypatch.setattr(reads, "dict_entries", _recursing)
    x = torch.ones(1)

    def body(x: torch.Tensor) -> Any:
        return tree.flatten({"b": x, "a": [x + 1]})

    with pytest.raises(torch._dynamo.exc.Unsupported, match="deeper than"):
        torch.compile(body, backend="eager", fullgraph=True)(x)
    torch._dynamo.reset()
    assert_identical(body(x), torch.compile(body, backend="eager")(x))
    assert _dynamo.counted(_dynamo.Event.SKIP_FRAME)["tree.flatten"] >= 1


def _flatten_a_proxy(x: torch.Tensor) -> Any:
    return tree.flatten(types.MappingProxyType({"b": x, "a": [x + 1]}))


def _type_of_a_proxy(x: torch.Tensor) -> Any:
    return type(types.MappingProxyType({"a": x}))


@needs_dynamo("mappingproxy made in the graph")  # else Dynamo has no such variable
def test_a_mappingproxy_variable_without_a_type_gets_one_where_a_tree_reads_it(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dynamo 2.7's mappingproxy variable has no type: ``type()`` of one ends tracing with
    a UserError, in the twins too. While installed, a tree function that asks gets the
    type later Dynamos give; the user's own ``type()`` is Dynamo's, as without the
    package; uninstalling takes it back."""
    from torch._dynamo.variables.base import VariableTracker
    from torch._dynamo.variables.dicts import MappingProxyVariable

    x = torch.ones(1)
    installer.uninstall()
    monkeypatch.setattr(MappingProxyVariable, "python_type", VariableTracker.python_type)
    try:
        installer.install()
        compiled = torch.compile(_flatten_a_proxy, backend="eager", fullgraph=True)
        assert_identical(_flatten_a_proxy(x), compiled(x))
        with pytest.raises(torch._dynamo.exc.UserError, match="has no type"):
            torch.compile(_type_of_a_proxy, backend="eager", fullgraph=True)(x)
        installer.uninstall()
        assert MappingProxyVariable.python_type is VariableTracker.python_type
    finally:
        installer.uninstall()
        monkeypatch.undo()
        installer.uninstall()  # what the fault kept from being undone, unguarded rows too
        installer.install()


def test_a_graph_break_names_its_reason_where_graph_break_takes_no_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where ``graph_break`` takes no message (torch 2.6 and earlier), the seam passes it
    through ``comptime``; where even that fails, the graph still breaks, never an
    internal error; eagerly, nothing happens."""
    bare = torch._dynamo.graph_break
    monkeypatch.setattr(torch._dynamo, "graph_break", lambda: bare())
    breaker = patches.graph_break_function()
    assert breaker(msg="eagerly nothing") is None

    def body(x: torch.Tensor) -> torch.Tensor:
        breaker(msg="the reason, named")
        return x + 1

    x = torch.ones(1)
    with pytest.raises(torch._dynamo.exc.Unsupported, match="the reason, named"):
        torch.compile(body, backend="eager", fullgraph=True)(x)

    def missing() -> Any:
        raise internals.Missing("torch._dynamo.exc.unimplemented")

    monkeypatch.setattr(internals, "_unimplemented", missing)
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported) as raised:
        torch.compile(body, backend="eager", fullgraph=True)(x)
    assert not isinstance(raised.value, torch._dynamo.exc.InternalTorchDynamoError)
    torch._dynamo.reset()
    assert_identical(body(x), torch.compile(body, backend="eager")(x))
