"""Every public ``keras.tree`` function, compiled with ``fullgraph=True``, against eager.

Keras's tree layer (``keras/src/tree``) is the one Keras uses: over optree up to Keras
3.11, over torch's pytree from 3.12 on the torch backend. Each call runs eagerly and
compiled on fresh structures of every kind Keras accepts (tuples, lists, dicts,
namedtuples, defaultdicts, OrderedDicts, None, Keras's tracked containers, and mixes),
passed in and built inside the compiled function, and must end alike: the same value,
container types and key order, or the same error. Keras 3.0.5 calls dm-tree itself; its
tests are in ``tests/integration``.
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras")
tree_api = pytest.importorskip("keras.src.tree.tree_api")  # Keras 3.1 and later
import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dynamo_tree_compat  # noqa: E402
from dynamo_tree_compat import _dynamo  # noqa: E402
from tests.helpers.compiling import compiled  # noqa: E402
from tests.helpers.structures import (  # noqa: E402
    COMPILED_EXAMPLES,
    assert_same_ending,
    build,
    outcome,
    tensor_leaves,
)
from tests.helpers.structures import specs as all_specs  # noqa: E402

tree = keras.tree
tracking = pytest.importorskip("keras.src.utils.tracking")

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
Point = collections.namedtuple("Point", ["x", "y"])
#: Keras's layer under test, by its module's last name: "torchtree_impl", "optree_impl".
LAYER = tree_api.tree_impl.__name__.rpartition(".")[2]


def _t(value: float) -> torch.Tensor:
    return torch.full((2,), value)


#: Named structures, each a function that makes a fresh one.
STRUCTURES: dict[str, Callable[[], Any]] = {
    "tuple": lambda: (_t(1), (_t(2), _t(3))),
    "list": lambda: [_t(1), [_t(2), _t(3)]],
    "dict": lambda: {"b": _t(1), "a": {"y": _t(2), "x": _t(3)}},
    "namedtuple": lambda: Point(_t(1), (_t(2),)),
    "mix": lambda: {"k": [_t(1), (_t(2), Point(_t(3), [_t(4)]))], "j": None},
    "tuples in tuples": lambda: ((_t(1),), ((_t(2), _t(3)), ()), _t(4)),
    "shapes": lambda: ((2, 3), [None, 4], {"s": (5,)}),
    "ordereddict": lambda: collections.OrderedDict([("b", _t(1)), ("a", (_t(2),))]),
    "defaultdict": lambda: collections.defaultdict(list, {"b": (_t(1),), "a": _t(2)}),
    "empty": lambda: ((), [], {}),
    "none": lambda: None,
    "leaf": lambda: _t(7),
    "tracked list": lambda: tracking.TrackedList([_t(1), (_t(2),)]),
    "tracked dict": lambda: tracking.TrackedDict({"b": _t(1), "a": (_t(2),)}),
}


def _plus_one(x: Any) -> Any:
    return x + 1 if isinstance(x, torch.Tensor) else x


def _visit(seen: list[Any]) -> Callable[[Any], Any]:
    def visit(x: Any) -> None:
        seen.append(x)

    return visit


def _renamed(x: Any) -> Any:
    # A replacement for tuples, MAP_TO_NONE for None, and on into everything else.
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return list(x)
    return tree.MAP_TO_NONE if x is None else None


#: Each public function, as one call on a structure; it returns what it can compare.
CALLS: dict[str, Callable[[Any], Any]] = {
    "is_nested": tree.is_nested,
    "flatten": tree.flatten,
    "flatten_with_path": tree.flatten_with_path,
    "map_structure": lambda s: tree.map_structure(_plus_one, s),
    "map_structure two": lambda s: tree.map_structure(lambda a, b: (a, b), s, s),
    "map_structure_up_to": lambda s: tree.map_structure_up_to(s, _plus_one, s),
    "assert_same_structure": lambda s: tree.assert_same_structure(s, s),
    "assert_same_structure unlike": lambda s: tree.assert_same_structure(s, [s]),
    "assert_same_paths": lambda s: tree.assert_same_paths(s, s),
    "pack_sequence_as": lambda s: tree.pack_sequence_as(s, tree.flatten(s)),
    "lists_to_tuples": tree.lists_to_tuples,
    "map_shape_structure": lambda s: tree.map_shape_structure(lambda x: x, s),
    "traverse top down": lambda s: tree.traverse(_renamed, s),
    "traverse bottom up": lambda s: tree.traverse(_renamed, s, top_down=False),
}


def _seen_by_traverse(structure: Any, top_down: bool) -> tuple[Any, list[Any]]:
    seen: list[Any] = []
    return tree.traverse(_visit(seen), structure, top_down=top_down), seen


CALLS["traverse visits top down"] = lambda s: _seen_by_traverse(s, True)
CALLS["traverse visits bottom up"] = lambda s: _seen_by_traverse(s, False)


def _same(call: Callable[[Any], Any], make: Callable[[], Any], fullgraph: bool = True) -> None:
    """Eager and compiled end alike; a call that raises is compiled without fullgraph,
    since Dynamo ends the graph to raise (its error is the user's, not a break's)."""
    expected = outcome(call, make())
    fullgraph = fullgraph and expected[0] == "returned"
    assert_same_ending(expected, outcome(compiled(call, fullgraph=fullgraph), make()))


def test_the_layer_is_covered_here() -> None:
    """Keras's layer has this package's twins registered, unless this Keras's code is not
    the code they mirror (then Keras's own code is traced, and the tests below say how)."""
    dynamo_tree_compat.install()
    functions = dynamo_tree_compat.status().functions
    assert functions[f"{tree_api.tree_impl.__name__}.traverse"] == "registered", functions


#: Containers Dynamo 2.5 cannot build in the graph (a defaultdict, Keras's TrackedList),
#: nor read (TrackedDict's values), with or without this package: there the call must
#: break the graph where it cannot go on and still return eager's answer.
BEYOND_DYNAMO_2_5 = ("defaultdict", "tracked list", "tracked dict")
DYNAMO_2_5 = torch.__version__.startswith("2.5.")


#: make test's share of the grid: every call meets every third structure, in turn, so
#: that every call and every structure is reached; CI's wide stage runs the rest.
_SHARE = 3
GRID = [
    pytest.param(call, structure, marks=() if (i + j) % _SHARE == 0 else pytest.mark.wide)
    for i, call in enumerate(CALLS)
    for j, structure in enumerate(STRUCTURES)
]


@pytest.mark.parametrize(("call", "structure"), GRID)
def test_every_function_in_one_graph(call: str, structure: str) -> None:
    fullgraph = not (DYNAMO_2_5 and structure in BEYOND_DYNAMO_2_5)
    _same(CALLS[call], STRUCTURES[structure], fullgraph)


@pytest.mark.parametrize("call", ["flatten", "traverse bottom up", "pack_sequence_as"])
@pytest.mark.parametrize("where", ["root", "inside"])
@pytest.mark.parametrize("built", ["passed in", "built inside"])
def test_tracked_set_comes_back_whole(call: str, where: str, built: str) -> None:
    """Keras's TrackedSet (the set layers track their children in). Where Dynamo would
    rebuild one made or filled in the graph empty (torch 2.13, 2.14), the package replays
    its contents on the way out: one graph, no break, eager's answer."""

    def make() -> Any:
        tracked = tracking.TrackedSet([1, 2])  # a set of tensors would compare by identity
        return tracked if where == "root" else {"a": [tracked, _t(2)]}

    function = CALLS[call]
    if built == "built inside":
        function = lambda _: CALLS[call](make())  # noqa: E731
    with _dynamo.GraphBreakRecorder() as recorder:
        _same(function, make, fullgraph=not DYNAMO_2_5)  # 2.5 breaks its own way
    if not DYNAMO_2_5:
        assert recorder.breaks == []


def test_eager_keras_is_untouched() -> None:
    dynamo_tree_compat.install()
    module = tree_api.tree_impl
    assert module.traverse.__module__ == module.__name__
    assert tree.lists_to_tuples([1, [2]]) == (1, (2,))


# --- Generated structures, passed in and built inside the compiled function ------------

#: What Keras's layer takes apart (everything else is a leaf to it).
KINDS = ("list", "tuple", "namedtuple", "dict", "ordereddict", "defaultdict")


def _keras_specs(inside: bool = False) -> st.SearchStrategy[Any]:
    """Structures of the kinds in KINDS; ``inside``: less the defaultdict, which Dynamo
    cannot pass, made in the graph, to a namedtuple's class, with or without this package
    ("SourcelessBuilder.create does not know how to wrap defaultdict", torch 2.13)."""
    kinds = [kind for kind in KINDS if not (inside and kind == "defaultdict")]

    def keras_kinds_only(spec: Any) -> bool:
        kind, payload = spec
        if kind in ("int", "str", "none", "float"):
            return True
        if kind not in kinds:
            return False
        children = [c for _, c in payload] if kind.endswith("dict") else payload
        return all(keras_kinds_only(child) for child in children)

    return all_specs(max_leaves=8, compiled=True).filter(keras_kinds_only)


GENERATED = ["flatten", "flatten_with_path", "map_structure", "pack_sequence_as"]
GENERATED += ["lists_to_tuples", "traverse visits bottom up", "assert_same_paths"]


@pytest.mark.parametrize("call", GENERATED)
@settings(max_examples=COMPILED_EXAMPLES)
@given(spec=_keras_specs())
def test_generated_structures_passed_in(call: str, spec: Any) -> None:
    torch._dynamo.reset()
    assert outcome(CALLS[call], build(spec, tensor_leaves))[0] == "returned"
    _same(CALLS[call], lambda: build(spec, tensor_leaves))


@pytest.mark.parametrize("call", GENERATED)
@settings(max_examples=COMPILED_EXAMPLES)
@given(spec=_keras_specs(inside=True))
def test_generated_structures_built_inside(call: str, spec: Any) -> None:
    torch._dynamo.reset()

    def built_inside(x: torch.Tensor) -> Any:
        # The leaves are made in the graph too (torch.full); a builder closing over x
        # would be a closure Dynamo 2.5 cannot test for truth in `build`.
        return CALLS[call](build(spec, tensor_leaves)), x + 1

    assert outcome(built_inside, torch.zeros(2))[0] == "returned"  # a structure to compare
    _same(built_inside, lambda: torch.zeros(2))


def test_no_break_in_kerass_tree_layer() -> None:
    """The counter: a model-like function over tuples gives one graph, no break."""

    def step(inputs: Any) -> Any:
        flat = tree.flatten(inputs)
        total = sum(tree.flatten(tree.map_structure(lambda t: t * 2, inputs)))
        return tree.pack_sequence_as(inputs, [t + total for t in flat])

    with _dynamo.GraphBreakRecorder() as recorder:
        expected = step(STRUCTURES["tuples in tuples"]())
        actual = torch.compile(step, backend="eager")(STRUCTURES["tuples in tuples"]())
    assert recorder.breaks == []
    assert_same_ending(("returned", expected, None), ("returned", actual, None))


def test_the_layer_is_covered_when_keras_is_imported_first() -> None:
    """Keras's tree module imports torch, which autoloads the package while that module
    is still importing: its functions must still be what registers (a capture taken
    then had no traverse, and Keras 3.12 to 3.14's fit broke at every traverse)."""
    program = (
        "import keras, dynamo_tree_compat\n"
        "from keras.src.tree import tree_api\n"
        "name = tree_api.tree_impl.__name__ + '.traverse'\n"
        "print(dynamo_tree_compat.status().functions[name])\n"
    )
    environment = {**os.environ, "KERAS_BACKEND": "torch"}
    environment.pop("DYNAMO_TREE_COMPAT", None)
    completed = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=environment
    )
    assert completed.stdout.strip().splitlines()[-1:] == ["registered"], completed.stderr[-2000:]
