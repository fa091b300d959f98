"""The package's settings: the mode flag Dynamo guards on, and the public switches.

It imports nothing of the package (and nothing else but ``os``), so every module can
read it without an import cycle, and Dynamo's guards can name it by its import path.

>>> from dynamo_tree_compat import config
>>> config.ENV_FAST_PATH, config.fast_path == (os.environ.get(config.ENV_FAST_PATH) != "0")
('DYNAMO_TREE_COMPAT_FAST_PATH', True)
"""

from __future__ import annotations

import os

__all__ = [
    "ENV_ANY_TORCH",
    "ENV_FAST_PATH",
    "ENV_RECORD",
    "ENV_RECORD_SKIP",
    "any_torch",
    "fast_path",
    "twins_enabled",
]

#: Set to ``0`` to start with :data:`fast_path` off.
ENV_FAST_PATH = "DYNAMO_TREE_COMPAT_FAST_PATH"

#: Whether traced tree calls use this package now: the innermost open scope's setting,
#: or else the global activation's. Scopes and activation set it; read it, do not set it.
twins_enabled = False

#: Whether the fast paths (common structures read straight from Dynamo's variables) are
#: tried before the twins. Turn it off to debug with the plain twins; it applies to
#: graphs compiled afterwards. optree's C layer is not a shortcut and stays on.
fast_path = os.environ.get(ENV_FAST_PATH, "1").strip() != "0"

#: Set to ``1`` to activate on a torch outside the supported releases: for work toward
#: supporting one (``make matrix-torch`` runs the suite so), not for users.
ENV_ANY_TORCH = "DYNAMO_TREE_COMPAT_ANY_TORCH"

#: Set by ``explain``: the folder where every process of the program records its graphs
#: and graph breaks (see :mod:`dynamo_tree_compat.recording`).
ENV_RECORD = "DYNAMO_TREE_COMPAT_RECORD"
#: Set by ``explain``'s own child: its pid, as it records itself.
ENV_RECORD_SKIP = "DYNAMO_TREE_COMPAT_RECORD_SKIP"
any_torch = os.environ.get(ENV_ANY_TORCH, "").strip() == "1"
