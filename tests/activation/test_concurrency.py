"""Threads, forked DataLoader workers and spawned processes.

Eight threads enter scopes and install and uninstall the package while two others compile
and run tree calls. Every change of mode or registration takes Dynamo's compile lock, so
no compile sees half a change: no thread fails, none deadlocks, and afterwards one
install() leaves every twin registered.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import random
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dynamo_tree_compat
from dynamo_tree_compat import installer, substitutions
from tests.helpers import workers
from tests.helpers.dynamo_support import needs_torch
from tests.helpers.structures import assert_identical

tree = pytest.importorskip("tree")
DEADLOCK_SECONDS = 240


def _fresh_function(index: int) -> Callable[[torch.Tensor], Any]:
    """A new code object each time, so that each one is compiled afresh."""
    namespace: dict[str, Any] = {"tree": tree}
    exec(
        f"def step_{index}(x):\n"
        f"    s = {{'b': [x, (x + {index}, None)], 'a': x * 2}}\n"
        "    tree.assert_same_structure(s, s)\n"
        "    return tree.map_structure(lambda v: v, s), tree.flatten_with_path(s)\n",
        namespace,
    )
    return namespace[f"step_{index}"]


def _toggler(seed: int, stop: threading.Event, errors: list[BaseException]) -> None:
    rng = random.Random(seed)
    try:
        while not stop.is_set():
            action = rng.choice(["enabled", "disabled", "install", "uninstall", "status"])
            if action == "enabled":
                with dynamo_tree_compat.enabled():
                    stop.wait(rng.random() / 50)
            elif action == "disabled":
                with dynamo_tree_compat.disabled():
                    stop.wait(rng.random() / 50)
            elif action == "install":
                dynamo_tree_compat.install()
            elif action == "uninstall" and rng.random() < 0.3:
                dynamo_tree_compat.uninstall()
            else:
                dynamo_tree_compat.status()
    except BaseException as error:  # noqa: BLE001 - reported by the test
        errors.append(error)


def _compiler(first: int, count: int, errors: list[BaseException]) -> None:
    try:
        for index in range(first, first + count):
            step = _fresh_function(index)
            x = torch.full((2,), float(index))
            # No fullgraph: with the mode off or the twins removed, a break is expected.
            assert_identical(step(x), torch.compile(step, backend="eager")(x))
            assert_identical(step(x), torch.compile(step, backend="eager")(x))
    except BaseException as error:  # noqa: BLE001 - reported by the test
        errors.append(error)


@needs_torch(
    (2, 11),
    "crashes (a segmentation fault in its cache-size check) when two threads compile at "
    "once, with or without this package",
)
def test_scopes_install_and_uninstall_from_8_threads_while_2_threads_compile() -> None:
    errors: list[BaseException] = []
    stop = threading.Event()
    togglers = [threading.Thread(target=_toggler, args=(seed, stop, errors)) for seed in range(8)]
    compilers = [threading.Thread(target=_compiler, args=(first, 12, errors)) for first in (0, 100)]
    faulthandler.dump_traceback_later(DEADLOCK_SECONDS, exit=False, file=sys.stderr)
    try:
        for thread in togglers + compilers:
            thread.start()
        for thread in compilers:
            thread.join(DEADLOCK_SECONDS)
        stop.set()
        for thread in togglers:
            thread.join(DEADLOCK_SECONDS)
    finally:
        faulthandler.cancel_dump_traceback_later()
        stop.set()
        dynamo_tree_compat.install()
    assert not [thread for thread in togglers + compilers if thread.is_alive()], "deadlock"
    assert not errors, errors
    # No lost registration: every twin is registered, and a full graph traces again.
    assert {s.original_name for s in substitutions.DM_TREE} <= set(installer.REGISTERED)
    assert dynamo_tree_compat.config.twins_enabled is True
    torch._dynamo.reset()
    step = _fresh_function(999)
    x = torch.ones(2)
    assert_identical(step(x), torch.compile(step, backend="eager", fullgraph=True)(x))


def test_dataloader_workers_forked_trace_the_twins() -> None:
    loader = torch.utils.data.DataLoader(
        workers.CompilingDataset(),
        batch_size=None,
        num_workers=2,
        multiprocessing_context="fork",
    )
    results = list(loader)
    assert len(results) == 4
    assert all(result["same"] for result in results), results
    assert {result["worker"] for result in results} == {0, 1}


def test_spawned_processes_activate_through_autoload() -> None:
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.map(workers.compiled_equals_eager, range(2))
    assert results == [{"same": True, "activated_by": "autoload"}] * 2
