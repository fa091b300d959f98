"""Reading the package's source as the interpreter runs it."""

from __future__ import annotations

import ast

__all__ = ["RunTimeVisitor"]


class RunTimeVisitor(ast.NodeVisitor):
    r"""Visits what runs: an ``if TYPE_CHECKING:`` block never does (only its ``else``).

    >>> class Names(RunTimeVisitor):
    ...     def __init__(self): self.seen = []
    ...     def visit_Name(self, node): self.seen.append(node.id)
    >>> names = Names()
    >>> names.visit(ast.parse("if TYPE_CHECKING:\n    a\nelse:\n    b"))
    >>> names.seen
    ['b']
    """

    def visit_If(self, node: ast.If) -> None:
        if ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)
