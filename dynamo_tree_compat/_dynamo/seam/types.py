"""Names for Dynamo's objects in this package's signatures.

For a type checker they are Dynamo's own classes; at run time they are ``Any``, so that
no module imports Dynamo to name them (the seam loads Dynamo lazily, and its classes
move between releases).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__all__ = ["Builder", "Codegen", "Handler", "Source", "Translator", "Variable"]

if TYPE_CHECKING:
    from torch._dynamo.codegen import PyCodegen as Codegen
    from torch._dynamo.source import Source
    from torch._dynamo.symbolic_convert import InstructionTranslatorBase as Translator
    from torch._dynamo.variables.base import VariableTracker as Variable
    from torch._dynamo.variables.builder import VariableBuilder as Builder
else:
    Builder = Codegen = Source = Translator = Variable = Any

#: What handles a call of an original at Dynamo's variable level: the translator, the
#: call's arguments, its keyword arguments; returns the result's variable.
Handler = Callable[[Translator, list[Variable], dict[str, Variable]], Variable]
