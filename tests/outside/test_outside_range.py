"""On a torch outside the supported releases: one warning, nothing done, nothing broken.

The package loads into every program that imports torch, the supported releases or not.
`make matrix-torch-outside` runs these tests on such a torch (CI: 2.4.1), without the
development switch that forces the package on, and the pure-Python dm-tree's parity
tests with them. Elsewhere they are skipped.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from typing import Any

import pytest
import torch

from dynamo_tree_compat import installer
from tests.helpers.fresh import run_fresh

OUTSIDE = installer.torch_out_of_range()
pytestmark = pytest.mark.skipif(
    OUTSIDE is None, reason=f"torch {torch.__version__} is a supported release"
)

#: A program that calls both libraries in compiled code and prints what Dynamo made of it.
_PROGRAM = """
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch  # autoload
    import dynamo_tree_compat, tree, optree, torch._dynamo
from dynamo_tree_compat import installer

def body(x):
    leaves = tree.flatten({"b": x, "a": [x + 1, (x * 2,)]})
    mapped = optree.tree_map(lambda t: t - 1, {"k": leaves, "n": (x,)})
    return tree.map_structure(lambda t: t * 3, mapped)

x = torch.arange(3.0)
explained = torch._dynamo.explain(body)(x)
torch._dynamo.reset()
compiled = torch.compile(body, backend="eager")(x)
print(json.dumps({
    "warnings": [str(w.message) for w in caught if w.category.__name__ ==
                 "DynamoTreeCompatWarning"],
    "registered": sorted(installer.REGISTERED),
    "same": str(compiled) == str(body(x)),
    "graphs": explained.graph_count,
    "breaks": explained.graph_break_count,
}))
"""


@functools.cache  # one fresh process per environment, shared by the tests
def _run(**environment: str) -> dict[str, Any]:
    lines = run_fresh(_PROGRAM, **environment).stdout.strip().splitlines()
    return json.loads(lines[-1])


def test_one_warning_nothing_registered_and_eager_results() -> None:
    seen = _run(DYNAMO_TREE_COMPAT_ANY_TORCH="0")
    assert seen["warnings"] == [f"dynamo-tree-compat is doing nothing: {OUTSIDE}"]
    assert seen["registered"] == []
    assert seen["same"]


def test_compiled_code_breaks_as_without_the_package() -> None:
    with_package = _run(DYNAMO_TREE_COMPAT_ANY_TORCH="0")
    switched_off = _run(DYNAMO_TREE_COMPAT="0", DYNAMO_TREE_COMPAT_ANY_TORCH="0")
    assert switched_off["warnings"] == []
    assert (with_package["graphs"], with_package["breaks"]) == (
        switched_off["graphs"],
        switched_off["breaks"],
    )
    assert with_package["breaks"] > 0  # dm-tree is on Dynamo's skip list


def test_the_originals_are_untouched() -> None:
    code = """
import tree, optree, torch
before = (tree.flatten, tree.map_structure, optree.tree_map, optree.tree_flatten)
import dynamo_tree_compat, torch._dynamo
after = (tree.flatten, tree.map_structure, optree.tree_map, optree.tree_flatten)
print(all(a is b for a, b in zip(before, after)))
"""
    assert run_fresh(code, DYNAMO_TREE_COMPAT_ANY_TORCH="0").stdout.split()[-1] == "True"


def test_the_doctor_says_why_and_exits_non_zero_without_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dynamo_tree_compat", "--backend", "eager", "--steps", "1"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "DYNAMO_TREE_COMPAT_ANY_TORCH": "0"},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"doing nothing: {OUTSIDE}" in done.stdout.splitlines()
    assert "fast path" not in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
