"""The pytest plugin, in pytester projects run in fresh interpreters."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

# One test module for the projects below: a model step full of dm-tree and optree calls.
MODEL = """
import optree, pytest, torch, tree
import dynamo_tree_compat


def step(batch):
    flat = tree.flatten(batch)
    scaled = tree.map_structure(lambda t: t * 2, batch)
    leaves = optree.tree_leaves(scaled)
    return sum(t.sum() for t in flat + leaves)


def _run():
    torch._dynamo.reset()
    batch = {"b": torch.ones(2), "a": [torch.ones(2)]}
    return torch.compile(step, backend="eager")(batch)  # fullgraph=False: breaks allowed


@pytest.mark.no_tree_graph_breaks
def test_enabled():
    _run()


@pytest.mark.no_tree_graph_breaks
def test_disabled():
    with dynamo_tree_compat.disabled():
        _run()


def test_records(tree_graph_breaks):
    with dynamo_tree_compat.disabled():
        _run()
    libraries = {record.library for record in tree_graph_breaks}
    assert "dm-tree" in libraries, tree_graph_breaks
    assert all(":" in record.location and record.cause for record in tree_graph_breaks)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_model=MODEL)
    return pytester


def test_the_marker_fails_with_a_readable_list_when_disabled_and_passes_when_enabled(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_disabled*",
            "*graph break(s) in dm-tree or optree:*",
            "*test_model.py:*[[]dm-tree[]]*",
            "*dynamo-tree-compat: disabled (a disabled() scope or uninstall())*",
        ]
    )
    assert "test_enabled FAILED" not in result.stdout.str()


def test_the_option_prints_a_summary(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--tree-graph-breaks")
    result.stdout.fnmatch_lines(
        ["*tree graph breaks*", "*graph break(s) in 2 test(s):*dm-tree*", "*x *test_model.py:*"]
    )


def test_with_xdist_each_worker_records_and_the_summary_adds_up(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--tree-graph-breaks"
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*graph break(s) in 2 test(s):*dm-tree*"])


def test_importing_the_plugin_imports_no_torch() -> None:
    code = "import sys, dynamo_tree_compat.pytest_plugin; print('torch' in sys.modules)"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert completed.stdout.strip() == "False", completed.stderr
