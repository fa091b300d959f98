"""The seam holds: outside ``_dynamo/seam/`` no module imports or names Dynamo, or touches
an attribute of Dynamo's objects; no package module grows past 700 lines.

A static check over the package's AST, by structure rather than by the names this package
happens to give things. Outside the seam, each of these is a finding:

- an import of ``torch._dynamo``, ``torch._logging``, ``torch._C._dynamo`` or
  ``torch.compiler`` in any form (``import``, ``from``, ``from torch import _dynamo``), a
  string that names one, an attribute chain through one (``torch._dynamo.reset``), or a
  ``getattr`` of ``_dynamo``; imports under ``if TYPE_CHECKING:`` never run, and type;
- ``importlib.import_module`` or ``__import__`` of a name computed at run time;
- an attribute, ``getattr``, ``hasattr``, ``setattr`` or ``delattr`` of a name Dynamo's
  objects have, whatever the receiver is called (the seam's own modules, and other
  modules imported by name, as receivers, are their interface), or a reflective access
  of a private name. The names: :data:`seam.DYNAMO_NAMES`, and every name that this
  torch's variable, source, translator, output graph, builder and code generator
  classes define (:data:`DYNAMO_CLASS_NAMES`, found from the classes themselves, not
  listed by hand), less those Python's own objects share and the package's own classes
  define.

The exceptions are exact ``(module, name)`` pairs, each with its reason, in
:data:`seam.EXCEPTIONS`.
"""

from __future__ import annotations

import ast
import collections
import dataclasses
import enum
import pathlib
import textwrap
import types
from typing import NamedTuple

import pytest

from dynamo_tree_compat._dynamo import seam
from tests.helpers.source import RunTimeVisitor

PACKAGE = pathlib.Path(seam.__file__).resolve().parent.parent.parent
SEAM = "_dynamo/seam/"
MAX_LINES = 700
DYNAMO_MODULES = ("torch._dynamo", "torch._logging", "torch._C._dynamo", "torch.compiler")
_TORCH_PRIVATE = frozenset(name.split(".", 1)[1] for name in DYNAMO_MODULES)
_ACCESSORS = frozenset({"getattr", "hasattr", "setattr", "delattr"})
_IMPORTERS = frozenset({"importlib.import_module", "import_module", "__import__"})


class Finding(NamedTuple):
    """One use of Dynamo outside the seam: where, and the name it uses."""

    line: int
    name: str


def _subclasses(base: type) -> set[type]:
    found, stack = set(), [base]
    while stack:
        cls = stack.pop()
        if cls not in found:
            found.add(cls)
            stack.extend(cls.__subclasses__())
    return found


def _defined(cls: type) -> set[str]:
    """The names a class itself defines: attributes, annotations, fields, slots."""
    names = set(vars(cls)) | set(vars(cls).get("__annotations__", {}))
    if dataclasses.is_dataclass(cls):
        names |= {field.name for field in dataclasses.fields(cls)}
    return names | set(getattr(cls, "__slots__", ()) or ())


def _dynamo_class_names() -> frozenset[str]:
    """What this torch's Dynamo objects define, less what Python's own objects share."""
    import torch._dynamo.variables  # noqa: F401 - every variable class loaded
    from torch._dynamo.codegen import PyCodegen
    from torch._dynamo.output_graph import OutputGraph
    from torch._dynamo.source import Source
    from torch._dynamo.symbolic_convert import InstructionTranslatorBase
    from torch._dynamo.variables.base import VariableTracker
    from torch._dynamo.variables.builder import VariableBuilder

    bases = (VariableTracker, Source, InstructionTranslatorBase, OutputGraph)
    classes = set().union(*(_subclasses(base) for base in (*bases, VariableBuilder, PyCodegen)))
    names = set().union(*(_defined(cls) for cls in classes))
    shared = set().union(*(dir(kind) for kind in _PYTHONS_OWN))
    return frozenset(name for name in names if not name.startswith("__") and name not in shared)


#: Python's own objects, whose attributes any code reads.
_PYTHONS_OWN: tuple[type, ...] = (
    *(object, type, dict, list, tuple, set, frozenset, str, bytes, int, float, bool, slice),
    *(range, property, BaseException, enum.Enum, types.SimpleNamespace, types.ModuleType),
    *(types.FunctionType, types.CodeType, types.FrameType, types.MethodType),
    *(collections.OrderedDict, collections.defaultdict, collections.deque),
)


def _packages_own() -> frozenset[str]:
    """The names the package's own classes define (their bodies, and ``self.x =``)."""
    own: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        own.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        own.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        own.update(t.id for t in item.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    own.add(node.attr)
    return frozenset(own)


#: The names of Dynamo's objects that no module outside the seam may read.
DYNAMO_CLASS_NAMES = seam.DYNAMO_NAMES | (_dynamo_class_names() - _packages_own())


def _modules() -> list[str]:
    return sorted(path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py"))


def _dynamo_module(text: str) -> bool:
    return any(text == name or text.startswith(name + ".") for name in DYNAMO_MODULES)


def _chain(node: ast.AST) -> str | None:
    """``a.b.c`` for an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


class _Checker(RunTimeVisitor):
    """Collects the findings of one module."""

    def __init__(self) -> None:
        self.found: list[Finding] = []
        self.seam_modules: set[str] = set()  # names bound to the seam's modules here
        self.modules: set[str] = set()  # names bound to other modules (not torch's)

    def _add(self, node: ast.AST, name: str) -> None:
        self.found.append(Finding(getattr(node, "lineno", 0), name))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _dynamo_module(alias.name):
                self._add(node, alias.name)
            elif alias.name.split(".")[0] != "torch":
                self.modules.add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if (node.level and module.rpartition(".")[2] == "seam") or module.endswith(".seam"):
            self.seam_modules.update(alias.asname or alias.name for alias in node.names)
        if node.level:
            return
        for alias in node.names:
            if _dynamo_module(module) or _dynamo_module(f"{module}.{alias.name}"):
                self._add(node, f"{module}.{alias.name}")

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _dynamo_module(node.value):
            self._add(node, node.value)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain = _chain(node)
        if chain is not None and _dynamo_module(chain):
            self._add(node, chain)
            return  # the chain's inner attributes are the same use
        receiver = node.value
        ours = isinstance(receiver, ast.Name) and receiver.id in self.seam_modules | self.modules
        if node.attr in DYNAMO_CLASS_NAMES and not ours:
            self._add(node, node.attr)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        callee = _chain(node.func) or ""
        first = node.args[0] if node.args else None
        if callee in _IMPORTERS and not (
            isinstance(first, ast.Constant) and isinstance(first.value, str)
        ):
            self._add(node, callee)
        if callee in _ACCESSORS and len(node.args) > 1:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                text = name.value
                if text in DYNAMO_CLASS_NAMES or _private(text) or text in _TORCH_PRIVATE:
                    self._add(node, f"{callee}:{text}")
        self.generic_visit(node)


def findings(source: str) -> list[Finding]:
    """Every use of Dynamo in a module's source, outside the seam's rules.

    >>> findings("def f(anything):\\n    return anything.python_type()\\n")
    [Finding(line=2, name='python_type')]
    >>> findings("from typing import TYPE_CHECKING\\nif TYPE_CHECKING:\\n"
    ...          "    from torch._dynamo.variables import VariableTracker\\n")
    []
    """
    checker = _Checker()
    checker.visit(ast.parse(source))
    return checker.found


def violations(module: str, source: str) -> list[str]:
    """The findings that :data:`seam.EXCEPTIONS` does not allow, as text."""
    return [
        f"{module}:{found.line}: {found.name}"
        for found in findings(source)
        if (module, found.name) not in seam.EXCEPTIONS
    ]


@pytest.mark.parametrize("module", [name for name in _modules() if not name.startswith(SEAM)])
def test_no_module_outside_the_seam_uses_dynamo(module: str) -> None:
    found = violations(module, (PACKAGE / module).read_text())
    assert not found, "Dynamo used outside the seam:\n" + "\n".join(found)


#: A name that Dynamo's classes define and no hand-kept list holds.
_UNLISTED = min(n for n in DYNAMO_CLASS_NAMES - seam.DYNAMO_NAMES if n.islower() and n[0] != "_")

#: Each kind of bypass, under names that appear nowhere in the package.
PLANTED = {
    "a read on a Dynamo variable under another name": """
        def qzv(wkz):
            return wkz.as_python_constant()
    """,
    "getattr with a string attribute name": """
        def qzv(wkz):
            return getattr(wkz, "call_function")(None, [], {})
    """,
    "importlib with a computed module name": """
        import importlib
        def qzv(tail):
            return importlib.import_module("torch." + tail)
    """,
    "__import__ with a computed module name": """
        def qzv(tail):
            return __import__("torch" + tail)
    """,
    "hasattr on a class that the seam hands out": """
        from ..seam import internals
        def qzv():
            handed = internals.kinds().Base
            return hasattr(handed, "_qzv_private"), hasattr(handed, "python_type")
    """,
    "getattr of torch's private Dynamo module": """
        import torch
        def qzv():
            return getattr(torch, "_dynamo")
    """,
    "an import beside a listed exception in the same module": """
        import importlib
        import torch._dynamo
        def qzv(name):
            return importlib.import_module(name)
    """,
    "a name of Dynamo's objects that no list holds": f"""
        def qzv(wkz):
            return wkz.{_UNLISTED}()
    """,
    "the plain forms": """
        import torch._dynamo.utils
        from torch import _dynamo
        from torch._logging import getArtifactLogger
        def qzv():
            return torch._dynamo.reset, "torch.compiler.disable"
    """,
}


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_the_check_fails_on_each_kind_of_bypass(kind: str) -> None:
    found = violations("_dynamo/qzv.py", textwrap.dedent(PLANTED[kind]))
    assert found, kind


def test_an_exception_allows_its_own_name_alone() -> None:
    """`_dynamo/__init__.py` may import its own modules by computed name, nothing else."""
    found = violations("_dynamo/__init__.py", textwrap.dedent(PLANTED["the plain forms"]))
    assert len(found) == 5, found


def test_the_planted_bypasses_are_each_found_whole() -> None:
    found = {
        kind: [finding.name for finding in findings(textwrap.dedent(source))]
        for kind, source in PLANTED.items()
    }
    assert found == {
        "a read on a Dynamo variable under another name": ["as_python_constant"],
        "getattr with a string attribute name": ["getattr:call_function"],
        "importlib with a computed module name": ["importlib.import_module"],
        "__import__ with a computed module name": ["__import__"],
        "hasattr on a class that the seam hands out": [
            "hasattr:_qzv_private",
            "hasattr:python_type",
        ],
        "getattr of torch's private Dynamo module": ["getattr:_dynamo"],
        "a name of Dynamo's objects that no list holds": [_UNLISTED],
        "an import beside a listed exception in the same module": [
            "torch._dynamo",
            "importlib.import_module",
        ],
        "the plain forms": [
            "torch._dynamo.utils",
            "torch._dynamo",
            "torch._logging.getArtifactLogger",
            "torch._dynamo.reset",
            "torch.compiler.disable",
        ],
    }


def test_each_exception_is_used_and_has_a_reason() -> None:
    used = {
        (module, found.name)
        for module in _modules()
        if not module.startswith(SEAM)
        for found in findings((PACKAGE / module).read_text())
    }
    for pair, why in seam.EXCEPTIONS.items():
        assert why, pair
        assert pair in used, f"{pair} is listed but not used: remove it"


@pytest.mark.parametrize("module", _modules())
def test_no_package_module_is_over_700_lines(module: str) -> None:
    lines = len((PACKAGE / module).read_text().splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines"
