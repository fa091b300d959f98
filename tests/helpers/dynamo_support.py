"""What the installed torch's Dynamo can do, for tests that need it.

A test that needs a Dynamo feature some supported torch lacks is skipped there, with a
reason that names the feature: the package cannot trace what Dynamo itself cannot.
"""

from __future__ import annotations

import re

import pytest
import torch

__all__ = ["TORCH", "needs_torch"]

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
