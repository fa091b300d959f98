"""How widely the tests draw and repeat: one knob, ``DTC_FUZZ``, for every test.

- ``quick`` (the default: ``make test``): every test, every function, every kind of
  structure and every code path, with the fewest repetitions that still find the bugs of
  the earlier rounds (``docs/development.md``).
- ``ci`` (CI's ``make test-wide`` and the Keras environments): the repetitions as well
  (more structures per compiled fuzz test, every change in the reuse tests, the wider
  parametrizations, marked ``wide``).
- ``smoke``: a first look on a new torch (CI's oldest release): ``quick``'s cases, fewer
  examples.
- ``long`` (opt-in, ``make fuzz-long``): thousands of structures, every change.

>>> PROFILE in ("quick", "ci", "smoke", "long")
True
>>> by_profile(quick=1, ci=2, long=3, smoke=1) in (1, 2, 3)
True
"""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")

#: The profile this run draws with.
PROFILE = os.environ.get("DTC_FUZZ") or "quick"
if PROFILE not in ("quick", "ci", "smoke", "long"):
    raise ValueError(f"DTC_FUZZ={PROFILE!r}: expected quick, ci, smoke or long")
#: Whether the repetitions run: tests marked ``wide``, and the wider draws.
WIDE = PROFILE in ("ci", "long")
LONG = PROFILE == "long"


def by_profile(*, quick: T, ci: T, long: T, smoke: T) -> T:
    """The value for this run's profile."""
    return {"quick": quick, "ci": ci, "long": long, "smoke": smoke}[PROFILE]
