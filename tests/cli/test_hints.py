"""explain's hints: each known break's way out is recorded where it was checked, and the
summary of what remains names the upgrade that removes the most.

The ways out themselves are run where their library is: Keras's in
``tests/integration/test_graph_budget.py`` and ``test_keras_fit.py`` (every break there is
a known one), RLlib's in ``tests/integration/test_rllib.py``; the releases that no longer
have a break, in ``docs/measurements.md`` ("Ways out").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dynamo_tree_compat import explain
from dynamo_tree_compat.hints import KNOWN_BREAKS, KnownBreak, hint, known_break

ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = (ROOT / "docs" / "measurements.md").read_text()


@pytest.mark.parametrize("known", KNOWN_BREAKS, ids=lambda known: f"{known.place}|{known.cause}")
def test_each_way_out_says_where_it_was_checked(known: KnownBreak) -> None:
    for path in re.findall(r"(?:tests|docs)/[\w/.-]+\.(?:py|md)", known.checked + known.way_out):
        assert (ROOT / path).exists(), path
    if "docs/measurements.md, Ways out" in known.checked:
        assert "## Ways out" in MEASUREMENTS
    if known.fixed_in:  # each such release is in the table of runs
        assert known.distribution and f"| {known.fixed_in} |" in MEASUREMENTS, known.fixed_in


def test_a_known_break_is_told_by_its_place_and_cause() -> None:
    places = ["keras/src/backend/torch/nn.py:679", "keras/src/layers/layer.py:3"]
    proxy = "Failed to convert args/kwargs to proxy\nargs: TensorVariable() "
    assert "tuple(layer.axis)" in hint(
        proxy + "UserDefinedListVariable(TrackedList)", "keras", places
    )
    assert "super().value" in hint(
        proxy + "GetAttrVariable(SuperVariable(), value)", "keras", places
    )
    # The same cause in the user's own file keeps the generic hint.
    assert known_break(proxy + "TrackedList", ["model.py:3"]) is None
    # A break called from Keras's layer code is known by the frame that called it.
    assert known_break("mapping proxy affected by dictionary mutation", places) is not None


def _row(location: str, reason: str, library: str, count: int) -> dict[str, object]:
    return {
        "location": location,
        "where": location,
        "reason": reason,
        "library": library,
        "without": count,
        "with": count,
        "removed": False,
        "hint": "",
        "text": reason,
        "places": [location],
    }


def test_the_summary_names_where_the_breaks_go_and_the_upgrade() -> None:
    rows = [
        _row(
            "keras/src/backend/common/variables.py:386",
            "Non-constant GetAttrVariable hash",
            "keras",
            19,
        ),
        _row(
            "keras/src/backend/torch/nn.py:679",
            "Failed to convert args/kwargs to proxy TrackedList",
            "keras",
            6,
        ),
        _row("model.py:3", "Data-dependent branching", "your code", 2),
    ]
    remaining = explain._remaining_by_library(rows)
    assert remaining["by_library"] == {"keras": 25, "your code": 2}
    lines = explain._where_they_come_from(remaining)
    assert lines[1:] == [
        "the 27 breaks that remain, by library: keras 25, your code 2",
        "  keras 3.11.0 or later removes 25 of them (each release run: docs/measurements.md, "
        "Ways out)",
    ]
