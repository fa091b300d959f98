"""The mirrored libraries' own test suites as the judge, every public call compiled.

Each suite runs eagerly, compiled with the package, and compiled without it (``run.py``,
``judge.py``); graphs are reused between calls as the suites' tests make them. Every test
that passes eagerly must pass compiled with the package, but for the limits below, each
with its reason, and no compiled call may return what eager code would not. The counts
of the three runs are printed (``pytest -s``).

- dm-tree's ``tree_test.py``, from the installed wheel (a copy outside site-packages);
- optree's ``tests/``, from the installed release's sdist (downloaded once into
  ``.cache/suites/``): a seeded sample (``DTC_OPTREE_SAMPLE``; by default 16 in make
  test, another 120 in CI's wide stage), the whole suite with ``DTC_OPTREE_SAMPLE=0``;
- Keras's ``tree_test.py`` (Keras 3.12 on): ``test_keras_suite.py``.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from tests.helpers.breadth import LONG
from tests.suites.judge import ROOT, runs, verdict

#: dm-tree's tests that fail compiled, package or not, with why.
DMTREE_LIMITS = {
    "dmtree_tree_test.DoctestTest.testDoctest": (
        "doctest runs its examples in a copy of the module's namespace named after the "
        "module; Dynamo guards a global that a function defined there reads as an "
        "attribute of the imported module of that name, where the copy's own names (the "
        "example's `visited`) are not: InternalTorchDynamoError, with or without this "
        "package, once the function is traced"
    ),
    "dmtree_tree_test.NestTest.testFlattenWithPath7": (
        "a wrapt.ObjectProxy of a namedtuple: Dynamo fails inside on it (`descriptor "
        "'__len__' requires a 'tuple' object`), with or without this package, and with no "
        "tree call (tests/dmtree/test_dmtree_hostile.py)"
    ),
}


def test_dm_trees_suite_passes_compiled(tmp_path: Path) -> None:
    pytest.importorskip("absl.testing.parameterized")
    import tree

    if not (Path(tree.__file__).parent / "tree_test.py").exists():
        pytest.fail("this dm-tree wheel ships no tree_test.py")
    eager, compiled, without = runs("dmtree", tmp_path)
    assert eager["ran"] > 60 and not eager["failed"], eager["failed"]
    wrong = verdict("dm-tree's tree_test.py", eager, compiled, without, DMTREE_LIMITS)
    assert not wrong, "\n".join(wrong)


#: optree's tests that fail compiled, with why: in the per-function sample of the long
#: profile (none in make test's and the wide stage's samples). None fail now.
OPTREE_LIMITS: dict[str, str] = {}
#: How many of optree's tests run: 16 in make test; the wide stage's own test draws 120
#: more; the long profile, four parametrizations of every test function of optree's main
#: files (run.per_function; those failing compiled are in OPTREE_LIMITS).
OPTREE_SAMPLE = int(os.environ.get("DTC_OPTREE_SAMPLE") or 16)
WIDE_SAMPLE = -4 if LONG else 120
OPTREE_SEED = int(os.environ.get("DTC_OPTREE_SEED", "20261205"))


def _optree_tests() -> Path:
    """optree's ``tests/`` for the installed release, from its sdist, cached."""
    version = importlib.metadata.version("optree")
    folder = ROOT / ".cache" / "suites" / f"optree-{version}"
    tests = folder / f"optree-{version}" / "tests"
    if not tests.exists():  # into a folder of this process's own, then moved in whole
        folder.parent.mkdir(parents=True, exist_ok=True)
        own = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f"{folder.name}."))
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        command += ["--no-binary", ":all:", f"optree=={version}", "-d", str(own)]
        completed = subprocess.run(command, capture_output=True, text=True, timeout=600)
        archives = list(own.glob("optree-*.tar.gz"))
        assert archives, f"could not download optree's sdist: {completed.stderr[-2000:]}"
        with tarfile.open(archives[0]) as archive:
            members = [m for m in archive.getmembers() if "/tests/" in m.name]
            archive.extractall(own, members=members, filter="data")
        try:
            own.rename(folder)
        except OSError:  # another run (make test beside the torch matrix) moved its own in
            shutil.rmtree(own, ignore_errors=True)
    return tests


def _optrees_suite_passes_compiled(tmp_path: Path, size: int, seed: int) -> None:
    tests = str(_optree_tests())
    eager, compiled, without = runs(
        "optree", tmp_path, str(size), str(seed), DTC_OPTREE_TESTS=tests
    )
    assert eager["ran"] >= (300 if size < 0 else min(size or 10_000, 200) * 0.9), eager["ran"]
    assert not eager["failed"], list(eager["failed"])[:20]
    drawn = f"{-size} of each function" if size < 0 else size or "all"
    name = f"optree {importlib.metadata.version('optree')}'s tests ({drawn})"
    wrong = verdict(name, eager, compiled, without, OPTREE_LIMITS)
    assert not wrong, "\n".join(wrong)


def test_optrees_suite_passes_compiled(tmp_path: Path) -> None:
    _optrees_suite_passes_compiled(tmp_path, OPTREE_SAMPLE, OPTREE_SEED)


@pytest.mark.wide
def test_optrees_suite_passes_compiled_in_a_wider_sample(tmp_path: Path) -> None:
    """Another seed's sample, wider (CI's wide stage; the long profile: every test
    function of optree's main files)."""
    _optrees_suite_passes_compiled(tmp_path, WIDE_SAMPLE, OPTREE_SEED + 1)
