"""Keras 3.0.5 and RLlib need their own environments (keras 3.0.5 wants numpy<2;
ray[rllib] is large): elsewhere their suites are not collected."""

from __future__ import annotations

import importlib.metadata
import importlib.util


def _keras_version() -> str:
    try:
        return importlib.metadata.version("keras")
    except importlib.metadata.PackageNotFoundError:
        return ""


# test_keras.py is about the dm-tree era (Keras 3.0); test_keras_fit.py runs on any Keras 3.
collect_ignore = [] if _keras_version().startswith("3.0.") else ["test_keras.py"]
if not _keras_version():
    collect_ignore.append("test_keras_fit.py")
if not importlib.util.find_spec("ray"):
    collect_ignore += ["test_rllib.py", "rllib_learner.py", "rllib_script.py", "rllib_algo.py"]
