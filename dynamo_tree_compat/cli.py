"""``python -m dynamo_tree_compat``: what is covered here, a live check, and ``explain``.

``doctor`` (the default) prints the versions, the activation, a coverage table of every
dm-tree and optree function, then compiles a small built-in model that calls both
libraries, first with the package disabled and then enabled, and compares graph counts,
graph breaks and step times. ``explain`` runs a user's program twice the same way and
lists its graph breaks by cause and source line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from . import console
from .explain import CHILD_FLAG, explain, run_child
from .outcomes import Kind
from .report import CoverageRow, Layer, coverage_rows
from .substitutions import LIBRARIES

__all__ = ["WINDOWS", "main", "step_milliseconds"]

EXIT_OK = 0
EXIT_BREAKS_REMAIN = 1


# --- The built-in model ------------------------------------------------------------------


def _built_in_model() -> tuple[Callable[..., Any], tuple[Any, ...], list[str]]:
    """A small model whose forward calls dm-tree and optree, where installed, and
    torch's own pytree."""
    import torch
    import torch.utils._pytree as pytree

    try:
        import tree
    except ImportError:
        tree = None
    try:
        import optree
    except ImportError:
        optree = None
    uses = [name for name, module in (("dm-tree", tree), ("optree", optree)) if module]
    uses.append("torch pytree")

    layers = torch.nn.ModuleDict(
        {"encode": torch.nn.Linear(32, 64), "decode": torch.nn.Linear(64, 16)}
    ).eval()

    def forward(batch: dict[str, Any]) -> Any:
        if tree is not None:
            inputs = tree.flatten(batch)
            scaled = tree.map_structure(lambda t: t * 0.5, {"x": inputs, "n": len(inputs)})
            tree.assert_same_structure(scaled["x"], inputs)
            features = torch.cat(scaled["x"], dim=-1)
        else:
            features = torch.cat([batch["image"], *batch["extra"]], dim=-1)
        leaves, spec = pytree.tree_flatten({"features": features, "n": [1, None]})
        features = pytree.tree_unflatten([leaves[0].float(), *leaves[1:]], spec)["features"]
        hidden = torch.relu(layers["encode"](features))
        outputs = {"logits": layers["decode"](hidden), "aux": [hidden.mean(-1)]}
        if optree is not None:
            outputs = optree.tree_map(torch.tanh, outputs)
            total = sum(leaf.sum() for leaf in optree.tree_leaves(outputs))
            # A scale per output, broadcast over its subtree: torch alone raises inside.
            scales = {"logits": 2.0, "aux": [hidden.std(-1)]}
            outputs = optree.tree_broadcast_map(lambda s, t: t * s, scales, outputs)
        else:
            total = outputs["logits"].sum() + outputs["aux"][0].sum()
        if tree is not None:
            paths = [path for path, _ in tree.flatten_with_path(outputs)]
            outputs = tree.map_structure_with_path(lambda p, t: t + len(p), outputs)
            return outputs, total, paths
        return outputs, total

    generator = torch.Generator().manual_seed(0)
    batch = {
        "image": torch.randn(8, 16, generator=generator),
        "extra": [torch.randn(8, 8, generator=generator), torch.randn(8, 8, generator=generator)],
    }
    return forward, (batch,), uses


@dataclass
class Run:
    """One compiled run of the built-in model."""

    mode: str
    graphs: int
    graph_breaks: int
    compile_seconds: float
    step_ms: float
    matches_eager: bool
    breaks: list[str]


def _same(expected: Any, actual: Any) -> bool:
    import torch

    if isinstance(expected, torch.Tensor):
        return isinstance(actual, torch.Tensor) and torch.allclose(expected, actual)
    if isinstance(expected, dict):
        return list(expected) == list(actual) and all(
            _same(expected[key], actual[key]) for key in expected
        )
    if isinstance(expected, (list, tuple)):
        return (
            type(expected) is type(actual)
            and len(expected) == len(actual)
            and all(_same(left, right) for left, right in zip(expected, actual))
        )
    return bool(expected == actual)


#: The step time is the median of this many windows: one scheduler hiccup on a busy
#: machine then moves one window, not the figure.
WINDOWS = 7


def step_milliseconds(
    step: Callable[[], Any], steps: int, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Milliseconds per call of ``step``: ``steps`` calls in :data:`WINDOWS` windows, the
    median window's mean.

    >>> ticks = iter([0, 1, 1, 2, 2, 90])  # a hiccup in the last window
    >>> step_milliseconds(lambda: None, 3, clock=lambda: next(ticks) / 1000)
    1.0
    """
    windows = max(1, min(WINDOWS, steps))
    sizes = [steps // windows + (index < steps % windows) for index in range(windows)]
    means = []
    for size in sizes:
        started = clock()
        for _ in range(size):
            step()
        means.append((clock() - started) / size * 1000)
    return statistics.median(means)


def _run_model(mode: str, backend: str, steps: int) -> Run:
    import torch

    import dynamo_tree_compat

    from . import _dynamo

    forward, args, _ = _built_in_model()
    expected = forward(*args)
    _dynamo.reset_compiled_code()
    graphs = []
    chosen = _dynamo.lookup_backend(backend)

    def counting_backend(graph_module: Any, example_inputs: Any) -> Any:
        graphs.append(graph_module)
        return chosen(graph_module, example_inputs)

    scope = dynamo_tree_compat.enabled() if mode == "enabled" else dynamo_tree_compat.disabled()
    with scope, _dynamo.GraphBreakRecorder() as recorder:
        compiled = torch.compile(forward, backend=counting_backend)
        started = time.perf_counter()
        actual = compiled(*args)
        compile_seconds = time.perf_counter() - started
        step_ms = step_milliseconds(lambda: compiled(*args), steps)
    return Run(
        mode=mode,
        graphs=len(graphs),
        graph_breaks=len(recorder.breaks),
        compile_seconds=compile_seconds,
        step_ms=step_ms,
        matches_eager=_same(expected, actual),
        breaks=[item.reason for item in recorder.breaks],
    )


def doctor(backend: str, steps: int, as_json: bool, show_all: bool = False) -> int:
    """Prints the report and runs the live check; returns the exit status."""
    console.progress("importing torch and Dynamo")
    import dynamo_tree_compat

    from . import _dynamo

    _dynamo.load()  # the twins register once Dynamo is loaded

    _, _, uses = _built_in_model()  # imports dm-tree and optree, so the twins register
    _load_kerass_tree_layer()
    report = dynamo_tree_compat.status()
    rows = coverage_rows()
    runs: list[Run] = []
    if uses:
        for mode in ("disabled", "enabled"):
            console.progress(f"compiling the built-in model with the package {mode} ({backend})")
            runs.append(_run_model(mode, backend, steps))
    verdict, status = _verdict(uses, runs, report)
    if as_json:
        print(
            json.dumps(
                {
                    "versions": report.versions,
                    "mode": report.mode,
                    "activated_by": report.activated_by,
                    "hooks_off": report.hooks_off,
                    "stepped_aside": report.stepped_aside,
                    "coverage": [
                        {"library": row.library, "function": row.function, "state": row.state}
                        for row in rows
                    ],
                    "runs": [asdict(run) for run in runs],
                    "verdict": verdict,
                },
                indent=2,
            )
        )
        return status
    print(_summary(report, rows, runs, uses, backend, verdict))
    if show_all:
        print()
        table = [(row.library, row.function, row.state) for row in rows]
        print(console.table(table, ["library", "function", "under torch.compile"]))
        for run in runs:
            for item, count in Counter(run.breaks).items():
                print(f"  {count} x break ({run.mode}): {item}")
    return status


#: Keras's tree layers, by their rows' library: the doctor lists the one Keras uses.
_KERAS_LAYERS = ("keras.tree", "keras.tree (optree)")


def _load_kerass_tree_layer() -> None:
    """Where Keras is installed, imports its tree layer as a torch program gets it (the
    torch backend, unless ``KERAS_BACKEND`` says otherwise), so its rows register."""
    from . import _dynamo
    from .activation import importable

    if not importable("keras"):
        return
    console.progress("importing Keras's tree layer")
    os.environ.setdefault("KERAS_BACKEND", "torch")
    try:
        import keras.src.tree.tree_api  # noqa: F401
    except Exception as error:  # noqa: BLE001 - a broken Keras: no row, and no failure
        _dynamo.LOG.debug("could not import Keras's tree layer: %r", error)


def _layer_of(row: CoverageRow) -> str:
    """How a row reads in the summary: its layer, or why it is not covered.

    >>> _layer_of(CoverageRow("optree", "optree.tree_map", Layer.FAST_PATH, "..."))
    "fast path, else optree's code"
    >>> _layer_of(CoverageRow("dm-tree", "tree.flatten", Layer.NOT_COVERED, "pending"))
    'not covered: pending'
    """
    if row.layer is Layer.NOT_COVERED:
        return f"not covered: {row.state}"
    return row.layer.value


def _summary(
    report: Any,
    rows: list[CoverageRow],
    runs: list[Run],
    uses: list[str],
    backend: str,
    verdict: str,
) -> str:
    """The doctor's first screen: versions, mode, coverage by layer, the live check."""
    versions = ", ".join(f"{name} {version or '-'}" for name, version in report.versions.items())
    how = report.activated_by or ("off (DYNAMO_TREE_COMPAT=0)" if report.switched_off else "off")
    hooks = "; ".join(f"{hook} OFF: {why}" for hook, why in report.hooks_off.items())
    from . import installer

    outside = installer.torch_out_of_range()
    lines = [
        "dynamo-tree-compat doctor (--all: every function and every break; --json: all of it)",
        versions,
        f"doing nothing: {outside}"
        if outside
        else f"mode: {report.mode}, activated by: {how}; private Dynamo hooks: {hooks or 'all on'}",
        "",
    ]

    for library in ("dm-tree", "optree", "torch pytree", *_KERAS_LAYERS):
        layers = Counter(
            _layer_of(row)
            for row in rows
            if row.library == library and row.layer is not Layer.ABSENT
        )
        if library in _KERAS_LAYERS and LIBRARIES[library].module not in sys.modules:
            continue  # Keras is not installed, or uses its other layer
        if len(layers) == 1:  # one layer: one line
            count = sum(layers.values())
            plural = "" if count == 1 else "s"
            lines.append(f"{library}: {count} function{plural}, {next(iter(layers))}")
            continue
        lines.append(f"{library}: {sum(layers.values())} functions")
        lines += [f"  {count:3} {layer}" for layer, count in layers.most_common()]
    if runs:
        lines += ["", f"live check: the built-in model ({', '.join(uses)}), backend={backend}"]
        table_rows = [
            (
                run.mode,
                run.graphs,
                run.graph_breaks,
                f"{run.compile_seconds:.2f}",
                f"{run.step_ms:.3f}",
                "yes" if run.matches_eager else "NO",
            )
            for run in runs
        ]
        header = ["package", "graphs", "graph breaks", "compile s", "ms/step", "same as eager"]
        lines.append(console.table(table_rows, header))
    lines += ["", verdict]
    return "\n".join(lines)


def _verdict(uses: list[str], runs: list[Run], report: Any) -> tuple[str, int]:
    flatten = report.outcomes.get("tree.flatten")
    if "dm-tree" in uses and (flatten is None or flatten.kind is not Kind.REGISTERED):
        return f"FAIL: the dm-tree twins are not registered: {flatten}", EXIT_BREAKS_REMAIN
    enabled = runs[-1]
    if not enabled.matches_eager:
        return "FAIL: the compiled model's results differ from eager", EXIT_BREAKS_REMAIN
    if enabled.graph_breaks:
        return (
            f"FAIL: {enabled.graph_breaks} graph break(s) remain with the package enabled",
            EXIT_BREAKS_REMAIN,
        )
    before = runs[0]
    return (
        f"OK: everything covered traced: {before.graphs} graph(s) and {before.graph_breaks} "
        f"break(s) without the package, {enabled.graphs} graph and 0 breaks with it",
        EXIT_OK,
    )


# --- Entry -------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dynamo_tree_compat",
        description="Reports what dynamo-tree-compat covers here and checks it live.",
    )
    commands = parser.add_subparsers(dest="command")
    doctor_parser = commands.add_parser("doctor", help="report and live check (the default)")
    doctor_parser.add_argument("--backend", default="inductor", help="torch.compile backend")
    doctor_parser.add_argument("--steps", type=int, default=50, help="timed steps per run")
    doctor_parser.add_argument("--json", action="store_true", help="machine-readable output")
    doctor_parser.add_argument(
        "--all", action="store_true", help="also every function's coverage and every break"
    )
    explain_parser = commands.add_parser("explain", help="graph breaks of a program, grouped")
    explain_parser.add_argument("-m", dest="module", help="run a module, as python -m does")
    explain_parser.add_argument("--json", action="store_true", help="machine-readable output")
    explain_parser.add_argument("program", nargs=argparse.REMAINDER, help="script [args...]")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status.

    >>> main(["explain"])
    Traceback (most recent call last):
      ...
    SystemExit: explain needs a script path or -m module
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == [CHILD_FLAG]:
        return run_child(arguments[1:])
    if not arguments or (arguments[0].startswith("-") and arguments[0] not in ("-h", "--help")):
        arguments.insert(0, "doctor")
    passed: list[str] = []  # after `explain -m module`, as python -m takes them
    if arguments[:1] == ["explain"] and "-m" in arguments[:-1]:
        cut = arguments.index("-m") + 2
        arguments, passed = arguments[:cut], arguments[cut:]
    options = _parser().parse_args(arguments)
    if options.command == "explain":
        if options.module:
            return explain("module", options.module, options.program + passed, options.json)
        if not options.program:
            raise SystemExit("explain needs a script path or -m module")
        return explain("path", options.program[0], options.program[1:], options.json)
    return doctor(options.backend, options.steps, options.json, options.all)
