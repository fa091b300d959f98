"""Eager cost of dm-tree calls and of ``import torch``, with and without this package.

Each configuration runs in its own fresh interpreter, side by side in one run, and the
script prints the ratios. The package never replaces dm-tree's functions, so the eager
ratios should be 1.00 within noise.

    python benchmarks/eager_overhead.py
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import textwrap

TIMING = textwrap.dedent(
    """
    import json, sys, timeit
    if sys.argv[1] == "with":
        import dynamo_tree_compat, torch, torch._dynamo
    import tree
    structure = {f"k{i}": [(i, i + 1.0)] for i in range(500)}  # 1,000 leaves
    other = {f"k{i}": [(0, 0.0)] for i in range(500)}
    if sys.argv[1] == "with":
        from dynamo_tree_compat import installer
        assert "tree.flatten" in installer.REGISTERED
    calls = {
        "flatten": lambda: tree.flatten(structure),
        "map_structure": lambda: tree.map_structure(lambda v: v, structure),
        "assert_same_structure": lambda: tree.assert_same_structure(structure, other),
        "flatten_with_path": lambda: tree.flatten_with_path(structure),
    }
    print(json.dumps({name: min(timeit.repeat(call, number=20, repeat=15)) / 20
                      for name, call in calls.items()}))
    """
)

OFF = {"DYNAMO_TREE_COMPAT": "0", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


def _run(code: list[str], environment: dict[str, str]) -> str:
    completed = subprocess.run(
        [sys.executable, *code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **environment},
    )
    return completed.stdout + completed.stderr


def eager_ratios() -> None:
    without = json.loads(_run(["-c", TIMING, "without"], OFF))
    with_package = json.loads(_run(["-c", TIMING, "with"], {}))
    print("eager dm-tree calls, 1,000 leaves (seconds per call, min of 15 x 20)")
    print(f"{'call':24} {'without':>12} {'with':>12} {'ratio':>7}")
    for name, seconds in without.items():
        ratio = with_package[name] / seconds
        print(f"{name:24} {seconds:12.2e} {with_package[name]:12.2e} {ratio:7.2f}")


def _import_torch_ms(environment: dict[str, str]) -> tuple[float, float]:
    """(total ms of `import torch`, ms of loading our entry point, its imports included)."""
    lines = _run(["-X", "importtime", "-c", "import torch"], environment).splitlines()
    total = 0.0
    ours: list[tuple[int, float]] = []  # (indentation, cumulative ms) of our modules
    for line in lines:
        found = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if not found:
            continue
        _, cumulative_us, indent, name = found.groups()
        if name == "torch":
            total = int(cumulative_us) / 1000
        if name.startswith("dynamo_tree_compat"):
            ours.append((len(indent), int(cumulative_us) / 1000))
    # Our outermost lines hold the rest in their cumulative figures.
    top = min((indent for indent, _ in ours), default=0)
    return total, sum(ms for indent, ms in ours if indent == top)


def import_cost(repeats: int = 7) -> None:
    # Byte-compile first, as pip does on install: otherwise each run would compile.
    package = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dynamo_tree_compat"
    )
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True)
    with_runs = [_import_torch_ms({}) for _ in range(repeats)]
    without_runs = [_import_torch_ms(OFF)[0] for _ in range(repeats)]
    ours = statistics.median(run[1] for run in with_runs)
    with_total = statistics.median(run[0] for run in with_runs)
    without_total = statistics.median(without_runs)
    print(f"\nimport torch (median of {repeats}, python -X importtime)")
    print(f"  TORCH_DEVICE_BACKEND_AUTOLOAD=0: {without_total:8.1f} ms")
    print(f"  autoload on:                     {with_total:8.1f} ms")
    print(f"  of which loading dynamo_tree_compat's entry point: {ours:.2f} ms")
    print("  (the rest of the difference is torch scanning entry points, with or without us)")


if __name__ == "__main__":
    eager_ratios()
    import_cost()
