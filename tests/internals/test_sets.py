"""Set subclasses kept whole (``_dynamo/seam/sets.py``): where Dynamo would rebuild one
made or filled in the graph empty (torch 2.13, 2.14), the call that fills it ends the
graph and runs in Python; where Dynamo keeps it whole (2.15), nothing changes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dynamo_tree_compat
from dynamo_tree_compat import _dynamo
from dynamo_tree_compat._dynamo.seam.sets import KEPT_WHOLE
from tests.helpers.compiling import compiled, fresh_dynamo  # noqa: F401

KEEPS_WHOLE = _dynamo.capability("set_subclass_keeps_contents")
#: Dynamo 2.5 has no set-subclass variable: it breaks the graph its own way.
DYNAMO_2_5 = torch.__version__.startswith("2.5.")


class Tracked(set):
    """A set subclass with an ``__init__`` of its own, as Keras's TrackedSet has."""

    def __init__(self, values: Any = None, tracker: Any = None) -> None:
        self.tracker = tracker
        super().__init__(values or [])


class Plain(set):
    pass


def _made_and_filled(x: torch.Tensor) -> Any:
    made = Tracked([1])
    made.add(2)
    plain = Plain([3])
    plain.update({4})  # (`|=` on a set subclass: Dynamo 2.13 returns a set, package or not)
    return made, plain, x + 1


def _filled_in_place(tracked: Tracked, x: torch.Tensor) -> torch.Tensor:
    tracked.update([5])
    tracked.discard(1)
    return x + len(tracked)


def _breaks(function: Any, *args: Any) -> list[Any]:
    with _dynamo.GraphBreakRecorder() as recorder:
        compiled(function, fullgraph=KEEPS_WHOLE)(*args)
    return recorder.breaks


@pytest.fixture(autouse=True)
def installed() -> None:
    dynamo_tree_compat.install()


def test_a_set_subclass_made_in_the_graph_comes_back_whole() -> None:
    made, plain, _ = compiled(_made_and_filled, fullgraph=KEEPS_WHOLE)(torch.ones(1))
    assert (type(made), made, made.tracker) == (Tracked, {1, 2}, None)
    assert (type(plain), plain) == (Plain, {3, 4})


def test_a_set_subclass_passed_in_is_changed_as_eagerly() -> None:
    tracked = Tracked([1, 2])
    result = compiled(_filled_in_place, fullgraph=KEEPS_WHOLE)(tracked, torch.ones(1))
    assert (tracked, float(result)) == ({2, 5}, 3.0)


def test_the_break_names_why_where_dynamo_needs_it() -> None:
    breaks = _breaks(_made_and_filled, torch.ones(1))
    if KEEPS_WHOLE:
        assert breaks == []
    elif not DYNAMO_2_5:
        assert any(KEPT_WHOLE in b.message for b in breaks), breaks


def test_reading_a_set_subclass_stays_in_the_graph() -> None:
    def read(tracked: Tracked, x: torch.Tensor) -> torch.Tensor:
        return x + len(tracked) + (2 in tracked)

    assert float(compiled(read, fullgraph=not DYNAMO_2_5)(Tracked([1, 2]), torch.ones(1))) == 4.0


def test_with_the_package_off_dynamo_is_left_as_it_is() -> None:
    """Outside the package's mode the seam changes nothing: Dynamo's own answer comes
    back (torch 2.13: the set rebuilt empty)."""
    with dynamo_tree_compat.disabled():
        torch._dynamo.reset()
        breaks = _breaks(_made_and_filled, torch.ones(1))
    assert not any(KEPT_WHOLE in b.message for b in breaks)
