"""A library's module as its own test suite sees it, with every public call compiled.

A stand-in module holds the library's namespace, with each public function replaced by
a call through ``torch.compile(fullgraph=True, backend="eager")``. Each function has one
compiled function of its own for the whole run, so that graphs are reused between calls
as the suite's tests make them (a guard that lets a graph answer for another structure
shows up as a wrong answer). A call:

- that traces returns the compiled result; where no argument is callable and the
  function has no side effect, it also runs eagerly, and a result that differs is
  counted in ``differs`` (and fails the call);
- whose traced code raises the user's error (Dynamo's "Observed exception") runs
  compiled without fullgraph, so that the suite sees the error eager code raises;
- that Dynamo cannot trace where eager code raises runs compiled without fullgraph,
  counted in ``errors_via_break`` (asked only where no argument is callable: running a
  visitor eagerly to ask would repeat its side effects);
- that breaks otherwise is counted in ``breaks``, with its reason, and runs compiled
  without fullgraph.

A call made inside another (a callback that calls the library again) is part of that
call's trace, or of its eager run.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import types
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

__all__ = ["Counts", "same", "stand_in"]

#: Set DTC_SUITE_TRACE=1 to print each compiled call, for finding what a failure follows.
TRACE_CALLS = bool(os.environ.get("DTC_SUITE_TRACE"))


@dataclasses.dataclass
class Counts:
    """What the compiled calls of one run came to."""

    calls: int = 0
    differs: int = 0
    breaks: int = 0
    errors_via_break: int = 0
    #: "function: what" for each break and each differing result.
    breaks_seen: list[str] = dataclasses.field(default_factory=list)
    differs_seen: list[str] = dataclasses.field(default_factory=list)


def same(expected: Any, actual: Any) -> bool:
    """Equal, with the same container types all the way down (arrays and tensors by
    value, iterators taken as they are, objects by equality and how they show)."""
    import numpy as np
    import torch

    if iter_is_self(expected) and iter_is_self(actual):  # reading would consume them
        return True
    if type(expected) is not type(actual):
        return False
    if isinstance(expected, (np.ndarray, torch.Tensor)):
        return expected.shape == actual.shape and bool((expected == actual).all())
    if isinstance(expected, dict):
        return list(expected) == list(actual) and all(
            same(expected[k], actual[k]) for k in expected
        )
    if isinstance(expected, (list, tuple)):
        return len(expected) == len(actual) and all(map(same, expected, actual))
    if isinstance(expected, types.FunctionType):  # a closure made anew: by its code (what
        return expected.__code__ is actual.__code__  # it does; the suite calls it)
    plain_repr = type(expected).__repr__ is object.__repr__  # its address: new each call
    if type(expected).__eq__ is object.__eq__:  # no equality of its own: what it holds
        if plain_repr and hasattr(expected, "__dict__"):
            try:
                return same(vars(expected), vars(actual))
            except RecursionError:  # it holds itself
                return False
        return repr(expected) == repr(actual)
    shown = plain_repr or repr(expected) == repr(actual)  # what it shows counts too
    try:
        return bool(expected == actual) and shown
    except Exception:  # noqa: BLE001 - an equality that raises: compare what it shows
        return repr(expected) == repr(actual)


def iter_is_self(value: Any) -> bool:
    """Whether ``value`` is an iterator (its own ``iter``).

    >>> iter_is_self(iter([])), iter_is_self([])
    (True, False)
    """
    try:
        return iter(value) is value
    except TypeError:
        return False


def _raises(function: Callable[..., Any], args: Any, kwargs: Any) -> bool:
    try:
        function(*args, **kwargs)
    except Exception:  # noqa: BLE001 - any error: the call is one that raises
        return True
    return False


def _named_body(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function(*a, **k)`` in a code object of its own (Dynamo caches by code)."""

    def body(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    code = body.__code__.replace(co_name=f"compiled_{name.replace('.', '_')}")
    return types.FunctionType(code, body.__globals__, code.co_name, None, body.__closure__)


class _Compiled:
    """One library function's compiled calls, for the whole run."""

    active: ClassVar[list[str]] = []  # the call under way, if any

    def __init__(
        self, name: str, function: Callable[..., Any], counts: Counts, side_effects: bool
    ) -> None:
        import torch

        self.name, self.function, self.counts = name, function, counts
        self.side_effects = side_effects
        self.full = torch.compile(_named_body(name, function), backend="eager", fullgraph=True)
        self.loose = torch.compile(_named_body(f"{name}_loose", function), backend="eager")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.active:  # a call from inside another: part of its trace, or eager run
            return self.function(*args, **kwargs)
        self.active.append(self.name)
        try:
            return self._compare(args, kwargs)
        finally:
            self.active.pop()

    def _compare(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        import torch

        counts = self.counts
        counts.calls += 1
        if TRACE_CALLS:
            print(f"call {self.name}{args!r} {kwargs!r}", flush=True)
        # Where an argument is callable (a visitor's side effects) or an iterator (read
        # once), the call runs once only: compiled.
        arguments = (*args, *kwargs.values())
        callbacks = any(callable(a) or iter_is_self(a) for a in arguments)
        try:
            result = self.full(*args, **kwargs)
        except torch._dynamo.exc.Unsupported as error:
            text = str(error)
            if "Observed exception" not in text:
                if not callbacks and _raises(self.function, args, kwargs):
                    counts.errors_via_break += 1
                else:
                    counts.breaks += 1
                    why = [line.strip() for line in text.splitlines() if "Explanation:" in line]
                    counts.breaks_seen.append(
                        f"{self.name}: {' '.join(text.splitlines()[:1] + why[:1])}"
                    )
            result = self.loose(*args, **kwargs)
        if not callbacks and not self.side_effects:
            try:
                expected = self.function(*args, **kwargs)
            except Exception as error:  # noqa: BLE001 - eager raises where compiled returned
                expected = error
            if not same(expected, result):
                counts.differs += 1
                what = f"{self.name}: compiled {result!r}, eager {expected!r}"
                counts.differs_seen.append(what[:500])
                raise AssertionError(what)
        return result


def stand_in(
    module: types.ModuleType,
    names: Iterable[str],
    counts: Counts,
    label: str | None = None,
    side_effects: frozenset[str] = frozenset(),
) -> types.ModuleType:
    """A module like ``module`` whose functions ``names`` run compiled (see above);
    ``side_effects``: those never run a second time eagerly to compare."""
    made = types.ModuleType(module.__name__)
    made.__dict__.update(vars(module))
    label = label or module.__name__
    for name in names:
        function = getattr(module, name, None)
        if inspect.isfunction(function) or inspect.isbuiltin(function):
            compiled = _Compiled(f"{label}.{name}", function, counts, name in side_effects)
            setattr(made, name, _function_of(made, function, compiled))
    _alias_in_submodules(module, made)
    return made


def _alias_in_submodules(module: types.ModuleType, made: types.ModuleType) -> None:
    """Each submodule ``made`` holds (``optree.treespec``) as a stand-in too, where it
    holds one of the functions made a stand-in above under another name
    (``optree.treespec.frozendict is optree.treespec_frozendict``)."""
    replaced = {
        id(original): getattr(made, name)
        for name, original in vars(module).items()
        if getattr(made, name) is not original
    }
    prefix = module.__name__ + "."
    for name, value in vars(module).items():
        if not isinstance(value, types.ModuleType) or not value.__name__.startswith(prefix):
            continue
        aliases = {k: replaced[id(v)] for k, v in vars(value).items() if id(v) in replaced}
        if aliases:
            sub = types.ModuleType(value.__name__)
            sub.__dict__.update(vars(value), **aliases)
            setattr(made, name, sub)


def _function_of(made: types.ModuleType, function: Any, compiled: _Compiled) -> Any:
    """A plain function of the stand-in module (its globals are the module's, where
    ``doctest`` looks for a module's own functions) that calls ``compiled``, with
    ``function``'s name and docstring."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return compiled(*args, **kwargs)

    made_function = types.FunctionType(
        call.__code__, made.__dict__, function.__name__, None, call.__closure__
    )
    made_function.__doc__ = function.__doc__
    for name, value in getattr(function, "__dict__", {}).items():  # register_pytree_node.get
        if inspect.isfunction(value) or inspect.isbuiltin(value):
            value = _Compiled(f"{compiled.name}.{name}", value, compiled.counts, False)
        setattr(made_function, name, value)
    # A module name not imported: doctest then asks the function's globals.
    made_function.__module__ = f"compiled {made.__name__}"
    made_function.__qualname__ = function.__qualname__
    return made_function
