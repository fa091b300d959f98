"""``explain`` sees every process a program starts: multiprocessing children (spawn and
fork), ``torchrun`` ranks, data-loader workers (Ray actors:
``tests/integration/test_rllib.py``), each recorded where the package loads, with the
package on or off."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from dynamo_tree_compat.hints import hint

STEP = """
import torch, tree

def step(x):
    return tree.map_structure(lambda t: t * 2, {"a": x, "b": [x + 1]})
"""

CHILDREN = (
    STEP
    + """
import multiprocessing

def child():
    torch.compile(step, backend="eager")(torch.ones(2))

if __name__ == "__main__":
    context = multiprocessing.get_context("{method}")
    process = context.Process(target=child)
    process.start()
    process.join()
    assert process.exitcode == 0
"""
)

RANKS = (
    STEP
    + """
import os
torch.compile(step, backend="eager")(torch.ones(2) * int(os.environ["RANK"]))
"""
)


def _run_explain(tmp_path: Path, *command: str, exits: int = 0) -> str:
    """explain's output on a program in ``tmp_path``; it must exit ``exits``."""
    completed = subprocess.run(
        [sys.executable, "-m", "dynamo_tree_compat", "explain", *command],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert completed.returncode == exits, completed.stderr[-3000:]
    return completed.stdout


def _explain(tmp_path: Path, *command: str) -> dict[str, Any]:
    return json.loads(_run_explain(tmp_path, "--json", *command))


def _by_role(report: dict[str, Any], label: str) -> dict[str, tuple[int, int]]:
    return {p["role"]: (p["graphs"], p["graph_breaks"]) for p in report["processes"][label]}


# fork: the data-loader worker below is one too; CI's wide stage runs this one as well.
@pytest.mark.parametrize("method", ["spawn", pytest.param("fork", marks=pytest.mark.wide)])
def test_a_multiprocessing_child_is_seen(tmp_path: Path, method: str) -> None:
    (tmp_path / "train.py").write_text(textwrap.dedent(CHILDREN.replace("{method}", method)))
    report = _explain(tmp_path, "train.py")
    child = f"{method.capitalize()}Process-1"
    without, with_package = _by_role(report, "without"), _by_role(report, "with")
    assert without["main"] == (0, 0) and with_package["main"] == (0, 0)
    assert without[child][1] >= 1 and without[child][0] >= 2  # tree breaks the graph
    assert with_package[child] == (1, 0)  # one graph, no break
    assert report["graphs"] == {"without": without[child][0], "with": 1}
    assert {row["library"] for row in report["breaks"]} == {"dm-tree"}
    assert all(row["removed"] for row in report["breaks"])


WORKERS = (
    STEP
    + """
class Compiling(torch.utils.data.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, index):
        return torch.compile(step, backend="eager")(torch.ones(2) * index)["a"]

if __name__ == "__main__":
    loader = torch.utils.data.DataLoader(Compiling(), num_workers=1, batch_size=None)
    assert [batch.tolist() for batch in loader] == [[0.0, 0.0], [2.0, 2.0]]
"""
)


def test_a_data_loader_worker_is_seen(tmp_path: Path) -> None:
    (tmp_path / "load.py").write_text(textwrap.dedent(WORKERS))
    report = _explain(tmp_path, "load.py")
    without, with_package = _by_role(report, "without"), _by_role(report, "with")
    worker = "data-loader worker 0"
    assert without["main"] == (0, 0) and with_package["main"] == (0, 0)
    assert without[worker][1] >= 1  # tree breaks the graph in the worker
    assert with_package[worker] == (1, 0)  # one graph for both items, no break
    assert all(row["removed"] for row in report["breaks"])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_both_torchrun_ranks_are_seen(tmp_path: Path) -> None:
    (tmp_path / "ranks.py").write_text(textwrap.dedent(RANKS))
    report = _explain(
        tmp_path,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={_free_port()}",
        "ranks.py",
    )
    with_package = _by_role(report, "with")
    assert with_package["rank 0"] == (1, 0) and with_package["rank 1"] == (1, 0)
    assert _by_role(report, "without")["rank 1"][1] >= 1
    assert report["graphs"]["with"] == 2


def test_a_program_that_compiles_nothing_is_told_so(tmp_path: Path) -> None:
    (tmp_path / "idle.py").write_text("import torch, tree\nprint(tree.flatten([1]))\n")
    printed = _run_explain(tmp_path, "idle.py")
    assert "no process compiled anything" in printed
    assert "COMPLETE_UPDATE" not in printed  # RLlib's hint: only where RLlib is


@pytest.mark.parametrize(
    ("cause", "start"),
    [
        ("Dynamic shape operator: aten.nonzero.default", "indexing with a mask"),
        ("Attempted to call function marked as skipped: Optimizer.zero_grad", "torch skips"),
        ("Unsupported method call: next(list_iterator)", "next() on an iterator"),
        ("User-inserted graph break. Message: None", "an explicit torch._dynamo"),
    ],
)
def test_the_hints_for_rllibs_remaining_breaks(cause: str, start: str) -> None:
    assert hint(cause, "your code").startswith(start)


CRASHES = """
import contextlib, torch

def step(x):
    with contextlib.nullcontext():
        torch._dynamo.graph_break()
        return x + 1

torch.compile(step, backend="eager")(torch.ones(2))
raise AssertionError("exception table entry start instruction has no offset")
"""


def test_dynamos_resume_crash_is_named_with_its_break(tmp_path: Path) -> None:
    """Dynamo's crash in a resume function (a break inside a ``with``; raised here by the
    program, as Dynamo raises it): explain says what it is, which break causes it, and
    what to do, in its report and its JSON."""
    (tmp_path / "crash.py").write_text(CRASHES)
    printed = _run_explain(tmp_path, "crash.py", exits=3)  # 3: the program failed
    what = [line for line in printed.splitlines() if line.startswith("what happened")]
    assert len(what) == 2, printed  # without the package and with it
    assert "crash.py:6" in what[1] and "one-hot labels" in what[1], what


def test_the_standard_library_is_pythons_not_yours() -> None:
    import inspect

    from dynamo_tree_compat._dynamo.graph_breaks import owner

    assert owner(f"{inspect.__file__}:3300") == "Python"
