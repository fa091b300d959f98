"""Capability probes: a hook whose probe fails is turned off, with the reason shown."""

from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree
import tree

import dynamo_tree_compat
from dynamo_tree_compat._dynamo import probes, runtime
from dynamo_tree_compat._dynamo.seam import making
from tests.helpers.structures import assert_identical


def test_every_probe_passes_on_this_torch() -> None:
    assert probes.probe() == {}
    assert dynamo_tree_compat.status().hooks_off == {}


def _break_dm_tree_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    def moved(items: list[object]) -> object:
        raise TypeError("ListVariable() got an unexpected keyword argument")

    monkeypatch.setattr(making, "new_list", moved)


def _break_torch_pytree_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    from dynamo_tree_compat._dynamo.pytree import probe as pytree_probe

    # A spec of the wrong shape
    monkeypatch.setattr(pytree_probe, "_flat", lambda variable: ([0], [], pytree.tree_structure(0)))


#: hook -> (how its probe is made to fail, the library's flatten, its originals' prefix)
CASES = {
    probes.DMTREE_FAST_PATH: (_break_dm_tree_probe, tree.flatten, "tree."),
    probes.TORCH_PYTREE_FAST_PATH: (_break_torch_pytree_probe, pytree.tree_flatten, "torch."),
}


@pytest.mark.parametrize("hook", list(CASES))
def test_a_failing_probe_turns_its_hook_off_and_the_other_way_takes_over(
    monkeypatch: pytest.MonkeyPatch, hook: str
) -> None:
    """The twin for dm-tree, torch's own code for torch's pytree."""
    break_probe, flatten, prefix = CASES[hook]
    break_probe(monkeypatch)
    monkeypatch.setattr(probes, "_probed", set())
    monkeypatch.setattr(runtime, "HOOKS_OFF", {})
    monkeypatch.setattr(probes, "HOOKS_OFF", runtime.HOOKS_OFF)
    off = probes.probe()
    assert hook in off and (hook != probes.DMTREE_FAST_PATH or "TypeError" in off[hook])
    assert hook in dynamo_tree_compat.status().hooks_off
    if hook == probes.TORCH_PYTREE_FAST_PATH:
        assert list(off) == [hook]
        assert probes.layer_off("torch pytree") and not probes.layer_off("optree")
    monkeypatch.undo()  # Dynamo works again; the hook stays off for the process
    monkeypatch.setattr(runtime, "HOOKS_OFF", {hook: "off for the test"})
    monkeypatch.setattr(probes, "HOOKS_OFF", runtime.HOOKS_OFF)
    torch._dynamo.reset()
    runtime.STATS.clear()
    x = torch.ones(2)
    compiled = torch.compile(lambda x: flatten({"b": x, "a": [x]}), backend="eager")
    assert_identical(flatten({"b": x, "a": [x]}), compiled(x))
    assert not any(what.startswith(prefix) for what in runtime.counted(runtime.Event.TAKEN))
