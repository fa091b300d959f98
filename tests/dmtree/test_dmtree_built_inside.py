"""Generated structures built inside the compiled function, through every dm-tree function.

What real code does: the compiled function builds its structures from a tensor argument,
builds the second structure of a two-structure call separately (equal, not the same
object), and nests them as deep as it likes. Each drawn spec becomes a small program,
run inside the graph by :func:`construct`; the same function run eagerly, with dm-tree's
C library, gives the expected results. ``fullgraph=True`` makes any graph break a failure.

A drawn structure sits at the bottom of a chain of wrapper containers, up to dm-tree's
traced depth limit where Dynamo itself can build the chain (:data:`DYNAMO_BUILDS`).
Results are peeled back through the chain inside the graph: the wrappers' types come
back as constants, and the inner results as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dynamo_tree_compat import config, dmtree
from tests.helpers import leaves as rllib_leaves
from tests.helpers.breadth import LONG, by_profile
from tests.helpers.compiling import compiled
from tests.helpers.dynamo_support import TORCH, drawn_kinds
from tests.helpers.structures import (
    COMPILED_EXAMPLES,
    Spec,
    assert_identical,
    attrs_class,
    container,
    deep_recursion,
    namedtuple_class,
    namedtuple_subclass,
    outcome,
)

tree = pytest.importorskip("tree")

SEQUENCES = ("list", "tuple", "namedtuple", "namedtuple_subclass", "deque", "attrs")
MAPPINGS = ("dict", "ordereddict", "defaultdict", "mapping", "mappingproxy")
#: How deep a chain of each kind Dynamo itself (torch 2.13) can build in a graph, with no
#: tree call at all: past these it raises RecursionError inside its own code.
DYNAMO_BUILDS = {"ordereddict": 100, "defaultdict": 100, "namedtuple": 250, "deque": 250}
DYNAMO_BUILDS |= {"namedtuple_subclass": 250}
LIMIT = dmtree.TRACED_MAX_DEPTH
if TORCH < (2, 10):  # Dynamo 2.9 builds no chain of any kind past about 190
    DYNAMO_BUILDS = {
        kind: min(DYNAMO_BUILDS.get(kind, LIMIT), 150) for kind in SEQUENCES + MAPPINGS
    }
PLAIN = ("list", "tuple", "dict")
#: Where any other kind is in the chain, the twins trace it: correct at any depth, but a
#: chain 1,000 deep costs minutes to compile. Such chains are drawn up to this length: 10
#: in make test, 40 in the ci profile, to the limit in the long one.
TWIN_CHAIN = by_profile(quick=10, ci=40, smoke=10, long=LIMIT)
#: How deep the plain chain goes through the twins (the fast path takes it to the limit).
TWINS_PLAIN = LIMIT if LONG else 300

# --- Programs: a spec as postorder steps, run inside the graph ---------------------------

Step = tuple[Any, ...]


CLASSES = {"namedtuple": namedtuple_class, "namedtuple_subclass": namedtuple_subclass}
CLASSES["attrs"] = attrs_class


def _container_step(kind: str, count: int, keys: tuple[Any, ...]) -> Step:
    if kind in CLASSES:
        CLASSES[kind](count)  # made before tracing: the graph only looks the class up
    return (kind, keys, count)


def program(spec: Spec) -> list[Step]:
    """Postorder steps that build ``spec`` around a tensor (see :func:`construct`)."""
    steps: list[Step] = []
    pending: list[tuple[Spec, bool]] = [(spec, False)]
    while pending:
        (kind, payload), visited = pending.pop()
        if kind in ("int", "float"):
            steps.append(("tensor", float(payload)))
        elif kind in ("str", "bytes", "none"):
            steps.append(("constant", payload))
        elif kind in rllib_leaves.KINDS:  # classes, functions, objects, distributions
            steps.append(("leaf", kind, payload))
        elif visited:
            keys = tuple(key for key, _ in payload) if kind in MAPPINGS else ()
            steps.append(_container_step(kind, len(payload), keys))
        else:
            pending.append(((kind, payload), True))
            children = [child for _, child in payload] if kind in MAPPINGS else list(payload)
            pending += [(child, False) for child in reversed(children)]
    return steps


def construct(steps: list[Step], x: torch.Tensor) -> Any:
    """Runs a program: a fresh structure whose numeric leaves are tensors made from x."""
    stack: list[Any] = []
    for step in steps:
        if step[0] == "tensor":
            stack.append(x + step[1])
        elif step[0] == "constant":
            stack.append(step[1])
        elif step[0] == "leaf":
            stack.append(rllib_leaves.make(step[1], step[2], x))
        else:
            count = step[2]
            items = stack[len(stack) - count :]
            stack = stack[: len(stack) - count]  # not del: Dynamo 2.8 cannot trace it
            stack.append(container(step[0], items, step[1]))
    return stack[0]


# --- Chains of wrappers, and peeling results back through them -------------------------


def wrap(inner: Spec, kinds: list[str]) -> Spec:
    """``inner`` under one wrapper per kind, the last kind outermost. Each wrapper holds
    the inner part first (key "k"); the innermost few also a constant leaf (key "a",
    sorted before "k"). Deeper ones hold no leaf: 1,000 leaves, each with a path 1,000
    long, would make the compiled function's output, not the tree calls, the cost."""
    spec = inner
    for index, kind in enumerate(kinds):
        sibling = ("str", "leaf")
        if kind in MAPPINGS:
            spec = (kind, (("k", spec), ("a", sibling)) if index < 8 else (("k", spec),))
        else:
            spec = (kind, (spec, sibling) if index < 8 else (spec,))
    return spec


def peel(result: Any, kinds: tuple[str, ...]) -> tuple[list[type], Any]:
    """The wrappers' types, outermost first, and what is inside the innermost."""
    seen = []
    for kind in reversed(kinds):
        seen.append(type(result))
        if kind == "attrs":
            result = result.a0
        elif kind in MAPPINGS:
            result = result["k"]
        else:
            result = result[0]
    return seen, result


# --- The calls: every dm-tree function, on structures built in the graph ----------------


def _double(value: Any) -> Any:
    return value * 2 if isinstance(value, torch.Tensor) else value


def _add(a: Any, b: Any) -> Any:
    return a + b if isinstance(a, torch.Tensor) else (a, b)


def _with_depth(path: Any, value: Any) -> Any:
    return (len(path), value * 3) if isinstance(value, torch.Tensor) else None


def _drop_strings(value: Any) -> Any:
    return tree.MAP_TO_NONE if isinstance(value, str) else None


def _shallow(spec: Spec, cut: int) -> Spec:
    """``spec`` with every subtree at depth ``cut`` (below the chain) made a None leaf."""
    kind, payload = spec
    if kind in ("int", "float", "str", "bytes", "none", *rllib_leaves.KINDS):
        return ("none", None)
    if cut == 0:
        return ("none", None)
    if kind in MAPPINGS:
        return (kind, tuple((key, _shallow(child, cut - 1)) for key, child in payload))
    return (kind, tuple(_shallow(child, cut - 1) for child in payload))


def calls(
    steps: list[Step], shallow_steps: list[Step], kinds: tuple[str, ...]
) -> Callable[[torch.Tensor], dict[str, Any]]:
    """One function that builds the structures and calls every dm-tree function."""

    def every_call(x: torch.Tensor) -> dict[str, Any]:
        s = construct(steps, x)
        other = construct(steps, x)  # equal, built separately
        shallow = construct(shallow_steps, x)
        seen: list[Any] = []
        tree.assert_same_structure(s, other)
        tree.assert_same_structure(s, other, check_types=False)
        return {
            "is_nested": tree.is_nested(s),
            "flatten": tree.flatten(s),
            "flatten_with_path": tree.flatten_with_path(s),
            "map_structure": peel(tree.map_structure(_double, s), kinds),
            "map_structure two": peel(tree.map_structure(_add, s, other), kinds),
            "map_structure unchecked": peel(
                tree.map_structure(_add, s, other, check_types=False), kinds
            ),
            "map_structure_with_path": peel(
                tree.map_structure_with_path(lambda p, a, b: (len(p), _add(a, b)), s, other),
                kinds,
            ),
            "flatten_up_to": tree.flatten_up_to(shallow, s),
            "flatten_with_path_up_to": tree.flatten_with_path_up_to(shallow, other),
            "map_structure_up_to": peel(
                tree.map_structure_up_to(shallow, lambda a, b: tree.flatten(a), s, other),
                kinds,
            ),
            "map_structure_with_path_up_to": peel(
                tree.map_structure_with_path_up_to(shallow, lambda p, a: len(p), s), kinds
            ),
            "unflatten_as": peel(tree.unflatten_as(other, tree.flatten(s)[::-1]), kinds),
            "traverse": peel(tree.traverse(lambda t: seen.append(type(t)), s), kinds),
            "traverse bottom up": peel(
                tree.traverse(lambda t: seen.append(type(t)), s, top_down=False), kinds
            ),
            "traverse map to none": peel(tree.traverse(_drop_strings, s), kinds),
            "traverse_with_path": peel(tree.traverse_with_path(_with_depth, s), kinds),
            "seen": seen,
        }

    return every_call


# --- Drawing -----------------------------------------------------------------------------

_leaves = st.one_of(
    st.integers(-5, 50).map(lambda v: ("int", v)),
    st.sampled_from([("str", "x"), ("bytes", b"ab"), ("none", None), ("float", 0.5)]),
    rllib_leaves.strategy(),
)
_keys = st.sampled_from(["a", "b", "c", "d", "e", "aa"])


@st.composite
def _node(draw: Any, children: st.SearchStrategy[Spec]) -> Spec:
    kind = draw(st.sampled_from(drawn_kinds(SEQUENCES + MAPPINGS, inside=True)))
    items = draw(st.lists(children, max_size=4))
    if kind in MAPPINGS:
        keys = draw(st.lists(_keys, min_size=len(items), max_size=len(items), unique=True))
        return (kind, tuple(zip(keys, items)))
    return (kind, tuple(items))


def depth_of(spec: Spec) -> int:
    kind, payload = spec
    if kind in ("int", "float", "str", "bytes", "none", *rllib_leaves.KINDS):
        return 0
    children = [child for _, child in payload] if kind in MAPPINGS else payload
    return 1 + max((depth_of(child) for child in children), default=0)


@st.composite
def cases(draw: Any) -> tuple[Spec, tuple[str, ...], int]:
    """(inner spec, chain kinds innermost first, shallow cut)."""
    inner = draw(st.recursive(_leaves, _node, max_leaves=8))
    pattern = draw(
        st.lists(
            st.sampled_from(drawn_kinds(SEQUENCES + MAPPINGS, inside=True)), min_size=1, max_size=3
        )
    )
    room = min([DYNAMO_BUILDS.get(kind, LIMIT) for kind in pattern]) - depth_of(inner)
    if not set(pattern) <= set(PLAIN):
        room = min(room, TWIN_CHAIN)
    length = draw(st.one_of(st.integers(0, 6), st.integers(0, max(room, 0))))
    kinds = tuple(pattern[i % len(pattern)] for i in range(length))
    return inner, kinds, draw(st.integers(0, 3))


def check(inner: Spec, kinds: tuple[str, ...], cut: int) -> None:
    spec = wrap(inner, list(kinds))
    shallow = wrap(_shallow(inner, cut), list(kinds))
    function = calls(program(spec), program(shallow), kinds)
    x = torch.arange(3.0)
    with deep_recursion():  # eager dm-tree recurses per level
        expected = outcome(function, x)
    if expected[0] == "raised":  # dm-tree refuses it (keys the shallow one lacks...)
        assert expected[1] in (TypeError, ValueError), expected
        return
    torch._dynamo.reset()
    actual = compiled(function)(x)
    with deep_recursion():
        assert_identical(expected[1], actual)


def room(*kinds: str, spare: int = 0) -> int:
    """How long a chain of ``kinds`` is drawn: the twins' chain length, within what
    Dynamo itself builds (less ``spare`` levels for the inner structure)."""
    return min(TWIN_CHAIN, *(DYNAMO_BUILDS.get(kind, LIMIT) - spare for kind in kinds))


DEEP_PLAIN = (
    ("list", (("int", 1),)),
    ("list", "dict", "tuple") * (min(LIMIT, DYNAMO_BUILDS.get("list", LIMIT)) // 3 - 1),
    1,
)


def drawn_or(kind: str, instead: str) -> str:
    """``kind`` where this Dynamo makes and rebuilds it in the graph, else ``instead``."""
    return (drawn_kinds([kind], inside=True) or [instead])[0]


#: Chains at the depth limit, or at what Dynamo itself builds (DYNAMO_BUILDS); in CI,
#: the twins' chains at TWIN_CHAIN. Kinds this Dynamo cannot make in the graph (or would
#: return wrong) are replaced by their nearest kin: attrs by a namedtuple, a mappingproxy
#: or a user Mapping by an OrderedDict, a defaultdict by an OrderedDict.
DEEP_CASES = [
    DEEP_PLAIN,
    (
        ("dict", (("b", ("int", 1)),)),
        (drawn_or("attrs", "namedtuple"), "list") * (room("attrs") // 2 - 1),
        1,
    ),
    (
        ("tuple", (("int", 1),)),
        (drawn_or("mappingproxy", "ordereddict"), drawn_or("mapping", "ordereddict"))
        * (room("mapping") // 2 - 1),
        0,
    ),
    (("list", (("int", 1),)), ("namedtuple", "deque", "tuple") * (room("deque", spare=10) // 3), 2),
    (
        ("list", (("int", 1),)),
        ("ordereddict", drawn_or("defaultdict", "ordereddict"))
        * (room("defaultdict", spare=4) // 2),
        2,
    ),
]


def _case_id(case: tuple[Spec, tuple[str, ...], int]) -> str:
    return "-".join(case[1][:2])


@pytest.mark.wide
@pytest.mark.parametrize("case", DEEP_CASES, ids=[_case_id(case) for case in DEEP_CASES])
def test_every_function_on_chains_built_inside(case: tuple[Spec, tuple[str, ...], int]) -> None:
    """The fixed deep cases, each a test of its own (minutes of compiling together, which
    pytest-xdist's processes share): CI's wide stage."""
    check(*case)


@pytest.mark.parametrize("case", DEEP_CASES, ids=[_case_id(case) for case in DEEP_CASES])
def test_every_function_on_short_chains_built_inside(
    case: tuple[Spec, tuple[str, ...], int],
) -> None:
    """The deep cases' chains, of the same kinds in the same pattern, cut to TWIN_CHAIN
    levels (make test's share: the depth itself is the wide stage's)."""
    inner, kinds, cut = case
    check(inner, kinds[:TWIN_CHAIN], cut)


#: Each drawn structure compiles every dm-tree function: half the compiled fuzz tests'
#: count (2 in make test, 5 in the ci profile; the long profile's 2,000).
BUILT_INSIDE_EXAMPLES = COMPILED_EXAMPLES if LONG else max(1, COMPILED_EXAMPLES // 2)


@settings(max_examples=BUILT_INSIDE_EXAMPLES, deadline=None)
@given(case=cases())
def test_every_function_on_structures_built_inside(
    case: tuple[Spec, tuple[str, ...], int],
) -> None:
    check(*case)


@pytest.mark.wide
def test_deep_plain_chain_through_the_twins() -> None:
    """With the fast path off, the twins trace DEEP_PLAIN's chain too (TWINS_PLAIN deep,
    for time). The fast path takes it to the limit in the deep cases."""
    inner, kinds, cut = DEEP_PLAIN
    saved, config.fast_path = config.fast_path, False
    try:
        check(inner, kinds[:TWINS_PLAIN], cut)
    finally:
        config.fast_path = saved
