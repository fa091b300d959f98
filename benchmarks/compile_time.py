"""Compile time of tree calls under torch.compile, as ratios to a floor, in one run.

The measure (issue 5): build ``{key: [(x, x)]}`` with N/2 keys inside the compiled
function, apply the tree call, drop the result; ``backend="eager"``, ``fullgraph=True``.
The floor builds the same structure and makes no tree call. R is compile time over the
floor's, the minimum over repeats. Dynamo's own ``tree_map`` fast path is the anchor for
map-like calls.

    python benchmarks/compile_time.py [--leaves 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as torch_pytree
import tree

import dynamo_tree_compat  # noqa: F401 - activates the twins

try:
    import optree
except ImportError:  # pragma: no cover - optional anchor
    optree = None


def _structure(x: torch.Tensor, leaves: int) -> dict[str, Any]:
    return {f"k{i:05d}": [(x, x)] for i in range(leaves // 2)}


def _identity(value: Any) -> Any:
    return value


def _calls(leaves: int) -> dict[str, Callable[[torch.Tensor], Any]]:
    def make(call: Callable[[Any], Any]) -> Callable[[torch.Tensor], Any]:
        def compiled_body(x: torch.Tensor) -> torch.Tensor:
            call(_structure(x, leaves))
            return x + 1

        return compiled_body

    calls = {
        "floor (no tree call)": make(lambda s: None),
        "torch pytree tree_map (Dynamo fast path)": make(
            lambda s: torch_pytree.tree_map(_identity, s)
        ),
        "tree.flatten": make(tree.flatten),
        "tree.flatten_with_path": make(tree.flatten_with_path),
        "tree.assert_same_structure": make(lambda s: tree.assert_same_structure(s, s)),
        "tree.is_nested": make(tree.is_nested),
        "tree.map_structure": make(lambda s: tree.map_structure(_identity, s)),
        "tree.map_structure_with_path": make(
            lambda s: tree.map_structure_with_path(lambda p, v: v, s)
        ),
    }
    if optree is not None:
        calls["optree.tree_map (Dynamo fast path)"] = make(lambda s: optree.tree_map(_identity, s))
        calls["optree.tree_leaves (torch polyfill)"] = make(optree.tree_leaves)
    return calls


def compile_seconds(function: Callable[[torch.Tensor], Any], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        torch._dynamo.reset()
        compiled = torch.compile(function, backend="eager", fullgraph=True)
        started = time.perf_counter()
        compiled(torch.ones(2))
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    calls = _calls(options.leaves)
    seconds = {name: compile_seconds(call, options.repeats) for name, call in calls.items()}
    floor = seconds["floor (no tree call)"]
    anchor = seconds["torch pytree tree_map (Dynamo fast path)"]
    print(f"compile time, N={options.leaves} leaves, backend=eager, min of {options.repeats}")
    print(f"{'call':44} {'seconds':>8} {'R':>7} {'vs tree_map':>12}")
    for name, value in seconds.items():
        print(f"{name:44} {value:8.3f} {value / floor:7.2f} {value / anchor:12.2f}")


if __name__ == "__main__":
    main()
