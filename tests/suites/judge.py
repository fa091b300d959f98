"""What the judges of the libraries' own suites share: running ``run.py`` in a fresh
interpreter, and the verdict.

A suite runs eagerly and compiled with the package; in the long profile also compiled
without it (``DYNAMO_TREE_COMPAT=0``), for the counts. The verdict: every test
that passes eagerly passes compiled with the package, except the limits named with their
reason, and no compiled call returns what eager code would not. The counts of the runs
are printed (``-s``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers.breadth import LONG

RUNNER = Path(__file__).with_name("run.py")
ROOT = RUNNER.parents[2]


def run_suite(
    suite: str, mode: str, tmp_path: Path, *extra: str, package: bool = True, **env: str
) -> dict[str, Any]:
    """One run of a suite, in a fresh interpreter; its counts and failures."""
    out = tmp_path / f"{suite}-{mode}-{package}.json"
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "KERAS_BACKEND": "torch", **env}
    if not package:
        environment["DYNAMO_TREE_COMPAT"] = "0"
    completed = subprocess.run(
        [sys.executable, str(RUNNER), suite, mode, str(out), *extra],
        capture_output=True,
        text=True,
        timeout=3000,
        cwd=ROOT,
        env=environment,
    )
    assert out.exists(), completed.stdout[-3000:] + completed.stderr[-3000:]
    return json.loads(out.read_text())


def runs(
    suite: str, tmp_path: Path, *extra: str, **env: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
    """The suite eagerly, compiled, and (in the long profile) compiled without the
    package: the judge's runs."""
    eager, compiled = (run_suite(suite, mode, tmp_path, *extra, **env) for mode in MODES)
    without = run_suite(suite, "compiled", tmp_path, *extra, package=False, **env) if LONG else None
    return eager, compiled, without


MODES = ("eager", "compiled")


def verdict(
    name: str,
    eager: dict[str, Any],
    compiled: dict[str, Any],
    without: dict[str, Any] | None,
    limits: dict[str, str],
    tests: Callable[[str], bool] = lambda test: True,
    calls: str = "",
) -> list[str]:
    """What is wrong with the compiled run (empty: nothing), after printing the counts.
    ``limits``: test ids that may fail compiled, each with why; ``tests``: which test ids
    are judged; ``calls``: the start of the names of the calls judged (all by default)."""
    judged = tests

    def failing(run: dict[str, Any]) -> set[str]:
        return {test for test in run["failed"] if judged(test)}

    def of(key: str) -> str:
        """A count of the run without the package, if it ran."""
        if without is None:
            return "not run"
        return str(len(failing(without)) if key == "failed" else without[key])

    print(
        f"\n{name}: ran {eager['ran']} tests; failed: eagerly {len(failing(eager))}, "
        f"compiled with the package {len(failing(compiled))}, without it {of('failed')}; "
        f"compiled calls {compiled['calls']} (without: {of('calls')}), differing from eager "
        f"{compiled['differs']} (without: {of('differs')}), graph breaks "
        f"{compiled['breaks']} (without: {of('breaks')})"
    )
    wrong = []
    if eager["ran"] != compiled["ran"]:
        wrong.append(f"ran {eager['ran']} eagerly, {compiled['ran']} compiled")
    # A test's id, less the parameters unittest shows after it.
    newly = {
        test for test in failing(compiled) - failing(eager) if test.split(" (")[0] not in limits
    }
    wrong += [f"{test}: {compiled['failed'][test]}" for test in sorted(newly)]
    wrong += [d for d in compiled["differs_seen"] if d.startswith(calls)]
    return wrong
