"""``python -m dynamo_tree_compat explain``: a program's graph breaks, without and with
the package, each with whose code caused it and what a user can do about it.

The program runs twice in a child interpreter, with ``DYNAMO_TREE_COMPAT=0`` and then
``=1``. The child counts the graphs Dynamo compiles (whatever backend the program
passes, and even if it clears Dynamo's counters) and records every graph break.
"""

from __future__ import annotations

import collections
import json
import os
import re
import runpy
import subprocess
import sys
import tempfile
import traceback
from typing import Any

from . import config, console, recording

__all__ = [
    "CHILD_FLAG",
    "EXIT_PROGRAM_FAILED",
    "explain",
    "hint",
    "run_child",
]

EXIT_OK = 0
EXIT_BREAKS_REMAIN = 1
EXIT_PROGRAM_FAILED = 3
CHILD_FLAG = "--_explain-child"
_ERROR_LINES = 8

#: What a user can do about a break the package itself made (``graph_breaks.OWN_BREAK``).
_OWN_HINT = (
    "dynamo-tree-compat ended the graph here on purpose (it stepped aside, or this torch "
    "cannot do what the call needs; see its docs/coverage.md): a newer torch may keep it "
    "in the graph; report it if it says it stepped aside"
)
# (pattern in the cause, what a user can do), first match wins. The causes are Dynamo's.
_HINTS: tuple[tuple[str, str], ...] = (
    (
        r"dynamo-tree-compat is disabled here",
        "the package is off for this call: remove DYNAMO_TREE_COMPAT=0 or the disabled() "
        "scope around it",
    ),
    (
        r"__class__ assignment",
        "assigning obj.__class__ is not traceable: create the object as that class (e.g. "
        "call the parent's classmethod with cls), or move it out of the compiled region",
    ),
    (
        r"(?is)(context manager|BEFORE_WITH|SETUP_WITH).*lock",
        "a lock cannot be entered while tracing: take it outside the compiled region, or "
        "swap it for contextlib.nullcontext() while torch.compiler.is_compiling()",
    ),
    (
        r"(?i)unsupported context manager|BEFORE_WITH|SETUP_WITH",
        "Dynamo cannot enter this context manager: enter it outside the compiled region",
    ),
    (
        r"(?i)zero_grad|Optimizer\.",
        "torch skips tracing the optimizer (zero_grad, step): call it outside the compiled region",
    ),
    (
        r"(?i)marked as skipped|skip_files|skipped function|torch\._dynamo\.disable|"
        r"torch\.compiler\.disable",
        "Dynamo does not trace this function: call it outside the compiled region, or "
        "wrap the helper in torch.compiler.disable so that the break is deliberate",
    ),
    (
        r"(?i)item\(\)|Tensor\.item|tolist|scalar output|capture_scalar_outputs",
        "a tensor's value is read into Python (.item(), float(t), .tolist()): keep it a "
        "tensor, or set torch._dynamo.config.capture_scalar_outputs = True",
    ),
    (
        r"(?i)data[- ]dependent|generic_jump|jump.*tensor|branch",
        "Python control flow depends on a tensor's value: use torch.where or torch.cond, "
        "or make the decision outside the compiled region",
    ),
    (
        r"(?i)backward",
        "backward() inside the compiled region: compile the forward and the loss, and "
        "call backward() outside (or use compiled autograd)",
    ),
    (
        r"(?i)numpy|ndarray",
        "numpy inside the compiled region: use torch ops, or convert outside it",
    ),
    (
        r"(?i)nonzero|boolean mask|data-dependent (output )?shape|dynamic shape operator",
        "indexing with a mask (x[mask]) or nonzero() gives a shape that depends on the "
        "data: use torch.where, or set torch._dynamo.config.capture_dynamic_output_shape_ops "
        "= True",
    ),
    (
        r"(?i)list_iterator|\bnext\(|iterator",
        "next() on an iterator: index the list, or iterate it with a for loop",
    ),
    (
        r"(?i)graph_break\(\)|User-inserted graph break",
        "an explicit torch._dynamo.graph_break(): remove it if it is not needed",
    ),
    (
        r"(?i)failed to trace builtin operator",
        "Dynamo cannot call this builtin with these arguments (e.g. min() over a "
        "generator): rewrite the call, or move it out of the compiled region",
    ),
    (
        r"(?i)\bprint\b|logging|logger",
        "printing or logging while compiled: move it out, or list the function in "
        "torch._dynamo.config.reorderable_logging_functions",
    ),
)
_TREE_HINT = (
    "a tree call this package does not cover here: see `python -m dynamo_tree_compat "
    "--all`, and please report it"
)
_DEFAULT_HINT = (
    "see the full report with TORCH_LOGS=graph_breaks; moving this code out of the "
    "compiled region, or torch.compiler.disable on it, makes the break deliberate"
)


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


def hint(cause: str, library: str) -> str:
    """One line on what a user can do about a graph break, from Dynamo's cause.

    >>> hint("Unsupported context manager: a `lock` context manager", "RLlib")[:29]
    'a lock cannot be entered whil'
    >>> hint("Attempted to call function marked as skipped", "keras")[:34]
    'Dynamo does not trace this functio'
    >>> hint("dynamo-tree-compat stepped aside: x", "keras")[:40]
    'dynamo-tree-compat ended the graph here '
    """
    from ._dynamo.graph_breaks import OWN_BREAK, TREE_LIBRARIES

    if OWN_BREAK.search(cause):
        return _OWN_HINT
    for pattern, text in _HINTS:
        if re.search(pattern, cause):
            return text

    return _TREE_HINT if library in TREE_LIBRARIES else _DEFAULT_HINT


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
            cause = item.pop("cause", "")
            item["hint"] = hint(f"{item['reason']}\n{cause}", item["library"])
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
    if as_json:
        print(json.dumps({**summary, "breaks": rows}, indent=2))
    else:
        print(_render(summary, rows))
    if before["failed"] or after["failed"]:
        return EXIT_PROGRAM_FAILED
    tree_left = any(row["library"] in TREE_LIBRARIES and row["with"] for row in rows)
    return EXIT_BREAKS_REMAIN if tree_left else EXIT_OK
