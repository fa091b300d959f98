"""The package in environments that lack dm-tree, or optree: `make matrix` builds them.

DTC_MISSING names the import names this environment must lack ("tree,optree", "optree"
or "tree"); the first test checks that they really are missing, so that the others test
what they claim to.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.helpers.fresh import run_fresh
from tests.helpers.silence import assert_silent

MISSING = {name for name in os.environ.get("DTC_MISSING", "").split(",") if name}
HAS_DM_TREE = "tree" not in MISSING
HAS_OPTREE = "optree" not in MISSING


def test_the_libraries_named_missing_are_missing_and_the_others_present() -> None:
    assert MISSING, "set DTC_MISSING, as `make matrix` does"
    for name in ("tree", "optree"):
        assert (importlib.util.find_spec(name) is None) == (name in MISSING), name


def test_import_torch_and_compile_never_break() -> None:
    completed = run_fresh(
        """
        import warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            import torch
            fn = torch.compile(lambda x: [x * 2, x + 1], fullgraph=True, backend="eager")
            print(fn(torch.ones(2))[0].tolist())
        import dynamo_tree_compat
        ours = [w for w in caught if w.category is dynamo_tree_compat.DynamoTreeCompatWarning]
        print(len(ours), [str(w.message) for w in ours])
        print(dynamo_tree_compat.status().activated_by)
        """
    )
    lines = completed.stdout.splitlines()
    assert lines[0] == "[2.0, 2.0]"
    assert lines[1].startswith("0"), lines[1]  # torch's own pytree is there to cover
    assert lines[2] == "autoload"


def test_status_and_the_main_job() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "dynamo_tree_compat", "--json", "--backend", "eager"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(completed.stdout)
    assert completed.returncode == 0, completed.stderr
    assert (report["versions"]["dm-tree"] is None) == (not HAS_DM_TREE)
    assert (report["versions"]["optree"] is None) == (not HAS_OPTREE)
    # The built-in model calls torch's pytree whatever is installed.
    assert [(run["mode"], run["graph_breaks"]) for run in report["runs"]][-1] == ("enabled", 0)


def test_the_pure_python_twin_needs_no_dm_tree() -> None:
    from dynamo_tree_compat import dmtree

    structure = {"b": 1, "a": [2, (3, None)]}
    assert dmtree.flatten(structure) == [2, 3, None, 1]
    assert dmtree.map_structure(str, structure) == {"b": "1", "a": ["2", ("3", "None")]}
    assert dmtree.flatten_with_path(structure)[0] == (("a", 0), 2)
    with pytest.raises(ValueError, match="same number of elements"):
        dmtree.assert_same_structure([1, 2], [1])


def test_dm_tree_traces_without_optree_or_is_reported_missing() -> None:
    import torch

    import dynamo_tree_compat

    if not HAS_DM_TREE:
        torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))  # loads Dynamo
        functions = dynamo_tree_compat.status().functions
        # torch's own pytree rows register with Dynamo alone
        assert functions["torch.utils._pytree.tree_flatten"] == "registered"
        from dynamo_tree_compat.substitutions import LIBRARY_OF

        # Keras's tree layers have their own tests (tests/keras); here: dm-tree and optree
        states = {
            state for name, state in functions.items() if LIBRARY_OF[name] in ("dm-tree", "optree")
        }
        if HAS_OPTREE:  # optree's rows register as with dm-tree (some need no twin)
            assert {"registered", "unavailable: dm-tree is not installed"} <= states
            assert "unavailable: optree is not installed" not in states
        else:
            assert states == {
                "unavailable: dm-tree is not installed",
                "unavailable: optree is not installed",
            }
        return
    import tree

    def step(x: torch.Tensor) -> object:
        structure = {"b": x, "a": [x + 1, (x * 2,)]}
        return tree.map_structure(torch.neg, structure), tree.flatten_with_path(structure)

    x = torch.ones(2)
    assert repr(torch.compile(step, fullgraph=True, backend="eager")(x)) == repr(step(x))


def test_silent_where_libraries_are_missing() -> None:
    """No warning, no output, nothing stepped aside: a library that is not installed is no
    fault (in RLlib's environment, without optree, every compile once warned)."""
    uses = assert_silent()["uses"]
    expected = [name for name, there in (("dm-tree", HAS_DM_TREE), ("optree", HAS_OPTREE)) if there]
    assert uses == [*expected, "torch pytree"]
