"""What a user can do about a graph break: one line per break, for ``explain``.

Two tables, first match wins:

- :data:`KNOWN_BREAKS`: the breaks that remain in the real clients the suite runs (Keras
  3.0 to 3.15, RLlib 2.60), each with its cause in the user's words and the way out that
  was run and seen to remove it: the first release of the library without it, a setting,
  or a line in the user's own code. ``checked`` says where: a test, or the command and
  counts in ``docs/measurements.md`` ("Ways out").
- the generic hints, from Dynamo's cause alone.

To add a known break: run the way out and see the break gone; record it (a test where
the suite's environments have what it needs, else ``docs/measurements.md``); then add a
row whose ``place`` and ``cause`` match only that break.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KNOWN_BREAKS",
    "KnownBreak",
    "Upgrade",
    "hint",
    "known_break",
    "text_and_places",
    "upgrades",
]


@dataclass(frozen=True)
class KnownBreak:
    """A break in a real client's own code, and its way out."""

    #: The library whose code breaks, as explain names it (``keras``, ``RLlib``).
    library: str
    #: A regular expression over the places the break is at or called from (any frame).
    place: str
    #: A regular expression over Dynamo's reason and cause.
    cause: str
    #: The cause, in the user's words.
    what: str
    #: The way out that was run and seen to remove the break.
    way_out: str
    #: Where the way out is checked: a test, or a section of ``docs/measurements.md``.
    checked: str
    #: The distribution whose release ``fixed_in`` names (``keras``, ``ray``).
    distribution: str = ""
    #: The first release without the break, found by running it; empty if none is known.
    fixed_in: str = ""

    def matches(self, text: str, places: Iterable[str]) -> bool:
        """Whether a break with Dynamo's ``text`` at (or called from) ``places`` is this."""
        return any(re.search(self.place, place) for place in places) and bool(
            re.search(self.cause, text)
        )


_MEASURED = "docs/measurements.md, Ways out"
_KERAS_PROBE = f"{_MEASURED} (the Sequential model, Keras release by release)"
_KERAS_FIT_PROBE = f"{_MEASURED} (fit with jit_compile=True, Keras release by release)"

KNOWN_BREAKS: tuple[KnownBreak, ...] = (
    KnownBreak(
        "keras",
        "keras/src/backend/common/variables.py",
        r"Non-constant GetAttrVariable hash",
        "Keras's standardize_dtype hashes the dtype of a variable's super().value",
        "before it, a patch in your code: docs/real-clients.md",
        f"{_KERAS_PROBE}; tests/integration/test_graph_budget.py (Keras 3.0.5)",
        "keras",
        "3.5.0",
    ),
    KnownBreak(
        "keras",
        "keras/src/backend/torch/",
        r"(?s)Failed to convert args/kwargs to proxy.*SuperVariable\(\), value",
        "a Keras variable reaches a torch op through its value property (super().value)",
        "before it, a patch in your code: docs/real-clients.md",
        f"{_KERAS_PROBE}; tests/integration/test_graph_budget.py (Keras 3.0.5)",
        "keras",
        "3.5.0",
    ),
    KnownBreak(
        "keras",
        "keras/src/backend/torch/nn.py",
        r"(?s)Failed to convert args/kwargs to proxy.*TrackedList",
        "LayerNormalization passes its axes to torch.mean as Keras's TrackedList",
        "before it, give each LayerNormalization a tuple after building the model: "
        'object.__setattr__(layer, "axis", tuple(layer.axis))',
        f"{_KERAS_PROBE}; tests/integration/test_graph_budget.py (Keras 3.0.5)",
        "keras",
        "3.11.0",
    ),
    KnownBreak(
        "Python",
        "keras/src/layers/layer.py",
        r"mapping proxy affected by dictionary mutation",
        "Keras's Layer.__call__ binds its call signature (inspect) after an earlier break "
        "in the same call",
        "it goes with the Keras breaks before it",
        _KERAS_PROBE,
        "keras",
        "3.11.0",
    ),
    KnownBreak(
        "keras",
        r"keras/src/(utils/python_utils|trainers/trainer)\.py",
        r"sort with non-constant keys",
        "Keras's pythonify_logs sorts the logs in the compiled train step",
        "",
        _KERAS_FIT_PROBE,
        "keras",
        "3.14.0",
    ),
    KnownBreak(
        "keras",
        r"keras/src/(utils/python_utils|trainers/trainer)\.py",
        r"(?i)item\(\)|data dependent",
        "Keras's pythonify_logs reads each log into a Python float in the compiled step",
        "",
        _KERAS_FIT_PROBE,
        "keras",
        "3.14.0",
    ),
    KnownBreak(
        "keras",
        "keras/src/backend/torch/core.py",
        r"ndarray attribute access",
        "Keras's loss tracker converts the batch size through numpy (ndarray.dtype)",
        "",
        _KERAS_FIT_PROBE,
        "keras",
        "3.15.0",
    ),
    KnownBreak(
        "keras",
        "keras/src/backend/torch/trainer.py",
        r"(?i)backward",
        "Keras's torch train step (jit_compile=True) calls loss.backward() inside the "
        "compiled step",
        "no way out is known: Keras 3.0.5 to 3.15.1 all do (the rest of the step still compiles)",
        _KERAS_FIT_PROBE,
    ),
    KnownBreak(
        "RLlib",
        "ray/rllib/core/distribution/distribution.py",
        r"__class__ assignment",
        "RLlib's partial distribution (from_logits) assigns distribution.__class__",
        "a patch in your code, from_logits built with cls: docs/real-clients.md (ray "
        "2.60.0, the newest tried, has the break)",
        "tests/integration/test_rllib.py (one graph, worked around)",
    ),
    KnownBreak(
        "RLlib",
        "ray/rllib/utils/metrics/metrics_logger.py",
        r"(?i)context manager|BEFORE_WITH|SETUP_WITH",
        "RLlib's MetricsLogger enters its lock object on every log call",
        "set learner.metrics._threading_lock = contextlib.nullcontext() on each Learner "
        "before compiling (ray 2.60.0, the newest tried, has the break)",
        "tests/integration/test_rllib.py (one graph, worked around)",
    ),
    KnownBreak(
        "RLlib",
        "ray/rllib/core/learner/torch/torch_learner.py",
        r"(?i)data[- ]dependent|generic_jump|jump|branch",
        "RLlib checks each gradient for nan/inf (torch.isfinite(grad).all() in a branch)",
        "config.framework(torch_skip_nan_gradients=True) skips the check (nan/inf "
        "gradients are then no longer set to zero; the optimizer's own break after it "
        "stays, so the graphs do not change)",
        "tests/integration/test_rllib.py (the NaN check's setting)",
    ),
    KnownBreak(
        "torch",
        "torch/distributions/kl.py",
        r"(?i)failed to trace builtin operator",
        "torch's kl_divergence looks its pair of distribution types up with min() over a "
        "generator, on the first call for that pair",
        "call it once outside the compiled region first (one eager update): the lookup is "
        "then cached",
        "tests/integration/test_rllib.py (the whole update, after one eager update)",
    ),
    KnownBreak(
        "RLlib",
        "ray/rllib/algorithms/ppo/torch/ppo_torch_learner.py",
        r"(?s)cannot resume.*Reconstruction failure.*Distribution\.kl\b",
        "PPO's KL loss meets torch's kl_divergence lookup (below) where Dynamo cannot resume",
        "it goes with that lookup: call kl_divergence once outside the compiled region "
        "first (one eager update)",
        "tests/integration/test_rllib.py (the whole update, after one eager update)",
    ),
)


def _release(text: str) -> tuple[int, ...]:
    """A release as numbers, for comparing (``'3.11.0'`` -> ``(3, 11, 0)``).

    >>> _release("3.11.0") > _release("3.5.0"), _release("2.60.0rc1")
    (True, (2, 60, 0))
    """
    return tuple(int(re.match(r"\d*", part).group() or 0) for part in text.split("."))


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def text_and_places(record: dict[str, Any]) -> tuple[str, list[str]]:
    """What a hint reads of a break's record (``recording.break_record``): Dynamo's reason
    and cause, and the places it is at and called from.

    >>> text_and_places({"reason": "r", "cause": "c", "location": "a.py:1", "where": "b.py:2",
    ...     "frames": ["c.py:3"]})
    ('r\\nc', ['a.py:1', 'b.py:2', 'c.py:3'])
    """
    text = f"{record['reason']}\n{record.get('cause', '')}"
    return text, [record["location"], record["where"], *record.get("frames", [])]


def known_break(text: str, places: Iterable[str]) -> KnownBreak | None:
    """The known break of this cause at (or called from) these places, if one is.

    >>> known_break("Non-constant GetAttrVariable hash", ["keras/src/backend/common/"
    ...     "variables.py:386"]).fixed_in
    '3.5.0'
    >>> known_break("Non-constant GetAttrVariable hash", ["model.py:3"]) is None
    True
    """
    found = list(places)
    return next((known for known in KNOWN_BREAKS if known.matches(text, found)), None)


def _known_hint(known: KnownBreak) -> str:
    """A known break's line: its cause, and its ways out.

    >>> _known_hint(KnownBreak("lib", "lib/a.py", "x", "lib's cause", "set y", "", "not-"
    ...     "installed", "2.0"))
    "lib's cause: not-installed 2.0 or later has no such break; set y"
    """
    parts = [known.what]
    if known.fixed_in:
        installed = _installed(known.distribution)
        have = f" (you have {installed})" if installed else ""
        parts.append(f"{known.distribution} {known.fixed_in} or later has no such break{have}")
    if known.way_out:
        parts.append(known.way_out)
    return parts[0] + ": " + "; ".join(parts[1:])


@dataclass(frozen=True)
class Upgrade:
    """One release that removes some of the breaks that remain."""

    distribution: str
    release: str
    removes: int
    of: int


def upgrades(breaks: Iterable[tuple[str, Iterable[str], int]]) -> list[Upgrade]:
    """For each library that ``breaks`` (text, places, count) leave, the one release
    that removes the most of them: the newest ``fixed_in`` among its known breaks.

    >>> upgrades([("Non-constant GetAttrVariable hash", ["keras/src/backend/common/"
    ...     "variables.py:9"], 19), ("sort with non-constant keys",
    ...     ["keras/src/utils/python_utils.py:1"], 8), ("x", ["model.py:3"], 2)])
    [Upgrade(distribution='keras', release='3.14.0', removes=27, of=29)]
    """
    fixes: dict[str, list[tuple[str, int]]] = {}
    total = 0
    for text, places, count in breaks:
        total += count
        known = known_break(text, places)
        if known is not None and known.fixed_in:
            fixes.setdefault(known.distribution, []).append((known.fixed_in, count))
    found = []
    for distribution, fixed in sorted(fixes.items()):
        release = max((release for release, _ in fixed), key=_release)
        found.append(Upgrade(distribution, release, sum(count for _, count in fixed), total))
    return found


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


def hint(cause: str, library: str, places: Iterable[str] = ()) -> str:
    """One line on what a user can do about a graph break, from Dynamo's cause and where
    it is (the break's location and the frames that called it).

    >>> hint("Unsupported context manager: a `lock` context manager", "RLlib")[:29]
    'a lock cannot be entered whil'
    >>> hint("Attempted to call function marked as skipped", "keras")[:34]
    'Dynamo does not trace this functio'
    >>> hint("dynamo-tree-compat stepped aside: x", "keras")[:40]
    'dynamo-tree-compat ended the graph here '
    >>> hint("sort with non-constant keys", "keras", ["keras/src/utils/python_utils.py:186"])[:41]
    "Keras's pythonify_logs sorts the logs in "
    """
    from ._dynamo.graph_breaks import OWN_BREAK, TREE_LIBRARIES

    if OWN_BREAK.search(cause):
        return _OWN_HINT
    known = known_break(cause, places)
    if known is not None:
        return _known_hint(known)
    for pattern, text in _HINTS:
        if re.search(pattern, cause):
            return text
    return _TREE_HINT if library in TREE_LIBRARIES else _DEFAULT_HINT
