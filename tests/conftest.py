"""Hypothesis profiles: a quick one for CI (the default) and a long one behind DTC_FUZZ=long."""

from __future__ import annotations

import os

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
