"""Compile time of tree calls under torch.compile, as ratios to a floor, in one run.

The measure (issue 5): build ``{key: [(x, x)]}`` with N/2 keys inside the compiled
function, apply the tree call, drop the result; ``backend="eager"``, ``fullgraph=True``.
Two-structure calls take that structure twice; the ``*_up_to`` calls take it as its own
shallow structure, so that every node is walked. The functions mapped return an argument
or None; one pair of rows maps ``t * 2`` instead, with dm-tree and with torch.
The floor builds the same structure and makes no tree call. R is compile time over the
floor's, the minimum over repeats. Dynamo's own ``tree_map`` fast paths are the anchors
for map-like calls. Each call with a fast path is also measured with it forced off: the
plain traced twin for dm-tree, torch's own handling for optree.

The same run also checks that eager calls are unchanged (fresh interpreters with and
without the package) and that a compiled model with tree calls runs as fast as the same
model written by hand, and draws compile time against N into a PNG (needs matplotlib).

    python benchmarks/compile_time.py [--leaves 1000] [--repeats 3] [--plot FILE.png]
                                      [--no-sweep] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import math
import platform
import time
import timeit
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as torch_pytree
import tree
from eager_overhead import eager_ratios

import dynamo_tree_compat
from dynamo_tree_compat import _dynamo, config

try:
    import optree
except ImportError:  # pragma: no cover - optional anchor
    optree = None

FLOOR = "floor (no tree call)"
ANCHOR = "torch pytree tree_map, package disabled (Dynamo's own)"
OPTREE_ANCHOR = "optree.tree_map, package disabled (Dynamo fast path)"
PATH_ANCHOR = "torch pytree tree_map_with_path, package disabled (Dynamo's own)"
FLATTEN_LIKE = ("tree.flatten", "tree.flatten_with_path", "tree.assert_same_structure")
FLATTEN_LIKE += ("tree.is_nested", "optree.tree_leaves", "optree.tree_flatten")
FLATTEN_LIKE += ("optree.tree_structure", "optree.tree_flatten_with_path")
FLATTEN_LIKE += ("tree.flatten_up_to", "tree.flatten_with_path_up_to")
FLATTEN_LIKE += ("tree.unflatten_as (of tree.flatten)", "tree.traverse", "tree.traverse_with_path")
FLATTEN_LIKE += ("torch pytree tree_leaves", "torch pytree tree_flatten")
FLATTEN_LIKE += ("torch pytree tree_structure", "torch pytree tree_flatten_with_path")
FLATTEN_LIKE += ("torch pytree tree_unflatten (of tree_flatten)",)
TWO = "tree.map_structure (two structures)"
OPTREE_TWO = "optree.tree_map (two trees)"
#: dm-tree's map-like calls: goal 0.8 x torch's anchor (issue 16); optree's: 1.1 x.
DM_TREE_MAP_LIKE = ("tree.map_structure", "tree.map_structure_with_path", TWO)
DM_TREE_MAP_LIKE += ("tree.map_structure_up_to", "tree.map_structure_with_path_up_to")
MAP_LIKE = (*DM_TREE_MAP_LIKE, "optree.tree_map", "optree.tree_map_with_path", OPTREE_TWO)
MAP_LIKE += ("optree.tree_map_with_accessor", "optree.tree_map, none_is_leaf=True")
MAP_LIKE += ("torch pytree tree_map",)
MAP_LIKE += ("torch pytree tree_map_with_path", "torch pytree tree_map_only")
#: The same map with a function that computes, beside torch's: what a real body costs.
DOUBLING = "tree.map_structure, func computes t * 2"
DOUBLING_ANCHOR = "torch pytree tree_map, func computes t * 2, package disabled"
OFF = " (fast path off)"
#: Torch's and Dynamo's own handling, measured with the package disabled.
ANCHORS = (ANCHOR, PATH_ANCHOR, DOUBLING_ANCHOR, OPTREE_ANCHOR)
SWEEP = (100, 300, 1000, 3000, 10000)
SLOW_LIMIT = 300  # the plain twins and torch's optree polyfills, besides N=--leaves


def _structure(x: torch.Tensor, leaves: int) -> dict[str, Any]:
    return {f"k{i:05d}": [(x, x)] for i in range(leaves // 2)}


def _identity(value: Any) -> Any:
    return value


def _path_identity(path: Any, value: Any) -> Any:
    return value


def _first(value: Any, other: Any) -> Any:
    return value


def _none(value: Any) -> None:
    return None


def _path_none(path: Any, value: Any) -> None:
    return None


def _double(value: torch.Tensor) -> torch.Tensor:
    return value * 2


def _calls(leaves: int) -> dict[str, Callable[[torch.Tensor], Any]]:
    def make(call: Callable[[Any], Any]) -> Callable[[torch.Tensor], Any]:
        def compiled_body(x: torch.Tensor) -> torch.Tensor:
            call(_structure(x, leaves))
            return x + 1

        return compiled_body

    calls = {
        FLOOR: make(lambda s: None),
        ANCHOR: make(lambda s: torch_pytree.tree_map(_identity, s)),
        PATH_ANCHOR: make(lambda s: torch_pytree.tree_map_with_path(_path_identity, s)),
        "tree.flatten": make(tree.flatten),
        "tree.flatten_with_path": make(tree.flatten_with_path),
        "tree.assert_same_structure": make(lambda s: tree.assert_same_structure(s, s)),
        "tree.is_nested": make(tree.is_nested),
        "tree.map_structure": make(lambda s: tree.map_structure(_identity, s)),
        "tree.map_structure_with_path": make(
            lambda s: tree.map_structure_with_path(_path_identity, s)
        ),
        TWO: make(lambda s: tree.map_structure(_first, s, s)),
        "tree.map_structure_up_to": make(lambda s: tree.map_structure_up_to(s, _identity, s)),
        "tree.map_structure_with_path_up_to": make(
            lambda s: tree.map_structure_with_path_up_to(s, _path_identity, s)
        ),
        "tree.flatten_up_to": make(lambda s: tree.flatten_up_to(s, s)),
        "tree.flatten_with_path_up_to": make(lambda s: tree.flatten_with_path_up_to(s, s)),
        "tree.unflatten_as (of tree.flatten)": make(
            lambda s: tree.unflatten_as(s, tree.flatten(s))
        ),
        "tree.traverse": make(lambda s: tree.traverse(_none, s)),
        "tree.traverse_with_path": make(lambda s: tree.traverse_with_path(_path_none, s)),
        DOUBLING: make(lambda s: tree.map_structure(_double, s)),
        DOUBLING_ANCHOR: make(lambda s: torch_pytree.tree_map(_double, s)),
        # With the package: its fast path where Dynamo has none of its own (the maps
        # before 2.10 or 2.12, the other calls everywhere), else the same as the anchor.
        "torch pytree tree_map": make(lambda s: torch_pytree.tree_map(_identity, s)),
        "torch pytree tree_map_with_path": make(
            lambda s: torch_pytree.tree_map_with_path(_path_identity, s)
        ),
        "torch pytree tree_map_only": make(
            lambda s: torch_pytree.tree_map_only(torch.Tensor, _identity, s)
        ),
        "torch pytree tree_leaves": make(torch_pytree.tree_leaves),
        "torch pytree tree_flatten": make(torch_pytree.tree_flatten),
        "torch pytree tree_structure": make(torch_pytree.tree_structure),
        "torch pytree tree_flatten_with_path": make(torch_pytree.tree_flatten_with_path),
        "torch pytree tree_unflatten (of tree_flatten)": make(
            lambda s: torch_pytree.tree_unflatten(*torch_pytree.tree_flatten(s))
        ),
    }
    if optree is not None:
        calls[OPTREE_ANCHOR] = make(lambda s: optree.tree_map(_identity, s))
        calls["optree.tree_leaves"] = make(optree.tree_leaves)
        calls["optree.tree_map"] = make(lambda s: optree.tree_map(_identity, s))
        calls["optree.tree_map_with_path"] = make(
            lambda s: optree.tree_map_with_path(_path_identity, s)
        )
        calls["optree.tree_map_with_accessor"] = make(
            lambda s: optree.tree_map_with_accessor(_path_identity, s)
        )
        calls[OPTREE_TWO] = make(lambda s: optree.tree_map(_first, s, s))
        calls["optree.tree_map, none_is_leaf=True"] = make(
            lambda s: optree.tree_map(_identity, s, none_is_leaf=True)
        )
        calls["optree.tree_flatten"] = make(optree.tree_flatten)
        calls["optree.tree_structure"] = make(optree.tree_structure)
        calls["optree.tree_flatten_with_path"] = make(optree.tree_flatten_with_path)
    return calls


FAST_PATHS = set(_dynamo.FAST_PATHS)
SLOW_ONLY: tuple[str, ...] = ()


def compile_once(function: Callable[[torch.Tensor], Any], fast: bool, enabled: bool) -> float:
    """Seconds of one cold compile and first call, after torch._dynamo.reset()."""
    saved, config.fast_path = config.fast_path, fast
    scope = dynamo_tree_compat.enabled() if enabled else dynamo_tree_compat.disabled()
    try:
        torch._dynamo.reset()
        gc.collect()  # each compile starts with no garbage left by the one before
        compiled = torch.compile(function, backend="eager", fullgraph=True)
        with scope:
            started = time.perf_counter()
            compiled(torch.ones(2))
            return time.perf_counter() - started
    finally:
        config.fast_path = saved


def _inlined_leaf_by_leaf(
    runs: dict[str, tuple[Callable[[torch.Tensor], Any], bool, bool]],
) -> list[str]:
    """The calls that compile over 20 times slower than the floor at N=100."""
    small = _calls(100)
    floor = compile_once(small[FLOOR], True, True)
    found = []
    for name, (_, fast, enabled) in runs.items():
        try:
            if compile_once(small[name], fast, enabled) > 20 * floor:
                found.append(name)
        except torch._dynamo.exc.Unsupported:
            pass  # measured below, where the graph break is reported
    return found


def measure(leaves: int, repeats: int, slow: bool) -> dict[str, float]:
    """The fastest of ``repeats`` compiles of every call at N=``leaves``.

    Calls take turns within each repeat, so that any drift over the run weighs on all of
    them alike. With ``slow``, the calls with the fast path forced off (the plain twins,
    torch's optree handling) are measured too, once each and after the others: they
    compile for seconds to minutes and leave the process larger.
    """
    fast_runs: dict[str, tuple[Callable[[torch.Tensor], Any], bool, bool]] = {}
    slow_runs: dict[str, tuple[Callable[[torch.Tensor], Any], bool, bool]] = {}
    for name, call in _calls(leaves).items():
        if name in SLOW_ONLY:
            if slow:
                slow_runs[name] = (call, True, True)
            continue
        fast_runs[name] = (call, True, name not in ANCHORS)
        if slow and name in FAST_PATHS:
            slow_runs[name + OFF] = (call, False, True)
    compile_once(fast_runs[FLOOR][0], True, True)  # warm-up: the first compile loads more
    # Where Dynamo inlines a call leaf by leaf (torch's pytree before 2.10), it compiles
    # for tens of seconds: such calls, found at N=100, are measured once, after the rest.
    for name in _inlined_leaf_by_leaf(fast_runs):
        slow_runs[name] = fast_runs.pop(name)
    seconds = dict.fromkeys(fast_runs, float("inf"))
    for _ in range(repeats):
        for name, (call, fast, enabled) in fast_runs.items():
            if math.isnan(seconds[name]):
                continue
            try:
                seconds[name] = min(seconds[name], compile_once(call, fast, enabled))
            except torch._dynamo.exc.Unsupported as error:
                if enabled:
                    raise
                # torch alone breaks the graph here (2.8 and 2.9 trace no optree by themselves)
                print(f"{name}: not measured, torch alone breaks the graph: {error}".split("\n")[0])
                seconds[name] = math.nan
    for name, (call, fast, enabled) in slow_runs.items():
        seconds[name] = compile_once(call, fast, enabled)
    return seconds


def _dynamo_own() -> set[str]:
    """torch pytree rows where this Dynamo's own fast path stays (issue 32), asked by the
    package's capabilities: the fast path exists, and gives eager's answer (a defaultdict
    kept, a graph not reused for keys in another order; else the package takes the map)."""
    rows = {
        "torch pytree tree_map": _dynamo.Capability.TREE_MAP_FAST_PATH,
        "torch pytree tree_map_only": _dynamo.Capability.TREE_MAP_ONLY_FAST_PATH,
        "torch pytree tree_map_with_path": _dynamo.Capability.TREE_MAP_WITH_PATH_FAST_PATH,
    }
    right = all(
        _dynamo.has(capability)
        for capability in (
            _dynamo.Capability.TREE_MAP_FAST_PATH_KEEPS_DEFAULTDICT,
            _dynamo.Capability.TREE_MAP_FAST_PATH_GUARDS_KEY_ORDER,
        )
    )
    return {row for row, capability in rows.items() if right and _dynamo.has(capability)}


def _goal(name: str, ratio: float, anchor_ratio: float, path_anchor_ratio: float) -> str:
    """Every call the package handles: R <= 1.3 (issue 32); map-like calls also against
    torch's own fast path (issue 16)."""
    if name not in FLATTEN_LIKE and name not in MAP_LIKE:
        return ""
    if name in _dynamo_own():
        return "Dynamo's own fast path: the package leaves it"
    goal = f"R<=1.3 {'met' if ratio <= 1.3 else 'MISSED'}"
    if name in MAP_LIKE:
        factor = 0.8 if name in DM_TREE_MAP_LIKE else 1.1
        limit = factor * (path_anchor_ratio if "with_path" in name else anchor_ratio)
        goal += f"; R<={limit:.2f} {'met' if ratio <= limit else 'MISSED'}"
    return goal


def table(seconds: dict[str, float], leaves: int, repeats: int) -> None:
    floor = seconds[FLOOR]
    anchor_ratio = seconds[ANCHOR] / floor  # the same kind of call, torch's own fast path
    path_anchor_ratio = seconds[PATH_ANCHOR] / floor
    print(f"\ncompile time, N={leaves} leaves, backend=eager, fullgraph, min of {repeats}", end="")
    print(" (fast path off: one compile)", flush=True)
    print(
        f"goal for map-like calls: 0.8 x torch's tree_map (R={anchor_ratio:.2f}) for dm-tree's,"
        " 1.1 x for optree's; for *_with_path calls the same of torch's tree_map_with_path"
        f" (R={path_anchor_ratio:.2f})"
    )
    print(f"{'call':68} {'seconds':>8} {'R':>7} {'vs anchor':>10}  goal")
    for name, value in seconds.items():
        ratio = value / floor
        goal = _goal(name, ratio, anchor_ratio, path_anchor_ratio)
        print(f"{name:68} {value:8.3f} {ratio:7.2f} {ratio / anchor_ratio:10.2f}  {goal}")
    doubling = seconds[DOUBLING] / seconds[DOUBLING_ANCHOR]
    print(f"map_structure over torch's tree_map, both with func t * 2: {doubling:.2f}")


def sweep(repeats: int, known: dict[int, dict[str, float]]) -> dict[str, dict[int, float]]:
    """Compile seconds by call and N, for the plot and the linear-growth check."""
    series: dict[str, dict[int, float]] = {}
    for leaves in SWEEP:
        print(f"sweep: N={leaves}", flush=True)
        found = known.get(leaves) or measure(leaves, repeats, slow=leaves <= SLOW_LIMIT)
        for name, value in found.items():
            series.setdefault(name, {})[leaves] = value
    return series


def growth(series: dict[str, dict[int, float]]) -> None:
    print("\nlinear growth: compile seconds at N=10,000 over N=1,000 (goal: at most 12)")
    for name, points in series.items():
        if 10000 in points and 1000 in points:
            ratio = points[10000] / points[1000]
            print(f"{name:68} {ratio:7.2f}  {'met' if ratio <= 12 else 'MISSED'}")


def plot(series: dict[str, dict[int, float]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(13, 7))
    colours = plt.cm.tab20.colors
    for index, (name, points) in enumerate(series.items()):
        sizes = sorted(points)
        style = "--" if OFF in name or name in SLOW_ONLY else "-"
        style = ":" if name in (FLOOR, ANCHOR, OPTREE_ANCHOR, PATH_ANCHOR) else style
        colour = colours[index % len(colours)]
        axes.plot(sizes, [points[n] for n in sizes], style, marker="o", label=name, color=colour)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("tensor leaves N in the structure")
    axes.set_ylabel("compile seconds (backend=eager, min of repeats)")
    axes.set_title(f"torch.compile time of tree calls, torch {torch.__version__}")
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    print(f"\nplot saved to {path}")


def _model(hand_written: bool) -> Callable[[dict[str, Any], torch.Tensor], Any]:
    def step(params: dict[str, Any], x: torch.Tensor) -> Any:
        if hand_written:
            hidden = torch.relu(x @ params["layers"][0]["w"] + params["layers"][0]["b"])
            out = hidden @ params["layers"][1]["w"] + params["layers"][1]["b"]
            scaled = {
                "layers": [{k: v * 0.5 for k, v in layer.items()} for layer in params["layers"]]
            }
            return out, scaled
        tree.assert_same_structure(params, params)
        layers = params["layers"]
        hidden = torch.relu(x @ layers[0]["w"] + layers[0]["b"])
        out = hidden @ layers[1]["w"] + layers[1]["b"]
        leaves = tree.flatten(tree.map_structure(lambda v: v * 0.5, params))
        return out, tree.unflatten_as(params, leaves)

    return step


def runtime_ratio() -> None:
    params = {
        "layers": [
            {"w": torch.randn(64, 64), "b": torch.randn(64)},
            {"w": torch.randn(64, 8), "b": torch.randn(8)},
        ]
    }
    x = torch.randn(32, 64)
    steps = {}
    for hand_written in (True, False):
        steps[hand_written] = torch.compile(_model(hand_written), fullgraph=True)  # inductor
        steps[hand_written](params, x)
    timings = dict.fromkeys(steps, float("inf"))
    for _ in range(5):  # taking turns, as for compile times
        for hand_written, step in steps.items():
            seconds = timeit.timeit(lambda step=step: step(params, x), number=200)
            timings[hand_written] = min(timings[hand_written], seconds)
    ratio = timings[False] / timings[True]
    print("\ncompiled runtime (inductor), seconds per step, min of 5 x 200")
    print(f"hand-written {timings[True] / 200:.2e}  with tree calls {timings[False] / 200:.2e}")
    print(f"ratio {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--plot", default="benchmarks/compile_time.png")
    parser.add_argument("--no-sweep", action="store_true", help="only the table at --leaves")
    parser.add_argument(
        "--quick", action="store_true", help="only the table, without the fast-path-off rows"
    )
    options = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {platform.platform()}")
    print(f"torch {torch.__version__}, python {platform.python_version()}")
    seconds = measure(options.leaves, options.repeats, slow=not options.quick)
    table(seconds, options.leaves, options.repeats)
    if options.quick:
        return
    if not options.no_sweep:
        series = sweep(options.repeats, {options.leaves: seconds})
        growth(series)
        plot(series, options.plot)
    print()
    eager_ratios()
    runtime_ratio()


if __name__ == "__main__":
    main()
