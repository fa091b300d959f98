"""What the package costs a process, package off and on, in fresh interpreters, alternated.

Each scenario runs ``--runs`` times with the package off (``DYNAMO_TREE_COMPAT=0`` and
torch's autoload of it off) and on (autoload, as users get it), the two alternated so that
a busy machine slows both alike; it prints each side's median and what the package adds.

- ``import torch, torch._dynamo, tree`` (and ``optree``), in both orders, compiling
  nothing: wall time and the peak RSS (``ru_maxrss``), and the package's own time in
  those imports measured inside the process (its import and its post-import hooks);
- the first compile of a function with no tree call (``backend="eager"``).

RLlib's first compiled update is ``benchmarks/real_clients.py``'s.

    python benchmarks/process_cost.py [--runs 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable

_IMPORTS = """
import json, resource, time
started = time.perf_counter()
{imports}
elapsed = time.perf_counter() - started
print(json.dumps({{"seconds": elapsed,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""

#: The package's own time in the same imports, measured inside the process: importing
#: it where autoload does, at the end of ``import torch`` (autoload is off here, so that
#: the import below is the package's first), and its post-import hooks. The wall times
#: carry tens of milliseconds of noise; this does not.
_OWN_TIME = """
import json, time
own = []
def _timed_import_of_the_package():
    began = time.perf_counter()
    import dynamo_tree_compat
    from dynamo_tree_compat import activation
    own.append(time.perf_counter() - began)
    hook = activation._on_imported
    def timed(name):
        began = time.perf_counter()
        try:
            hook(name)
        finally:
            own.append(time.perf_counter() - began)
    activation._on_imported = timed
{imports}
print(json.dumps({{"seconds": sum(own)}}))
"""

_FIRST_COMPILE = """
import json, time
import torch, torch._dynamo
{imports}
x = torch.ones(3)
compiled = torch.compile(lambda t: t * 2 + 1, backend="eager")
started = time.perf_counter()
compiled(x)
print(json.dumps({{"seconds": time.perf_counter() - started}}))
"""

_OFF = {"DYNAMO_TREE_COMPAT": "0", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


def _libraries() -> list[str]:
    import importlib.util

    return [name for name in ("tree", "optree") if importlib.util.find_spec(name)]


def _run(code: str, package_on: bool, **extra: str) -> dict[str, float]:
    environment = {**os.environ, "PYTHONDONTWRITEBYTECODE": "0"}
    for name in _OFF:
        environment.pop(name, None)
    if not package_on:
        environment.update(_OFF)
    environment.update(extra)
    completed = subprocess.run(
        [sys.executable, "-c", code],
        env=environment,
        cwd=tempfile.gettempdir(),
        check=True,
        capture_output=True,
        text=True,
    )
    if completed.stderr.strip():
        print(f"  stderr ({'on' if package_on else 'off'}): {completed.stderr.strip()[:300]}")
    return json.loads(completed.stdout.splitlines()[-1])


def _alternated(code: str, runs: int) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    off, on = [], []
    for index in range(runs):
        first_on = index % 2 == 1
        for package_on in (first_on, not first_on):
            (on if package_on else off).append(_run(code, package_on))
    return off, on


def _row(name: str, off: list[float], on: list[float], unit: str, scale: float) -> str:
    median_off, median_on = statistics.median(off) * scale, statistics.median(on) * scale
    added = median_on - median_off
    return f"{name:<46} {median_off:9.1f} {median_on:9.1f} {added:+9.1f} {unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    libraries = _libraries()
    import torch

    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, libraries {libraries}")
    print(f"medians of {runs} fresh interpreters each side, alternated")
    print(f"{'scenario':<46} {'off':>9} {'on':>9} {'added':>9}")
    orders: dict[str, Callable[[], str]] = {
        "torch, Dynamo, then the libraries": lambda: "\n".join(
            ["import torch", "import torch._dynamo", *(f"import {n}" for n in libraries)]
        ),
        "the libraries, then torch and Dynamo": lambda: "\n".join(
            [*(f"import {n}" for n in libraries), "import torch", "import torch._dynamo"]
        ),
    }
    for name, imports in orders.items():
        timed = imports().replace(
            "import torch\n", "import torch\n_timed_import_of_the_package()\n", 1
        )
        code = _OWN_TIME.format(imports=timed)
        own = [_run(code, True, TORCH_DEVICE_BACKEND_AUTOLOAD="0")["seconds"] for _ in range(runs)]
        print(
            f"{'  the package: import and hooks, in-process':<46} {'':>9} {'':>9} "
            f"{statistics.median(own) * 1000:+9.1f} ms"
        )
        off, on = _alternated(_IMPORTS.format(imports=imports()), runs)
        print(
            _row(
                f"import: {name}",
                [r["seconds"] for r in off],
                [r["seconds"] for r in on],
                "ms",
                1000,
            )
        )
        print(_row("  peak RSS", [r["rss_mb"] for r in off], [r["rss_mb"] for r in on], "MB", 1))
    imports = "\n".join(f"import {n}" for n in libraries)
    off, on = _alternated(_FIRST_COMPILE.format(imports=imports), runs)
    print(
        _row(
            "first compile, no tree call (eager backend)",
            [r["seconds"] for r in off],
            [r["seconds"] for r in on],
            "ms",
            1000,
        )
    )


if __name__ == "__main__":
    main()
