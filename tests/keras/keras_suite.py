"""Keras's own tree tests, from the installed Keras, with every call compiled.

Run as a script: ``python tests/keras/keras_suite.py eager|compiled OUT.json``. It loads
``keras/src/tree/tree_test.py`` from the installed wheel (never a copy) and runs it with
unittest. In ``compiled`` mode each tree implementation module the suite tests
(``dmtree_impl``, ``torchtree_impl``, ``optree_impl``) is seen by the suite through a
stand-in whose public functions run under ``torch.compile(fullgraph=True)``:

- a call that traces returns the compiled result; where no argument is callable (so a
  second run has no side effect to repeat) it is also run eagerly, and a compiled result
  that differs is counted in ``differs`` and fails the test;
- a call whose traced code raises the user's error (Dynamo's "Observed exception") is run
  compiled without fullgraph, so the suite sees the error eager code would raise;
- a call Dynamo cannot trace where eager code raises (Dynamo does not model calling a
  string, say) runs compiled without fullgraph, so the suite sees eager's error; counted
  in ``errors_via_break`` (asked only where no argument is callable: running a visitor
  eagerly to ask would repeat its side effects);
- any other Dynamo error is a break, counted in ``breaks`` with its reason: the call runs
  compiled without fullgraph and, where no argument is callable, must give eager's
  result (the judge, ``test_keras_suite.py``, allows breaks only where Dynamo cannot
  take the structure at all, torch 2.5).

A call made inside another (a visitor that calls the tree again) is part of that call's
trace, or of its eager run.

Keras itself, and every module but the suite's view of the implementation, is untouched.
"""

from __future__ import annotations

import json
import os
import sys
import types
import unittest
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "torch")

#: The functions of a tree implementation module the suite calls.
PUBLIC = (
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
COUNTS = {"calls": 0, "differs": 0, "breaks": 0, "errors_via_break": 0}
#: What broke, and what differed, as "layer.function: what".
BREAKS: list[str] = []
DIFFERS: list[str] = []
#: The call under way, if any.
_ACTIVE: list[str] = []


def _same(expected: Any, actual: Any) -> bool:
    """Equal, with the same container types all the way down (arrays and tensors by
    value)."""
    import numpy as np
    import torch

    if type(expected) is not type(actual):
        return False
    if isinstance(expected, (np.ndarray, torch.Tensor)):
        return bool((expected == actual).all()) and expected.shape == actual.shape
    if isinstance(expected, dict):
        return list(expected) == list(actual) and all(
            _same(expected[k], actual[k]) for k in expected
        )
    if isinstance(expected, (list, tuple)):
        return len(expected) == len(actual) and all(map(_same, expected, actual))
    try:
        return bool(expected == actual)
    except Exception:  # noqa: BLE001 - an object with no equality: compare what it shows
        return repr(expected) == repr(actual)


def _raises(function: Callable[..., Any], args: Any, kwargs: Any) -> bool:
    """Whether the call raises eagerly: asked only where no argument is callable, since a
    visitor's side effects would otherwise happen twice (here, and in the compiled run)."""
    if any(callable(a) for a in (*args, *kwargs.values())):
        return False
    try:
        function(*args, **kwargs)
    except Exception:  # noqa: BLE001 - any error: the call is one that raises
        return True
    return False


def _compiled(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    def call(*args: Any, **kwargs: Any) -> Any:
        if _ACTIVE:  # a call from inside another: part of its trace, or of its eager run
            return function(*args, **kwargs)
        _ACTIVE.append(name)
        try:
            return _compare(*args, **kwargs)
        finally:
            _ACTIVE.pop()

    def _compare(*args: Any, **kwargs: Any) -> Any:

        def body(*a: Any, **k: Any) -> Any:
            return function(*a, **k)

        COUNTS["calls"] += 1
        torch._dynamo.reset()
        try:
            result = torch.compile(body, backend="eager", fullgraph=True)(*args, **kwargs)
        except torch._dynamo.exc.Unsupported as error:
            if "Observed exception" in str(error):
                pass
            elif _raises(function, args, kwargs):
                COUNTS["errors_via_break"] += 1
            else:
                COUNTS["breaks"] += 1
                BREAKS.append(f"{name}: {str(error).splitlines()[0]}")
            torch._dynamo.reset()
            result = torch.compile(body, backend="eager")(*args, **kwargs)
        if not any(callable(a) for a in (*args, *kwargs.values())):
            expected = function(*args, **kwargs)
            if not _same(expected, result):
                COUNTS["differs"] += 1
                DIFFERS.append(f"{name}: compiled {result!r}, eager {expected!r}")
                raise AssertionError(f"{name}: compiled {result!r}, eager {expected!r}")
        return result

    return call


def _stand_in(module: types.ModuleType) -> types.ModuleType:
    stand_in = types.ModuleType(module.__name__)
    stand_in.__dict__.update(module.__dict__)
    for name in PUBLIC:
        if hasattr(module, name):
            layer = module.__name__.rpartition(".")[2]
            setattr(stand_in, name, _compiled(f"{layer}.{name}", getattr(module, name)))
    return stand_in


def run(mode: str) -> dict[str, Any]:
    import importlib
    import importlib.util

    import keras.src.tree as package

    suite_path = Path(package.__file__).parent / "tree_test.py"
    if mode == "compiled":
        for name in ("dmtree_impl", "torchtree_impl", "optree_impl"):
            try:
                module = importlib.import_module(f"keras.src.tree.{name}")
            except ImportError:
                continue
            setattr(package, name, _stand_in(module))  # what `from keras.src.tree import` sees
    spec = importlib.util.spec_from_file_location("keras_tree_test", suite_path)
    assert spec is not None and spec.loader is not None
    suite_module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = suite_module  # Dynamo imports the module of a class it meets
    spec.loader.exec_module(suite_module)
    suite = unittest.defaultTestLoader.loadTestsFromModule(suite_module)
    result = unittest.TestResult()
    suite.run(result)
    failed = {test.id(): text.strip().splitlines()[-1] for test, text in result.failures}
    failed.update({test.id(): text.strip().splitlines()[-1] for test, text in result.errors})
    skipped = {test.id() for test, _ in result.skipped}
    return {
        "ran": result.testsRun,
        "failed": failed,
        "skipped": sorted(skipped),
        **COUNTS,
        "breaks_seen": sorted(set(BREAKS)),
        "differs_seen": DIFFERS,
    }


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(json.dumps(run(sys.argv[1]), indent=1))
