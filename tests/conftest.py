"""Hypothesis profiles: a quick one for CI (the default) and a long one behind DTC_FUZZ=long;
the long-running tests first."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    derandomize=True,
)
settings.register_profile(
    "long",
    max_examples=100_000,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
# A smoke profile, for a first look on a new torch: DTC_FUZZ=smoke.
settings.register_profile(
    "smoke",
    max_examples=10,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
settings.load_profile(os.environ.get("DTC_FUZZ") or "ci")

# The version-matrix tests run only in the environments `make matrix` builds, those for a
# torch outside the supported releases only where `make matrix-torch-outside` runs them.
collect_ignore = [] if os.environ.get("DTC_MATRIX") else ["matrix"]
collect_ignore += [] if os.environ.get("DTC_OUTSIDE") else ["outside"]

#: Tests that take minutes (compiling whole suites, deep chains, Keras's fit, the watch on
#: Dynamo's objects): run first, so that pytest-xdist's processes share them, rather than
#: one running the last of them while the other waits. (``make test`` hands out two tests
#: at a time, ``--maxschedchunk=2``: in xdist's first batches, one process would get them
#: all.)
LONG_RUNNING = (
    "tests/suites/",
    "tests/dmtree/test_dmtree_built_inside.py",
    "tests/internals/test_seam_reads.py",
    "tests/integration/test_keras_fit.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long-running tests first, in the order above, each group as collected."""

    def rank(item: pytest.Item) -> int:
        found = (i for i, start in enumerate(LONG_RUNNING) if item.nodeid.startswith(start))
        return next(found, len(LONG_RUNNING))

    items.sort(key=rank)
