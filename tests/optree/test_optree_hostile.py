"""Hostile input to optree under torch.compile: each case ends as eager optree does.

Eagerly, optree runs its own C code (this package has no eager twin of it), so what is
compared is compiled against eager. Where a case traces, it is compiled with
``fullgraph=True``; where optree raises, or Dynamo cannot take the input, it is compiled
with ``fullgraph=False`` and must end in optree's own result or error.
"""

from __future__ import annotations

import collections
import random
import re
import threading
import warnings
from collections import abc
from collections.abc import Callable, Iterator
from typing import Any

import attr
import pytest
import torch

import dynamo_tree_compat
from tests.helpers.compiling import compiled
from tests.helpers.dynamo_support import (
    dynamo_traces,
    needs_dynamo,
    needs_torch,
    new_defaultdict,
)
from tests.helpers.structures import assert_same_ending, outcome

optree = pytest.importorskip("optree")

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
_DEQUE_MAXLEN = dynamo_traces("deque maxlen")


def assert_like_eager(function: Callable[..., Any], *args: Any, fullgraph: bool = True) -> None:
    """``function(*args)`` compiled ends as it does eagerly: the same value, or error."""
    expected = outcome(function, *args)
    assert_same_ending(expected, outcome(compiled(function, fullgraph=fullgraph), *args))


def _kinds(leaves: list[Any]) -> list[Any]:
    """Each leaf's type, and the tensors: the hostile objects cannot be compared."""
    return [(type(leaf), leaf if isinstance(leaf, torch.Tensor) else None) for leaf in leaves]


def _nested(depth: int, leaf: Any) -> Any:
    tree: Any = leaf
    for _ in range(depth):
        tree = [tree]
    return tree


@pytest.mark.parametrize("depth", [250, 900])
def test_nested_hundreds_of_levels_deep(depth: int) -> None:
    """Past this package's depth limit (200) the frame runs eagerly, in optree's code:
    a graph break there would have Dynamo's own code recurse through the structure, and
    Dynamo's own check of a frame for tensors does. (Torch alone fails here with an
    internal RecursionError, from 150 levels.)"""
    x = torch.ones(1)
    assert_like_eager(lambda t: optree.tree_leaves(t), _nested(depth, x), fullgraph=False)
    torch._dynamo.reset()
    assert_like_eager(optree.tree_leaves, _nested(depth, x), fullgraph=False)
    torch._dynamo.reset()
    assert_like_eager(lambda x: optree.tree_structure(_nested(depth, x)), x, fullgraph=False)


def test_nested_thousands_of_levels_deep() -> None:
    """optree stops at its own recursion limit with its RecursionError; so does the call
    compiled, word for word, whether the structure comes in or is built inside."""
    x = torch.ones(1)
    with pytest.raises(RecursionError, match="during flattening the tree"):
        optree.tree_leaves(_nested(3000, x))
    assert_like_eager(lambda t: optree.tree_leaves(t), _nested(3000, x), fullgraph=False)
    torch._dynamo.reset()
    assert_like_eager(lambda x: optree.tree_leaves(_nested(3000, x)), x, fullgraph=False)


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_self_referencing_structures_end_with_a_clear_error(kind: str) -> None:
    x = torch.ones(1)
    loop: Any = [x] if kind == "list" else {"x": x}
    if kind == "list":
        loop.append(loop)
    else:
        loop["self"] = loop
    for call in (optree.tree_leaves, optree.tree_structure, lambda t: optree.tree_map(abs, t)):
        torch._dynamo.reset()
        with pytest.raises(RecursionError, match="during flattening the tree"):
            call(loop)
        assert_like_eager(call, loop, fullgraph=False)


def test_half_a_million_leaves() -> None:
    """Built inside the graph (as an input, Dynamo would guard on each of its items)."""

    def body(x: torch.Tensor) -> Any:
        leaves, spec = optree.tree_flatten({"a": [x] * 250_000, "b": [x + 1] * 250_000})
        return len(leaves), spec.num_leaves, leaves[-1]

    assert_like_eager(body, torch.ones(1))


class _Key:
    """A dict key whose ``__lt__`` raises."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __lt__(self, other: Any) -> bool:
        raise ValueError(f"{self.name} cannot be ordered")

    def __repr__(self) -> str:
        return f"_Key({self.name!r})"


def test_unsortable_keys() -> None:
    """optree falls back to insertion order where keys do not sort; so does the graph."""
    assert_like_eager(lambda x: optree.tree_flatten({1: x, "a": x * 2, (2,): x * 3}), torch.ones(1))
    assert_like_eager(lambda x: optree.tree_flatten({None: x, 1: x * 2}), torch.ones(1))


def test_keys_whose_lt_raises() -> None:
    """Keys that are objects are not known while tracing: a graph break, then optree's
    own error."""
    keys = (_Key("b"), _Key("a"))
    built_inside = lambda x: optree.tree_leaves({keys[0]: x, keys[1]: x})  # noqa: E731
    # Where Dynamo cannot build such a dict at all, its own graph break comes first (2.9:
    # "unhashable"; 2.8: an exception it observed while hashing).
    reason = "not known while tracing" if dynamo_traces("object dict keys") else None
    with pytest.raises(torch._dynamo.exc.Unsupported, match=reason):
        compiled(built_inside)(torch.ones(1))
    torch._dynamo.reset()
    assert_like_eager(built_inside, torch.ones(1), fullgraph=False)
    torch._dynamo.reset()
    tree = {keys[0]: 1, keys[1]: torch.ones(1)}
    assert_like_eager(lambda t: optree.tree_leaves(t), tree, fullgraph=False)


class _GetitemRaises(abc.Mapping):
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __getitem__(self, key: str) -> Any:
        raise KeyError(f"no {key}")

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


class _IterRaises(_GetitemRaises):
    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("no iteration")


def test_mapping_whose_getitem_raises() -> None:
    """An unregistered Mapping is a leaf to optree: its methods are never called."""
    mapping = _GetitemRaises({"a": 1})
    assert_like_eager(lambda x: _kinds(optree.tree_leaves([mapping, x])), torch.ones(1))


def test_mapping_whose_iter_raises() -> None:
    mapping = _IterRaises({"a": 1})
    assert_like_eager(lambda t: _kinds(optree.tree_map(lambda v: v, t)), [mapping, torch.ones(1)])


class _Custom(collections.namedtuple("_Custom", "a b")):
    def __new__(cls, a: Any, b: Any = 0) -> _Custom:
        return super().__new__(cls, a, b)


@needs_dynamo("tuple subclass")
def test_namedtuple_with_custom_new() -> None:
    assert_like_eager(lambda x: optree.tree_map(lambda v: v + 1, _Custom(x, x)), torch.ones(1))


@attr.s
class _WithInitFalse:
    x: Any = attr.ib()
    y: Any = attr.ib(init=False, default=3)


def test_attrs_class_with_init_false_fields() -> None:
    """optree does not know attrs classes: a leaf."""
    assert_like_eager(lambda t: optree.tree_leaves(t), [_WithInitFalse(torch.ones(1))])


class _LiesAboutList:
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return list


def test_objects_whose_class_lies() -> None:
    """optree goes by the type: a leaf. (Dynamo alone takes it for a list and fails.)"""
    assert_like_eager(lambda t: _kinds(optree.tree_leaves(t)), [_LiesAboutList(), torch.ones(1)])
    assert_like_eager(lambda x: _kinds(optree.tree_leaves([_LiesAboutList(), x])), torch.ones(1))


class _MyTensor(torch.Tensor):
    pass


def test_tensor_subclasses_as_leaves() -> None:
    tree = {"p": torch.nn.Parameter(torch.ones(2)), "s": torch.ones(2).as_subclass(_MyTensor)}
    assert_like_eager(lambda t: optree.tree_leaves(t), tree)


@needs_dynamo("Tensor.as_subclass")
def test_tensor_subclasses_made_in_the_graph_as_leaves() -> None:
    def body(x: torch.Tensor) -> Any:
        return optree.tree_map(lambda t: t * 2, {"s": [x.as_subclass(_MyTensor), x]})

    assert_like_eager(body, torch.ones(2))


@pytest.mark.parametrize("none_is_leaf", [False, True])
def test_none_and_empty_containers_everywhere(none_is_leaf: bool) -> None:
    def body(x: torch.Tensor) -> Any:
        tree = [None, (), [], {}, {"a": None, "b": ((),)}, collections.OrderedDict(), (x, None)]
        if _DEQUE_MAXLEN:  # else Dynamo keeps no maxlen for a deque made in the graph
            tree.append(collections.deque())
        return (
            optree.tree_map(lambda v: v, tree, none_is_leaf=none_is_leaf),
            optree.tree_flatten(tree, none_is_leaf=none_is_leaf),
        )

    assert_like_eager(body, torch.ones(1))


@needs_dynamo("dict.items() view")
def test_keys_values_and_items_views() -> None:
    """Views are leaves to optree."""

    def body(x: torch.Tensor) -> Any:
        source = {"b": x, "a": x * 2}
        return optree.tree_leaves([source.keys(), source.values(), source.items()])

    assert_like_eager(body, torch.ones(1))


@pytest.mark.parametrize(
    "kind",
    [
        "dict",
        "OrderedDict",
        pytest.param("defaultdict", marks=needs_dynamo("defaultdict leaves the graph")),
    ],
)
@needs_dynamo("list subclass")
def test_dicts_with_keys_of_mixed_types_one_level(kind: str) -> None:
    """optree's own flatten functions for dicts sort keys of any types, falling back on a
    TypeError; Dynamo 2.10 and earlier let that TypeError escape their sort as an internal
    error, unless the package stands in for optree's sort."""

    def body(x: torch.Tensor) -> Any:
        pairs = [("b", x), (1, x + 1), ("a", x * 2), (0, None)]
        if kind == "defaultdict":
            tree = new_defaultdict(list, pairs)
        else:
            tree = dict(pairs) if kind == "dict" else collections.OrderedDict(pairs)
        # tuple() first: Dynamo 2.8 fails slicing the namedtuple itself (an internal error).
        one_level = tuple(optree.tree_flatten_one_level(tree, none_is_leaf=True))
        return one_level[:3], optree.tree_flatten_with_path(tree), optree.tree_leaves(tree)

    assert_like_eager(body, torch.ones(1))


def test_keys_that_are_no_constants_break_the_graph_where_sorting_them_would_fail() -> None:
    """Where Dynamo's sort lets a comparison's TypeError escape, the package orders keys
    by folding the sort on constants; other keys end the graph, naming why."""
    from dynamo_tree_compat import _dynamo, installer
    from dynamo_tree_compat.twins import optree as optree_twins

    if _dynamo.has(_dynamo.Capability.SORT_RAISES_CLEANLY):
        pytest.skip(f"torch {torch.__version__}: Dynamo's own sort raises the TypeError cleanly")
    stood_in = [helper for helper, _ in installer.PROGRESS.optree_helpers]
    # optree's sort of a dict's items (for tree_flatten_one_level) passes a key function
    # Dynamo 2.5 cannot call, an operator.itemgetter: it has its stand-in too.
    sorts_items = getattr(optree.registry, "_sorted_items", None)
    assert stood_in == [
        optree_twins.total_order,
        optree.utils.total_order_sorted,
        *([sorts_items] if sorts_items else []),
    ]
    x = torch.ones(1)
    assert compiled(lambda x: optree_twins.total_order(["b", 1, "a"]))(x) == [1, 2, 0]
    with pytest.raises(torch._dynamo.exc.Unsupported, match="does not sort these dict keys"):
        compiled(lambda x: optree_twins.total_order([x, x]))(x)
    if sorts_items:
        assert_like_eager(lambda x: sorts_items({"b": x, 1: 2 * x, "a": 3 * x}.items()), x)


class _Box(torch.nn.Module):
    """A node whose flatten function breaks the graph: optree's frame resumes after it.
    (A module: Dynamo traces a frame that holds one, as it does one that holds a tensor.)"""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


class _OtherBox(_Box):
    pass


def _breaking_flatten(tag: str) -> Callable[[_Box], Any]:
    def flatten(box: _Box) -> Any:
        torch._dynamo.graph_break()
        return [box.value], tag

    return flatten


def test_a_registry_entry_held_across_a_break_is_guarded_by_what_is_read() -> None:
    """optree's ``tree_flatten_one_level`` holds the class's registry entry while the
    flatten function breaks the graph; the frame that resumes reads the entry's fields.
    Dynamo 2.5 on Python 3.10 fails on any guard on the entry itself (an internal error):
    the package guards its class and each field read. Another class, and the same class
    registered again, resume at the same place with another entry: each gets its own
    answer."""
    namespace = "dtc-entry"

    def register(cls: type, tag: str) -> None:
        optree.register_pytree_node(
            cls,
            _breaking_flatten(tag),
            lambda meta, children, tag=tag: (tag, meta, children),
            namespace=namespace,
        )

    def call(box: _Box) -> Any:
        children, meta, entries, unflatten = optree.tree_flatten_one_level(box, namespace=namespace)
        return children, meta, entries, unflatten(meta, children)

    compiled_call = torch.compile(call, backend="eager")
    register(_Box, "box")
    register(_OtherBox, "other")
    try:
        for cls, again in ((_Box, None), (_OtherBox, None), (_Box, "box again")):
            if again is not None:
                optree.unregister_pytree_node(cls, namespace=namespace)
                register(cls, again)
            box = cls(torch.ones(2))
            assert_same_ending(outcome(call, box), outcome(compiled_call, box))
    finally:
        for cls in (_Box, _OtherBox):
            optree.unregister_pytree_node(cls, namespace=namespace)


def _lazily_read(tree: Any, seen: list[Any]) -> list[Any]:
    """optree's iterator read one leaf, the tree changed, then read to the end."""

    def is_leaf(node: Any) -> bool:
        seen.append(type(node).__name__)
        return False

    leaves = optree.tree_iter(tree, is_leaf)
    first = next(leaves)
    tree["b"]["d"] = first * 3  # a node not yet read: optree's iterator sees it
    tree["a2"] = first  # the root's keys were read already: it does not
    return [first, *(leaf + 1 for leaf in leaves)]


@needs_dynamo("a generator read lazily")
def test_tree_iter_reads_lazily_in_the_graph_as_optree_does() -> None:
    """Compiled, ``tree_iter`` expands each node when ``next()`` reaches it, as optree's
    iterator does: the leaves, and ``is_leaf``'s calls in their order, are eager's."""

    def tree() -> dict[str, Any]:
        return {"a": torch.ones(1), "b": {"c": torch.full((1,), 2.0)}}

    eager_seen: list[Any] = []
    expected = _lazily_read(tree(), eager_seen)
    compiled_seen: list[Any] = []
    actual = compiled(_lazily_read)(tree(), compiled_seen)
    torch.testing.assert_close(actual, expected)
    assert compiled_seen == eager_seen


def test_a_tree_iter_that_leaves_the_graph_is_optrees_own() -> None:
    """An iterator returned from compiled code is optree's (weakly referable, lazy), not a
    look-alike built while tracing: the graph ends at the call, which runs optree's."""
    import weakref

    def leaves_and_double(tree: Any, x: torch.Tensor) -> Any:
        return optree.tree_iter(tree), x * 2

    tree = {"a": 1, "b": {"c": 2}}
    leaves, _ = compiled(leaves_and_double, fullgraph=False)(tree, torch.ones(1))
    assert type(leaves) is type(optree.tree_iter([]))
    weakref.ref(leaves)
    assert next(leaves) == 1
    tree["b"]["d"] = 3
    assert list(leaves) == [2, 3]


@needs_dynamo("a generator read lazily")
def test_a_tree_iter_returned_alone_is_optrees_own_or_no_graph() -> None:
    """Returned alone, Dynamo would read the twin's generator whole into a tuple_iterator
    (as it does any generator a compiled function returns): the frame runs eagerly
    instead, and with fullgraph=True that is the graph break it reports."""
    import weakref

    def leaves(tree: Any) -> Any:
        return optree.tree_iter(tree)

    tree = {"a": 1, "b": {"c": 2}}
    iterator = compiled(leaves, fullgraph=False)(tree)
    assert type(iterator) is type(optree.tree_iter([]))
    weakref.ref(iterator)
    assert next(iterator) == 1
    tree["b"]["d"] = 3
    assert list(iterator) == [2, 3]

    def tensor_leaves(tree: Any) -> Any:
        return optree.tree_iter(tree)

    with pytest.raises(torch._dynamo.exc.Unsupported, match="generator leaves the graph"):
        compiled(tensor_leaves)({"a": torch.ones(1)})


@needs_torch((2, 6), "has no guard on a call: the order beneath an OrderedDict is unguarded")
def test_an_ordereddict_reordered_in_place_is_read_as_optree_reads_it() -> None:
    """optree's C code reads the dict beneath an OrderedDict, whose order
    ``move_to_end`` leaves as it was: compiled, the leaves, the spec and the map's keys
    come in that order too, on the first call and on a graph reused."""

    def moved() -> collections.OrderedDict[str, Any]:
        made = collections.OrderedDict(a=torch.ones(1), b=torch.full((1,), 2.0))
        made.move_to_end("a")
        return made

    def read(tree: Any) -> Any:
        return (
            optree.tree_leaves(tree),
            optree.tree_structure(tree),
            list(optree.tree_map(lambda leaf: leaf + 1, tree)),
            [leaf * 2 for leaf in optree.tree_iter(tree)],
        )

    assert list(moved()) == ["b", "a"]
    compiled_read = compiled(read)
    for tree in (moved(), collections.OrderedDict(b=torch.ones(1), a=torch.ones(1)), moved()):
        assert_same_ending(outcome(read, tree), outcome(compiled_read, tree))


_LOCK = threading.Lock()


def _enters_a_lock(x: torch.Tensor) -> Any:
    with _LOCK:  # what optree's register_pytree_node and unregister_pytree_node do
        return x + 1


def _makes_an_optree_partial(x: torch.Tensor) -> Any:
    return optree.functools.partial(max, x)


class _RankedKey:
    """A dict key of the user's: it sorts, by its own ``__lt__``."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __lt__(self, other: _RankedKey) -> bool:
        return self.rank < other.rank

    def __hash__(self) -> int:
        return self.rank


#: What the optree calls that still break the graph do, in code with no tree call:
#: (program, its arguments, a word each release's explanation holds, or None).
_DYNAMOS_OWN_LIMITS: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]], Any]] = {
    # optree's register_pytree_node and unregister_pytree_node
    "registry lock": (_enters_a_lock, lambda: (torch.ones(1),), "lock"),
    "optree partial": (
        _makes_an_optree_partial,
        lambda: (torch.ones(1),),
        "optree.functools.partial",
    ),
    # treespec_ordereddict given a zip of keys and specs
    "a zip passed in": (
        lambda pairs, x: ([pair for pair in pairs], x + 1),
        lambda: (zip("ab", "cd"), torch.ones(1)),
        None,
    ),
    # tree_transpose and treespec_transform over a custom node whose flatten returns a zip
    "hasattr of a zip": (
        lambda x: (hasattr(zip([x], [x]), "keys"), x + 1),
        lambda: (torch.ones(1),),
        None,
    ),
    # tree_sum over bytes and bytearrays: optree's sum starts from an empty one
    "joining bytes": (lambda x: (b"".join([b"a", b"b"]), x + 1), lambda: (torch.ones(1),), None),
    "an empty bytearray": (lambda x: (bytearray(), x + 1), lambda: (torch.ones(1),), None),
    # tree_flatten_one_level over a dict whose keys are the user's objects: optree sorts
    "sorting the user's keys": (
        lambda table, x: (sorted(table), x + 1),
        lambda: ({_RankedKey(2): 0, _RankedKey(1): 0}, torch.ones(1)),
        None,
    ),
    # optree's own tests whose mapped function draws at random
    "random.choice": (
        lambda x: (random.choice([1, 2]), x + 1),
        lambda: (torch.ones(1),),
        None,
    ),
}


@pytest.mark.parametrize("limit", sorted(_DYNAMOS_OWN_LIMITS))
def test_dynamos_own_limits_the_package_leaves_are_limits_with_no_tree_call(limit: str) -> None:
    """The optree calls that still break the graph where eager returns do what Dynamo
    cannot do in code with no tree call, with or without the package (docs/coverage.md):
    enter the registry's lock (registering, unregistering), build an optree partial,
    iterate a zip passed in or ask it for an attribute, join bytes or make a bytearray,
    sort keys of the user's, draw at random."""
    program, arguments, explanation = _DYNAMOS_OWN_LIMITS[limit]
    for scope in (dynamo_tree_compat.disabled(), dynamo_tree_compat.enabled()):
        torch._dynamo.reset()
        match = None if explanation is None else re.escape(explanation)
        with scope, pytest.raises(torch._dynamo.exc.Unsupported, match=match):
            torch.compile(program, backend="eager", fullgraph=True)(*arguments())


def test_tree_sum_whose_addition_raises_raises_the_users_error() -> None:
    """Dynamo's ``sum`` over values known while tracing fails inside Dynamo where an
    addition raises (an internal error, with no tree call too); ``optree.tree_sum`` ends
    as eagerly: optree's TypeError, after a graph break."""

    def total(tree: Any) -> Any:
        return optree.tree_sum(tree, none_is_leaf=True)

    tree = {"x": 1, "y": (2, None)}
    assert_same_ending(outcome(total, tree), outcome(compiled(total, fullgraph=False), tree))
    # The user's error in traced code, in each release's words (torch 2.5: constant fold).
    raised = "Observed exception|constant fold exception: TypeError"
    with pytest.raises(torch._dynamo.exc.Unsupported, match=raised):
        compiled(lambda t: optree.tree_sum(t, none_is_leaf=True))(tree)


def test_a_constant_that_holds_a_symbolic_int_is_no_constant() -> None:
    """A container variable that says it is a constant can hold an int Dynamo made
    symbolic (automatic dynamic: seen changing); reading it is then no constant (a graph
    break, the call eager), never an error of the package's (a step aside)."""
    from dynamo_tree_compat._dynamo.common.reading import NOT_CONSTANT, constant_or

    class HoldsASymbol:
        def is_python_constant(self) -> bool:
            return True

        def as_python_constant(self) -> Any:
            # Dynamo's AsPythonConstantNotImplementedError, a NotImplementedError
            raise NotImplementedError("SymNodeVariable() is not a constant")

    assert constant_or(HoldsASymbol()) is NOT_CONSTANT


def test_an_int_dynamo_made_symbolic_is_read_as_its_value() -> None:
    """An int seen changing between calls becomes symbolic (Dynamo's automatic dynamic): a
    spec method given one reads its value, guarded, in one graph per value, as Dynamo
    reads an int that Python code needs whole."""
    spec = optree.tree_structure([0, (0, 0), [0]])

    def child(index: int, x: torch.Tensor) -> Any:
        return optree.treespec_child(spec, index), optree.treespec_entry(spec, index), x + 1

    compiled_child = compiled(child)
    for index in (0, 1, 2, 1, -1):
        assert_same_ending(
            outcome(child, index, torch.ones(1)), outcome(compiled_child, index, torch.ones(1))
        )


def test_metadata_that_holds_an_int_seen_changing_is_read_as_its_value() -> None:
    """A custom node's metadata, a list holding an int that Dynamo made symbolic: read
    item by item, each int's value guarded, in one graph per value."""

    class Sized:
        def __init__(self, value: Any, size: int) -> None:
            self.value, self.size = value, size

    optree.register_pytree_node(
        Sized,
        lambda s: ((s.value,), [s.size]),
        lambda meta, kids: Sized(kids[0], *meta),
        namespace="sized",
    )
    try:

        def leaves_and_spec(size: int, x: torch.Tensor) -> Any:
            return optree.tree_flatten(Sized(x, size), namespace="sized")

        compiled_call = compiled(leaves_and_spec)
        for size in (1, 2, 3, 2):
            assert_same_ending(
                outcome(leaves_and_spec, size, torch.ones(1)),
                outcome(compiled_call, size, torch.ones(1)),
            )
    finally:
        optree.unregister_pytree_node(Sized, namespace="sized")


def test_a_transform_optree_rejects_raises_optrees_error() -> None:
    """A transform whose callback changes a node's arity: optree's ValueError, after a
    graph break, never a fault of the package's."""
    from dynamo_tree_compat._dynamo import Event, counted

    spec = optree.tree_structure([0, 0])

    def transformed(x: torch.Tensor) -> Any:
        return spec.transform(lambda s: optree.treespec_list([s]), None), x + 1

    assert_same_ending(
        outcome(transformed, torch.ones(1)),
        outcome(compiled(transformed, fullgraph=False), torch.ones(1)),
    )
    assert not counted(Event.STEPPED_ASIDE)


def test_a_leaf_given_as_a_collection_makes_a_leafs_spec_in_one_graph() -> None:
    """``treespec_from_collection`` of a leaf (a number, a string, bytes): optree makes a
    leaf's spec, with a warning; compiled, in one graph, one call after another with
    another leaf or a collection in its place (the warning comes once, as it is made)."""

    def spec_of(collection: Any, x: torch.Tensor) -> Any:
        return optree.treespec_from_collection(collection), x + 1

    compiled_spec_of = compiled(spec_of)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for collection in (1, "abc", b"x", 2.5, None, 7, (optree.treespec_leaf(),)):
            expected = outcome(spec_of, collection, torch.ones(1))
            assert_same_ending(expected, outcome(compiled_spec_of, collection, torch.ones(1)))
        # A tuple of leaves, no specs: optree's own error, eagerly.
        expected = outcome(spec_of, ("a", 1), torch.ones(1))
        assert expected[0] == "raised"
        actual = outcome(compiled(spec_of, fullgraph=False), ("a", 1), torch.ones(1))
        assert_same_ending(expected, actual)
