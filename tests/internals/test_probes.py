"""Capability probes: a hook whose probe fails is turned off, with the reason shown."""

from __future__ import annotations

import pytest
import torch
import tree

import dynamo_tree_compat
from dynamo_tree_compat._dynamo import internals, probes, runtime
from tests.helpers.structures import assert_identical


def test_every_probe_passes_on_this_torch() -> None:
    assert probes.probe() == {}
    assert dynamo_tree_compat.status().hooks_off == {}


def test_a_failing_probe_turns_its_hook_off_and_the_twin_takes_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def moved(items: list[object]) -> object:
        raise TypeError("ListVariable() got an unexpected keyword argument")

    monkeypatch.setattr(internals, "new_list", moved)
    monkeypatch.setattr(probes, "_probed", set())
    monkeypatch.setattr(runtime, "HOOKS_OFF", {})
    monkeypatch.setattr(probes, "HOOKS_OFF", runtime.HOOKS_OFF)
    off = probes.probe()
    assert probes.DMTREE_FAST_PATH in off and "TypeError" in off[probes.DMTREE_FAST_PATH]
    assert probes.DMTREE_FAST_PATH in dynamo_tree_compat.status().hooks_off
    monkeypatch.undo()  # Dynamo works again; the hook stays off for the process
    monkeypatch.setattr(runtime, "HOOKS_OFF", {probes.DMTREE_FAST_PATH: "off for the test"})
    monkeypatch.setattr(probes, "HOOKS_OFF", runtime.HOOKS_OFF)
    torch._dynamo.reset()
    runtime.STATS.clear()
    x = torch.ones(2)
    compiled = torch.compile(lambda x: tree.flatten({"b": x, "a": [x]}), backend="eager")
    assert_identical(tree.flatten({"b": x, "a": [x]}), compiled(x))
    assert not any(key.startswith("taken:tree.") for key in runtime.STATS)


def test_a_failing_torch_pytree_probe_leaves_torch_s_pytree_to_torch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its probe reads a spec of the wrong shape: the hook is off, torch's code traces."""
    import torch.utils._pytree as pytree

    from dynamo_tree_compat._dynamo import pytree_fast

    monkeypatch.setattr(pytree_fast, "_flat", lambda variable: ([0], [], pytree.tree_structure(0)))
    monkeypatch.setattr(probes, "_probed", set())
    monkeypatch.setattr(runtime, "HOOKS_OFF", {})
    monkeypatch.setattr(probes, "HOOKS_OFF", runtime.HOOKS_OFF)
    off = probes.probe()
    assert list(off) == [probes.TORCH_PYTREE_FAST_PATH]
    assert probes.layer_off("torch pytree") and not probes.layer_off("optree")
    monkeypatch.undo()
    monkeypatch.setattr(runtime, "HOOKS_OFF", {probes.TORCH_PYTREE_FAST_PATH: "off"})
    monkeypatch.setattr(probes, "HOOKS_OFF", runtime.HOOKS_OFF)
    torch._dynamo.reset()
    runtime.STATS.clear()
    x = torch.ones(2)
    compiled = torch.compile(lambda x: pytree.tree_flatten({"b": x, "a": [x]}), backend="eager")
    assert_identical(pytree.tree_flatten({"b": x, "a": [x]}), compiled(x))
    assert not any(key.startswith("taken:torch.") for key in runtime.STATS)
