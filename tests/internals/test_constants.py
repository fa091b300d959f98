"""``iter()`` of a number (``_dynamo/seam/constants.py``): eager's TypeError, never
Dynamo 2.5's ``InternalTorchDynamoError``, for bad input such as a library's check of
its arguments meets."""

from __future__ import annotations

import pytest
import torch

import dynamo_tree_compat
from dynamo_tree_compat import _dynamo
from tests.helpers.compiling import compiled, fresh_dynamo  # noqa: F401


@pytest.fixture(autouse=True)
def installed() -> None:
    dynamo_tree_compat.install()


def _enumerate_a_number(x: torch.Tensor) -> list[object]:
    return [*enumerate(5), x + 1]  # type: ignore[call-overload]


def test_enumerating_a_number_raises_eagers_type_error() -> None:
    with pytest.raises(TypeError, match="'int' object is not iterable"):
        _enumerate_a_number(torch.ones(1))
    with pytest.raises(TypeError, match="'int' object is not iterable"):
        compiled(_enumerate_a_number, fullgraph=False)(torch.ones(1))


def test_a_caught_type_error_stays_in_the_graph_where_dynamo_raises_it() -> None:
    def caught(x: torch.Tensor) -> torch.Tensor:
        try:
            iter(5)  # type: ignore[call-overload]
        except TypeError:
            return x + 1
        return x

    fullgraph = _dynamo.capability("iter_of_a_number_raises")
    assert float(compiled(caught, fullgraph=fullgraph)(torch.ones(1))) == 2.0


def test_iterating_a_string_stays_in_the_graph() -> None:
    def letters(x: torch.Tensor) -> torch.Tensor:
        return x + len(list(iter("abc")))

    assert float(compiled(letters)(torch.ones(1))) == 4.0
