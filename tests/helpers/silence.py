"""The covered workloads, compiled in a fresh process: the package must print nothing,
warn nothing and step aside nowhere, whichever tree libraries are installed.

Stepping aside is for faults in this package, not for a library that is not installed.
"""

from __future__ import annotations

import json

from tests.helpers.fresh import run_fresh

#: Compiles the doctor's model (dm-tree, optree where installed, torch's pytree) and
#: RLlib's pattern (dm-tree over distributions) with ``fullgraph=True``; prints a report.
_WORKLOAD = """
import importlib.util, json, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import torch
    import dynamo_tree_compat
    from dynamo_tree_compat.cli import _built_in_model

    forward, args, uses = _built_in_model()
    workloads = [(forward, args)]
    if importlib.util.find_spec("tree"):
        import tree

        def rllib_pattern(x):
            dist = {"a": torch.distributions.Normal(x, 1.0, validate_args=False), "b": [x]}
            means = tree.map_structure(lambda d: getattr(d, "mean", d), dist)
            return tree.flatten(means), tree.map_structure_with_path(lambda p, v: len(p), dist)

        workloads.append((rllib_pattern, (torch.ones(3),)))
    results = []
    for function, arguments in workloads:
        compiled = torch.compile(function, fullgraph=True, backend="eager")
        results.append(repr(compiled(*arguments)) == repr(function(*arguments)))
    status = dynamo_tree_compat.status()
print(json.dumps({
    "uses": uses,
    "same": results,
    "stepped_aside": status.stepped_aside,
    "hooks_off": status.hooks_off,
    "warnings": [str(w.message) for w in caught],
}))
"""


def assert_silent(prelude: str = "") -> dict[str, object]:
    """Runs the workloads after ``prelude`` (say ``"import tree"``); asserts that the
    results equal eager's, that nothing stepped aside, was turned off or warned, and that
    the process printed nothing else. Returns the report."""
    completed = run_fresh(prelude + _WORKLOAD)
    *printed, last = completed.stdout.splitlines() or [""]
    report = json.loads(last)
    assert all(report["same"]), report
    assert report["stepped_aside"] == 0, (report, completed.stderr)
    assert report["hooks_off"] == {}, report
    assert report["warnings"] == [], report
    assert printed == [], printed
    assert completed.stderr == "", completed.stderr
    return report
