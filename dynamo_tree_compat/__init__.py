"""Makes dm-tree (``import tree``) traceable by TorchDynamo, with no graph breaks.

Importing this package activates it, unless ``DYNAMO_TREE_COMPAT=0``: from then on,
wherever ``torch.compile`` or ``torch.export`` traces a dm-tree call, it traces a
pure-Python twin instead, while eager calls keep running dm-tree's C code.

>>> import dynamo_tree_compat
>>> dynamo_tree_compat.status().mode
'on'
"""

from __future__ import annotations

from .activation import (
    ENV_SWITCH,
    DynamoTreeCompatWarning,
    Status,
    disabled,
    enabled,
    install,
    status,
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
