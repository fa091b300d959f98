"""What the package adds to ``import torch``: its autoload entry point, in fresh interpreters.

Each run imports torch with torch's autoload off, then imports and calls the entry point
as torch would, and prints both times and their ratio. Run it against a byte-compiled,
non-editable install for users' figures (an editable install adds its own finder).

    python benchmarks/autoload_cost.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

_CHILD = """
import time
started = time.perf_counter()
import torch
imported = time.perf_counter()
import dynamo_tree_compat.autoload as entry_point
entry_point.load()
loaded = time.perf_counter()
print(imported - started, loaded - imported, entry_point.__file__)
"""


def measure(runs: int) -> list[tuple[float, float]]:
    """``(import torch, autoload)`` seconds, one pair per fresh interpreter."""
    environment = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    pairs = []
    for _ in range(runs):
        output = subprocess.run(
            [sys.executable, "-c", _CHILD],
            env=environment,
            cwd=tempfile.gettempdir(),  # the installed package, not a checkout's
            check=True,
            capture_output=True,
        ).stdout.split()
        pairs.append((float(output[0]), float(output[1])))
    print(f"entry point: {output[2].decode()}")
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    pairs = measure(parser.parse_args().runs)
    torch_ms = statistics.median(pair[0] for pair in pairs) * 1000
    ours_ms = statistics.median(pair[1] for pair in pairs) * 1000
    print(f"median of {len(pairs)} fresh interpreters")
    print(f"import torch   {torch_ms:8.1f} ms")
    print(f"autoload       {ours_ms:8.2f} ms")
    print(f"ratio          {ours_ms / torch_ms:8.4f}")


if __name__ == "__main__":
    main()
