"""The Keras suite needs its own environment (keras 3.0.5 wants numpy<2)."""

from __future__ import annotations

import importlib.util

collect_ignore = [] if importlib.util.find_spec("keras") else ["test_keras.py"]
