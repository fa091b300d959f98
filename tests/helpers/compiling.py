"""What the fast-path test modules share: compiling, the counts (a fresh Dynamo per test:
``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dynamo_tree_compat import _dynamo
from tests.helpers.dynamo_support import dynamo_traces, with_a_graph_op


def compiled(function: Callable[..., Any], fullgraph: bool = True) -> Callable[..., Any]:
    """``function`` compiled with the eager backend, traced as one frame on every Dynamo.

    A Dynamo that skips a frame with no graph ops (2.6) gets one beside the call, so it
    traces what the test means, not the frames inside it alone.
    """
    if fullgraph and not dynamo_traces("a frame with no graph ops"):
        return torch.compile(with_a_graph_op(function), fullgraph=True, backend="eager")
    return torch.compile(function, fullgraph=fullgraph, backend="eager")


def stats(event: Any) -> set[str]:
    """The calls counted for ``event`` (``_dynamo.Event.TAKEN``, ``FALLBACK``, ``CYCLE``)."""
    return set(_dynamo.counted(event))
