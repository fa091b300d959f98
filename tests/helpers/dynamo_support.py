"""What the installed torch's Dynamo can do, for tests that need it.

A test that needs a Dynamo feature some supported torch lacks is skipped there, with a
reason that names the feature: the package cannot trace what Dynamo itself cannot.
"""

from __future__ import annotations

import collections
import functools
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

__all__ = ["FEATURES", "TORCH", "dynamo_traces", "needs_dynamo", "needs_torch", "require_dynamo"]

#: The installed torch's (major, minor).
TORCH: tuple[int, int] = tuple(  # type: ignore[assignment]
    int(part)
    for part in re.match(r"(\d+)\.(\d+)", torch.__version__).groups()  # type: ignore[union-attr]
)


def needs_torch(minimum: tuple[int, int], what_dynamo_lacks: str) -> pytest.MarkDecorator:
    """Skips a test on torch older than ``minimum``, where Dynamo lacks a feature.

    >>> needs_torch((2, 0), "nothing").name
    'skipif'
    """
    return pytest.mark.skipif(
        TORCH < minimum,
        reason=f"torch {torch.__version__}: Dynamo {what_dynamo_lacks}",
    )


#: Dynamo features some supported torch lacks: a tiny use of each, and what it is.
FEATURES: dict[str, tuple[Callable[[torch.Tensor], Any], str]] = {
    "time.struct_time": (
        lambda x: time.struct_time(range(9)),
        "cannot construct a time.struct_time (a structseq) in the graph",
    ),
    "hash": (lambda x: hash((1, "a")), "cannot trace the builtin hash()"),
    "defaultdict.default_factory": (
        lambda x: (collections.defaultdict(list).default_factory, 1) != (list, 1),
        "cannot read a defaultdict's default_factory (optree's prefix_errors compares it)",
    ),
    "tuple.__repr__": (
        lambda x: tuple.__repr__((1, "a")),
        "cannot trace tuple.__repr__ (optree's accessors call it in their repr)",
    ),
}


@functools.cache
def dynamo_traces(feature: str) -> bool:
    """Whether this torch's Dynamo traces ``feature`` (a key of :data:`FEATURES`) in one
    graph, tried once.

    >>> dynamo_traces("tuple.__repr__") in (True, False)
    True
    """
    use, _ = FEATURES[feature]
    try:
        torch.compile(use, backend="eager", fullgraph=True)(torch.ones(1))
    except Exception:  # noqa: BLE001 - any failure: Dynamo does not trace it
        return False
    return True


def needs_dynamo(feature: str) -> pytest.MarkDecorator:
    """Skips a test where Dynamo cannot trace ``feature``, naming what it lacks.

    >>> needs_dynamo("hash").name
    'skipif'
    """
    return pytest.mark.skipif(
        not dynamo_traces(feature),
        reason=f"torch {torch.__version__}: Dynamo {FEATURES[feature][1]}",
    )


def require_dynamo(feature: str) -> None:
    """Skips the running test where Dynamo cannot trace ``feature``, naming what it lacks."""
    if not dynamo_traces(feature):
        pytest.skip(f"torch {torch.__version__}: Dynamo {FEATURES[feature][1]}")
