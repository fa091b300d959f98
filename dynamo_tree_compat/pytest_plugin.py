"""A pytest plugin that keeps tree graph breaks out of a library's compiled code.

Registered through the ``pytest11`` entry point; importing it imports neither torch nor
Dynamo. It offers:

- the fixture ``tree_graph_breaks``: the graph breaks Dynamo met during the test, each
  with ``location``, ``cause`` and ``library``: whose code caused it ("dm-tree",
  "optree", "torch pytree", "dynamo-tree-compat", another package such as "keras", or
  "your code"), never a tree library's just because a tree call is on the stack;
- the marker ``@pytest.mark.no_tree_graph_breaks``: the test fails when Dynamo breaks a
  graph in dm-tree, optree or this package during it, with a list of the breaks and of what this
  package did about each;
- the option ``--tree-graph-breaks``: records every test and prints a summary at the
  end of the session (with pytest-xdist, each worker records its own tests and the
  summary adds them up).

Dynamo reports a break when it traces: a function compiled by an earlier test and not
traced again reports nothing.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import pytest

__all__ = ["TreeGraphBreak"]

MARKER = "no_tree_graph_breaks"
OPTION = "--tree-graph-breaks"
TREE_LIBRARIES = ("dm-tree", "optree", "dynamo-tree-compat")
_RECORDS = pytest.StashKey[list["TreeGraphBreak"]]()
_OFF_WHEN_BROKEN = pytest.StashKey[bool]()
_SESSION = pytest.StashKey[list[dict[str, str]]]()


@dataclass(frozen=True)
class TreeGraphBreak:
    """One graph break Dynamo met during a test.

    >>> TreeGraphBreak("model.py:12", "Observed exception", "dm-tree").library
    'dm-tree'
    """

    location: str
    cause: str
    library: str

    def __str__(self) -> str:
        return f"{self.location}: [{self.library}] {self.cause}"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dynamo-tree-compat")
    group.addoption(
        OPTION,
        action="store_true",
        help="record the graph breaks of every test; print a summary at the end",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: fail the test if Dynamo breaks a graph in dm-tree or optree during it",
    )
    config.stash[_SESSION] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    wanted = item.get_closest_marker(MARKER) is not None or item.config.getoption(OPTION)
    wanted = wanted or "tree_graph_breaks" in getattr(item, "fixturenames", ())
    if not wanted:
        return (yield)
    from . import config
    from ._dynamo.graph_breaks import GraphBreakRecorder

    records = item.stash.setdefault(_RECORDS, [])
    item.stash[_OFF_WHEN_BROKEN] = False

    class Recorder(GraphBreakRecorder):
        """Fills the test's records as Dynamo reports each break."""

        def emit(self, record: Any) -> None:
            super().emit(record)
            found = self.breaks[-1]
            records.append(TreeGraphBreak(found.call_site, found.reason, found.library))
            if not config.twins_enabled:  # the package was disabled when it broke
                item.stash[_OFF_WHEN_BROKEN] = True

    with Recorder():
        try:
            return (yield)
        finally:
            item.config.stash[_SESSION].extend(
                {"test": item.nodeid, **asdict(record)} for record in records
            )
            _check_marker(item, records)


def _check_marker(item: pytest.Item, records: list[TreeGraphBreak]) -> None:
    if item.get_closest_marker(MARKER) is None:
        return
    tree_breaks = [record for record in records if record.library in TREE_LIBRARIES]
    if tree_breaks:
        lines = [f"{len(tree_breaks)} graph break(s) in dm-tree or optree:"]
        lines += [f"  {record}" for record in tree_breaks]
        off = item.stash.get(_OFF_WHEN_BROKEN, False)
        lines.append(f"dynamo-tree-compat: {_package_state(tree_breaks, off)}")
        pytest.fail("\n".join(lines), pytrace=False)


def _package_state(breaks: list[TreeGraphBreak], off_when_broken: bool) -> str:
    """Whether the package was active, disabled, or not covering what broke."""
    import dynamo_tree_compat

    from .outcomes import Kind

    report = dynamo_tree_compat.status()
    if report.mode != "on" or off_when_broken:
        how = "DYNAMO_TREE_COMPAT=0" if report.switched_off else "a disabled() scope or uninstall()"
        return f"disabled ({how}): these calls break the graph as without the package"
    uncovered = {
        name: str(outcome)
        for name, outcome in report.outcomes.items()
        if outcome.kind is not Kind.REGISTERED and any(name in str(record) for record in breaks)
    }
    if uncovered:
        return "active, but not covering " + "; ".join(
            f"{name} ({state})" for name, state in uncovered.items()
        )
    return "active: these breaks come from calls or values it does not trace (see the causes)"


@pytest.fixture
def tree_graph_breaks(request: pytest.FixtureRequest) -> list[TreeGraphBreak]:
    """The graph breaks Dynamo meets during the test (filled as the test runs)."""
    return request.node.stash.setdefault(_RECORDS, [])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist, on the controller: adds up what a worker recorded."""
    recorded = getattr(node, "workeroutput", {}).get("tree_graph_breaks", [])
    node.config.stash[_SESSION].extend(recorded)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """pytest-xdist, on a worker: hands its records to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["tree_graph_breaks"] = session.config.stash[_SESSION]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not config.getoption(OPTION) or hasattr(config, "workeroutput"):
        return
    records = config.stash[_SESSION]
    terminalreporter.section("tree graph breaks")
    by_library = collections.Counter(record["library"] for record in records)
    tests = len({record["test"] for record in records})
    summary = ", ".join(f"{count} {library}" for library, count in sorted(by_library.items()))
    terminalreporter.write_line(
        f"{len(records)} graph break(s) in {tests} test(s)" + (f": {summary}" if records else "")
    )
    counts = collections.Counter(
        (record["library"], record["location"], record["cause"]) for record in records
    )
    for (library, location, cause), count in counts.most_common():
        terminalreporter.write_line(f"  {count} x {location}: [{library}] {cause[:100]}")
