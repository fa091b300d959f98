"""Keras's own tree tests as the judge: every test of the layer Keras uses that passes
eagerly passes with each call compiled (``keras_suite.py``), and no compiled call
returns what eager code would not.

The suite ships in Keras's wheel from 3.12 on (``keras/src/tree/tree_test.py``); it is
run from the installed Keras, never copied. Keras on the torch backend uses
``torchtree_impl``; the suite also tests ``dmtree_impl`` where dm-tree is installed,
which Keras never uses on the torch backend, so those results are reported, not judged.
Every call must trace in one graph, except on torch 2.5, whose Dynamo cannot take some
of the suite's structures (a deque's maxlen, Keras's TrackedDict, a generator): there a
call may break the graph, and must still give eager's result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
pytest.importorskip("keras")
pytest.importorskip("absl.testing.parameterized")
tree_api = pytest.importorskip("keras.src.tree.tree_api")

#: Where a break is Dynamo's limit, not this package's: it breaks, with eager's result.
DYNAMO_2_5 = __import__("torch").__version__.startswith("2.5.")
RUNNER = Path(__file__).with_name("keras_suite.py")
ROOT = RUNNER.parents[2]
#: The suite's name for the layer Keras uses here: "torchtree" for torchtree_impl.
LAYER = tree_api.tree_impl.__name__.rpartition(".")[2].removesuffix("_impl")


def _run(mode: str, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / f"{mode}.json"
    completed = subprocess.run(
        [sys.executable, str(RUNNER), mode, str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "KERAS_BACKEND": "torch"},
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return json.loads(out.read_text())


def _of_layer(test_ids: Any) -> set[str]:
    return {test for test in test_ids if test.endswith(f"_{LAYER}")}


def test_kerass_tree_suite_passes_compiled(tmp_path: Path) -> None:
    if not (Path(tree_api.__file__).parent / "tree_test.py").exists():
        pytest.skip("this Keras wheel ships no tree_test.py")
    eager, compiled = _run("eager", tmp_path), _run("compiled", tmp_path)
    print(
        f"\nKeras's tree_test.py, {LAYER}: ran {eager['ran']}; failed eagerly "
        f"{len(_of_layer(eager['failed']))}, compiled {len(_of_layer(compiled['failed']))}; "
        f"compiled calls {compiled['calls']}, differing {compiled['differs']}, breaks "
        f"{compiled['breaks']}; all layers: "
        f"{compiled['breaks_seen'] + compiled['differs_seen']}"
    )
    assert eager["ran"] == compiled["ran"] > 20  # the whole suite, not an empty module
    newly_failing = _of_layer(compiled["failed"]) - _of_layer(eager["failed"])
    assert not newly_failing, {test: compiled["failed"][test] for test in newly_failing}
    assert compiled["calls"] > 300
    ours = f"{LAYER}_impl."
    assert not [d for d in compiled["differs_seen"] if d.startswith(ours)]
    if not DYNAMO_2_5:  # there Dynamo cannot take a deque's maxlen, a dict subclass, ...
        assert not [b for b in compiled["breaks_seen"] if b.startswith(ours)]
