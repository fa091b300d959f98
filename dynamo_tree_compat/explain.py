"""``python -m dynamo_tree_compat explain``: a program's graph breaks, without and with
the package, each with whose code caused it and what a user can do about it.

The program runs twice in a child interpreter, with ``DYNAMO_TREE_COMPAT=0`` and then
``=1``. The child counts the graphs Dynamo compiles (whatever backend the program
passes, and even if it clears Dynamo's counters) and records every graph break.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import runpy
import subprocess
import sys
import tempfile
import traceback
from typing import Any

from . import config, console, recording
from .hints import hint, text_and_places, upgrades

__all__ = [
    "CHILD_FLAG",
    "EXIT_PROGRAM_FAILED",
    "explain",
    "run_child",
]

EXIT_OK = 0
EXIT_BREAKS_REMAIN = 1
EXIT_PROGRAM_FAILED = 3
CHILD_FLAG = "--_explain-child"
_ERROR_LINES = 8

#: Dynamo's own crash while it builds the function that resumes after a graph break
#: inside a ``with`` block (torch 2.13 to 2.15 at least).
_RESUME_CRASH = "exception table entry"


def diagnose(error: list[str] | None, breaks: list[dict[str, Any]]) -> str | None:
    """What a failed run's last lines mean, where explain knows: Dynamo's crash in a
    resume function, with the last graph break before it, which causes it.

    >>> crash = ["AssertionError: exception table entry start instruction has no offset"]
    >>> text = diagnose(crash, [{"location": "losses.py:9", "reason": "numpy call"}])
    >>> text.split(". ")[1], "one-hot labels" in text
    ('The break that causes it: losses.py:9 (numpy call)', True)
    >>> diagnose(["ValueError: no"], []) is None
    True
    """
    if not error or not any(_RESUME_CRASH in line for line in error):
        return None
    text = (
        "Dynamo crashed building the code that resumes after a graph break inside a "
        "`with` block (its own bug, not your program's)."
    )
    if breaks:
        last = breaks[-1]
        text += f" The break that causes it: {last['location']} ({last['reason'][:80]})."
    return text + (
        " Remove that break (for Keras's sparse losses: one-hot labels with a categorical "
        "loss, or labels already tensors, so that convert_to_tensor calls no numpy), or "
        "compile less: torch.compiler.disable on the function with the `with` block."
    )


# --- The child: one run of the program ----------------------------------------------


def run_child(argv: list[str]) -> int:
    """Runs the user's program, recording graphs and breaks; writes them as JSON."""
    output, kind, target, *args = argv
    os.environ[config.ENV_RECORD_SKIP] = str(os.getpid())  # this one records itself
    import dynamo_tree_compat  # noqa: F401 - activates unless DYNAMO_TREE_COMPAT=0

    from . import _dynamo

    graphs, undo = _dynamo.count_graphs()  # loads Dynamo too, before the program runs
    exit_code: int | str | None = 0
    error: list[str] = []
    with _dynamo.GraphBreakRecorder() as recorder:
        sys.argv = [target, *args]
        try:
            if kind == "module":
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(target, run_name="__main__")
        except SystemExit as stop:
            exit_code = stop.code
            if exit_code not in (0, None):
                error = [f"SystemExit: {stop.code}"]
        except BaseException as failure:  # noqa: BLE001 - the program's failure, reported
            exit_code = 1
            lines = traceback.format_exception(type(failure), failure, failure.__traceback__)
            error = "".join(lines).rstrip().splitlines()[-_ERROR_LINES:]
    undo()
    record = recording.process_record(graphs(), recorder.breaks, named="main")
    with open(output, "w") as handle:
        json.dump({"main": record, "exit_code": exit_code, "error": error}, handle)
    return 0


def _run_program(kind: str, target: str, args: list[str], enabled: bool) -> dict[str, Any]:
    """One run in a child interpreter; the program's output passes through."""
    with tempfile.TemporaryDirectory() as folder:
        output = os.path.join(folder, "run.json")
        records = os.path.join(folder, "processes")
        os.mkdir(records)
        environment = {
            **os.environ,
            "DYNAMO_TREE_COMPAT": "1" if enabled else "0",
            config.ENV_RECORD: records,
        }
        command = [sys.executable, "-m", "dynamo_tree_compat", CHILD_FLAG, output, kind, target]
        tail: collections.deque[str] = collections.deque(maxlen=_ERROR_LINES)
        with subprocess.Popen(
            [*command, *args], env=environment, stderr=subprocess.PIPE, text=True
        ) as child:
            assert child.stderr is not None
            for line in child.stderr:
                sys.stderr.write(line)
                tail.append(line.rstrip("\n"))
        if os.path.exists(output):
            with open(output) as handle:
                run: dict[str, Any] = json.load(handle)
            processes = [run.pop("main"), *recording.read(records)]
        else:  # the interpreter itself died: no record, only its last words
            run = {"exit_code": child.returncode}
            run["error"] = list(tail) or [f"exit status {child.returncode}"]
            processes = recording.read(records)
        run.update(_merged(processes))
        run["failed"] = bool(run["error"]) or child.returncode != 0
        if run["failed"] and not run["error"]:
            run["error"] = list(tail) or [f"exit status {child.returncode}"]
        return run


def _merged(processes: list[dict[str, Any]]) -> dict[str, Any]:
    """The processes' records as one run: every break, with its process and a hint; the
    graphs in all; and each process's own counts."""
    breaks = []
    for record in processes:
        for item in record["breaks"]:
            item["text"], item["places"] = text_and_places(item)
            item["hint"] = hint(item["text"], item["library"], item["places"])
            del item["cause"], item["frames"]
            item["process"] = record.get("role", "?")
            breaks.append(item)
    counted = [record["graphs"] for record in processes if record.get("graphs") is not None]
    return {
        "breaks": breaks,
        "graphs": sum(counted) if counted else None,
        "processes": [
            {
                "role": record.get("role", "?"),
                "pid": record["pid"],
                "graphs": record["graphs"],
                "graph_breaks": len(record["breaks"]),
            }
            for record in processes
        ],
        "rllib": any(record.get("rllib") for record in processes),
    }


# --- The report ------------------------------------------------------------------------


def _rows(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for index, run in enumerate((before, after)):
        for item in run["breaks"]:
            key = (item["location"], item["reason"], item["library"])
            group = groups.setdefault(key, [0, 0, item])
            group[index] += 1
    return [
        {
            "location": location,
            "where": item["where"],
            "reason": reason,
            "library": library,
            "without": without,
            "with": with_package,
            "removed": with_package == 0,
            "hint": item["hint"],
            "text": item["text"],
            "places": item["places"],
        }
        for (location, reason, library), (without, with_package, item) in sorted(groups.items())
    ]


_NOTHING_COMPILED = (
    "no process compiled anything: nothing ran under torch.compile (is the compiled "
    "function called? is compiling switched on?)"
)
_RLLIB_HINT = (
    ". RLlib 2.60 compiles nothing with its default torch_compile_learner_what_to_compile "
    "(forward_train): use TorchCompileWhatToCompile.COMPLETE_UPDATE"
)


def _processes(processes: dict[str, list[dict[str, Any]]]) -> list[str]:
    """A table of each process's graphs and breaks, where the program ran more than one."""
    if max(len(processes["without"]), len(processes["with"])) < 2:
        return []
    rows = [
        (label, process["role"], process["pid"], process["graphs"], process["graph_breaks"])
        for label in ("without", "with")
        for process in processes[label]
    ]
    header = ["package", "process", "pid", "graphs", "graph breaks"]
    return ["", "each process:", console.table(rows, header)]


def _remaining_by_library(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The breaks that remain with the package: how many each library's code has, and
    for each library the one release that removes the most of them (each release found
    by running it: ``hints.KNOWN_BREAKS``)."""
    remaining = [row for row in rows if row["with"]]
    by_library: collections.Counter[str] = collections.Counter()
    for row in remaining:
        by_library[row["library"]] += row["with"]
    found = upgrades((row["text"], row["places"], row["with"]) for row in remaining)
    return {
        "by_library": dict(by_library.most_common()),
        "upgrades": [dataclasses.asdict(upgrade) for upgrade in found],
    }


def _where_they_come_from(remaining: dict[str, Any]) -> list[str]:
    counts = remaining["by_library"]
    shares = ", ".join(f"{library} {count}" for library, count in counts.items())
    lines = ["", f"the {sum(counts.values())} breaks that remain, by library: {shares}"]
    for upgrade in sorted(remaining["upgrades"], key=lambda upgrade: -upgrade["removes"]):
        share = "all" if upgrade["removes"] == upgrade["of"] else upgrade["removes"]
        lines.append(
            f"  {upgrade['distribution']} {upgrade['release']} or later removes {share} of "
            "them (each release run: docs/measurements.md, Ways out)"
        )
    return lines


def _render(summary: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    graphs, breaks = summary["graphs"], summary["graph_breaks"]
    lines = [
        f"graphs: {graphs['without']} without the package, {graphs['with']} with it; "
        f"graph breaks: {breaks['without']} without, {breaks['with']} with",
        "",
    ]
    table = [
        (
            row["location"],
            row["reason"][:60],
            row["library"],
            row["without"],
            row["with"],
            "removed" if row["removed"] else "remains",
        )
        for row in rows
    ]

    header = ["where", "cause", "library", "without", "with", "this package"]
    lines.append(console.table(table, header))
    lines += _processes(summary["processes"])
    if not graphs["without"] and not graphs["with"]:
        lines += ["", _NOTHING_COMPILED + (_RLLIB_HINT if summary["rllib"] else "")]
    remaining = [row for row in rows if not row["removed"]]
    if remaining:
        lines += ["", "what you can do about the breaks that remain:"]
        for row in remaining:
            lines.append(f"  {row['location']} ({row['library']}): {row['hint']}")
        lines += _where_they_come_from(summary["remaining"])
    for label, failure in summary["failed"].items():
        if failure:
            lines += ["", f"FAILED: the program failed {label} the package:"]
            lines += [f"  {line}" for line in failure]
            if summary["diagnosis"][label]:
                lines += [f"what happened: {summary['diagnosis'][label]}"]
    return "\n".join(lines)


def explain(kind: str, target: str, args: list[str], as_json: bool) -> int:
    """Runs the program with the package disabled, then enabled; prints the breaks.

    Exits 3 if the program failed in either run, 1 if tree-library breaks remain with
    the package, else 0.
    """
    from ._dynamo.graph_breaks import TREE_LIBRARIES

    console.progress(f"running {target} with the package disabled")
    before = _run_program(kind, target, args, enabled=False)
    console.progress(f"running {target} with the package enabled")
    after = _run_program(kind, target, args, enabled=True)
    rows = _rows(before, after)
    summary = {
        "graph_breaks": {"without": len(before["breaks"]), "with": len(after["breaks"])},
        "graphs": {"without": before["graphs"], "with": after["graphs"]},
        "exit_codes": {"without": before["exit_code"], "with": after["exit_code"]},
        "processes": {"without": before["processes"], "with": after["processes"]},
        "rllib": before["rllib"] or after["rllib"],
        "failed": {
            "without": before["error"] if before["failed"] else None,
            "with": after["error"] if after["failed"] else None,
        },
    }
    summary["diagnosis"] = {
        label: diagnose(summary["failed"][label], run["breaks"])
        for label, run in (("without", before), ("with", after))
    }
    summary["remaining"] = _remaining_by_library(rows)
    for row in rows:  # what the hints read, not the report
        del row["text"], row["places"]
    if as_json:
        print(json.dumps({**summary, "breaks": rows}, indent=2))
    else:
        print(_render(summary, rows))
    if before["failed"] or after["failed"]:
        return EXIT_PROGRAM_FAILED
    tree_left = any(row["library"] in TREE_LIBRARIES and row["with"] for row in rows)
    return EXIT_BREAKS_REMAIN if tree_left else EXIT_OK
