"""``iter()`` of a number (``_dynamo/seam/constants.py``): eager's TypeError, never
Dynamo 2.5's ``InternalTorchDynamoError``, for bad input such as a library's check of
its arguments meets."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dynamo_tree_compat
from tests.helpers.compiling import compiled

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.fixture(autouse=True)
def installed() -> None:
    dynamo_tree_compat.install()


def _enumerate_a_number(x: torch.Tensor) -> list[object]:
    return [*enumerate(5), x + 1]  # type: ignore[call-overload]


def _outcome(function: Any, package: bool) -> tuple[str, str]:
    """The exception type and first line that ``function`` compiled raises."""
    torch._dynamo.reset()
    scope = dynamo_tree_compat.enabled() if package else dynamo_tree_compat.disabled()
    with scope, pytest.raises(Exception) as raised:
        compiled(function, fullgraph=False)(torch.ones(1))
    return type(raised.value).__name__, str(raised.value).splitlines()[0]


def test_a_number_iterated_in_user_code_is_left_to_dynamo() -> None:
    """Code that is no tree function's traces as without the package: Dynamo's own
    answer (eager's TypeError on 2.13; Dynamo 2.5's InternalTorchDynamoError)."""
    with pytest.raises(TypeError, match="'int' object is not iterable"):
        _enumerate_a_number(torch.ones(1))
    assert _outcome(_enumerate_a_number, True) == _outcome(_enumerate_a_number, False)


def test_a_tree_function_iterating_a_number_raises_eagers_type_error() -> None:
    """Keras's ``pack_sequence_as`` over a number of leaves iterates it (Keras 3.12 on;
    before, optree's own check answers): eager's TypeError on every release (where Dynamo
    2.5 would fail inside on ``iter()``, the call runs in Python; on 2.5 torch's pytree
    meets ``list(5)``, where Dynamo breaks the graph)."""
    keras = pytest.importorskip("keras")

    def pack(x: torch.Tensor) -> list[object]:
        return [keras.tree.pack_sequence_as([1, 2], 5), x + 1]

    with pytest.raises(TypeError) as eager:
        pack(torch.ones(1))
    assert _outcome(pack, True) == ("TypeError", str(eager.value).splitlines()[0])


def test_iterating_a_string_stays_in_the_graph() -> None:
    def letters(x: torch.Tensor) -> torch.Tensor:
        return x + len(list(iter("abc")))

    assert float(compiled(letters)(torch.ones(1))) == 4.0
