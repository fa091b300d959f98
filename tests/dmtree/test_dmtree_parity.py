"""Differential tests: every twin in dynamo_tree_compat.dmtree against the C dm-tree.

Each test draws structures of every container kind, builds them twice (fresh objects
for each side) and asserts the same results, container types, key order, call order of
user functions, and the same exception types and messages.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamo_tree_compat import dmtree
from tests.helpers.structures import (
    LEAF_KINDS,
    MAPPING_KINDS,
    VIEW_KINDS,
    Spec,
    assert_same_outcome,
    build,
    has_unsortable_keys,
    leaves,
    normalize,
    outcome,
    specs,
)

tree = pytest.importorskip("tree")


# --- Pairs of structures ---------------------------------------------------------------

_KIND_SWAPS = {
    "list": "tuple",
    "tuple": "list",
    "namedtuple": "namedtuple_subclass",
    "namedtuple_subclass": "namedtuple",
    "dict": "ordereddict",
    "ordereddict": "mapping",
    "defaultdict": "dict",
    "mapping": "dict",
    "mappingproxy": "defaultdict",
    "deque": "list",
    "attrs": "tuple",
    "keys": "values",
    "values": "items",
    "items": "list",
}


@st.composite
def mutated(draw: Any, spec: Spec) -> Spec:
    """``spec`` with at most one change somewhere: a kind, a length, a key, a level."""
    kind, payload = spec
    if kind in LEAF_KINDS:
        if draw(st.integers(0, 5)) == 0:
            return ("list", (spec,))
        return draw(leaves())
    if kind == "proxy":  # keep what it wraps a container (see structures.py)
        inner_kind, inner_children = payload[0]
        changed = draw(mutated((inner_kind, inner_children)))
        return spec if changed[0] in LEAF_KINDS else ("proxy", (changed,))
    change = draw(st.sampled_from(["recurse", "recurse", "recurse", "kind", "drop", "key", "leaf"]))
    children = list(payload)
    if change == "kind":
        new_kind = _KIND_SWAPS[kind]
        keyed = MAPPING_KINDS + VIEW_KINDS
        if (kind in keyed) == (new_kind in keyed):
            return (new_kind, payload)
        if new_kind in keyed:
            return (new_kind, tuple(enumerate(children)))
        return (new_kind, tuple(child for _, child in children))
    if change == "drop" and children:
        del children[draw(st.integers(0, len(children) - 1))]
        return (kind, tuple(children))
    if change == "key" and children and kind in MAPPING_KINDS + VIEW_KINDS:
        index = draw(st.integers(0, len(children) - 1))
        children[index] = ("zz", children[index][1])
        return (kind, tuple(children))
    if change == "leaf":
        return ("none", None)
    if not children:
        return spec
    index = draw(st.integers(0, len(children) - 1))
    if kind in MAPPING_KINDS + VIEW_KINDS:
        key, child = children[index]
        children[index] = (key, draw(mutated(child)))
    else:
        children[index] = draw(mutated(children[index]))
    return (kind, tuple(children))


@st.composite
def same_shape(draw: Any, spec: Spec) -> Spec:
    """``spec`` with other leaves in the same places."""
    kind, payload = spec
    if kind in LEAF_KINDS:
        return draw(leaves())
    if kind in MAPPING_KINDS + VIEW_KINDS:
        return (kind, tuple((key, draw(same_shape(child))) for key, child in payload))
    return (kind, tuple(draw(same_shape(child)) for child in payload))


@st.composite
def truncated(draw: Any, spec: Spec) -> Spec:
    """A shallow version of ``spec``: some sub-trees cut back to leaves."""
    kind, payload = spec
    if kind in LEAF_KINDS or draw(st.integers(0, 3)) == 0:
        return ("none", None)
    if kind == "proxy":
        inner_kind, inner_children = payload[0]
        return ("proxy", ((inner_kind, tuple(draw(truncated(c)) for c in inner_children)),))
    if kind in MAPPING_KINDS + VIEW_KINDS:
        return (kind, tuple((key, draw(truncated(child))) for key, child in payload))
    return (kind, tuple(draw(truncated(child)) for child in payload))


@st.composite
def pairs(draw: Any, unsortable: bool = False) -> tuple[Spec, Spec]:
    first = draw(specs(unsortable=unsortable))
    how = draw(st.sampled_from(["same", "same", "mutated", "mutated", "other"]))
    if how == "same":
        return first, draw(same_shape(first))
    if how == "mutated":
        return first, draw(mutated(first))
    return first, draw(specs(unsortable=unsortable))


@st.composite
def shallow_pairs(draw: Any) -> tuple[Spec, Spec]:
    """(shallow, input): the shallow one cut from the input, sometimes then mutated."""
    deep = draw(specs())
    shallow = draw(truncated(deep))
    if draw(st.booleans()):
        shallow = draw(mutated(shallow))
    return shallow, deep


def both(function_name: str, *specs_: Spec, extra: tuple[Any, ...] = (), **kwargs: Any) -> None:
    """Calls dm-tree and the twin on separately built inputs and compares the outcomes."""
    expected = outcome(getattr(tree, function_name), *extra, *map(build, specs_), **kwargs)
    actual = outcome(getattr(dmtree, function_name), *extra, *map(build, specs_), **kwargs)
    assert_same_outcome(expected, actual)


class Recorder:
    """A user function that records what it was called with, in order."""

    def __init__(self, result: Any = None) -> None:
        self.calls: list[str] = []
        self.result = result

    def __call__(self, *args: Any) -> Any:
        self.calls.append(normalize(repr(args)))
        return ("mapped", len(self.calls)) if self.result is None else self.result


def both_with_recorder(
    function_name: str,
    *specs_: Spec,
    before: tuple[Any, ...] = (),
    swallowed: bool = False,
    **kwargs: Any,
) -> None:
    """Like :func:`both` for functions taking a user callable; compares the calls too.

    ``swallowed``: see :func:`assert_same_outcome`; the twin's sort error comes before
    any call, and the C library's erratic end says nothing about its calls.
    """
    left, right = Recorder(), Recorder()
    expected = outcome(getattr(tree, function_name), *before, left, *map(build, specs_), **kwargs)
    actual = outcome(getattr(dmtree, function_name), *before, right, *map(build, specs_), **kwargs)
    assert_same_outcome(expected, actual, swallowed=swallowed)
    if not (swallowed and actual[0] == "raised" and "not supported between" in actual[2]):
        assert left.calls == right.calls


# --- Checks, one per function group --------------------------------------------------
#
# Three tests below draw the structures and run every check on each, so that a long run
# (DTC_FUZZ=long: 100,000 examples per test) puts 100,000 structures through every function.


def check_is_nested_flatten_and_paths(spec: Spec) -> None:
    for name in ("is_nested", "flatten", "flatten_with_path", "_is_attrs", "_yield_value"):
        if name.startswith("_yield"):
            expected = outcome(lambda s, n=name: list(getattr(tree, n)(s)), build(spec))
            actual = outcome(lambda s, n=name: list(getattr(dmtree, n)(s)), build(spec))
            if spec[0] in LEAF_KINDS:
                continue  # dm-tree's generator fails on leaves in ways that name the leaf
            assert_same_outcome(expected, actual)
        else:
            both(name, spec)


def check_is_namedtuple_and_sorted_items(spec: Spec, strict: bool) -> None:
    both("_is_namedtuple", spec, strict=strict)
    if spec[0] not in LEAF_KINDS:
        expected = outcome(lambda s: list(tree._yield_sorted_items(s)), build(spec))
        actual = outcome(lambda s: list(dmtree._yield_sorted_items(s)), build(spec))
        assert_same_outcome(expected, actual)
    if spec[0] in MAPPING_KINDS:
        both("_sorted", spec)


def check_map_structure_one_structure(spec: Spec) -> None:
    both_with_recorder("map_structure", spec)
    both_with_recorder("map_structure_with_path", spec)


def check_traverse(spec: Spec, top_down: bool, stop_at: str | None) -> None:
    def replace_some(*args: Any) -> Any:
        value = args[-1]
        if stop_at and type(value).__name__ == stop_at:
            return ("replaced", len(args))
        return None

    for name in ("traverse", "traverse_with_path"):
        expected = outcome(getattr(tree, name), replace_some, build(spec), top_down=top_down)
        actual = outcome(getattr(dmtree, name), replace_some, build(spec), top_down=top_down)
        assert_same_outcome(expected, actual)


def check_unflatten_as(spec: Spec, data: st.DataObject) -> None:
    flat_spec = outcome(tree.flatten, build(spec))
    if flat_spec[0] == "raised":
        return  # unsortable keys: flatten's own error is checked above
    count = len(flat_spec[1])
    length = data.draw(st.sampled_from([count, count, max(count - 1, 0), count + 1]))
    flat = list(range(length))
    expected = outcome(tree.unflatten_as, build(spec), list(flat))
    actual = outcome(dmtree.unflatten_as, build(spec), list(flat))
    assert_same_outcome(expected, actual)


def check_sequence_like(spec: Spec, data: st.DataObject) -> None:
    if spec[0] in LEAF_KINDS:
        return
    values = data.draw(st.lists(st.integers(0, 9), min_size=len(spec[1]), max_size=len(spec[1])))
    expected = outcome(tree._sequence_like, build(spec), list(values))
    actual = outcome(dmtree._sequence_like, build(spec), list(values))
    assert_same_outcome(expected, actual)


def check_assert_same_structure(pair: tuple[Spec, Spec], check_types: bool) -> None:
    expected = outcome(tree.assert_same_structure, *map(build, pair), check_types=check_types)
    actual = outcome(dmtree.assert_same_structure, *map(build, pair), check_types=check_types)
    swallowed = any(map(has_unsortable_keys, pair))
    assert_same_outcome(expected, actual, swallowed=swallowed)


def check_map_structure_two_structures(pair: tuple[Spec, Spec], check_types: bool) -> None:
    # map_structure checks the structures with dm-tree's assert_same_structure first.
    swallowed = any(map(has_unsortable_keys, pair))
    both_with_recorder("map_structure", *pair, check_types=check_types, swallowed=swallowed)
    both_with_recorder("map_structure_with_path", *pair)


def check_flatten_up_to(pair: tuple[Spec, Spec], check_types: bool) -> None:
    both("flatten_up_to", *pair, check_types=check_types)
    both("flatten_with_path_up_to", *pair, check_types=check_types)
    for path in (None, ()):
        both("_assert_shallow_structure", *pair, path=path, check_types=check_types)


def check_map_structure_up_to(pair: tuple[Spec, Spec], two_inputs: bool) -> None:
    shallow, deep = pair
    inputs = (deep, deep) if two_inputs else (deep,)
    for name in ("map_structure_up_to", "map_structure_with_path_up_to"):
        left, right = Recorder(), Recorder()
        expected = outcome(getattr(tree, name), build(shallow), left, *map(build, inputs))
        actual = outcome(getattr(dmtree, name), build(shallow), right, *map(build, inputs))
        assert_same_outcome(expected, actual)
        assert left.calls == right.calls


# --- The tests -------------------------------------------------------------------------


@given(specs(unsortable=True), st.booleans(), st.data())
def test_every_one_structure_function(spec: Spec, flag: bool, data: st.DataObject) -> None:
    """is_nested, flatten(_with_path), map_structure(_with_path), traverse(_with_path),
    unflatten_as and the private helpers, on one drawn structure."""
    check_is_nested_flatten_and_paths(spec)
    check_is_namedtuple_and_sorted_items(spec, strict=flag)
    check_map_structure_one_structure(spec)
    stop_at = data.draw(st.sampled_from([None, "list", "tuple", "dict", "int"]))
    check_traverse(spec, top_down=flag, stop_at=stop_at)
    check_unflatten_as(spec, data)
    check_sequence_like(spec, data)


@given(st.data(), st.booleans())
def test_every_two_structure_function(data: st.DataObject, check_types: bool) -> None:
    """assert_same_structure and map_structure(_with_path) on two drawn structures."""
    pair = data.draw(pairs(unsortable=data.draw(st.booleans())))
    check_assert_same_structure(pair, check_types)
    check_map_structure_two_structures(pair, check_types)


@given(shallow_pairs(), st.booleans(), st.booleans())
def test_every_up_to_function(pair: tuple[Spec, Spec], check_types: bool, two: bool) -> None:
    """flatten(_with_path)_up_to, map_structure(_with_path)_up_to, _assert_shallow_structure."""
    check_flatten_up_to(pair, check_types)
    check_map_structure_up_to(pair, two_inputs=two)


# --- Named cases -----------------------------------------------------------------------


def test_unsortable_keys_message_differs_between_c_and_python_paths() -> None:
    for name in ("flatten", "flatten_with_path", "map_structure_with_path"):
        extra = (lambda *a: a,) if name.startswith("map") else ()
        expected = outcome(getattr(tree, name), *extra, {1: 1, "a": 2})
        actual = outcome(getattr(dmtree, name), *extra, {1: 1, "a": 2})
        assert expected[0] == "raised"
        assert_same_outcome(expected, actual)


def test_c_library_internal_error_becomes_the_sort_error() -> None:
    """dm-tree raises SystemError here (a C bug); the twin raises the sort's TypeError."""
    expected = outcome(tree.assert_same_structure, {1: "x", "a": 2}, [1, 2], False)
    actual = outcome(dmtree.assert_same_structure, {1: "x", "a": 2}, [1, 2], False)
    assert expected[1] in (SystemError, AttributeError, TypeError)
    assert actual[1] is TypeError and "'<' not supported" in actual[2]


def test_map_structure_argument_errors() -> None:
    for args, kwargs in [
        ((1, [1]), {}),
        ((len,), {}),
        ((len, [1]), {"bogus": 1, "other": 2}),
        ((len, [1], [2]), {"check_types": False}),
    ]:
        assert_same_outcome(
            outcome(tree.map_structure, *args, **kwargs),
            outcome(dmtree.map_structure, *args, **kwargs),
        )
    assert_same_outcome(
        outcome(tree.map_structure_with_path, len), outcome(dmtree.map_structure_with_path, len)
    )


def test_check_types_is_deprecated_in_up_to(caplog: pytest.LogCaptureFixture) -> None:
    result = dmtree.map_structure_up_to([None], len, [[1, 2]], check_types=True)
    assert result == tree.map_structure_up_to([None], len, [[1, 2]], check_types=True) == [2]
    assert caplog.messages == [dmtree.CHECK_TYPES_DEPRECATED] * 2


def test_set_leaf_warns_once_on_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    dmtree._nodes._set_warning_issued = False
    assert dmtree.flatten([{1}, {2}]) == [{1}, {2}]
    assert capfd.readouterr().err == dmtree.SET_WARNING + "\n"
    assert dmtree.is_nested({3}) is False
    assert capfd.readouterr().err == ""


def test_self_reference_ends_with_recursion_error() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    for function in (
        dmtree.flatten,
        lambda s: dmtree.assert_same_structure(s, s),
        dmtree.flatten_with_path,
        lambda s: dmtree.map_structure(abs, s),
    ):
        with pytest.raises(RecursionError):
            function(loop)
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(RecursionError):
        dmtree.flatten(cycle)


def test_deep_nesting_beyond_the_c_recursion_limit() -> None:
    deep: Any = 0
    for _ in range(dmtree.MAX_DEPTH - 1):
        deep = [deep]
    # Python 3.13 gives C code its own recursion limit (about 10,000 levels): the C
    # library refuses this depth only before 3.13.
    if sys.version_info < (3, 13):
        with pytest.raises(RecursionError):
            tree.flatten(deep)
    assert dmtree.flatten(deep) == [0]
    mapped = dmtree.map_structure(lambda v: v + 1, deep)
    assert dmtree.flatten(mapped) == [1]
    dmtree.assert_same_structure(deep, mapped)
    dmtree.assert_same_structure(deep, deep)
    assert dmtree.flatten_with_path(deep)[0][1] == 0
