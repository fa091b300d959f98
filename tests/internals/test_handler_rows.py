"""Every handler has its row in the table, and every row its twin, handler or way.

A handler is keyed by its original's import path (``tree.flatten``); a key spelt
otherwise than the row's would never be called, silently. This test reads the keys from
the handler tables and the rows from ``substitutions.LIBRARIES``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dynamo_tree_compat import substitutions
from dynamo_tree_compat._dynamo import handlers

ROWS = {
    row.original_name: row for library in substitutions.LIBRARIES.values() for row in library.rows
}
TABLES: dict[str, Mapping[str, object]] = {
    "FAST_PATHS": handlers.FAST_PATHS,
    "OPTREE_C_LAYER": handlers.OPTREE_C_LAYER,
    "CORRECTIONS": handlers.CORRECTIONS,
}
#: Rows with no twin of their own whose library code Dynamo traces in front of torch's
#: handling: optree's Python code over the package's C layer, and ``_cxx_pytree``'s.
OWN_CODE = ("optree.", f"{substitutions.CXX_PYTREE}.")


def without_row(tables: Mapping[str, Iterable[str]], rows: Iterable[str]) -> list[str]:
    """The handler keys that name no row.

    >>> without_row({"FAST_PATHS": ["tree.flaten"]}, ["tree.flatten"])
    ['FAST_PATHS: tree.flaten']
    """
    known = set(rows)
    return [f"{table}: {key}" for table, keys in tables.items() for key in keys if key not in known]


def test_every_handler_has_its_row() -> None:
    assert without_row(TABLES, ROWS) == []


def test_every_row_has_its_twin_handler_or_way() -> None:
    handled = {key for table in TABLES.values() for key in table}
    bare = [
        name
        for name, row in ROWS.items()
        if row.twin is None and name not in handled and not name.startswith(OWN_CODE)
    ]
    assert bare == []


def test_a_misspelt_handler_key_is_found() -> None:
    planted = {**TABLES, "FAST_PATHS": [*handlers.FAST_PATHS, "tree.flaten"]}
    assert without_row(planted, ROWS) == ["FAST_PATHS: tree.flaten"]
