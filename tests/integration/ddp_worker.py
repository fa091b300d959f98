"""One rank of the DDP check. It does not import dynamo_tree_compat: autoload must."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import tree
from torch.nn.parallel import DistributedDataParallel


class TreeModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleDict({"a": torch.nn.Linear(4, 8), "b": torch.nn.Linear(8, 1)})

    def forward(self, batch: dict[str, Any]) -> torch.Tensor:
        features = torch.cat(tree.flatten(batch), dim=-1)
        hidden = tree.map_structure(torch.relu, {"h": self.layers["a"](features)})
        return self.layers["b"](hidden["h"]).pow(2).mean()


def _train(rank: int, compiled: bool) -> tuple[list[float], list[torch.Tensor]]:
    torch.manual_seed(0)
    inner = TreeModel()
    # DDP around the compiled module: DDP's own wrapper code stays out of the graph.
    model = DistributedDataParallel(torch.compile(inner, backend="eager") if compiled else inner)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step = model
    generator = torch.Generator().manual_seed(rank)
    losses = []
    for _ in range(3):
        batch = {"x": torch.randn(5, 3, generator=generator), "y": [torch.randn(5, 1)]}
        loss = step(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    return losses, [param.detach().clone() for param in model.parameters()]


def run(rank: int, world_size: int, port: int, output: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size
    )
    from torch._dynamo.utils import counters

    package = sys.modules.get("dynamo_tree_compat")
    activated_by = package.status().activated_by if package else None
    eager_losses, eager_params = _train(rank, compiled=False)
    compiled_losses, compiled_params = _train(rank, compiled=True)
    result = {
        "activated_by": activated_by,
        "graph_breaks": sum(counters["graph_break"].values()),
        "losses_equal": eager_losses == compiled_losses,
        "params_equal": all(torch.equal(a, b) for a, b in zip(eager_params, compiled_params)),
    }
    Path(output, f"rank{rank}.json").write_text(json.dumps(result))
    # Both ranks done before either tears gloo down: a rank that exits while the other
    # still talks to it aborts in gloo's C++ ("terminate called without an active
    # exception"), about one run in four under pytest here.
    dist.barrier()
    dist.destroy_process_group()
