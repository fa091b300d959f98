"""The package's settings: the mode flag Dynamo guards on, and the public switches.

It imports nothing of the package (and nothing else but ``os``, ``re`` and ``sys``), so every
module can read it without an import cycle, and Dynamo's guards can name it by its
import path.

>>> from dynamo_tree_compat import config
>>> config.ENV_FAST_PATH, config.fast_path == (os.environ.get(config.ENV_FAST_PATH) != "0")
('DYNAMO_TREE_COMPAT_FAST_PATH', True)
"""

from __future__ import annotations

import os
import re
import sys

__all__ = [
    "ENV_ANY_TORCH",
    "ENV_FAST_PATH",
    "ENV_RECORD",
    "ENV_RECORD_SKIP",
    "TORCH_RANGE",
    "any_torch",
    "fast_path",
    "torch_in_range",
    "torch_release",
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

#: The torch releases (major, minor) that `make matrix-torch` passes; pyproject.toml
#: declares the same range. Outside it, the package warns once and does nothing: on
#: older releases Dynamo lacks what some calls need (docs/torch-versions.md).
TORCH_RANGE = ((2, 5), (2, 15))


def torch_release() -> tuple[str, tuple[int, int] | None]:
    """The imported torch's version, and its (major, minor) where it starts with them
    (None where torch is not imported or has no release number).

    >>> version, release = torch_release()
    >>> release is None or (version.startswith(f"{release[0]}.{release[1]}"))
    True
    """
    version = str(getattr(sys.modules.get("torch"), "__version__", ""))
    found = re.match(r"(\d+)\.(\d+)", version)
    return version, (int(found[1]), int(found[2])) if found else None


def torch_in_range(any_torch: bool = False) -> bool:
    """Whether the package supports the imported torch: inside :data:`TORCH_RANGE`, or
    ``any_torch``, or torch not imported or with no release number.

    >>> torch_in_range(any_torch=True)
    True
    """
    release = torch_release()[1]
    return any_torch or release is None or TORCH_RANGE[0] <= release <= TORCH_RANGE[1]
