"""DDP on CPU with gloo, 2 processes: a compiled model with tree calls, autoloaded per rank."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import torch.multiprocessing as mp

pytest.importorskip("tree")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_ddp_two_ranks_compiled_equals_eager_with_no_breaks(tmp_path: Path) -> None:
    from tests.integration import ddp_worker

    mp.spawn(ddp_worker.run, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    results = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    for result in results:
        assert result == {
            "activated_by": "autoload",
            "graph_breaks": 0,
            "losses_equal": True,
            "params_equal": True,
        }
