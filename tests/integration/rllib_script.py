"""An RLlib user's script, for ``explain``: the PPO learner step of ``rllib_learner``
compiled as real code often compiles it, with its own backend (a graph-counting
wrapper around "eager") and Dynamo's counters cleared before it starts.

    python rllib_script.py COUNT_FILE

Appends "<DYNAMO_TREE_COMPAT> <graphs it counted>" to COUNT_FILE.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch
import torch._dynamo.utils
from rllib_learner import NESTED_ACTIONS, OBSERVATIONS, build_learner, make_batch, train_once
from rllib_learner import training_step as make_step


def main(count_file: str) -> None:
    spaces = {"default_policy": (OBSERVATIONS, NESTED_ACTIONS)}
    learner = build_learner(spaces)
    batch = make_batch(learner, spaces)
    graphs: list[Any] = []

    def counting_backend(graph_module: Any, example_inputs: Any) -> Any:
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.utils.counters.clear()
    train_once(learner, torch.compile(make_step(learner), backend=counting_backend), batch)
    with open(count_file, "a") as handle:
        handle.write(f"{os.environ.get('DYNAMO_TREE_COMPAT', '1')} {len(graphs)}\n")
    torch._dynamo.utils.counters.clear()  # as a program measuring its own graphs might


if __name__ == "__main__":
    main(sys.argv[1])
