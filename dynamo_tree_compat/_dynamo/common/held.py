"""Variables that hold a real object made while tracing: constants of the graph."""

from __future__ import annotations

from typing import Any

from ..seam import internals
from ..seam.types import Codegen
from .reading import breaks_on_error

__all__ = ["HeldConstant", "load_held"]


class HeldConstant:
    """Mixin for a variable that holds a real object made while tracing, ``value``: a
    constant of the graph, loaded from a global where it leaves the graph."""

    value: Any

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return self.value

    @breaks_on_error("reconstructing a constant of the graph")
    def reconstruct(self, codegen: Codegen) -> None:
        load_held(codegen, self.value)


def load_held(codegen: Codegen, value: Any) -> None:
    """Makes ``codegen`` load ``value`` itself, a global of the compiled code."""
    internals.load_global(codegen, "__dtc_constant", value)
