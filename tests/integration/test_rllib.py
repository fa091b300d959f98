"""Real RLlib (ray 2.60.0, unmodified) under torch.compile: a PPO learner built by RLlib
with nested action spaces, its training step compiled. No dm-tree graph breaks; with
RLlib's two own breaks worked around (see ``rllib_learner``), one graph.

Runs in its own environment (``make integration-rllib``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray.rllib")
import torch

import dynamo_tree_compat
from dynamo_tree_compat import _dynamo, recording
from dynamo_tree_compat.hints import hint, text_and_places
from tests.integration.rllib_learner import (
    NESTED_ACTIONS,
    OBSERVATIONS,
    OTHER_ACTIONS,
    build_learner,
    make_batch,
    train_once,
    training_step,
)

HERE = Path(__file__).parent
SINGLE = {"default_policy": (OBSERVATIONS, NESTED_ACTIONS)}
MULTI = {"p0": (OBSERVATIONS, NESTED_ACTIONS), "p1": (OBSERVATIONS, OTHER_ACTIONS)}


def counting(graphs: list[Any]) -> Callable[[Any, Any], Any]:
    """A backend that appends each graph it is given to ``graphs`` and runs it as is."""

    def backend(graph_module: Any, example_inputs: Any) -> Any:
        graphs.append(graph_module)
        return graph_module.forward

    return backend


def eager_and_compiled(
    spaces: dict[str, Any], worked_around: bool, updates: int = 1, **compile_options: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[int]]:
    """``updates`` updates each, eagerly and compiled, from the same initial learner and
    batches; returns both results per update and the graphs compiled so far after each."""
    learner = build_learner(spaces, worked_around)
    batches = [make_batch(learner, spaces, seed=1 + index) for index in range(updates)]
    eager_step = training_step(learner)
    eager = [train_once(learner, eager_step, batch) for batch in batches]
    graphs: list[Any] = []
    torch._dynamo.reset()
    learner = build_learner(spaces, worked_around)
    step = torch.compile(training_step(learner), backend=counting(graphs), **compile_options)
    compiled, counts = [], []
    for batch in batches:
        compiled.append(train_once(learner, step, batch))
        counts.append(len(graphs))
    return eager, compiled, counts


def test_without_the_package_dm_tree_breaks_the_learner_step() -> None:
    """The baseline the tests below remove: RLlib's distributions call dm-tree."""
    with dynamo_tree_compat.disabled(), _dynamo.GraphBreakRecorder() as recorder:
        eager, compiled, graphs = eager_and_compiled(SINGLE, worked_around=False)
    assert sum(item.library == "dm-tree" for item in recorder.breaks) > 0
    assert graphs[-1] > 1
    torch.testing.assert_close(compiled, eager)


@pytest.mark.no_tree_graph_breaks
def test_ppo_learner_step_as_shipped_has_no_dm_tree_breaks() -> None:
    with _dynamo.GraphBreakRecorder() as recorder:
        eager, compiled, _ = eager_and_compiled(SINGLE, worked_around=False)
    # What remains is RLlib's own: the two breaks rllib_learner works around.
    assert {item.library for item in recorder.breaks} == {"RLlib"}
    torch.testing.assert_close(compiled, eager)  # losses, gradients, metrics, parameters


@pytest.mark.no_tree_graph_breaks
def test_ppo_learner_step_is_one_graph_with_rllib_breaks_worked_around() -> None:
    """One graph per update, three updates, the metrics logger kept from one update to
    the next (its deques with a maxlen made in earlier updates). The first fills state
    RLlib makes lazily (``curr_kl_coeffs_per_module``), so the second compiles once more,
    on Dynamo's guard on that dict's length; the third reuses the second's graph."""
    eager, compiled, graphs = eager_and_compiled(
        SINGLE, worked_around=True, updates=3, fullgraph=True
    )
    assert graphs == [1, 2, 2]
    torch.testing.assert_close(compiled, eager)


@pytest.mark.no_tree_graph_breaks
def test_multi_agent_learner_with_two_nested_action_spaces() -> None:
    eager, compiled, graphs = eager_and_compiled(MULTI, worked_around=True, fullgraph=True)
    assert graphs == [1]
    assert set(compiled[0]["losses"]) == {"p0", "p1"}
    torch.testing.assert_close(compiled, eager)


@functools.cache  # the tests below share the runs: each compiles the whole update
def whole_updates(
    package_on: bool, updates: int = 3, skip_nan_check: bool = False
) -> tuple[list[Any], list[int], list[Any]]:
    """The whole update (the step, backward, the Adam step) compiled as one function,
    ``updates`` times, worked around; returns each update's losses and parameters, the
    graphs compiled so far after each, and the breaks recorded."""
    graphs: list[Any] = []

    def run(compiled: bool) -> tuple[list[Any], list[int]]:
        torch._dynamo.reset()
        learner = build_learner(SINGLE, worked_around=True, skip_nan_check=skip_nan_check)
        batches = [make_batch(learner, SINGLE, seed=1 + index) for index in range(updates)]
        step = training_step(learner)

        def update(batch: Any) -> Any:
            _, losses = step(batch)
            learner.apply_gradients(learner.compute_gradients(losses))
            return losses

        if compiled:
            update = torch.compile(update, backend=counting(graphs))
        results, counts = [], []
        module = learner.module["default_policy"]
        for batch in batches:
            losses = update(batch)
            parameters = [p.detach().clone() for p in module.parameters()]
            results.append(({key: loss.detach() for key, loss in losses.items()}, parameters))
            counts.append(len(graphs))
        return results, counts

    scope = contextlib.nullcontext() if package_on else dynamo_tree_compat.disabled()
    with scope:
        eager, _ = run(compiled=False)  # also fills torch's KL dispatch cache
        with _dynamo.GraphBreakRecorder() as recorder:
            compiled, counts = run(compiled=True)
    torch.testing.assert_close(compiled, eager)
    return compiled, counts, recorder.breaks


#: Where the whole update breaks, package or not: the optimizer's ``zero_grad`` (a
#: function Dynamo skips) in RLlib's ``compute_gradients``, RLlib's check of each gradient
#: for NaN (``torch.isfinite(grad).all()`` in a branch) and the optimizer's own
#: ``graph_break()`` before its step.
UPDATE_BREAKS = {
    "ray/rllib/core/learner/torch/torch_learner.py:175",
    "ray/rllib/core/learner/torch/torch_learner.py:204",
    "torch/optim/optimizer.py",
}


def _place(location: str) -> str:
    place = location.split("site-packages/")[-1]
    return "torch/optim/optimizer.py" if place.startswith("torch/optim/") else place


def test_whole_update_breaks_only_where_the_optimizer_and_rllibs_nan_check_do() -> None:
    """The whole update, three times, metrics logger kept: two graphs, three after the
    lazily made state of the first update (as above); without the package fourteen. No
    break from a deque, the package or a tree library on any update (a builder hook on
    every deque once made it eleven graphs from the second update on)."""
    _, with_package, breaks = whole_updates(package_on=True)
    assert {_place(item.location) for item in breaks} <= UPDATE_BREAKS, breaks
    assert with_package == [2, 3, 3]
    _, without, _ = whole_updates(package_on=False)
    assert without[0] > with_package[0]


def test_rllibs_nan_check_setting_removes_its_break_as_explain_says() -> None:
    """explain's way out of RLlib's NaN check (``hints.KNOWN_BREAKS``), run: with
    ``torch_skip_nan_gradients=True`` the check's break is gone; the optimizer's remain.
    (The other ways out: the worked-around tests above, and the eager update that
    ``whole_updates`` runs first, which fills torch's KL lookup.)"""
    nan_check = "ray/rllib/core/learner/torch/torch_learner.py:204"
    _, _, breaks = whole_updates(package_on=True)
    found = [item for item in breaks if _place(item.location) == nan_check]
    assert found, breaks
    record = recording.break_record(found[0])
    text, places = text_and_places(record)
    assert "torch_skip_nan_gradients=True" in hint(text, record["library"], places)
    _, _, breaks = whole_updates(package_on=True, updates=1, skip_nan_check=True)
    assert {_place(item.location) for item in breaks} == UPDATE_BREAKS - {nan_check}


def test_explain_tells_the_truth_on_an_rllib_script(tmp_path: Path) -> None:
    counts = tmp_path / "graphs.txt"
    completed = subprocess.run(
        [sys.executable, "-m", "dynamo_tree_compat", "explain", "--json"]
        + [str(HERE / "rllib_script.py"), str(counts)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(HERE)},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout)
    # The script counts its graphs with its own backend and clears Dynamo's counters.
    counted = dict(line.split() for line in counts.read_text().splitlines())
    assert report["graphs"] == {"without": int(counted["0"]), "with": int(counted["1"])}
    assert report["graphs"]["with"] < report["graphs"]["without"]
    rows = report["breaks"]
    assert all(row["removed"] for row in rows if row["library"] == "dm-tree")
    assert any(row["library"] == "dm-tree" for row in rows)
    remaining = [row for row in rows if not row["removed"]]
    # RLlib's own two, and torch's KL dispatch on its first call (min() over a generator).
    assert {row["library"] for row in remaining} <= {"RLlib", "torch"}
    files = {row["location"].rpartition(":")[0] for row in remaining if row["library"] == "RLlib"}
    assert files == {
        "ray/rllib/core/distribution/distribution.py",
        "ray/rllib/utils/metrics/metrics_logger.py",
    }
    hints = {row["location"].rpartition(":")[0]: row["hint"] for row in remaining}
    assert "__class__" in hints["ray/rllib/core/distribution/distribution.py"]
    assert "nullcontext" in hints["ray/rllib/utils/metrics/metrics_logger.py"]


def test_silent_in_rllibs_environment() -> None:
    """RLlib's install has dm-tree and no optree: the doctor's model and RLlib's pattern
    compile with no warning and nothing stepped aside (each compile once warned here)."""
    from tests.helpers.silence import assert_silent

    assert assert_silent()["uses"] == ["dm-tree", "torch pytree"]


@pytest.mark.parametrize("num_learners", [0, 1])
def test_rllibs_own_switch_with_explain(tmp_path: Path, num_learners: int) -> None:
    """RLlib's ``torch_compile_learner`` with ``COMPLETE_UPDATE``, ``algo.train()``; with
    one learner it runs in a Ray actor. ``explain`` sees the learner's process: no dm-tree
    break is left with the package, and the losses equal the package-off run's."""
    losses = tmp_path / "losses"
    completed = subprocess.run(
        [sys.executable, "-m", "dynamo_tree_compat", "explain", "--json"]
        + [str(HERE / "rllib_algo.py"), str(num_learners), str(losses)],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=HERE,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout)
    learner = "main" if num_learners == 0 else "Ray actor"
    for label in ("without", "with"):
        roles = [process["role"] for process in report["processes"][label]]
        assert learner in roles, roles
    assert report["graphs"]["without"] > report["graphs"]["with"] > 0
    tree_rows = [row for row in report["breaks"] if row["library"] == "dm-tree"]
    assert tree_rows and all(row["with"] == 0 for row in tree_rows)
    off = json.loads((tmp_path / "losses.0").read_text())
    on = json.loads((tmp_path / "losses.1").read_text())
    assert len(off) == len(on) == 2
    assert on == pytest.approx(off, rel=1e-5)
