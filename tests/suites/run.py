"""The mirrored libraries' own test suites, with every public call compiled.

Run as a script: ``python tests/suites/run.py SUITE MODE OUT.json [SAMPLE SEED]``, SUITE
one of ``dmtree``, ``optree``, ``keras``, MODE ``eager`` or ``compiled`` (the judge,
``test_suites.py``, also runs ``compiled`` with ``DYNAMO_TREE_COMPAT=0``: compiled
without the package). The suites come from where the libraries ship them, never from
this repository:

- dm-tree: ``tree/tree_test.py`` from the installed wheel, run from a copy outside
  site-packages (Dynamo skips every file of the ``tree`` package, the suite's own
  callbacks included);
- optree: ``tests/`` of the release's sdist (``pip download --no-binary :all:``), in the
  folder the judge passes in ``DTC_OPTREE_TESTS``; SAMPLE tests drawn with SEED (a
  negative SAMPLE, -K: K parametrizations of each test function, :func:`per_function`);
- Keras: ``keras/src/tree/tree_test.py`` from the installed wheel.

The suite's view of the library is a stand-in whose public functions run compiled
(``compiled_calls.py``); the library itself, and every other module, is untouched.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import os
import random
import shutil
import sys
import tempfile
import types
import unittest
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.suites.compiled_calls import Counts, stand_in

#: Keras's tree layer: the functions its implementation modules share.
KERAS_PUBLIC = (
    "is_nested",
    "traverse",
    "flatten",
    "flatten_with_path",
    "map_structure",
    "map_structure_up_to",
    "assert_same_structure",
    "assert_same_paths",
    "pack_sequence_as",
    "lists_to_tuples",
    "map_shape_structure",
)
#: optree's functions that change its state: compiled, but never run twice to compare.
OPTREE_STATEFUL = frozenset(
    {"register_pytree_node", "register_pytree_node_class", "unregister_pytree_node"}
)


def _many_graphs() -> None:
    """Room for a graph per structure a test brings: past Dynamo's limit a frame would
    run eagerly, which would hide a wrong reuse."""
    import torch

    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, name, 100_000)
    if hasattr(config, "accumulated_recompile_limit"):
        config.accumulated_recompile_limit = 100_000


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Dynamo imports the module of a class it meets
    spec.loader.exec_module(module)
    return module


def _unittest(module: types.ModuleType) -> dict[str, Any]:
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    result = unittest.TestResult()
    suite.run(result)
    failed = {test.id(): text.strip().splitlines()[-1] for test, text in result.failures}
    failed.update({test.id(): text.strip().splitlines()[-1] for test, text in result.errors})
    return {
        "ran": result.testsRun,
        "failed": failed,
        "skipped": sorted(test.id() for test, _ in result.skipped),
    }


def run_dmtree(compiled: bool, counts: Counts) -> dict[str, Any]:
    import tree

    source = Path(tree.__file__).parent / "tree_test.py"
    folder = Path(tempfile.mkdtemp(prefix="dtc-dmtree-suite-"))
    try:
        copy = folder / "dmtree_tree_test.py"
        shutil.copyfile(source, copy)
        module = _load("dmtree_tree_test", copy)
        if compiled:
            public = [n for n in dir(tree) if not n.startswith("_") and callable(getattr(tree, n))]
            module.tree = stand_in(tree, public, counts)  # what the suite's `tree.x` reads
        return _unittest(module)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_keras(compiled: bool, counts: Counts) -> dict[str, Any]:
    import keras.src.tree as package

    if compiled:
        for layer in ("dmtree_impl", "torchtree_impl", "optree_impl"):
            try:
                module = importlib.import_module(f"keras.src.tree.{layer}")
            except ImportError:
                continue
            label = layer.removesuffix("_impl") + "_impl"
            # what `from keras.src.tree import dmtree_impl` in the suite sees
            setattr(package, layer, stand_in(module, KERAS_PUBLIC, counts, label=label))
    return _unittest(_load("keras_tree_test", Path(package.__file__).parent / "tree_test.py"))


#: optree's test files whose every test function the per-function sample reaches.
OPTREE_FILES = (
    "test_ops.py",
    "test_treespec.py",
    "test_accessors.py",
    "test_functools.py",
    "test_prefix_errors.py",
    "test_dataclasses.py",
    "test_utils.py",
    "test_registry.py",
)


def per_function(items: list[Any], count: int, seed: int) -> list[Any]:
    """``count`` parametrizations (all, where fewer) of each test function of
    :data:`OPTREE_FILES`, drawn with ``seed``, in the suite's order."""
    groups: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        path, _, name = item.nodeid.partition("::")
        if path.rsplit("/", 1)[-1] in OPTREE_FILES:
            groups.setdefault(f"{path}::{name.partition('[')[0]}", []).append(index)
    draw = random.Random(seed)
    chosen = {
        index
        for group in groups.values()
        for index in (group if len(group) <= count else draw.sample(group, count))
    }
    return [item for index, item in enumerate(items) if index in chosen]


class _OptreeStandIn:
    """A pytest plugin: the sample's test modules see a compiled optree."""

    def __init__(self, compiled: bool, counts: Counts, sample: int, seed: int) -> None:
        self.compiled, self.counts, self.sample, self.seed = compiled, counts, sample, seed
        self.outcomes: dict[str, str] = {}

    def pytest_collection_modifyitems(self, config: Any, items: list[Any]) -> None:
        # Dynamo registers torch's own nodes with optree: after the suite's helpers have
        # counted the registry, in every mode alike.
        _dynamo_loaded(self.compiled)
        kept = items
        if self.sample < 0:  # that many parametrizations of each test function
            kept = per_function(items, -self.sample, self.seed)
        elif self.sample and len(items) > self.sample:
            chosen = set(random.Random(self.seed).sample(range(len(items)), self.sample))
            kept = [item for index, item in enumerate(items) if index in chosen]
        if kept is not items:
            chosen_ids = {id(item) for item in kept}
            config.hook.pytest_deselected(items=[i for i in items if id(i) not in chosen_ids])
            items[:] = kept
        if self.compiled:
            import optree

            public = [
                name for name in optree.__all__ if not isinstance(getattr(optree, name), type)
            ]
            compiled = stand_in(
                optree,
                public,
                self.counts,
                side_effects=OPTREE_STATEFUL | {"dict_insertion_ordered"},
            )
            compiled.dict_insertion_ordered = optree.dict_insertion_ordered  # a context manager
            for module in {item.module for item in items if getattr(item, "module", None)}:
                if getattr(module, "optree", None) is optree:
                    module.optree = compiled

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.failed:
            self.outcomes[report.nodeid] = "failed"
        elif report.skipped and self.outcomes.get(report.nodeid) != "failed":
            self.outcomes[report.nodeid] = "skipped"
        elif report.when == "call":
            self.outcomes.setdefault(report.nodeid, "passed")


def run_optree(compiled: bool, counts: Counts, sample: int, seed: int) -> dict[str, Any]:
    import pytest

    tests = Path(os.environ["DTC_OPTREE_TESTS"])
    plugin = _OptreeStandIn(compiled, counts, sample, seed)
    args = ["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-o", "addopts="]
    args += ["--ignore", str(tests / "concurrent"), "--ignore", str(tests / "integrations")]
    args += ["-x"] if os.environ.get("DTC_SUITE_FIRST_FAILURE") else []
    args += ["-k", os.environ["DTC_SUITE_SELECT"]] if os.environ.get("DTC_SUITE_SELECT") else []
    pytest.main([*args, "--rootdir", str(tests), str(tests)], plugins=[plugin])
    failed = {test: outcome for test, outcome in plugin.outcomes.items() if outcome == "failed"}
    return {
        "ran": len(plugin.outcomes),
        "failed": failed,
        "skipped": sorted(t for t, outcome in plugin.outcomes.items() if outcome == "skipped"),
    }


def _dynamo_loaded(compiled: bool) -> None:
    """Dynamo imported, with room for many graphs where calls are compiled."""

    import dynamo_tree_compat  # noqa: F401 - as autoload would (DYNAMO_TREE_COMPAT decides)

    if compiled:
        _many_graphs()


def run(suite: str, mode: str, sample: int = 0, seed: int = 0) -> dict[str, Any]:
    counts = Counts()
    compiled = mode == "compiled"
    if suite != "optree":  # (optree's: once its suite has looked at the registry)
        _dynamo_loaded(compiled)
    if suite == "dmtree":
        found = run_dmtree(compiled, counts)
    elif suite == "keras":
        found = run_keras(compiled, counts)
    else:
        found = run_optree(compiled, counts, sample, seed)
    return {**found, **dataclasses.asdict(counts)}


if __name__ == "__main__":
    suite_name, mode_name, out = sys.argv[1:4]
    numbers = [int(value) for value in sys.argv[4:6]]
    Path(out).write_text(json.dumps(run(suite_name, mode_name, *numbers), indent=1))
