"""Runs code in a fresh interpreter, as a user's program would start."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def run_fresh(
    code: str, timeout: float = 300, **environment: str
) -> subprocess.CompletedProcess[str]:
    """Runs ``code`` in a new Python process with extra environment variables.

    Fails the test with the process's output if it exits non-zero.
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **environment}
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert completed.returncode == 0, f"stdout:\n{completed.stdout}\nstderr:\n{completed.stderr}"
    return completed
