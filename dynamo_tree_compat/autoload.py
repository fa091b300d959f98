"""The ``torch.backends`` entry point: torch calls :func:`load` during ``import torch``.

It must never raise (an exception here makes ``import torch`` fail) and must stay light:
it only arms the post-import hook.
"""

from __future__ import annotations

from . import activation

__all__ = ["load"]


def load() -> None:
    """Activates the package as torch autoloads its backends; never raises."""
    activation.activate("autoload")
