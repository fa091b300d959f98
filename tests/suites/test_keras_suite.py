"""Keras's own tree tests as the judge (``keras/src/tree/tree_test.py``, in Keras's wheel
from 3.12 on, run from the installed Keras, never copied): every test of the layer Keras
uses that passes eagerly passes with each call compiled (``run.py keras``), graphs
reused between calls, and no compiled call returns what eager code would not.

Keras on the torch backend uses ``torchtree_impl``; the suite also tests ``dmtree_impl``
where dm-tree is installed, which Keras never uses on the torch backend, so those
results are reported, not judged. Every call of the judged layer must trace in one
graph, except on torch 2.5, whose Dynamo cannot take some of the suite's structures (a
deque's maxlen, Keras's TrackedDict, a generator): there a call may break the graph,
and must still give eager's result.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
pytest.importorskip("keras")
pytest.importorskip("absl.testing.parameterized")
tree_api = pytest.importorskip("keras.src.tree.tree_api")

from tests.suites.judge import runs, verdict  # noqa: E402

DYNAMO_2_5 = __import__("torch").__version__.startswith("2.5.")
#: The suite's name for the layer Keras uses here: "torchtree" for torchtree_impl.
LAYER = tree_api.tree_impl.__name__.rpartition(".")[2].removesuffix("_impl")


def _of_layer(test: str) -> bool:
    return test.endswith(f"_{LAYER}")


@pytest.mark.skipif(
    not (Path(tree_api.__file__).parent / "tree_test.py").exists(),
    reason="this Keras wheel ships no tree_test.py (Keras 3.12 and later do)",
)
def test_kerass_tree_suite_passes_compiled(tmp_path: Path) -> None:
    eager, compiled, without = runs("keras", tmp_path)
    assert eager["ran"] > 20  # the whole suite, not an empty module
    ours = f"{LAYER}_impl."
    name = f"Keras's tree_test.py, {LAYER}"
    wrong = verdict(name, eager, compiled, without, {}, _of_layer, calls=ours)
    assert not wrong, "\n".join(wrong)
    assert compiled["calls"] > 300
    if not DYNAMO_2_5:  # there Dynamo cannot take a deque's maxlen, a dict subclass, ...
        assert not [b for b in compiled["breaks_seen"] if b.startswith(ours)]
