"""torch's optree-backed pytree (``torch.utils._cxx_pytree``) under torch.compile.

Its functions are Python code over optree. Dynamo before torch 2.7 skips every call into
its file; there, the package has Dynamo trace a copy of each (the same code, read from
another file) over its optree coverage. From 2.7 on, Dynamo traces the module itself.
Either way each call traces in one graph and gives eager's answer, on the first call and
on graphs reused for changed structures.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import pytest
import torch

from dynamo_tree_compat import _dynamo, installer
from tests.helpers.compiling import compiled
from tests.helpers.dynamo_support import dynamo_traces
from tests.helpers.structures import assert_same_ending, outcome

pytest.importorskip("optree")
cxx = pytest.importorskip("torch.utils._cxx_pytree")

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

Point = collections.namedtuple("Point", "a b")


def _double(leaf: Any) -> Any:
    return leaf * 2 if isinstance(leaf, torch.Tensor) else leaf


def _is_tensor(leaf: Any) -> bool:
    return isinstance(leaf, torch.Tensor)


#: Each call, and the Dynamo features it needs, beyond those every release has, to trace
#: in one graph (None: not on every release; elsewhere it traces with graph breaks).
CALLS: dict[str, tuple[Callable[[Any], Any], tuple[str, ...] | None]] = {
    "tree_map": (lambda t: cxx.tree_map(_double, t), ()),
    "tree_map, two trees": (lambda t: cxx.tree_map(lambda a, b: (a, b), t, t), ()),
    "tree_flatten": (cxx.tree_flatten, ()),
    "tree_leaves": (cxx.tree_leaves, ()),
    "tree_structure": (cxx.tree_structure, ()),
    "tree_unflatten": (lambda t: cxx.tree_unflatten(*reversed(cxx.tree_flatten(t))), ()),
    "tree_unflatten, too few leaves": (
        lambda t: cxx.tree_unflatten([1], cxx.tree_structure(t)),
        (),
    ),
    "tree_map_only": (lambda t: cxx.tree_map_only(torch.Tensor, _double, t), ()),
    "tree_map_only, a tuple of types": (
        lambda t: cxx.tree_map_only((int, float), lambda n: n + 1, t),
        (),
    ),
    # torch 2.5's map_only compares sys.version_info for a predicate, which Dynamo cannot
    "tree_map_only, a predicate": (lambda t: cxx.tree_map_only(_is_tensor, _double, t), None),
    "tree_map_": (lambda t: cxx.tree_map_(_double, t), ("deque maxlen",)),
    "tree_iter": (lambda t: list(cxx.tree_iter(t)), ("a generator read lazily",)),
    "tree_all": (lambda t: cxx.tree_all(lambda leaf: leaf is not None, t), ()),
    "tree_any_only": (
        lambda t: cxx.tree_any_only(int, lambda n: n > 1, t),
        ("a generator read lazily",),
    ),
}


def _structures() -> list[Any]:
    """A structure, then each change a reused graph must see: a key more, keys in another
    order, another container kind, a deeper node, None where a leaf was."""
    x = torch.ones(2)
    return [
        {"a": x, "b": [x, None, Point(x, 2)]},
        {"a": x, "b": [x, None, Point(x, 2)], "c": 3},
        {"b": [x, None, Point(x, 2)], "a": x},
        collections.OrderedDict(b=[x, None, Point(x, 2)], a=x),
        {"a": x, "b": (x, None, Point(x, 2))},
        {"a": x, "b": [x, [x, {"d": 1.5}], Point(x, 2)]},
        {"a": None, "b": [x, None, Point(x, 2)]},
    ]


@pytest.mark.parametrize("name", CALLS)
def test_each_call_gives_eagers_answer_in_one_graph(name: str) -> None:
    """In one graph where Dynamo can (``fullgraph=True``), else with breaks; eager's
    answer either way, on every structure of the chain through one compiled function."""
    call, needs = CALLS[name]
    one_graph = needs is not None and all(dynamo_traces(feature) for feature in needs)
    if name == "tree_all" and not dynamo_traces("a generator read lazily"):
        one_graph = False  # torch 2.5's tree_all reads tree_iter
    if name == "tree_leaves" and _dynamo.has(_dynamo.Capability.CXX_PYTREE_INLINED):
        # Dynamo's own polyfill reads a dict one level down through optree's DictMetaData
        one_graph = one_graph and dynamo_traces("list subclass")
    # optree's own errors come from eager code, after a graph break: without fullgraph
    run, run_raising = compiled(call, fullgraph=one_graph), compiled(call, fullgraph=False)
    for structure in _structures():
        expected = outcome(call, structure)
        actual = outcome(run if expected[0] == "returned" else run_raising, structure)
        assert_same_ending(expected, actual)


def test_the_copies_register_only_where_dynamo_skips_the_module() -> None:
    """Before torch 2.7, every function above is a copy read from another file; later,
    Dynamo's own tracing of the module is left alone, but for the maps where Dynamo's own
    tree_map fast path answers wrong (torch 2.13 and 2.15: a graph reused for keys in
    another order)."""
    registered = {key for key in installer.REGISTERED if key.startswith("torch.utils._cxx")}
    inlined = _dynamo.has(_dynamo.Capability.CXX_PYTREE_INLINED)
    assert ("torch.utils._cxx_pytree.map_only" in registered) is not inlined
    assert "torch.utils._cxx_pytree.tree_map" in registered
