"""The command line, run as a user runs it: ``python -m dynamo_tree_compat`` in a subprocess."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.dynamo_support import TORCH
from tests.helpers.fresh import run_fresh

pytest.importorskip("tree")

# The torch matrix's switch for releases outside the supported range, passed on to the
# minimal environments below.
ANY_TORCH = {
    name: os.environ[name] for name in ("DYNAMO_TREE_COMPAT_ANY_TORCH",) if name in os.environ
}

SCRIPT_WITH_TREE_BREAKS = """
import sys
import torch
import tree

def step(x):
    parts = tree.flatten({"a": x, "b": [x * 2]})
    total = sum(parts)
    mapped = tree.map_structure(lambda t: t + 1, {"t": total})
    return mapped["t"]

print(torch.compile(step, backend="eager")(torch.ones(3)).tolist(), sys.argv[1:])
"""


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "dynamo_tree_compat", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check:
        assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed


def test_doctor_counts_graphs_and_breaks_of_the_built_in_model() -> None:
    completed = run_cli("doctor", "--backend", "eager", "--steps", "2", "--json")
    report = json.loads(completed.stdout)
    disabled, enabled = report["runs"]
    # Without the package: 6 breaks from torch 2.11 on, 3 on 2.10, 18 on 2.9 (torch's own
    # optree handling differs); with it, none.
    without = 6 if TORCH >= (2, 11) else 3 if TORCH >= (2, 10) else 18
    assert (disabled["mode"], disabled["graph_breaks"]) == ("disabled", without)
    assert disabled["graphs"] > 1
    assert (enabled["graphs"], enabled["graph_breaks"], enabled["matches_eager"]) == (1, 0, True)
    states = {row["function"]: row["state"] for row in report["coverage"]}
    assert states["tree.map_structure"] == "twin: traced by this package"
    assert states["optree.tree_leaves"].startswith("fast path by this package")
    assert states["optree.tree_unflatten"].startswith("optree's own code")
    assert states["optree._C.flatten"].startswith("this package: optree's C code")
    assert report["verdict"].startswith("OK")
    assert "compiling the built-in model with the package enabled" in completed.stderr


def test_doctor_answers_on_its_first_screen_and_is_the_default_command() -> None:
    out = run_cli("--backend", "eager", "--steps", "1").stdout
    lines = out.rstrip().splitlines()
    assert len(lines) <= 25, out
    assert lines[1].startswith("python ") and " optree " in lines[1]  # versions
    assert lines[2].startswith("mode: on, activated by:") and "hooks: all on" in lines[2]
    assert "dm-tree: 20 functions" in lines and "   13 fast path, else twin" in lines
    assert any(line.startswith("optree: ") and line.endswith(" functions") for line in lines)
    assert "package   graphs  graph breaks  compile s  ms/step  same as eager" in lines
    assert lines[-1].startswith("OK: everything covered traced")
    assert (
        lines[0]
        == "dynamo-tree-compat doctor (--all: every function and every break; --json: all of it)"
    )
    assert "tree.flatten" not in out  # the per-function table waits for --all
    # Keras's tree layer, where Keras is installed: the one it uses, all twins.
    keras_rows = [i for i, line in enumerate(lines) if line.startswith("keras.tree")]
    if importlib.util.find_spec("keras") is None:
        assert keras_rows == []
    else:
        assert len(keras_rows) == 1 and lines[keras_rows[0]].endswith(", twin"), out


def test_doctor_all_prints_every_function_and_every_break() -> None:
    out = run_cli("doctor", "--all", "--backend", "eager", "--steps", "1").stdout
    assert any(
        line.split()[:2] == ["dm-tree", "tree.flatten"] and "traced by this package" in line
        for line in out.splitlines()
    )
    assert "1 x break (disabled): tree.flatten runs untraced" in out
    if TORCH >= (2, 10):  # before, torch alone breaks on optree's spec methods 5 times
        assert "5 x" not in out
    if TORCH >= (2, 11):  # torch's own optree polyfills from 2.11 on: a spec they lack
        lacking = "break (disabled): raises AttributeError(\"'PyTreeSpec' object has no attribute"
        assert lacking in out


def test_doctor_exits_non_zero_with_a_reason_when_twins_cannot_register() -> None:
    code = textwrap.dedent(
        """
        from dynamo_tree_compat import installer
        def broken():
            raise RuntimeError("simulated")
        installer.install = broken
        from dynamo_tree_compat.cli import main
        raise SystemExit(main(["doctor", "--backend", "eager", "--steps", "1"]))
        """
    )
    completed = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert (
        completed.stdout.rstrip()
        .splitlines()[-1]  # the verdict
        .startswith("FAIL: the dm-tree twins are not registered")
    )


def test_explain_lists_the_breaks_this_package_removes(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT_WITH_TREE_BREAKS)
    completed = run_cli("explain", "--json", str(script), "--flag")
    report = json.loads(completed.stdout[completed.stdout.index("{") :])
    assert report["graph_breaks"] == {"without": 2, "with": 0}
    assert report["graphs"] == {"without": 3, "with": 1}
    assert [(row["location"], row["library"], row["removed"]) for row in report["breaks"]] == [
        (f"{script}:7", "dm-tree", True),
        (f"{script}:9", "dm-tree", True),
    ]
    assert "['--flag']" in completed.stdout  # the program got its arguments


def test_explain_runs_a_module_and_prints_a_table(tmp_path: Path) -> None:
    (tmp_path / "trainer.py").write_text(SCRIPT_WITH_TREE_BREAKS)
    completed = subprocess.run(
        [sys.executable, "-m", "dynamo_tree_compat", "explain", "-m", "trainer"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", **ANY_TORCH},
    )
    assert completed.returncode == 0, completed.stderr
    assert "graph breaks: 2 without, 0 with" in completed.stdout
    assert completed.stdout.count("removed") == 2
    assert "running trainer with the package disabled" in completed.stderr


# A program with its own breaks inside a tree call, its own backend, and counters cleared.
SCRIPT_WITH_OWN_BREAKS = """
import os, threading
import torch, tree
import torch._dynamo.utils

lock = threading.Lock()
graphs = []

class Box:
    pass

def backend(graph_module, example_inputs):
    graphs.append(graph_module)
    return graph_module.forward

def add_one(t):
    with lock:
        return t + 1

def step(x):
    box = Box()
    box.__class__ = Box
    return tree.map_structure(add_one, {"a": x, "b": [x * 2]})

torch._dynamo.utils.counters.clear()
torch.compile(step, backend=backend)(torch.ones(3))
torch._dynamo.utils.counters.clear()
with open("graphs.txt", "a") as handle:
    handle.write(os.environ["DYNAMO_TREE_COMPAT"] + " " + str(len(graphs)) + "\\n")
"""


def run_explain(tmp_path: Path, program: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "train.py").write_text(program)
    return subprocess.run(
        [sys.executable, "-m", "dynamo_tree_compat", "explain", "--json", "train.py"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )


def test_explain_attributes_a_programs_own_breaks_to_it_with_a_hint(tmp_path: Path) -> None:
    completed = run_explain(tmp_path, SCRIPT_WITH_OWN_BREAKS)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    # Counted from Dynamo, as the program itself counted, though it cleared the counters.
    counted = dict(line.split() for line in (tmp_path / "graphs.txt").read_text().splitlines())
    assert report["graphs"] == {"without": int(counted["0"]), "with": int(counted["1"])}
    rows = {(row["location"], row["library"]): row for row in report["breaks"]}
    # The lock is inside a function dm-tree maps; the break is still the program's.
    assert rows["train.py:17", "your code"]["with"] >= 1  # once per leaf from 2.6 on
    assert "nullcontext" in rows["train.py:17", "your code"]["hint"]
    # The __class__ assignment breaks the graph on torch 2.13 (2.5 and 2.9 trace it).
    if TORCH >= (2, 13):
        assert ("train.py:22", "your code") in rows
    for row in rows.values():
        assert ("__class__" in row["hint"]) is ("__class__" in row["reason"])
    assert rows["train.py:23", "dm-tree"]["removed"]
    assert {library for _, library in rows} == {"your code", "dm-tree"}


@pytest.mark.parametrize(
    ("ending", "last_line"),
    [
        ('raise SystemExit("boom")', "SystemExit: boom"),
        ('raise ValueError("bad input")', "ValueError: bad input"),
    ],
)
def test_explain_reports_a_failing_program_and_exits_non_zero(
    tmp_path: Path, ending: str, last_line: str
) -> None:
    completed = run_explain(tmp_path, f"import torch\n{ending}\n")
    assert completed.returncode == 3, completed.stdout + completed.stderr
    report = json.loads(completed.stdout)
    for run in ("without", "with"):
        assert report["failed"][run][-1] == last_line


def test_explain_prints_a_failure_with_its_last_lines(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text('def load():\n    raise OSError("no data")\nload()\n')
    completed = subprocess.run(
        [sys.executable, "-m", "dynamo_tree_compat", "explain", "train.py"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert completed.returncode == 3
    assert "FAILED: the program failed with the package:" in completed.stdout
    assert "OSError: no data" in completed.stdout
    assert "line 2, in load" in completed.stdout


def test_explain_without_a_program_is_a_clear_error() -> None:
    completed = run_cli("explain", check=False)
    assert completed.returncode != 0
    assert "explain needs a script path or -m module" in completed.stderr


def test_torch_logs_name_shows_registrations_and_twins_used() -> None:
    code = (
        "import torch, tree\n"
        "torch.compile(lambda x: tree.flatten([x]), backend='eager', fullgraph=True)"
        "(torch.ones(1))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env={"TORCH_LOGS": "+dynamo_tree_compat", "PATH": "/usr/bin:/bin", **ANY_TORCH},
    )
    assert completed.returncode == 0, completed.stderr
    assert "registered the twin of tree.flatten" in completed.stderr
    assert "Dynamo met tree.flatten: tracing its twin" in completed.stderr


def test_torch_without_optree_polyfills_still_traces_optree() -> None:
    """An older torch (before 2.6) has no optree polyfills: simulated by removing them."""
    completed = run_fresh(
        """
        import torch, torch._dynamo, optree, tree
        import dynamo_tree_compat
        from dynamo_tree_compat import _dynamo, report
        for original, handle in _dynamo.torch_polyfills().items():
            if str(getattr(original, "__module__", "")).startswith("optree"):
                _dynamo.unsubstitute(original, handle)
        dynamo_tree_compat.install()  # DYNAMO_TREE_COMPAT=0: nothing registered before
        states = {name: state for library, name, state in report.coverage() if library == "optree"}
        print(states["optree.tree_leaves"])
        print(states["optree.tree_unflatten"])
        x = torch.ones(2)
        plain = lambda x: (tree.flatten({"b": x, "a": [x]}), optree.tree_leaves({"c": [x]}))
        print(repr(torch.compile(plain, fullgraph=True, backend="eager")(x)) == repr(plain(x)))
        try:
            torch.compile(optree.tree_flatten, fullgraph=True, backend="eager")({"c": x})
            print("tree_flatten traced")
        except torch._dynamo.exc.Unsupported:
            print("tree_flatten breaks")
        """,
        DYNAMO_TREE_COMPAT="0",
    )
    assert completed.stdout.splitlines() == [
        "fast path by this package for dicts, lists, tuples, None; else optree's own code,"
        " inlined by Dynamo, over this package's C layer",
        "optree's own code, inlined by Dynamo, over this package's C layer",
        "True",
        "tree_flatten traced",
    ]
