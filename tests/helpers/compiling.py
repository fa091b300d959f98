"""What the fast-path test modules share: a fresh Dynamo per test, compiling, the counts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from dynamo_tree_compat import _dynamo


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    """Each test starts and ends with no compiled code and no fast-path counts."""
    torch._dynamo.reset()
    _dynamo.STATS.clear()
    yield
    torch._dynamo.reset()


def compiled(function: Callable[..., Any], fullgraph: bool = True) -> Callable[..., Any]:
    return torch.compile(function, fullgraph=fullgraph, backend="eager")


def stats(prefix: str) -> set[str]:
    """The calls counted under ``prefix`` ("taken:", "fallback:", "cycle:")."""
    counted = _dynamo.STATS
    return {key.removeprefix(prefix) for key in counted if key.startswith(prefix)}
