"""A new RLlib user's script: PPO through RLlib's own switch, ``torch_compile_learner=True``
with ``COMPLETE_UPDATE``, on an env with a nested Dict/Tuple action space, ``algo.train()``.

    python rllib_algo.py NUM_LEARNERS [OUTPUT.json]

With ``NUM_LEARNERS=1`` the learner runs in a Ray actor on a local cluster. Writes each
iteration's total loss to OUTPUT.json.<DYNAMO_TREE_COMPAT> (explain runs it off and on).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import ray
from ray.rllib.algorithms.algorithm_config import TorchCompileWhatToCompile
from ray.rllib.algorithms.ppo import PPOConfig
from rllib_learner import NESTED_ACTIONS, OBSERVATIONS


class NestedEnv(gym.Env):
    """A short episodic env whose action space nests a Tuple in a Dict."""

    observation_space = OBSERVATIONS
    action_space = NESTED_ACTIONS

    def __init__(self, config: Any = None) -> None:
        self._steps = 0
        self._random = np.random.default_rng(0)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        self._steps = 0
        return self._random.uniform(-1, 1, (6,)).astype(np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self._steps += 1
        reward = float(action["a"] == 1) - float(np.abs(action["b"][0]).sum())
        observation = self._random.uniform(-1, 1, (6,)).astype(np.float32)
        return observation, reward, self._steps >= 8, False, {}


def main(num_learners: int, output: str | None) -> None:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    config = (
        PPOConfig()
        .environment(NestedEnv)
        .framework(
            "torch",
            torch_compile_learner=True,
            torch_compile_learner_what_to_compile=TorchCompileWhatToCompile.COMPLETE_UPDATE,
            torch_compile_learner_dynamo_backend="eager",
        )
        .env_runners(num_env_runners=0)
        .learners(num_learners=num_learners)
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .debugging(seed=0)
    )
    algo = config.build_algo()
    losses = []
    for _ in range(2):
        result = algo.train()
        learner = result["learners"]["default_policy"]
        losses.append(float(learner["total_loss"]))
    algo.stop()
    ray.shutdown()
    if output:
        with open(f"{output}.{os.environ.get('DYNAMO_TREE_COMPAT', '1')}", "w") as handle:
            json.dump(losses, handle)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
