"""Where the inductor compile time of RLlib's learner update goes, package off and on.

The update of ``tests/integration/rllib_learner.py`` (RLlib's PPO learner, nested action
space), as RLlib ships it and with its own breaks worked around, compiled with inductor
and inductor's caches off, split by phase for the first update,
from ``torch._dynamo.utils.compilation_time_metrics``. Columns: graphs; the first
update's time over an eager update's (``compile``); Dynamo's tracing; the backend on the
forward graphs (AOT autograd and inductor); the first ``backward()`` (the backward
graphs' compile); inductor's ``compile_fx_inner`` (forward and backward). Each row is
the faster of two runs in one process.

    python benchmarks/rllib_compile_split.py

Needs ray[rllib]: ``make benchmark-real-clients`` builds the environment (``.venv-rllib``).
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"

import torch
import torch._dynamo.utils as dynamo_utils

import dynamo_tree_compat
from tests.integration.rllib_learner import (
    NESTED_ACTIONS,
    OBSERVATIONS,
    build_learner,
    make_batch,
    training_step,
)

SPACES = {"default_policy": (OBSERVATIONS, NESTED_ACTIONS)}
_BACKEND = "OutputGraph.call_user_compiler"


def _seconds(name: str) -> float:
    """Total seconds Dynamo recorded under ``name`` since the last reset."""
    return sum(dynamo_utils.compilation_time_metrics.get(name, []))


def first_update(worked_around: bool, package: str) -> dict[str, Any]:
    """Compile seconds of the first update, split by phase."""
    torch._dynamo.reset()
    dynamo_utils.compilation_time_metrics.clear()
    scope = dynamo_tree_compat.enabled() if package == "on" else dynamo_tree_compat.disabled()
    with scope:
        learner = build_learner(SPACES, worked_around)
        batch = make_batch(learner, SPACES)
        eager_step = training_step(learner)
        started = time.perf_counter()
        learner.compute_gradients(eager_step(batch)[1])
        eager_seconds = time.perf_counter() - started
        step = torch.compile(training_step(learner))
        started = time.perf_counter()
        _, losses = step(batch)
        forward = time.perf_counter() - started
        started = time.perf_counter()
        learner.compute_gradients(losses)
        backward = time.perf_counter() - started
    frames = _seconds("_compile.compile_inner")
    backend = _seconds(_BACKEND)
    return {
        "graphs": len(dynamo_utils.compilation_time_metrics.get(_BACKEND, [])),
        "compile": forward + backward - eager_seconds,
        "Dynamo": frames - backend,
        "fw backend": backend,
        "bw compile": backward,
        "inductor": _seconds("compile_fx_inner"),
    }


def main() -> None:
    print(f"torch {torch.__version__}, python {platform.python_version()}, caches off")
    # Each row twice, in the order off, on, on, off, and the faster of the two kept: the
    # first compile in a process pays for loading inductor's toolchain.
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for worked_around, label in ((False, "as shipped"), (True, "worked around")):
        for package in ("off", "on", "on", "off"):
            found.setdefault((label, package), []).append(first_update(worked_around, package))
    rows = [
        (label, package, min(runs, key=lambda run: run["compile"]))
        for (label, package), runs in found.items()
    ]
    keys = list(rows[0][2])
    print(f"{'RLlib update':14} {'package':8}" + "".join(f"{key:>11}" for key in keys))
    for label, package, found in rows:
        cells = "".join(
            f"{value:>11}" if isinstance(value, int) else f"{value:>10.1f}s"
            for value in found.values()
        )
        print(f"{label:14} {package:8}{cells}")


if __name__ == "__main__":
    main()
