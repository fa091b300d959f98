"""The few optree twins, eagerly, against optree itself, on generated trees.

Most of optree needs no twin: Dynamo follows optree's own code, and this package traces
optree's C functions by running them while tracing. The twins below stand in where
optree's code makes or calls something Dynamo cannot (a C iterator, a bare ``object()``,
``deque(..., maxlen=0)`` before torch 2.6).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamo_tree_compat.twins import optree as optree_twins
from tests.helpers.structures import assert_same_ending, outcome

optree = pytest.importorskip("optree")
from tests.helpers.optree_trees import build, options, prefix_of, trees  # noqa: E402


@given(spec=trees(), drawn=options())
def test_tree_iter(spec: Any, drawn: dict[str, Any]) -> None:
    tree = build(spec, tensors=False)
    assert_same_ending(
        outcome(lambda: list(optree.tree_iter(tree, **drawn))),
        outcome(lambda: list(optree_twins.tree_iter(tree, **drawn))),
    )


@st.composite
def _broadcastable(draw: Any) -> list[Any]:
    spec = draw(trees())
    others = draw(st.lists(st.one_of(prefix_of(spec), trees()), min_size=0, max_size=2))
    return [spec, *others]


@pytest.mark.skipif(
    not hasattr(optree.ops, "_tree_broadcast_common_with_treespec"),
    reason="this optree (before 0.20) has no such helper for the twin to stand in for",
)
@given(specs=_broadcastable(), drawn=options())
def test_broadcast_common_with_treespec(specs: list[Any], drawn: dict[str, Any]) -> None:
    private = optree.ops._tree_broadcast_common_with_treespec
    assert_same_ending(
        outcome(lambda: private(*[build(s, tensors=False) for s in specs], **drawn)),
        outcome(
            lambda: optree_twins.broadcast_common_with_treespec(
                *[build(s, tensors=False) for s in specs], **drawn
            )
        ),
    )


@pytest.mark.skipif(
    hasattr(optree.ops, "_tree_broadcast_common_with_treespec"),
    reason="this optree (0.20 and later) needs no twin of tree_broadcast_common",
)
@given(specs=_broadcastable(), drawn=options())
def test_tree_broadcast_common_before_0_20(specs: list[Any], drawn: dict[str, Any]) -> None:
    pair = [*specs, specs[0]][:2]
    assert_same_ending(
        outcome(
            lambda: optree.tree_broadcast_common(*[build(s, tensors=False) for s in pair], **drawn)
        ),
        outcome(
            lambda: optree_twins.tree_broadcast_common(
                *[build(s, tensors=False) for s in pair], **drawn
            )
        ),
    )


def _recording(name: str, calls: list[Any]) -> Any:
    """A function for an in-place map that records its arguments (an accessor as its
    path, its type and its repr); it raises on one leaf value, as a user's may."""

    def record(*args: Any) -> Any:
        if name == "tree_map_with_accessor_":
            args = (args[0].path, type(args[0]), repr(args[0]), *args[1:])
        calls.append(args)
        if args[-1] == 7:
            raise ValueError("seven")
        return "ignored"

    return record


@pytest.mark.parametrize("name", ["tree_map_", "tree_map_with_path_", "tree_map_with_accessor_"])
@given(specs=_broadcastable(), drawn=options())
def test_in_place_maps(name: str, specs: list[Any], drawn: dict[str, Any]) -> None:
    """The in-place maps (twins where Dynamo cannot call ``deque(..., maxlen=0)``): the
    same calls in the same order, the tree itself back, the same errors on rests."""
    if not hasattr(optree, name):
        pytest.skip(f"this optree has no {name}")
    results = []
    for function in (getattr(optree, name), getattr(optree_twins, name)):
        calls: list[Any] = []
        trees_given = [build(s, tensors=False) for s in specs]
        ending = outcome(function, _recording(name, calls), *trees_given, **drawn)
        if ending[0] == "returned":
            assert ending[1] is trees_given[0]
        results.append((ending, calls))
    assert_same_ending(results[0][0], results[1][0])
    assert repr(results[0][1]) == repr(results[1][1])  # leaves of separate builds


#: key functions for tree_max and tree_min: none, ties, one that raises on some leaves.
KEYS: dict[str, Any] = {
    "none": None,
    "rank": lambda leaf: leaf if type(leaf) is int else -1,
    "repr": repr,
    "tie": lambda leaf: 0,
    "len": len,
}


@pytest.mark.parametrize("name", ["tree_max", "tree_min"])
@given(
    spec=trees(),
    drawn=options(),
    key=st.sampled_from(sorted(KEYS)),
    default=st.sampled_from([(), (None,), (-1,)]),
)
def test_tree_max_and_tree_min(
    name: str, spec: Any, drawn: dict[str, Any], key: str, default: tuple[Any, ...]
) -> None:
    keywords = {**drawn, "key": KEYS[key], **dict(zip(["default"], default))}
    tree = build(spec, tensors=False)
    assert_same_ending(
        outcome(lambda: getattr(optree, name)(tree, **keywords)),
        outcome(lambda: getattr(optree_twins, name)(tree, **keywords)),
    )


_sort_keys = st.one_of(
    st.integers(-2, 2),
    st.sampled_from(["a", "b", ""]),
    st.none(),
    st.tuples(st.integers(0, 1), st.sampled_from(["x", 1])),
)


@given(keys=st.lists(_sort_keys, max_size=6), reverse=st.booleans(), keyed=st.booleans())
def test_total_order_sorted(keys: list[Any], reverse: bool, keyed: bool) -> None:
    """The stand-in for optree's key sort (traced where Dynamo's own sort fails), against
    optree's: mixed types, equal keys, keys that never order, either direction."""
    from optree.utils import total_order_sorted

    items = [(key, index) for index, key in enumerate(keys)] if keyed else keys
    key = (lambda pair: pair[0]) if keyed else None
    assert_same_ending(
        outcome(lambda: total_order_sorted(items, key=key, reverse=reverse)),
        outcome(lambda: optree_twins.total_order_sorted(items, key=key, reverse=reverse)),
    )
