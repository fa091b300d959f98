"""Silent where all is well: the covered workloads compile with no warning, no output and
nothing stepped aside, whichever tree libraries are installed (here: all of them, and
optree or dm-tree hidden from the process; ``make matrix`` and ``make integration-rllib``
run the same check where they really are missing)."""

from __future__ import annotations

import pytest

from tests.helpers.silence import assert_silent

# Python's path finder no longer finds the module or its distribution (torch asks
# importlib.metadata for optree's version): to the process it is not installed.
HIDE = """
import sys
class Hidden:
    def __init__(self, finder): self.finder = finder
    def __getattr__(self, attribute): return getattr(self.finder, attribute)
    def find_spec(self, fullname, *rest):
        if fullname.partition(".")[0] in {names!r}:
            return None
        return self.finder.find_spec(fullname, *rest)
    def find_distributions(self, *args, **kwargs):
        found = self.finder.find_distributions(*args, **kwargs)
        return [d for d in found if d.metadata["Name"].lower() not in {distributions!r}]
sys.meta_path[:] = [
    Hidden(f) if getattr(f, "__name__", "") == "PathFinder" else f
    for f in sys.meta_path]
"""


@pytest.mark.parametrize("import_first", ["", "import tree, optree"])
def test_silent_with_every_library(import_first: str) -> None:
    assert assert_silent(import_first)["uses"] == ["dm-tree", "optree", "torch pytree"]


@pytest.mark.parametrize(
    ("hidden", "uses"),
    [
        ({"optree": "optree"}, ["dm-tree", "torch pytree"]),  # RLlib's install
        ({"tree": "dm-tree"}, ["optree", "torch pytree"]),
        ({"tree": "dm-tree", "optree": "optree"}, ["torch pytree"]),
    ],
    ids=["optree missing", "dm-tree missing", "both missing"],
)
def test_silent_with_a_library_missing(hidden: dict[str, str], uses: list[str]) -> None:
    """``hidden``: import name -> distribution name, each hidden from the process."""
    prelude = HIDE.format(names=sorted(hidden), distributions=sorted(hidden.values()))
    assert assert_silent(prelude)["uses"] == uses
