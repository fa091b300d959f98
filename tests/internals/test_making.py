"""What the fast paths make, and what they skip making.

``_dynamo/making.py`` makes Dynamo's container variables as copies of one its
constructor made: a copy must be what the constructor would give, fields and all, with
a mark of its own. A path or accessor the mapped function never reads (it only returns
another argument or a constant) is not made: a function that does read it, even one
that only returns it, gets the real one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
import tree

from dynamo_tree_compat._dynamo.runtime import Event
from dynamo_tree_compat._dynamo.seam import internals, making
from tests.helpers.compiling import compiled, stats
from tests.helpers.dynamo_support import needs_dynamo
from tests.helpers.structures import assert_identical

optree = pytest.importorskip("optree")

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _constructed(kind: str, items: Any) -> Any:
    k = internals.kinds()
    mark = {k.new_keyword: k.new()}
    if kind == "tuple":
        return k.Tuple(items)
    if kind == "list":
        return k.List(items, **mark)
    extra = {"user_cls": dict} if k.dict_takes_user_cls else {}
    return k.Dict(items, **extra, **mark)


MADE: dict[str, Callable[[Any], Any]] = {
    "tuple": making.new_tuple,
    "list": making.new_list,
    "dict": making.new_dict,
}


@pytest.mark.parametrize("kind", sorted(MADE))
def test_a_made_container_is_what_the_constructor_gives(kind: str) -> None:
    items: Any = {} if kind == "dict" else [making.constant(1), making.constant("a")]
    made, again, expected = MADE[kind](items), MADE[kind](items), _constructed(kind, items)
    assert type(made) is type(expected)
    assert vars(made).keys() == vars(expected).keys()
    marker = internals.kinds().new_keyword
    for name, value in vars(expected).items():
        if name == marker and value is not None:  # a mark of its own, of the same kind
            assert type(vars(made)[name]) is type(value)
            assert vars(made)[name] is not vars(again)[name]
        else:
            assert vars(made)[name] == value, name
    assert vars(made)["items"] is not vars(again)["items"] or not items


def _sin(path: Any, value: torch.Tensor) -> torch.Tensor:
    return value.sin()


#: name -> a call over the structure with a function of (path or accessor, value).
CALLS: dict[str, Callable[[Callable[..., Any], Any], Any]] = {
    "tree.map_structure_with_path": tree.map_structure_with_path,
    "tree.traverse_with_path": lambda f, s: tree.traverse_with_path(
        lambda p, v: f(p, v) if isinstance(v, torch.Tensor) else None, s
    ),
    "optree.tree_map_with_path": optree.tree_map_with_path,
    "torch.utils._pytree.tree_map_with_path": pytree.tree_map_with_path,
}
#: Functions of (path, value): one that returns its path, trivial as it is, reads it.
FUNCS: dict[str, Callable[[Any, Any], Any]] = {
    "returns the path": lambda p, v: p,
    "returns the value": lambda p, v: v,
    "returns a constant": lambda p, v: 3,
    "computes": _sin,
}


@pytest.mark.parametrize("func", sorted(FUNCS))
@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_path_is_made_where_the_function_reads_it(call: str, func: str) -> None:
    def body(x: torch.Tensor) -> Any:
        structure = {"b": [x, (x + 1, x * 2)], "a": {"z": x - 1}}
        return CALLS[call](FUNCS[func], structure)

    x = torch.arange(3.0)
    assert_identical(body(x), compiled(body)(x))
    assert not stats(Event.FALLBACK)


@needs_dynamo("tuple subclass")  # the accessor returned: Dynamo reads optree's class
def test_an_accessor_is_a_placeholder_only_where_never_read() -> None:
    def body(x: torch.Tensor) -> Any:
        structure = {"b": [x, (x + 1, x * 2)], "a": {"z": x - 1}}
        unread = optree.tree_map_with_accessor(lambda a, v: v, structure)
        read = optree.tree_map_with_accessor(lambda a, v: a, structure)
        return unread, [type(a).__name__ for a in optree.tree_leaves(read)]

    x = torch.arange(3.0)
    assert_identical(body(x), compiled(body)(x))
    assert "optree.tree_map_with_accessor" in stats(Event.TAKEN)
