"""dm-tree's own test suite, run against dynamo_tree_compat.dmtree swapped in for ``tree``."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

RUNNER = """
import sys, unittest
if sys.argv[2] == "twin":
    from dynamo_tree_compat import dmtree
    sys.modules["tree"] = dmtree  # every `import tree` in the suite now gets the twin
spec = __import__("importlib.util").util.spec_from_file_location("tree_test", sys.argv[1])
suite_module = __import__("importlib.util").util.module_from_spec(spec)
spec.loader.exec_module(suite_module)
assert (suite_module.tree.__name__ == "dynamo_tree_compat.dmtree") == (sys.argv[2] == "twin")
result = unittest.main(module=suite_module, argv=["tree_test"], exit=False, verbosity=0).result
print(f"ran={result.testsRun} failures={len(result.failures)} errors={len(result.errors)}")
sys.exit(0 if result.wasSuccessful() else 1)
"""


def _suite_path() -> Path:
    spec = importlib.util.find_spec("tree")
    if spec is None or spec.origin is None:
        pytest.skip("dm-tree is not installed")
    path = Path(spec.origin).parent / "tree_test.py"
    if not path.exists():
        pytest.skip("this dm-tree wheel ships no tree_test.py")
    return path


def _run_suite(which: str) -> tuple[int, str]:
    completed = subprocess.run(
        [sys.executable, "-c", RUNNER, str(_suite_path()), which],
        capture_output=True,
        text=True,
        timeout=300,
        env={"DYNAMO_TREE_COMPAT": "0", "PATH": "/usr/bin:/bin"},
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    summary = completed.stdout.strip().splitlines()[-1]
    return int(summary.split()[0].removeprefix("ran=")), summary


def test_dm_tree_suite_passes_against_the_twin() -> None:
    pytest.importorskip("absl.testing.parameterized")
    ran_on_twin, summary = _run_suite("twin")
    ran_on_c, _ = _run_suite("c")
    assert ran_on_twin == ran_on_c > 50, summary  # the whole suite, not an empty module
