"""The distribution ships every subpackage: a missing one breaks `import torch` (autoload)."""

from __future__ import annotations

import pathlib

import pytest
import setuptools

tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_subpackage_is_in_the_distribution() -> None:
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = set(setuptools.find_packages(str(ROOT), **settings["packages"]["find"]))
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "dynamo_tree_compat").rglob("__init__.py")
    }
    assert on_disk == shipped
    assert {"dynamo_tree_compat._dynamo", "dynamo_tree_compat.twins.dmtree"} <= shipped
