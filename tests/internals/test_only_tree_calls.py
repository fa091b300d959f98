"""The package changes only tree calls: programs that call no tree function trace exactly
as without it (``non_tree_programs.py``): the same graphs, the same graph breaks, and
calls that end alike.

Each workaround of the package (a deque's maxlen, a set subclass rebuilt, an object that
lies about its class, an optree spec, a methodcaller, a mappingproxy's type, ``iter()``
of a number, a structure deeper than Dynamo reads) has a program here that meets the
same kind of value outside any tree function.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).with_name("non_tree_programs.py")
ROOT = SCRIPT.parents[2]


def _run(tmp_path: Path, **environment: str) -> dict[str, Any]:
    out = tmp_path / f"programs-{len(environment)}.json"
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **environment},
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return {"found": json.loads(out.read_text()), "stderr": completed.stderr}


def test_programs_without_a_tree_call_trace_as_without_the_package(tmp_path: Path) -> None:
    with_package = _run(tmp_path)
    without = _run(tmp_path, DYNAMO_TREE_COMPAT="0")
    differing = {
        name: {"with": found, "without": without["found"][name]}
        for name, found in with_package["found"].items()
        if found != without["found"][name]
    }
    assert not differing, json.dumps(differing, indent=1)
    assert len(with_package["found"]) >= 12  # every program ran
    assert "dynamo_tree_compat" not in with_package["stderr"], with_package["stderr"][-2000:]
