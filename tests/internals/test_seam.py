"""The seam holds: no module outside ``_dynamo/internals.py``, ``_dynamo/making.py`` and
``_dynamo/patches.py`` reads Dynamo, and no package module grows past 700 lines.

A static check over the package's AST. What counts as reading Dynamo:

- importing, or naming as a string, a module of ``torch._dynamo``, ``torch._logging``,
  ``torch._C._dynamo`` or ``torch.compiler`` (imports under ``if TYPE_CHECKING:`` run
  never, and are allowed: they type Dynamo's objects);
- an attribute chain through those modules (``torch._dynamo.reset``);
- an attribute of a Dynamo object, read, written or deleted, directly or through
  ``getattr``/``hasattr``/``setattr``/``delattr``: a Dynamo object is a parameter
  annotated with one of Dynamo's types (``tx: InstructionTranslator``), or a name the
  package keeps for Dynamo's objects (:data:`DYNAMO_NAMES`), alone, as an attribute
  (``self.tx``) or indexed (``args[0]``).

The seam's own exceptions are listed, with their reasons, in ``internals.EXCEPTIONS``;
each must appear in its docstring too.
"""

from __future__ import annotations

import ast
import pathlib
import textwrap

import pytest

from dynamo_tree_compat._dynamo import internals

PACKAGE = pathlib.Path(internals.__file__).resolve().parent.parent
SEAM = {"_dynamo/internals.py", "_dynamo/making.py", "_dynamo/patches.py"}
MAX_LINES = 700
DYNAMO_MODULES = ("torch._dynamo", "torch._logging", "torch._C._dynamo", "torch.compiler")
#: Dynamo's types, as annotations name them.
DYNAMO_TYPES = frozenset(
    {
        "VariableTracker",
        "InstructionTranslator",
        "InstructionTranslatorBase",
        "VariableBuilder",
        "PyCodegen",
        "Source",
    }
)
#: The names this package gives Dynamo's objects: its translator, builder, code
#: generator, sources and variables.
DYNAMO_NAMES = frozenset(
    {
        "tx",
        "builder",
        "codegen",
        "source",
        "variable",
        "key_variable",
        "said",
        "held",
        "listed",
        "callee",
        "args",
    }
)
_ACCESSORS = frozenset({"getattr", "hasattr", "setattr", "delattr", "vars"})


def _modules() -> list[tuple[str, pathlib.Path]]:
    return sorted((path.relative_to(PACKAGE).as_posix(), path) for path in PACKAGE.rglob("*.py"))


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


def _annotation_names(annotation: ast.AST | None) -> set[str]:
    if annotation is None:
        return set()
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval")
        except SyntaxError:
            return set()
    return {
        node.id if isinstance(node, ast.Name) else node.attr
        for node in ast.walk(annotation)
        if isinstance(node, (ast.Name, ast.Attribute))
    }


class _Reader(ast.NodeVisitor):
    """Collects ``(line, what)`` for each Dynamo read of one module."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []
        self.typed: list[set[str]] = [set()]

    def _is_dynamo_object(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Subscript):
            node = node.value
        if isinstance(node, ast.Name):
            return node.id in DYNAMO_NAMES or node.id in self.typed[-1]
        if isinstance(node, ast.Attribute):
            return node.attr in DYNAMO_NAMES and isinstance(node.value, ast.Name)
        return False

    def visit_If(self, node: ast.If) -> None:
        if _chain(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        arguments = node.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        every += [arg for arg in (arguments.vararg, arguments.kwarg) if arg is not None]
        typed = {arg.arg for arg in every if _annotation_names(arg.annotation) & DYNAMO_TYPES}
        self.typed.append(self.typed[-1] | typed)
        self.generic_visit(node)
        self.typed.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _dynamo_module(alias.name):
                self.found.append((node.lineno, f"import {alias.name}"))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        names = [f"{module}.{alias.name}" for alias in node.names]
        if node.level == 0 and (_dynamo_module(module) or any(map(_dynamo_module, names))):
            self.found.append((node.lineno, f"from {module} import ..."))

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _dynamo_module(node.value):
            self.found.append((node.lineno, f"the module name {node.value!r}"))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain = _chain(node)
        if chain is not None and _dynamo_module(chain):
            self.found.append((node.lineno, chain))
            return  # the chain's inner attributes are the same read
        if self._is_dynamo_object(node.value):
            self.found.append((node.lineno, f"{ast.unparse(node.value)}.{node.attr}"))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if (
            isinstance(node.func, ast.Name)
            and node.func.id in _ACCESSORS
            and node.args
            and self._is_dynamo_object(node.args[0])
        ):
            self.found.append((node.lineno, ast.unparse(node)[:60]))
        self.generic_visit(node)


def dynamo_reads(source: str) -> list[tuple[int, str]]:
    """Every Dynamo read of a module's source, as ``(line, what)``.

    >>> dynamo_reads("def f(builder):\\n    return builder.source\\n")
    [(2, 'builder.source')]
    >>> dynamo_reads("from typing import TYPE_CHECKING\\nif TYPE_CHECKING:\\n"
    ...              "    from torch._dynamo.variables import VariableTracker\\n")
    []
    """
    reader = _Reader()
    reader.visit(ast.parse(source))
    return reader.found


def _allowed(module: str, what: str) -> bool:
    return any(
        module == allowed_module and allowed in what
        for (allowed_module, allowed) in internals.EXCEPTIONS
    )


@pytest.mark.parametrize("module", [name for name, _ in _modules() if name not in SEAM])
def test_no_module_outside_the_seam_reads_dynamo(module: str) -> None:
    source = (PACKAGE / module).read_text()
    reads = [
        f"{module}:{line}: {what}"
        for line, what in dynamo_reads(source)
        if not _allowed(module, what)
    ]
    assert not reads, "Dynamo read outside the seam:\n" + "\n".join(reads)


def test_the_check_finds_a_read_that_bypasses_the_seam() -> None:
    """The check fails on each kind of read a module could slip in."""
    slipped = textwrap.dedent(
        """
        import torch._dynamo
        from torch._dynamo.utils import counters
        from torch import _dynamo
        def hook(builder, tx: "InstructionTranslator", value):
            found = builder.source, tx.output, getattr(value, "fn", None)
            return torch._dynamo.reset, hasattr(builder, "tx"), args[0].realize()
        """
    )
    found = [what for _, what in dynamo_reads(slipped)]
    assert found == [
        "import torch._dynamo",
        "from torch._dynamo.utils import ...",
        "from torch import ...",
        "builder.source",
        "tx.output",
        "torch._dynamo.reset",
        "hasattr(builder, 'tx')",
        "args[0].realize",
    ]


def test_each_exception_is_in_the_seam_docstring_with_its_reason() -> None:
    doc = internals.__doc__ or ""
    for (module, what), why in internals.EXCEPTIONS.items():
        assert f"``{module}``" in doc and what in doc, (module, what)
        assert why and why.split(":")[0] in doc, (module, what, why)


@pytest.mark.parametrize("module", [name for name, _ in _modules()])
def test_no_package_module_is_over_700_lines(module: str) -> None:
    lines = len((PACKAGE / module).read_text().splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines"
