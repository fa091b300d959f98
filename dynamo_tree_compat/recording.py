"""Every process's graphs and graph breaks, for ``explain``: Ray actors, ``torchrun``
ranks, ``multiprocessing`` children and data-loader workers as well as the program.

``explain`` sets :data:`ENV_RECORD` to a folder for the program it runs; the variable
passes to every process the program starts, and wherever the package loads there (by
autoload, whether the package is on or off) it records that process's graphs and breaks
once Dynamo is imported, into ``<folder>/<pid>.json``. The file is written again after
each graph and each break, whole (a process that ends with ``os._exit``, as forked
workers and killed actors do, leaves what it had). ``explain`` then reads them all
(:func:`read`). Where :data:`ENV_RECORD` is unset, nothing here runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from .config import ENV_RECORD, ENV_RECORD_SKIP

__all__ = [
    "ENV_RECORD",
    "ENV_RECORD_SKIP",
    "break_record",
    "process_record",
    "read",
    "role",
    "start",
]

_state: dict[str, Any] = {}


def role() -> str:
    """What this process is in a program, as a user would name it.

    >>> role()
    'main'
    """
    ray = sys.modules.get("ray")
    if ray is not None and sys.argv[:1] and sys.argv[0].endswith("default_worker.py"):
        with contextlib.suppress(Exception):  # an actor: its class; else a Ray task worker
            actor = ray.get_runtime_context().current_actor
            name = actor._ray_actor_creation_function_descriptor.class_name
            return "Ray actor" if "<locals>" in name else f"Ray actor {name}"  # a wrapper
        return "Ray worker"
    data = sys.modules.get("torch.utils.data")
    info = getattr(data, "get_worker_info", lambda: None)()
    if info is not None:
        return f"data-loader worker {info.id}"
    if "RANK" in os.environ and "LOCAL_RANK" in os.environ:
        return f"rank {os.environ['RANK']}"
    processing = sys.modules.get("multiprocessing")
    if processing is not None:
        name = processing.current_process().name
        if name != "MainProcess":
            return name
    return "main"


def break_record(item: Any) -> dict[str, str]:
    """One graph break as the records keep it: where, why, whose, and Dynamo's cause
    (without its generic hints)."""
    from ._dynamo.graph_breaks import cause_text, shorten

    lines = cause_text(item.message).splitlines()
    return {
        "location": shorten(item.call_site),
        "where": shorten(item.location),
        "reason": item.reason,
        "library": item.library,
        "cause": "\n".join(line for line in lines if not line.strip().startswith("Hint:")),
        # The frames that led to it: a hint may know a break by who called the code.
        "frames": [shorten(frame) for frame in item.frames],
    }


def process_record(graphs: int, breaks: list[Any], named: str | None = None) -> dict[str, Any]:
    """One process's record: its pid, role (``named``, else :func:`role`), graphs and
    breaks, and whether RLlib is loaded in it."""
    return {
        "pid": os.getpid(),
        "role": named or role(),
        "graphs": graphs,
        "breaks": [break_record(item) for item in breaks],
        "rllib": "ray.rllib" in sys.modules,
    }


def _flush() -> None:
    """Writes this process's record again, whole (see the module's docstring)."""
    folder = os.environ.get(ENV_RECORD)
    if not folder or not _state:
        return
    with contextlib.suppress(Exception):  # recording must never break the program
        from . import _dynamo

        graphs: Callable[[], int] = _state["graphs"]
        breaks = _state["recorder"].breaks[_state["breaks_before"] :]
        record = process_record(graphs() - _state["graphs_before"], breaks)
        _dynamo.write_json_whole(os.path.join(folder, f"{os.getpid()}.json"), record)


def start() -> bool:
    """Records this process from now on, where ``explain`` asked for it and this is not
    its own child; once per process (a forked child's record starts empty: what the
    parent had is the parent's). Returns whether it records. Dynamo must be loaded.
    """
    folder = os.environ.get(ENV_RECORD)
    if not folder or os.environ.get(ENV_RECORD_SKIP) == str(os.getpid()):
        return False
    if _state.get("pid") == os.getpid():
        return True
    if _state:  # forked from a process that records
        _state.update(
            pid=os.getpid(),
            graphs_before=_state["graphs"](),
            breaks_before=len(_state["recorder"].breaks),
        )
        return True
    from . import _dynamo

    graphs, _ = _dynamo.count_graphs(on_graph=_flush)
    recorder = _dynamo.GraphBreakRecorder(on_break=_flush)
    recorder.__enter__()  # for the rest of the process
    _state.update(
        pid=os.getpid(), graphs=graphs, recorder=recorder, graphs_before=0, breaks_before=0
    )
    import atexit

    atexit.register(_flush)
    return True


def read(folder: str) -> list[dict[str, Any]]:
    """The records in ``folder``, by pid; a file that is not a whole record is skipped."""
    records = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        with contextlib.suppress(OSError, ValueError):
            with open(os.path.join(folder, name), encoding="utf-8") as file:
                record = json.load(file)
            if isinstance(record, dict) and {"pid", "graphs", "breaks"} <= set(record):
                records.append(record)
    return sorted(records, key=lambda record: record["pid"])
