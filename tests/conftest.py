"""Hypothesis profiles by ``DTC_FUZZ`` (``tests/helpers/breadth.py``); the ``wide`` tests
only where the profile runs the repetitions; the long-running tests first; the
``fresh_dynamo`` fixture."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.helpers.breadth import PROFILE, WIDE

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
# make test's: the same examples as CI's (eager property tests are cheap); the compiled
# ones draw fewer (tests/helpers/structures.py).
settings.register_profile("quick", parent=settings.get_profile("ci"))
# A smoke profile, for a first look on a new torch: DTC_FUZZ=smoke.
settings.register_profile(
    "smoke",
    max_examples=10,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
settings.load_profile(PROFILE)

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``wide`` tests deselected where the profile leaves out the repetitions (they
    run in CI's other stages); the long-running tests first, in the order above, each
    group as collected."""
    if not WIDE:
        wide = [item for item in items if item.get_closest_marker("wide")]
        if wide:
            config.hook.pytest_deselected(items=wide)
            items[:] = [item for item in items if not item.get_closest_marker("wide")]

    def rank(item: pytest.Item) -> int:
        found = (i for i, start in enumerate(LONG_RUNNING) if item.nodeid.startswith(start))
        return next(found, len(LONG_RUNNING))

    items.sort(key=rank)


@pytest.fixture
def fresh_dynamo() -> Iterator[None]:
    """No compiled code, no fast-path counts and no Dynamo counters at a test's start, and
    no compiled code at its end. A module takes it for each of its tests with
    ``pytestmark = pytest.mark.usefixtures("fresh_dynamo")``."""
    import torch
    from torch._dynamo.utils import counters

    from dynamo_tree_compat import _dynamo

    torch._dynamo.reset()
    _dynamo.STATS.clear()
    counters.clear()
    yield
    torch._dynamo.reset()
