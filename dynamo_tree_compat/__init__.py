"""Makes dm-tree (``import tree``), optree and torch's pytree traceable by TorchDynamo,
with no graph breaks.

Importing this package activates it, unless ``DYNAMO_TREE_COMPAT=0`` (torch also
autoloads it): from then on, wherever ``torch.compile`` or ``torch.export`` traces a call
of one of these libraries, Dynamo traces this package's twin or fast path instead, while
eager calls keep running the libraries' own code, untouched.

>>> import dynamo_tree_compat
>>> dynamo_tree_compat.status().mode
'on'
"""

from __future__ import annotations

from typing import Any

from .activation import (
    ENV_SWITCH,
    DynamoTreeCompatWarning,
    disabled,
    enabled,
    install,
    uninstall,
)

__all__ = [
    "ENV_SWITCH",
    "DynamoTreeCompatWarning",
    "Status",
    "disabled",
    "enabled",
    "install",
    "status",
    "uninstall",
]
__version__ = "0.1.0"

from .activation import activate as _activate

_activate("import")


def __getattr__(name: str) -> Any:
    # The report loads on first use: this package loads into every `import torch`.
    if name in ("Status", "status"):
        from . import report

        return getattr(report, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
