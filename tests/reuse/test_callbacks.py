"""Every callback as eager calls it: the differential property over every function of
dm-tree, optree, torch's pytree and ``keras.tree`` that calls a user's function.

Each call's callbacks (``tests/helpers/callbacks.py``) note what they are given. One
compiled function per call is called along a chain of structures (the first, a changed
one, one with custom nodes where the library has them, the first again), and on each the
result, the callbacks' log and the custom nodes' log are eager's: the same calls, in the
same order, with the same arguments. No callback runs for real while tracing.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import optree
import pytest
import torch
import torch.utils._pytree as pytree
import tree

import dynamo_tree_compat
from tests.helpers.callbacks import NODE_LOG, NS, STRAYS, Node, noted
from tests.helpers.compiling import compiled
from tests.helpers.dynamo_support import dynamo_traces
from tests.helpers.reuse import keras_tree
from tests.helpers.structures import assert_same_ending, outcome

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

Point = collections.namedtuple("Point", "x y")
Log = list[Any]
Call = Callable[[Any, Log], Any]


def _x(value: float = 1.0) -> torch.Tensor:
    return torch.full((2,), float(value))


def _plain() -> Any:
    return {"b": [_x(1), None, (_x(2),)], "a": Point(_x(3), _x(4))}


def _changed() -> Any:
    return {
        "a": Point(_x(3), _x(4)),
        "c": collections.OrderedDict(z=_x(5), a=[_x(6)]),
        "b": [_x(1)],
    }


def _custom() -> Any:
    return {"n": Node([_x(1), Node([_x(2)], "inner")], "outer"), "z": [_x(3), None]}


def _double(v: Any) -> Any:
    return v * 2 if isinstance(v, torch.Tensor) else v


def _add(u: Any, v: Any) -> Any:
    return u + v if isinstance(u, torch.Tensor) else u


def _is_point(v: Any) -> bool:
    return type(v) is Point


def _f(log: Log, name: str = "f", result: Callable[..., Any] = _double) -> Any:
    return noted(name, log, result)


def _last(*args: Any) -> Any:
    return _double(args[-1])


def _sum_last_two(*args: Any) -> Any:
    return _add(args[-2], args[-1])


_DMTREE: dict[str, Call] = {
    "map_structure": lambda s, log: tree.map_structure(_f(log), s),
    "map_structure of two": lambda s, log: tree.map_structure(_f(log, result=_add), s, s),
    "map_structure_with_path": lambda s, log: tree.map_structure_with_path(
        _f(log, result=_last), s
    ),
    "map_structure_up_to": lambda s, log: tree.map_structure_up_to(s, _f(log), s),
    "map_structure_with_path_up_to": lambda s, log: tree.map_structure_with_path_up_to(
        s, _f(log, result=_last), s
    ),
    "traverse": lambda s, log: tree.traverse(_f(log, result=lambda v: None), s),
    "traverse bottom-up": lambda s, log: tree.traverse(_f(log, result=lambda v: None), s, False),
    "traverse_with_path": lambda s, log: tree.traverse_with_path(
        _f(log, result=lambda p, v: None), s
    ),
}

_OPTREE: dict[str, Call] = {
    "tree_map": lambda s, log: optree.tree_map(_f(log), s, namespace=NS),
    "tree_map of two": lambda s, log: optree.tree_map(_f(log, result=_add), s, s, namespace=NS),
    "tree_map with is_leaf": lambda s, log: optree.tree_map(
        _f(log), s, is_leaf=_f(log, "is_leaf", _is_point), namespace=NS
    ),
    "tree_map_": lambda s, log: optree.tree_map_(_f(log, result=lambda v: None), s, namespace=NS),
    "tree_map_with_path": lambda s, log: optree.tree_map_with_path(
        _f(log, result=_last), s, namespace=NS
    ),
    "tree_map_with_path_": lambda s, log: optree.tree_map_with_path_(
        _f(log, result=lambda p, v: None), s, namespace=NS
    ),
    "tree_map_with_accessor": lambda s, log: optree.tree_map_with_accessor(
        _f(log, result=_last), s, namespace=NS
    ),
    "tree_broadcast_map": lambda s, log: optree.tree_broadcast_map(_f(log), s, namespace=NS),
    "tree_broadcast_map of two": lambda s, log: optree.tree_broadcast_map(
        _f(log, result=_add), s, s, namespace=NS
    ),
    "tree_broadcast_map_with_path": lambda s, log: optree.tree_broadcast_map_with_path(
        _f(log, result=_last), s, namespace=NS
    ),
    "tree_broadcast_map_with_accessor": lambda s, log: optree.tree_broadcast_map_with_accessor(
        _f(log, result=_last), s, namespace=NS
    ),
    "tree_transpose_map": lambda s, log: optree.tree_transpose_map(
        _f(log, result=lambda v: [v, v]), s, namespace=NS
    ),
    "tree_reduce": lambda s, log: optree.tree_reduce(
        _f(log, result=_add), optree.tree_leaves(s, namespace=NS)
    ),
    "tree_partition": lambda s, log: optree.tree_partition(
        _f(log, result=lambda v: isinstance(v, torch.Tensor)), s, namespace=NS
    ),
    "tree_flatten with is_leaf": lambda s, log: optree.tree_flatten(
        s, is_leaf=_f(log, "is_leaf", _is_point), namespace=NS
    ),
    "tree_leaves": lambda s, log: optree.tree_leaves(s, namespace=NS),
    "tree_unflatten": lambda s, log: optree.tree_unflatten(
        *reversed(optree.tree_flatten(s, namespace=NS))
    ),
    "tree_paths": lambda s, log: optree.tree_paths(s, namespace=NS),
    "tree_iter": lambda s, log: list(
        optree.tree_iter(s, is_leaf=_f(log, "is_leaf", _is_point), namespace=NS)
    ),
    "tree_replace_nones": lambda s, log: optree.tree_replace_nones(0, s, namespace=NS),
    "spec.flatten_up_to": lambda s, log: optree.tree_structure(s, namespace=NS).flatten_up_to(s),
    "spec.traverse": lambda s, log: optree.tree_structure(s, namespace=NS).traverse(
        optree.tree_leaves(s, namespace=NS), _f(log, "f_node", lambda n: n), _f(log, "f_leaf")
    ),
    "spec.traverse of leaves": lambda s, log: optree.tree_structure(s, namespace=NS).traverse(
        optree.tree_leaves(s, namespace=NS), None, _f(log, "f_leaf")
    ),
    "spec.walk": lambda s, log: optree.tree_structure(s, namespace=NS).walk(
        optree.tree_leaves(s, namespace=NS), None, _f(log, "f_leaf")
    ),
}

_PYTREE: dict[str, Call] = {
    "tree_map": lambda s, log: pytree.tree_map(_f(log), s),
    "tree_map of two": lambda s, log: pytree.tree_map(_f(log, result=_add), s, s),
    "tree_map with is_leaf": lambda s, log: pytree.tree_map(
        _f(log), s, is_leaf=_f(log, "is_leaf", _is_point)
    ),
    "tree_map_": lambda s, log: pytree.tree_map_(_f(log, result=lambda v: None), s),
    "tree_map_only": lambda s, log: pytree.tree_map_only(torch.Tensor, _f(log), s),
    "tree_map_with_path": lambda s, log: pytree.tree_map_with_path(_f(log, result=_last), s),
    "tree_flatten with is_leaf": lambda s, log: pytree.tree_flatten(
        s, is_leaf=_f(log, "is_leaf", _is_point)
    ),
    "tree_unflatten": lambda s, log: pytree.tree_unflatten(*pytree.tree_flatten(s)),
    "tree_all": lambda s, log: pytree.tree_all(_f(log, result=lambda v: True), s),
    "tree_any": lambda s, log: pytree.tree_any(_f(log, result=lambda v: False), s),
}


def _keras_calls() -> dict[str, Call]:
    kt = keras_tree()
    if kt is None:
        return {}
    return {
        "map_structure": lambda s, log: kt.map_structure(_f(log), s),
        "map_structure of two": lambda s, log: kt.map_structure(_f(log, result=_add), s, s),
        "map_structure_up_to": lambda s, log: kt.map_structure_up_to(
            {"k": 0, "j": 0}, _f(log, result=lambda v: v), {"k": s, "j": [s]}
        ),
        "traverse": lambda s, log: kt.traverse(_f(log, result=lambda v: None), s),
        "traverse bottom-up": lambda s, log: kt.traverse(
            _f(log, result=lambda v: None), s, top_down=False
        ),
        "map_shape_structure": lambda s, log: kt.map_shape_structure(_f(log), s),
    }


#: Each library's calls, and whether its structures include custom nodes.
CALLS: dict[str, tuple[dict[str, Call], bool]] = {
    "dm-tree": (_DMTREE, False),
    "optree": (_OPTREE, True),
    "torch pytree": (_PYTREE, True),
    "keras.tree": (_keras_calls(), False),
}
CASES = [
    pytest.param(library, name, id=f"{library}.{name}")
    for library, (calls, _) in CALLS.items()
    for name in calls
]


#: Calls that read a generator lazily, calling back between its items: where Dynamo runs
#: a generator to its end where first read, it calls back in another order, as it does
#: with no tree call (capability generators_run_to_the_end).
_LAZY = {("optree", "tree_iter"), ("torch pytree", "tree_all"), ("torch pytree", "tree_any")}


def _run(call: Call, structure: Any) -> tuple[Any, Log, Log]:
    """The call's outcome, its callbacks' log and the custom nodes' log."""
    log: Log = []
    NODE_LOG.clear()
    result = outcome(call, structure, log)
    return result, log, list(NODE_LOG)


@pytest.mark.parametrize(("library", "name"), CASES)
def test_callbacks_are_called_as_eager_calls_them(library: str, name: str) -> None:
    calls, custom = CALLS[library]
    call = calls[name]
    if (library, name) in _LAZY and not dynamo_traces("a generator read lazily"):
        pytest.skip("this Dynamo reads a generator to its end where first read (2.5, 2.6)")
    dynamo_tree_compat.install()
    # A break is no wrong answer here (other tests hold the graphs to one): a call that
    # runs eagerly after one calls back as eager does, and the rest is still traced.
    compiled_call = compiled(call, fullgraph=False)
    chain = [_plain, _changed, *([_custom] if custom else []), _plain]
    STRAYS.clear()
    for make in chain:
        expected, eager_log, eager_nodes = _run(call, make())
        actual, compiled_log, compiled_nodes = _run(compiled_call, make())
        where = f"{library}.{name} on {make.__name__}"
        assert_same_ending(expected, actual)
        assert compiled_log == eager_log, where
        assert compiled_nodes == eager_nodes, where
    assert STRAYS == [], f"called for real while tracing: {STRAYS}"


def test_a_one_shot_flatten_function_is_called_once_per_node() -> None:
    """optree's own case (``test_tree_broadcast_map_single_input_flattens_only_once``): a
    flatten function that fails when called twice, compiled in one graph."""
    calls = [0]

    class OneShot:
        def __init__(self, x: Any) -> None:
            self.x = x

    def flatten(node: OneShot) -> tuple[tuple[Any], None]:
        calls[0] += 1
        if calls[0] > 1:
            raise RuntimeError(f"flatten called {calls[0]} times")
        return (node.x,), None

    optree.register_pytree_node(OneShot, flatten, lambda _, kids: OneShot(*kids), namespace="once")
    try:
        for name in ("tree_broadcast_map", "tree_map"):
            mapped = getattr(optree, name)
            calls[0] = 0
            result = compiled(
                lambda x, mapped=mapped: mapped(lambda v: v + 1, OneShot(x), namespace="once")
            )(torch.ones(1))
            assert calls[0] == 1, name
            assert type(result) is OneShot and torch.equal(result.x, torch.full((1,), 2.0))
    finally:
        optree.unregister_pytree_node(OneShot, namespace="once")
