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
import importlib.util, json, logging, warnings
logged = []
class Recorder(logging.Handler):
    def emit(self, record):
        logged.append(record.getMessage())
logging.getLogger("dynamo_tree_compat").addHandler(Recorder(logging.DEBUG + 1))
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
            normal = torch.distributions.Normal
            dist = {
                "a": normal(x, 1.0, validate_args=False),
                "b": [normal(x + 1, 2.0, validate_args=False)],
            }
            means = tree.map_structure(lambda d: d.mean, dist)
            return tree.flatten(means), tree.map_structure_with_path(lambda p, v: len(p), dist)

        workloads.append((rllib_pattern, (torch.ones(3),)))
    results = []
    for function, arguments in workloads:
        compiled = torch.compile(function, fullgraph=True, backend="eager")
        got, expected = repr(compiled(*arguments)), repr(function(*arguments))
        results.append(True if got == expected else [got, expected])
    status = dynamo_tree_compat.status()
print(json.dumps({
    "uses": uses,
    "same": results,
    "stepped_aside": status.stepped_aside,
    "hooks_off": status.hooks_off,
    "warnings": [
        str(w.message) for w in caught
        if w.category is dynamo_tree_compat.DynamoTreeCompatWarning
        or "dynamo_tree_compat" in w.filename
    ],
    "logged": logged,
}))
"""


def assert_silent(prelude: str = "") -> dict[str, object]:
    """Runs the workloads after ``prelude`` (say ``"import tree"``); asserts that the
    results equal eager's, that nothing stepped aside or was turned off, and that the
    package warned, logged and printed nothing (torch's own notices, such as its word on
    Python 3.13.0's guards, are torch's). Returns the report."""
    completed = run_fresh(prelude + _WORKLOAD)
    *printed, last = completed.stdout.splitlines() or [""]
    report = json.loads(last)
    assert all(same is True for same in report["same"]), report
    assert report["stepped_aside"] == 0, (report, completed.stderr)
    assert report["hooks_off"] == {}, report
    assert report["warnings"] == [], report
    assert report["logged"] == [], report
    assert printed == [], printed
    ours = [line for line in completed.stderr.splitlines() if "dynamo_tree_compat" in line]
    assert ours == [], completed.stderr
    return report
