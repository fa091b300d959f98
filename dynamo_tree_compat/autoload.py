"""The ``torch.backends`` entry point: torch calls :func:`load` during ``import torch``.

It must never raise (an exception here makes ``import torch`` fail) and must stay light:
it only arms the post-import hook.
"""

from __future__ import annotations

from . import _dynamo, activation

__all__ = ["load"]


def load() -> None:
    """Activates the package as torch autoloads its backends; never raises.

    It also registers ``TORCH_LOGS=+dynamo_tree_compat``, which torch parses right after.
    """
    try:
        _dynamo.register_log_name()
    except Exception as error:  # noqa: BLE001 - runs inside import torch
        activation.warn_once(f"registering the TORCH_LOGS name failed: {error}")
    activation.activate("autoload")
