"""Set subclasses kept whole, where Dynamo would lose what one holds.

Some Dynamos (torch 2.13, 2.14) trace a set subclass (Keras's ``TrackedSet``) made or
changed in the graph, but rebuild it empty when it leaves the graph: no error, a wrong
answer. Dynamo already replays the contents of list and dict subclasses on the way out;
where the capability ``set_subclass_keeps_contents`` says so, this does the same for set
subclasses: after Dynamo's own replay of side effects, each set subclass whose contents
changed in the graph gets them, through ``set``'s own methods (not the subclass's). A set
that never leaves the graph costs nothing, and nothing breaks the graph. While the
package's mode is off, or a capability trial compiles, Dynamo is left as it is.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ..runtime import Capability, step_aside
from . import capabilities, internals, patches
from .types import Codegen

__all__ = ["keep_set_subclasses_whole", "refill"]


def refill(target: set[Any], contents: set[Any]) -> None:
    """Makes ``target`` hold ``contents``, by ``set``'s own methods (a subclass may
    override ``add`` or ``update`` to do more than that).

    >>> class Tracked(set):
    ...     def add(self, item):
    ...         raise AssertionError("not called")
    >>> held = Tracked({1})
    >>> refill(held, {2, 3})
    >>> sorted(held)
    [2, 3]
    """
    set.clear(target)
    set.update(target, contents)


def _replay(side_effects: Any, codegen: Codegen, set_class: type) -> None:
    """Emits, for each changed set subclass, ``refill(the object, its contents)``."""
    replay_all = getattr(internals.dynamo_config(), "replay_side_effects", True)
    temporary = internals.temporary_source_class()
    for variable in side_effects._get_modified_vars():
        if not isinstance(variable, set_class):
            continue
        inner = getattr(variable, "_base_vt", None)
        source = getattr(variable, "source", None)
        if inner is None or source is None or not side_effects.is_modified(inner):
            continue
        if not replay_all and not isinstance(source, temporary):
            continue
        codegen.add_push_null(lambda: internals.load_global(codegen, "__dtc_refill", refill))
        codegen(source)
        codegen(inner, allow_cache=False)  # its contents, not the object again
        internals.emit_call(codegen, 2)


def keep_set_subclasses_whole(mode_on: Callable[[], bool]) -> Callable[[], None] | None:
    """Makes Dynamo's replay of side effects fill each set subclass changed in the graph
    with what it holds, while ``mode_on()`` and this Dynamo needs it (asked at each
    replay, so an answer settled later counts). Returns how to undo it; None where this
    Dynamo has no set-subclass variable.
    """
    try:
        user_defined = importlib.import_module("torch._dynamo.variables.user_defined")
        set_class = user_defined.UserDefinedSetVariable
        owner = importlib.import_module("torch._dynamo.side_effects").SideEffects
        original = owner.__dict__["codegen_update_mutated"]
    except Exception:  # noqa: BLE001 - no such variable here: Dynamo breaks by itself
        return None

    def codegen_update_mutated(self: Any, codegen: Codegen, *args: Any, **kwargs: Any) -> Any:
        result = original(self, codegen, *args, **kwargs)
        if mode_on() and capabilities.lacks(Capability.SET_SUBCLASS_KEEPS_CONTENTS):
            emitted = None
            try:
                emitted = internals.emitted(codegen)
                _replay(self, codegen, set_class)
            except internals.dynamo_errors():
                raise
            except Exception as error:  # noqa: BLE001 - ours: Dynamo's own replay stands
                if emitted is not None:
                    internals.take_back(codegen, emitted)
                step_aside("the replay of a set subclass's contents", error)
        return result

    return patches.put_own(owner, "codegen_update_mutated", codegen_update_mutated)
