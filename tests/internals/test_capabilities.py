"""Every "does this Dynamo do X" answer, pinned per release of the torch matrix.

The package's capabilities (``_dynamo/capabilities.py``) choose its workarounds; the
tests' features (``tests/helpers/dynamo_support.py``) choose what the tests draw and
skip. Both are asked by trying. A release whose answer changes fails here, by name,
rather than switching a workaround or a skip silently. Every release's answers were
seen on 2026-12-03 (``docs/torch-versions.md``).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest
import torch

from dynamo_tree_compat._dynamo.runtime import Capability
from dynamo_tree_compat._dynamo.seam import capabilities
from tests.helpers.dynamo_support import FEATURES, TORCH, dynamo_traces
from tests.helpers.fresh import run_fresh

RELEASES = [(2, minor) for minor in range(5, 16)]
#: The package's capabilities by name.
NAMES = [capability.value for capability in Capability]


def _releases(first: tuple[int, int], last: tuple[int, int]) -> set[tuple[int, int]]:
    return {release for release in RELEASES if first <= release <= last}


OLDEST, NEWEST = RELEASES[0], RELEASES[-1]
#: Each name: the releases where it answers True.
TRUE_ON: dict[str, set[tuple[int, int]]] = {
    # the package's capabilities
    "sort_raises_cleanly": _releases((2, 11), NEWEST),
    "defaultdict_takes_items": _releases((2, 10), NEWEST),
    "defaultdict_leaves_graph": _releases((2, 8), NEWEST),
    "deque_keeps_maxlen": _releases((2, 6), NEWEST),
    "inlined_skip_becomes_break": _releases(OLDEST, (2, 10)),
    "break_recurses_on_cycles": _releases(OLDEST, (2, 10)),
    "skip_keeps_graphs": _releases((2, 7), NEWEST),
    "compares_through_polyfills": _releases(OLDEST, (2, 12)),
    "tree_map_fast_path": _releases((2, 10), NEWEST),
    "tree_map_with_path_fast_path": _releases((2, 12), NEWEST),  # read in 2.10-2.12 wheels
    "tree_map_only_fast_path": _releases((2, 10), NEWEST),
    # 2.10 to 2.14 seen on their wheels; 2.15's fast path returns a dict
    "tree_map_fast_path_keeps_defaultdict": _releases((2, 10), (2, 14)),
    # seen false on the 2.13.0 and 2.15.0 wheels (a graph reused for keys in another
    # order); 2.10 to 2.12 and 2.14 not tried (false there: the package takes the maps)
    "tree_map_fast_path_guards_key_order": set(),
    # seen on the 2.5.1, 2.13.0, 2.14.1 and 2.15.0 wheels; 2.6 to 2.12 not tried yet
    # (a False there only keeps a graph break, never a wrong answer)
    "set_subclass_keeps_contents": _releases((2, 15), NEWEST),
    # seen on 2.5.1 (false), 2.13.0 and 2.15.0; 2.6 to 2.12 and 2.14 not tried
    "iter_of_a_number_raises": _releases((2, 13), NEWEST),
    # seen on 2.5.1, 2.6.0 (true), 2.7.1, 2.13.0 and 2.15.0 (false)
    "generators_run_to_the_end": _releases(OLDEST, (2, 6)),
    # seen on 2.5.1 (false), 2.6.0, 2.7.1, 2.13.0 and 2.15.0 (true)
    "cxx_pytree_inlined": _releases((2, 6), NEWEST),
    # the tests' features
    "time.struct_time": _releases((2, 12), NEWEST),
    "hash": _releases((2, 13), NEWEST),
    "defaultdict.default_factory": _releases((2, 11), NEWEST),
    "tuple.__repr__": _releases((2, 13), NEWEST),
    "frozen dataclass repr": set(),
    "defaultdict(factory, items)": _releases((2, 10), NEWEST),
    "defaultdict leaves the graph": _releases((2, 8), NEWEST),
    "dict.items() view": _releases((2, 8), NEWEST),
    "tuple subclass": _releases((2, 8), NEWEST),
    "namedtuple subclass": _releases((2, 6), NEWEST),
    "deque maxlen": _releases((2, 6), NEWEST),
    "structseq made in the graph": _releases((2, 6), NEWEST),
    "list subclass": _releases((2, 7), NEWEST),
    # seen on 2.5.1, 2.6.0 (false), 2.7.1, 2.13.0 and 2.15.0 (true)
    "a generator read lazily": _releases((2, 7), NEWEST),
    "Tensor.as_subclass": _releases((2, 8), NEWEST),
    "mappingproxy made in the graph": _releases((2, 7), NEWEST),
    "mappingproxy passed in": _releases((2, 7), NEWEST),  # 2.7: with the package's type
    "class of an object made in the graph": _releases((2, 7), NEWEST),
    "attrs instance made in the graph": _releases(OLDEST, NEWEST),
    "is between containers": _releases((2, 7), NEWEST),
    "a @contextmanager scope": _releases((2, 7), NEWEST),
    "a frame with no graph ops": _releases((2, 7), NEWEST),
    "object dict keys": _releases((2, 10), NEWEST),
    "optree without the package": _releases((2, 10), NEWEST),
}

needs_a_pinned_release = pytest.mark.skipif(
    TORCH not in RELEASES, reason=f"torch {torch.__version__} is not in the matrix"
)


def test_every_capability_and_feature_is_pinned() -> None:
    assert set(TRUE_ON) == set(NAMES) | set(FEATURES)
    assert set(capabilities.QUESTIONS) == set(Capability)


@needs_a_pinned_release
@pytest.mark.parametrize("name", NAMES)
def test_the_package_capability_answers_as_pinned(name: str) -> None:
    """Both the shipped answer and the trial itself, asked now on this torch."""
    capability = Capability(name)
    assert capabilities.has(capability) is (TORCH in TRUE_ON[name]), torch.__version__
    assert capabilities.trial(capability) is (TORCH in TRUE_ON[name]), torch.__version__


def test_the_shipped_answers_are_the_pinned_ones_for_every_release() -> None:
    assert [tuple(map(int, r.split(".")[:2])) for r in capabilities.KNOWN_RELEASES] == RELEASES
    for release in capabilities.KNOWN_RELEASES:
        minor = tuple(map(int, release.split(".")[:2]))
        expected = {Capability(name): minor in TRUE_ON[name] for name in NAMES}
        assert capabilities.known_answers(release) == expected, release
        assert capabilities.known_answers(release + "+cu126") == expected, release


@needs_a_pinned_release
@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_the_test_feature_answers_as_pinned(feature: str) -> None:
    assert dynamo_traces(feature) is (TORCH in TRUE_ON[feature]), f"torch {torch.__version__}"


def test_a_capability_is_asked_once() -> None:
    """The answer is kept: a second ask compiles nothing."""
    capability = Capability.DEQUE_KEEPS_MAXLEN
    first = capabilities.has(capability)
    question = capabilities.QUESTIONS[capability]
    try:
        capabilities.QUESTIONS[capability] = dataclasses.replace(question, ask=lambda: not first)
        assert capabilities.has(capability) is first
    finally:
        capabilities.QUESTIONS[capability] = question


def test_a_trial_leaves_dynamo_s_counters_as_they_were() -> None:
    from dynamo_tree_compat._dynamo.seam import internals

    counters = internals.counters()
    before = {kind: dict(events) for kind, events in counters.items()}
    with capabilities._unseen():
        torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
    assert {kind: dict(events) for kind, events in counters.items()} == before


@needs_a_pinned_release
def test_a_first_compile_that_imports_dynamo_still_gets_true_answers() -> None:
    """A program's first ``torch.compile`` imports Dynamo halfway through importing
    inductor, where no trial can compile: the answers given then are the safe ones, and
    Dynamo's check of the first frame asks again, before anything is traced. The first
    compiled call then already uses this release's true answers (here: a defaultdict
    made in the graph, which the safe answer would break out of the graph for)."""
    completed = run_fresh(
        """
        import collections, json, sys
        import torch, tree
        assert "torch._dynamo" not in sys.modules
        graphs = []
        def counting(graph_module, example_inputs):
            graphs.append(graph_module)
            return graph_module.forward
        def step(x):
            made = collections.defaultdict(list)
            made["a"], made["b"] = x, [x + 1]
            return tree.map_structure(lambda t: t * 2, made)
        out = torch.compile(step, backend=counting)(torch.ones(2))
        from dynamo_tree_compat._dynamo.seam import capabilities
        answered = {c.value: a for c, a in capabilities._ANSWERS.items()}
        print(json.dumps([type(out).__name__, len(graphs), answered]))
        """,
        DYNAMO_TREE_COMPAT_ANY_TORCH="1",
        DYNAMO_TREE_COMPAT_ASK_DYNAMO="1",  # as on a build nobody has seen
        DYNAMO_TREE_COMPAT_CACHE_DIR="0",
    )
    kind, graphs, answers = json.loads(completed.stdout.strip().splitlines()[-1])
    expected = {name: TORCH in TRUE_ON[name] for name in NAMES}
    assert answers == expected
    if expected["defaultdict_leaves_graph"]:  # before 2.8 Dynamo returns a plain dict
        assert (kind, graphs) == ("defaultdict", 1)  # the safe answer: a break at the map


_IMPORT_THEN_COMPILE = """
import json
import torch, torch._dynamo, tree, optree
from dynamo_tree_compat._dynamo.seam import capabilities
after_import = list(capabilities.TRIALS_RUN)
compiled = torch.compile(lambda x: tree.map_structure(lambda t: t + 1, [x]), backend="eager")
compiled(torch.ones(1))
answered = {c.value: a for c, a in capabilities._ANSWERS.items()}
print(json.dumps([after_import, capabilities.TRIALS_RUN, answered]))
"""


def _import_then_compile(**environment: str) -> tuple[list[str], list[str], dict[str, bool]]:
    completed = run_fresh(_IMPORT_THEN_COMPILE, **environment)
    after_import, after_compile, answers = json.loads(completed.stdout.splitlines()[-1])
    return after_import, after_compile, answers


@needs_a_pinned_release
def test_nothing_compiles_for_a_capability_on_a_release_the_matrix_tests() -> None:
    after_import, after_compile, answers = _import_then_compile()
    assert (after_import, after_compile) == ([], [])
    assert answers == {name: TORCH in TRUE_ON[name] for name in NAMES}


def _compiling() -> set[str]:
    return {c.value for c, question in capabilities.QUESTIONS.items() if question.compiles}


def test_a_build_nobody_has_seen_asks_once_before_its_first_frame_then_from_the_cache(
    tmp_path: pathlib.Path,
) -> None:
    unseen = {"DYNAMO_TREE_COMPAT_ASK_DYNAMO": "1", "DYNAMO_TREE_COMPAT_CACHE_DIR": str(tmp_path)}
    after_import, after_compile, answers = _import_then_compile(**unseen)
    assert after_import == []  # nothing compiles at import
    assert set(after_compile) == _compiling()  # the trials, before the first frame
    [cached] = tmp_path.iterdir()
    assert json.loads(cached.read_text())["answers"] == answers
    assert _import_then_compile(**unseen) == ([], [], answers)  # from the cache


def test_a_corrupt_or_foreign_cache_file_is_no_answer(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Such a file reads as none (the process asks, as for a build nobody has seen, above),
    and the next write replaces it whole."""
    monkeypatch.setenv("DYNAMO_TREE_COMPAT_CACHE_DIR", str(tmp_path))
    answers = {capability: capabilities.has(capability) for capability in Capability}
    capabilities._write_cache(answers)
    assert capabilities._read_cache() == answers
    [cached] = tmp_path.iterdir()
    whole = json.loads(cached.read_text())
    for corrupt in (
        "{not json",
        json.dumps({**whole, "build": "another"}),
        json.dumps({**whole, "answers": {**whole["answers"], "unheard_of": True}}),
        json.dumps({**whole, "answers": dict(list(whole["answers"].items())[1:])}),
        json.dumps({**whole, "answers": {name: 1 for name in whole["answers"]}}),
        json.dumps([]),
    ):
        cached.write_text(corrupt)
        assert capabilities._read_cache() is None, corrupt
        capabilities._write_cache(answers)
        assert json.loads(cached.read_text()) == whole


def test_concurrent_writers_leave_one_whole_cache_file(tmp_path: pathlib.Path) -> None:
    environment = {
        **os.environ,
        "DYNAMO_TREE_COMPAT_ASK_DYNAMO": "1",
        "DYNAMO_TREE_COMPAT_CACHE_DIR": str(tmp_path),
    }
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _IMPORT_THEN_COMPILE],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [writer.communicate(timeout=600) for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0], outputs
    [cached] = tmp_path.iterdir()  # no temporary file left behind
    answers = [json.loads(out.splitlines()[-1])[2] for out, _ in outputs]
    assert json.loads(cached.read_text())["answers"] == answers[0] == answers[1]


#: Where capabilities are named: the package, its tests and benchmarks.
_SOURCES = [
    path
    for folder in ("dynamo_tree_compat", "tests", "benchmarks")
    for path in sorted((pathlib.Path(__file__).parents[2] / folder).rglob("*.py"))
]
#: The functions that take a capability.
_ASKING = {"has", "lacks", "trial", "_dynamo_can"}


def _misnamed(tree: ast.AST) -> list[str]:
    """A capability named by a string, or a member that does not exist, in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in ("Capability", "C") and node.attr.isupper():
                if node.attr not in Capability.__members__:
                    found.append(f"line {node.lineno}: no capability {node.attr}")
        if isinstance(node, ast.Call):
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else None
            name = function.id if isinstance(function, ast.Name) else name
            if name in _ASKING and any(
                isinstance(arg, ast.Constant) and isinstance(arg.value, str) for arg in node.args
            ):
                found.append(f"line {node.lineno}: {name}() given a string")
    return found


def test_every_capability_is_named_by_an_existing_member_never_a_string() -> None:
    """A misspelt capability fails here, whatever line it is on and whether it runs."""
    found = [
        f"{path.name}, {problem}"
        for path in _SOURCES
        for problem in _misnamed(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, found


def test_the_static_check_finds_a_misspelt_member_and_a_string() -> None:
    planted = "x = Capability.SKIP_KEEPS_GRAPH\nhas('skip_keeps_graphs')\nlacks(C.NO_SUCH)"
    assert len(_misnamed(ast.parse(planted))) == 3
    by_name: Any = "skip_keeps_graphs"
    with pytest.raises(TypeError, match="expected a Capability member"):
        capabilities.has(by_name)
