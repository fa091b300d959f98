"""Work for other processes: DataLoader workers (fork) and a spawned pool."""

from __future__ import annotations

from typing import Any

import torch
import tree

import dynamo_tree_compat


def tree_step(x: torch.Tensor) -> Any:
    structure = {"b": [x, (x + 1, None)], "a": x * 2}
    return tree.map_structure(lambda v: v if v is None else v + 1, structure), tree.flatten(
        structure
    )


def compiled_equals_eager(index: int) -> dict[str, Any]:
    """Compiles tree_step with fullgraph=True here; reports how this process is set up."""
    torch._dynamo.reset()
    x = torch.full((2,), float(index))
    compiled = torch.compile(tree_step, backend="eager", fullgraph=True)(x)
    eager = tree_step(x)
    same = repr(compiled) == repr(eager)
    return {"same": same, "activated_by": dynamo_tree_compat.activation.activated_by}


class CompilingDataset(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Each item compiles a tree call inside the DataLoader worker."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> dict[str, Any]:
        info = torch.utils.data.get_worker_info()
        return {**compiled_equals_eager(index), "worker": info.id if info else None}
