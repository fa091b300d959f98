"""Generated optree pytrees: every container kind optree knows, custom nodes, options.

A tree is drawn as a spec, ``(kind, payload)``, and built fresh for each run, with
tensors or plain numbers as leaves, so that eager and compiled runs never share objects.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import optree
import torch
from hypothesis import strategies as st

from tests.helpers import leaves as rllib_leaves
from tests.helpers.dynamo_support import drawn_kinds, new_defaultdict
from tests.helpers.optree_calls import NS, Box, Cfg, Pair, Point

Spec = tuple[str, Any]
#: Node kinds, with how many children each takes (None: any number).
NODE_KINDS: dict[str, int | None] = {
    "list": None,
    "tuple": None,
    "dict": None,
    "ordereddict": None,
    "defaultdict": None,
    "deque": None,
    "namedtuple": 2,
    "structseq": 2,
    "pair": 2,
    "box": None,
    "cfg": 2,
}
_KEYED = ("dict", "ordereddict", "defaultdict")
#: What optree's kinds need of Dynamo besides: its deques keep their maxlen, and its
#: structseqs are made in the graph.
_OPTREE_NEEDS = {
    "deque": ("deque maxlen",),
    "structseq": ("structseq made in the graph",),
}
#: The kinds drawn for the graph: those Dynamo itself gets right there (``drawn_kinds``).
_COMPILED_KINDS = drawn_kinds(sorted(NODE_KINDS), library_needs=_OPTREE_NEEDS)
_keys = st.one_of(st.sampled_from(["a", "b", "c", "zz", ""]), st.integers(-2, 3))


def _leaves() -> st.SearchStrategy[Spec]:
    return st.one_of(
        st.integers(-3, 9).map(lambda v: ("tensor", v)),
        st.integers(-3, 9).map(lambda v: ("int", v)),
        st.sampled_from(["s", ""]).map(lambda v: ("str", v)),
        st.just(("none", None)),
        rllib_leaves.strategy(),
    )


@st.composite
def _node(draw: Any, children: st.SearchStrategy[Spec], compiled: bool) -> Spec:
    kinds = sorted(NODE_KINDS)
    kind = draw(st.sampled_from(_COMPILED_KINDS if compiled else kinds))
    arity = NODE_KINDS[kind]
    if arity is None:
        items = draw(st.lists(children, max_size=4))
    else:
        items = draw(st.lists(children, min_size=arity, max_size=arity))
    if kind in _KEYED:  # mixed str and int keys: optree sorts them its own way
        keys = draw(st.lists(_keys, min_size=len(items), max_size=len(items), unique=True))
        return (kind, tuple(zip(keys, items)))
    if kind == "deque":
        return (kind, (draw(st.sampled_from([None, len(items), len(items) + 2])), tuple(items)))
    return (kind, tuple(items))


def trees(max_leaves: int = 10, compiled: bool = False) -> st.SearchStrategy[Spec]:
    """Specs of optree pytrees mixing every node kind; ``compiled``: those this Dynamo
    itself gets right made in the graph (see ``drawn_kinds``)."""
    return st.recursive(
        _leaves(), lambda children: _node(children, compiled), max_leaves=max_leaves
    )


#: is_leaf callbacks the tests draw from, by name.
IS_LEAF: dict[str, Callable[[Any], bool] | None] = {
    "none": None,
    "tuples": lambda node: type(node) is tuple,
    "pairs": lambda node: isinstance(node, Pair),
    "empty lists": lambda node: isinstance(node, list) and not node,
}


@st.composite
def options(draw: Any) -> dict[str, Any]:
    """optree's keyword options: none_is_leaf, namespace and is_leaf."""
    return {
        "none_is_leaf": draw(st.booleans()),
        "namespace": draw(st.sampled_from([NS, ""])),
        "is_leaf": IS_LEAF[draw(st.sampled_from(sorted(IS_LEAF)))],
    }


def build(spec: Spec, tensors: bool = True) -> Any:
    """A fresh tree for ``spec``; ``tensors=False`` gives plain numbers instead."""
    kind, payload = spec
    if kind == "tensor":
        return torch.full((2,), float(payload)) if tensors else payload
    if kind in ("int", "str", "none"):
        return payload
    if kind in rllib_leaves.KINDS:
        return rllib_leaves.make(kind, payload)
    if kind in _KEYED:
        pairs = [(key, build(child, tensors)) for key, child in payload]
        if kind == "dict":
            return dict(pairs)
        if kind == "ordereddict":
            return collections.OrderedDict(pairs)
        return new_defaultdict(list, pairs)
    if kind == "deque":
        maxlen, items = payload
        return collections.deque([build(child, tensors) for child in items], maxlen=maxlen)
    items = [build(child, tensors) for child in payload]
    if kind == "list":
        return items
    if kind == "tuple":
        return tuple(items)
    if kind == "namedtuple":
        return Point(*items)
    if kind == "structseq":
        return torch.return_types.max(items)
    if kind == "pair":
        return Pair(*items)
    if kind == "box":
        return Box(items, "tag")
    if kind == "cfg":
        return Cfg(*items)
    raise AssertionError(kind)


def spec_of(spec: Spec, **kwargs: Any) -> Any:
    """optree's own tree spec of the built tree."""
    return optree.tree_structure(build(spec, tensors=False), **kwargs)


@st.composite
def prefix_of(draw: Any, spec: Spec) -> Spec:
    """``spec`` with some subtrees cut to a leaf: a tree prefix, so broadcasting succeeds."""
    kind, payload = spec
    if kind not in NODE_KINDS or draw(st.integers(0, 3)) == 0:
        return ("tensor", draw(st.integers(-3, 9)))
    if kind in _KEYED:
        return (kind, tuple((key, draw(prefix_of(child))) for key, child in payload))
    if kind == "deque":
        maxlen, items = payload
        return (kind, (maxlen, tuple(draw(prefix_of(child)) for child in items)))
    return (kind, tuple(draw(prefix_of(child)) for child in payload))
