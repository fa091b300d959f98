"""RLlib's first compiled update, package off and on, in fresh interpreters, alternated.

Each run is a new process that builds RLlib's PPO learner (``tests/integration/
rllib_learner.py``: ray 2.60.0, a nested action space, RLlib's code as shipped), compiles
its training step with ``torch.compile(backend=...)`` and times the first update (the
compile, the step, backward and Adam), as a user's first ``algo.train()`` pays it. The
package is off (``DYNAMO_TREE_COMPAT=0``, torch's autoload off) or on (autoload, as
users get it), the two alternated so that a busy machine slows both alike; it prints
each side's median and their ratio. Inductor runs with a warm cache: one unmeasured run
per side fills it first (``TORCHINDUCTOR_CACHE_DIR``, a fresh folder per invocation).

    python benchmarks/rllib_first_update.py [--runs 10] [--backend eager inductor]

Needs ray[rllib]: ``make benchmark-real-clients`` builds the environment (``.venv-rllib``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_FIRST_UPDATE = """
import json, sys, time
sys.path.insert(0, {root!r})
import torch
from tests.integration.rllib_learner import (
    NESTED_ACTIONS, OBSERVATIONS, build_learner, make_batch, train_once, training_step,
)
spaces = {{"default_policy": (OBSERVATIONS, NESTED_ACTIONS)}}
learner = build_learner(spaces)
batch = make_batch(learner, spaces)
step = torch.compile(training_step(learner), backend={backend!r})
started = time.perf_counter()
train_once(learner, step, batch)
print(json.dumps({{"seconds": time.perf_counter() - started}}))
"""

_OFF = {"DYNAMO_TREE_COMPAT": "0", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


def _run(backend: str, package_on: bool, cache: str) -> float:
    environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    for name in _OFF:
        environment.pop(name, None)
    if not package_on:
        environment.update(_OFF)
    completed = subprocess.run(
        [sys.executable, "-c", _FIRST_UPDATE.format(root=str(ROOT), backend=backend)],
        env=environment,
        cwd=tempfile.gettempdir(),
        check=True,
        capture_output=True,
        text=True,
    )
    return float(json.loads(completed.stdout.splitlines()[-1])["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--backend", nargs="+", default=["eager", "inductor"])
    arguments = parser.parse_args()
    import torch

    print(f"python {sys.version.split()[0]}, torch {torch.__version__}")
    print(f"medians of {arguments.runs} fresh interpreters each side, alternated")
    print(f"{'first compiled update':<36} {'off s':>8} {'on s':>8} {'on / off':>9}")
    with tempfile.TemporaryDirectory() as cache:
        for backend in arguments.backend:
            if backend == "inductor":  # warm the cache, both sides
                _run(backend, False, cache)
                _run(backend, True, cache)
            off, on = [], []
            for index in range(arguments.runs):
                first_on = index % 2 == 1
                for package_on in (first_on, not first_on):
                    (on if package_on else off).append(_run(backend, package_on, cache))
            median_off, median_on = statistics.median(off), statistics.median(on)
            label = f"backend={backend}" + (", warm cache" if backend == "inductor" else "")
            print(f"{label:<36} {median_off:8.2f} {median_on:8.2f} {median_on / median_off:9.3f}")


if __name__ == "__main__":
    main()
