"""torch's pytree at Dynamo's variable level: its fast path, readers and probe.

It imports :mod:`..common`, the seam and :mod:`..runtime`, never another library folder
(``tests/internals/test_layout.py`` holds it).
"""

import os

__all__ = ["PYTREE_COPIES_FILE"]

#: The file Dynamo reads this package's copies of ``torch.utils._cxx_pytree``'s functions
#: from (there is no such file): in this folder, a tree library's place, which Dynamo does
#: not skip, where before torch 2.6 it skips every file of ``torch.utils``.
PYTREE_COPIES_FILE = os.path.join(os.path.dirname(__file__), "_cxx_pytree.py")
