"""What the installed torch's Dynamo can do, for tests that need it.

A test that needs a Dynamo feature some supported torch lacks is skipped there, with a
reason that names the feature: the package cannot trace what Dynamo itself cannot.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import pathlib
import re
import time
import types
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attr
import pytest
import torch

import dynamo_tree_compat

__all__ = [
    "FEATURES",
    "TORCH",
    "drawn_kinds",
    "dynamo_traces",
    "needs_dynamo",
    "needs_torch",
    "new_defaultdict",
    "raised_in_package",
    "require_dynamo",
    "with_a_graph_op",
]

#: The installed torch's (major, minor).
TORCH: tuple[int, int] = tuple(  # type: ignore[assignment]
    int(part)
    for part in re.match(r"(\d+)\.(\d+)", torch.__version__).groups()  # type: ignore[union-attr]
)


def new_defaultdict(
    factory: Callable[[], Any], pairs: Iterable[tuple[Any, Any]]
) -> collections.defaultdict[Any, Any]:
    """``defaultdict(factory, pairs)`` in two steps, as every Dynamo traces it (Dynamo
    2.9 calls defaultdict with the factory alone).

    >>> new_defaultdict(list, [("b", 1)])
    defaultdict(<class 'list'>, {'b': 1})
    """
    made = collections.defaultdict(factory)
    made.update(pairs)
    return made


def needs_torch(minimum: tuple[int, int], what_dynamo_lacks: str) -> pytest.MarkDecorator:
    """Skips a test on torch older than ``minimum``, where Dynamo lacks a feature.

    >>> needs_torch((2, 0), "nothing").name
    'skipif'
    """
    return pytest.mark.skipif(
        TORCH < minimum,
        reason=f"torch {torch.__version__}: Dynamo {what_dynamo_lacks}",
    )


@dataclasses.dataclass(frozen=True)
class _Frozen:
    field: int = 1


class _Key:
    """A dict key that is a plain user object."""


_KEY = _Key()
_PROXY = types.MappingProxyType({"a": 1})


@contextlib.contextmanager
def _scope() -> Iterator[None]:
    yield


def _in_a_scope(x: torch.Tensor) -> torch.Tensor:
    with _scope():
        return x + 1


def _is_itself(value: Any) -> tuple[bool]:
    same = value
    return (value is same,)


class _Made:
    """A plain user class."""

    def __init__(self, value: Any) -> None:
        self.value = value


_Record = attr.make_class("_Record", {"value": attr.ib()})


class _SubTensor(torch.Tensor):
    """A tensor subclass."""


class _SubTuple(tuple):
    """A tuple subclass."""


class _SubList(list):
    """A list subclass with an ``__init__`` of its own, like optree's DictMetaData."""

    __slots__ = ("extra",)

    def __init__(self, items: Iterable[Any] = (), *, extra: Any = None) -> None:
        super().__init__(items)
        self.extra = extra


_SubPoint = type("_SubPoint", (collections.namedtuple("_Point", "x y"),), {})
_SUB_POINT = _SubPoint(1, 2)
_DEQUE = collections.deque([1], maxlen=3)
_STRUCTSEQ = torch.return_types.max((1, 2))


def _structseq_in_graph(x: torch.Tensor) -> Any:
    if [_STRUCTSEQ]:  # a list holding a structseq of constants, tested for truth
        torch.return_types.max((1, 2))
    return torch.return_types.max((x, 3)).values


def _optree_flatten(x: torch.Tensor) -> Any:
    import optree  # only where the feature is asked about

    return optree.tree_flatten([x])


def _reads_to(box: list[int]) -> Iterator[int]:
    box.append(1)
    yield 1
    box.append(2)
    yield 2


def _read_once(x: torch.Tensor) -> Any:
    """A tuple where ``next()`` ran the generator to its first ``yield`` only."""
    box: list[int] = []
    next(_reads_to(box))
    return (x,) if len(box) == 1 else x


#: Dynamo features some supported torch lacks: a tiny use of each, and what it is.
FEATURES: dict[str, tuple[Callable[[torch.Tensor], Any], str]] = {
    "time.struct_time": (
        lambda x: time.struct_time(range(9)),
        "cannot construct a time.struct_time (a structseq) in the graph",
    ),
    "hash": (lambda x: hash((1, "a")), "cannot trace the builtin hash()"),
    "defaultdict.default_factory": (
        lambda x: (collections.defaultdict(list).default_factory, 1) != (list, 1),
        "cannot read a defaultdict's default_factory (optree's prefix_errors compares it)",
    ),
    "tuple.__repr__": (
        lambda x: tuple.__repr__((1, "a")),
        "cannot trace tuple.__repr__ (optree's accessors call it in their repr)",
    ),
    "frozen dataclass repr": (
        lambda x: repr(_Frozen()),
        "cannot trace repr() of a frozen dataclass (optree's accessor entries)",
    ),
    "defaultdict(factory, items)": (
        lambda x: collections.defaultdict(int, {"a": x}),
        "cannot call defaultdict(factory, items), or with a factory such as int "
        "(optree's treespec_defaultdict does)",
    ),
    "defaultdict leaves the graph": (
        lambda x: new_defaultdict(list, [("a", x)]),
        "returns a defaultdict made in the graph as a plain dict",
    ),
    "dict.items() view": (
        lambda x: {"a": x}.items(),
        "takes dict.items() for a tuple of pairs, not a view",
    ),
    "tuple subclass": (
        lambda x: _SubTuple((x, 1)),
        "cannot construct a tuple subclass in the graph (optree's PyTreeAccessor, a "
        "namedtuple with a __new__ of its own)",
    ),
    "namedtuple subclass": (
        lambda x: (_SubPoint(x, 1), _SUB_POINT[0], list(_SUB_POINT)),
        "cannot make, index or iterate an instance of a namedtuple's subclass",
    ),
    "deque maxlen": (
        lambda x: (collections.deque([x], maxlen=2), _DEQUE.maxlen),
        "keeps no deque's maxlen: it cannot make a deque with one in the graph, nor read "
        "one's (optree's specs hold it)",
    ),
    "structseq made in the graph": (
        _structseq_in_graph,
        "makes a structseq in the graph wrongly (its first field holds every argument), "
        "and one of constants not at all (an internal error of its own)",
    ),
    "a generator read lazily": (
        lambda x: _read_once(x),
        "runs a generator to its end where it is first read (optree's tree_iter then runs "
        "optree's own iterator, after a graph break, and so do tree_all and tree_any)",
    ),
    "list subclass": (
        lambda x: _SubList([x], extra=1),
        "cannot construct a list subclass with an __init__ of its own in the graph "
        "(optree's DictMetaData, which tree_flatten_one_level makes for a dict)",
    ),
    "Tensor.as_subclass": (
        lambda x: x.as_subclass(_SubTensor),
        "cannot trace Tensor.as_subclass (an internal error of its own)",
    ),
    "mappingproxy made in the graph": (
        lambda x: types.MappingProxyType({"a": x}),
        "cannot make a types.MappingProxyType in the graph",
    ),
    "mappingproxy passed in": (
        lambda x: (_PROXY["a"], len(_PROXY), list(_PROXY.keys())),
        "cannot read a types.MappingProxyType that comes in (its items, length or keys)",
    ),
    "class of an object made in the graph": (
        lambda x: type(_Made(x))(x),
        "cannot call the class of an object made in the graph, type(made)(...) (the "
        "twins rebuild a user Mapping so)",
    ),
    "attrs instance made in the graph": (
        lambda x: _Record(x),
        "cannot make an attrs instance in the graph",
    ),
    "is between containers": (
        lambda x: _is_itself({"a": x}) + _is_itself((x,)),
        "cannot trace ``is`` between a dict and itself, or a tuple and itself (it compares "
        "their items)",
    ),
    "a @contextmanager scope": (
        lambda x: _in_a_scope(x),
        "cannot trace a @contextlib.contextmanager scope (a generator): the graph breaks "
        "there (Keras's name scopes)",
    ),
    "a frame with no graph ops": (
        lambda x: list(y for y in [x]),
        "skips a fullgraph frame with no graph ops, then traces the frames inside it alone "
        "(a generator or comprehension frame, whose iterator it cannot take as an input)",
    ),
    "object dict keys": (
        lambda x: {_KEY: x},
        "cannot build a dict keyed by a user object in the graph",
    ),
    # Tried with this package disabled: what torch's own optree polyfills do.
    "optree without the package": (
        _optree_flatten,
        "does not trace optree.tree_flatten by itself (torch's own optree polyfills)",
    ),
}


_PACKAGE = pathlib.Path(dynamo_tree_compat.__file__).resolve().parent


def raised_in_package(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, was raised in this package's own
    code (its innermost frame is there), rather than by Dynamo.

    >>> raised_in_package(ValueError("no traceback"))
    False
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        trace = current.__traceback__
        while trace is not None and trace.tb_next is not None:
            trace = trace.tb_next
        if trace is not None:
            path = pathlib.Path(trace.tb_frame.f_code.co_filename).resolve()
            if _PACKAGE in path.parents:
                return True
        current = current.__cause__ or current.__context__
    return False


@functools.cache
def dynamo_traces(feature: str) -> bool:
    """Whether this torch's Dynamo traces ``feature`` (a key of :data:`FEATURES`) in one
    graph, to a result of eager's type, tried once. An error Dynamo raises means it does
    not; an error raised in this package's own code fails loudly, never as a skip.
    Dynamo's warnings about the trial (such as "does not know how to trace the
    builtin") are the answer, not news: they are kept out of the test run's summary.
    ``tests/internals/test_capabilities.py`` pins each release's answers.

    >>> dynamo_traces("no such feature")
    Traceback (most recent call last):
    ...
    KeyError: 'no such feature'
    """
    use, _ = FEATURES[feature]
    scope = contextlib.nullcontext()
    if feature == "optree without the package":
        scope = dynamo_tree_compat.disabled()
    try:
        with scope, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            result = torch.compile(_probe(feature, use), backend="eager", fullgraph=True)(
                torch.ones(1)
            )
    except Exception as error:
        if raised_in_package(error):
            raise AssertionError(f"trying {feature!r} failed in dynamo-tree-compat") from error
        return False
    return type(result) is type(use(torch.ones(1)))


def _probe(feature: str, use: Callable[[torch.Tensor], Any]) -> Callable[[torch.Tensor], Any]:
    """``use`` with a graph op beside it: a Dynamo that skips a frame with none (2.6 and
    earlier) would otherwise run the use eagerly and seem to trace it."""
    return use if feature == "a frame with no graph ops" else with_a_graph_op(use)


def with_a_graph_op(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, with one graph op beside each call that changes nothing, in a code
    object of its own (Dynamo caches compiled code by code object).

    >>> with_a_graph_op(len)([1, 2])
    2
    """

    def beside(*args: Any, **kwargs: Any) -> Any:
        torch.zeros(())  # an op in the graph, so Dynamo traces this frame as one
        return function(*args, **kwargs)

    code = beside.__code__.replace(co_name=f"{getattr(function, '__name__', 'call')}_with_an_op")
    return types.FunctionType(code, globals(), code.co_name, None, beside.__closure__)


#: Container kinds some Dynamo gets wrong by itself, made in the graph or passed in: the
#: features each needs.
_KIND_NEEDS = {
    "defaultdict": ("defaultdict leaves the graph",),
    "items": ("dict.items() view",),
    "mappingproxy": ("mappingproxy made in the graph", "mappingproxy passed in"),
    "namedtuple_subclass": ("namedtuple subclass",),
}
#: What each kind needs besides, made in the graph (a user Mapping is rebuilt by its class).
_KIND_NEEDS_INSIDE = {
    "mapping": ("class of an object made in the graph",),
    "attrs": ("attrs instance made in the graph", "class of an object made in the graph"),
}


def drawn_kinds(
    kinds: Iterable[str],
    inside: bool = False,
    library_needs: Mapping[str, tuple[str, ...]] | None = None,
) -> list[str]:
    """The container kinds generated structures draw from: all of ``kinds``, less those
    Dynamo itself gets wrong (a defaultdict it returns as a plain dict, an items view it
    takes for a tuple, a mappingproxy it cannot read), which no package call could mend;
    ``inside``: made in the graph (less the kinds it cannot make or rebuild there);
    ``library_needs``: the features one library's kinds need besides (optree's deque
    keeps its maxlen), by kind.

    >>> "list" in drawn_kinds(["list", "defaultdict"], inside=True)
    True
    >>> drawn_kinds(["list"], library_needs={"list": ("hash",)}) in ([], ["list"])
    True
    """
    needs = {**_KIND_NEEDS}
    for table in ([_KIND_NEEDS_INSIDE] if inside else []) + [library_needs or {}]:
        for kind, more in table.items():
            needs[kind] = needs.get(kind, ()) + more
    return [kind for kind in kinds if all(map(dynamo_traces, needs.get(kind, ())))]


def needs_dynamo(feature: str) -> pytest.MarkDecorator:
    """Skips a test where Dynamo cannot trace ``feature``, naming what it lacks.

    >>> needs_dynamo("hash").name
    'skipif'
    """
    return pytest.mark.skipif(
        not dynamo_traces(feature),
        reason=f"torch {torch.__version__}: Dynamo {FEATURES[feature][1]}",
    )


def require_dynamo(features: str | tuple[str, ...]) -> None:
    """Skips the running test where Dynamo cannot trace a feature of ``features``, naming
    what it lacks."""
    for feature in (features,) if isinstance(features, str) else features:
        if not dynamo_traces(feature):
            pytest.skip(f"torch {torch.__version__}: Dynamo {FEATURES[feature][1]}")
