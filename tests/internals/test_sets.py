"""Set subclasses kept whole (``_dynamo/seam/sets.py``): where Dynamo would rebuild one
made or changed in the graph empty (torch 2.13, 2.14), the package replays its contents
on the way out, with no graph break; where Dynamo keeps it whole (2.15), nothing
changes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import dynamo_tree_compat
from dynamo_tree_compat import _dynamo
from dynamo_tree_compat._dynamo.seam import sets
from tests.helpers.compiling import compiled

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

KEEPS_WHOLE = _dynamo.has(_dynamo.Capability.SET_SUBCLASS_KEEPS_CONTENTS)
#: Dynamo 2.5 has no set-subclass variable: it breaks the graph its own way.
DYNAMO_2_5 = torch.__version__.startswith("2.5.")


class Tracked(set):
    """A set subclass with an ``__init__`` and an ``add`` of its own, as Keras's
    TrackedSet has."""

    def __init__(self, values: Any = None, tracker: Any = None) -> None:
        self.tracker = tracker
        self.added = 0
        super().__init__(values or [])

    def add(self, item: Any) -> None:
        self.added += 1
        super().add(item)


class Plain(set):
    pass


def _made_and_filled(x: torch.Tensor) -> Any:
    made = Tracked([1], tracker="t")
    made.add(2)
    plain = Plain([3])
    plain.update({4})  # (`|=` on a set subclass: Dynamo 2.13 returns a set, package or not)
    return made, plain, x + 1


def _filled_in_place(tracked: Tracked, x: torch.Tensor) -> torch.Tensor:
    tracked.update([5])
    tracked.discard(1)
    tracked.add(7)
    return x + len(tracked)


def _made_never_returned(x: torch.Tensor) -> torch.Tensor:
    made = Plain([1, 2])
    made.add(3)
    return x + len(made)


def _breaks(function: Any, *args: Any) -> list[Any]:
    with _dynamo.GraphBreakRecorder() as recorder:
        compiled(function, fullgraph=not DYNAMO_2_5)(*args)
    return recorder.breaks


@pytest.fixture(autouse=True)
def installed() -> None:
    dynamo_tree_compat.install()


@pytest.mark.skipif(DYNAMO_2_5, reason="Dynamo 2.5 has no set-subclass variable")
def test_a_set_subclass_made_in_the_graph_comes_back_whole_in_one_graph() -> None:
    made, plain, _ = compiled(_made_and_filled)(torch.ones(1))
    assert (type(made), made, made.tracker, made.added) == (Tracked, {1, 2}, "t", 1)
    assert (type(plain), plain) == (Plain, {3, 4})


@pytest.mark.skipif(DYNAMO_2_5, reason="Dynamo 2.5 has no set-subclass variable")
def test_a_set_subclass_passed_in_is_changed_as_eagerly() -> None:
    tracked = Tracked([1, 2])
    result = compiled(_filled_in_place)(tracked, torch.ones(1))
    assert (tracked, float(result), tracked.added) == ({2, 5, 7}, 4.0, 1)
    again = Tracked([1, 3])
    compiled(_filled_in_place)(again, torch.ones(1))
    assert again == {3, 5, 7}


@pytest.mark.skipif(DYNAMO_2_5, reason="Dynamo 2.5 has no set-subclass variable")
def test_no_graph_break_and_nothing_for_a_set_that_stays_in_the_graph() -> None:
    assert _breaks(_made_and_filled, torch.ones(1)) == []
    assert _breaks(_made_never_returned, torch.ones(1)) == []
    assert float(compiled(_made_never_returned)(torch.ones(1))) == 4.0


def test_reading_a_set_subclass_stays_in_the_graph() -> None:
    def read(tracked: Tracked, x: torch.Tensor) -> torch.Tensor:
        return x + len(tracked) + (2 in tracked)

    assert float(compiled(read, fullgraph=not DYNAMO_2_5)(Tracked([1, 2]), torch.ones(1))) == 4.0


@pytest.mark.skipif(KEEPS_WHOLE or DYNAMO_2_5, reason="this Dynamo keeps a set subclass whole")
def test_with_the_package_off_dynamo_is_left_as_it_is() -> None:
    """Outside the package's mode the seam changes nothing: Dynamo's own answer comes
    back (torch 2.13: the set rebuilt empty). This is the bug the replay answers."""
    with dynamo_tree_compat.disabled():
        torch._dynamo.reset()
        made, plain, _ = compiled(_made_and_filled)(torch.ones(1))
    assert (made, plain) == (set(), set())


def test_refill_uses_sets_own_methods() -> None:
    held = Tracked([1])
    sets.refill(held, {4})
    assert (held, held.added) == ({4}, 0)
