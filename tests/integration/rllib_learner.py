"""A real RLlib PPO learner (ray 2.60.0, unmodified), and its training step to compile.

Shared by ``test_rllib.py``, ``benchmarks/real_clients.py`` and ``rllib_script.py``.
The step is what ``torch_compile_learner=True`` compiles, less the optimizer: RLlib's
off-policyness metric, ``forward_train`` and ``compute_losses``; backward and the Adam
step run after it, outside the compiled region.

RLlib's own code has two graph breaks that have nothing to do with dm-tree; the
worked-around runs remove both:

- ``DistributionPartial.from_logits`` assigns ``distribution.__class__ = cls``
  (``rllib/core/distribution/distribution.py``): Dynamo cannot trace ``__class__``
  assignment. The parent's ``from_logits`` already builds ``cls(...)``, so the partial
  class calls it with ``cls`` and needs no assignment.
- ``MetricsLogger`` enters ``self._threading_lock`` (``rllib/utils/metrics/
  metrics_logger.py``), a lock object made outside the compiled region, which Dynamo
  cannot enter: the test swaps it for ``contextlib.nullcontext()``.

From the second update on, ``MetricsLogger`` appends to the ``deque(maxlen=window)`` of
a ``Stats`` it made in an earlier update. Dynamo traces that; a builder hook this package
once put on every deque did not ("Side effect on existing deque with limited maxlen", a
break in every later update), and is gone: deques are left to Dynamo except where a tree
library flattens one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import tree
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.distribution import Distribution
from ray.rllib.evaluation.postprocessing import Postprocessing

OBSERVATIONS = gym.spaces.Box(-1, 1, (6,), np.float32)
#: The action space of the issue: a Dict holding a Tuple.
NESTED_ACTIONS = gym.spaces.Dict(
    {
        "a": gym.spaces.Discrete(3),
        "b": gym.spaces.Tuple([gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(4)]),
    }
)
#: A second, different nesting for the multi-agent learner: a Tuple holding a Dict.
OTHER_ACTIONS = gym.spaces.Tuple(
    [
        gym.spaces.Dict(
            {"x": gym.spaces.Discrete(2), "y": gym.spaces.Box(-1, 1, (3,), np.float32)}
        ),
        gym.spaces.Discrete(5),
    ]
)
BATCH = 16


@contextlib.contextmanager
def work_around_rllib_breaks() -> Iterator[None]:
    """RLlib's partial distributions without ``__class__`` assignment, while active."""
    original = Distribution.__dict__["get_partial_dist_cls"]

    def partial_without_class_assignment(parent: Any, **partial_kwargs: Any) -> Any:
        partial = original.__func__(parent, **partial_kwargs)

        def from_logits(cls: Any, logits: Any, **kwargs: Any) -> Any:
            return parent.from_logits.__func__(cls, logits, **cls._merge_kwargs(**kwargs))

        partial.from_logits = classmethod(from_logits)
        return partial

    Distribution.get_partial_dist_cls = classmethod(partial_without_class_assignment)
    try:
        yield
    finally:
        Distribution.get_partial_dist_cls = original


def build_learner(
    spaces: dict[str, tuple[Any, Any]], worked_around: bool = False, skip_nan_check: bool = False
) -> Any:
    """A PPO learner built by RLlib itself, one module per entry of ``spaces``;
    ``skip_nan_check``: RLlib's setting that skips its check of each gradient for NaN."""
    config = PPOConfig().framework("torch", torch_skip_nan_gradients=skip_nan_check)
    if len(spaces) > 1:
        config = config.multi_agent(
            policies=set(spaces), policy_mapping_fn=lambda agent_id, *_, **__: agent_id
        )
    else:
        ((observations, actions),) = spaces.values()
        config = config.environment(observation_space=observations, action_space=actions)
    torch.manual_seed(0)
    with work_around_rllib_breaks() if worked_around else contextlib.nullcontext():
        learner = config.build_learner(spaces=spaces if len(spaces) > 1 else None)
    if worked_around:
        learner.metrics._threading_lock = contextlib.nullcontext()
    return learner


def make_batch(learner: Any, spaces: dict[str, tuple[Any, Any]], seed: int = 1) -> Any:
    """A training batch per module: observations, actions drawn from each nested space,
    the old policy's logits and log-probabilities, advantages and value targets."""
    batch = {}
    generator = torch.Generator().manual_seed(seed)
    for index, (module_id, (observations, actions)) in enumerate(sorted(spaces.items())):
        actions.seed(seed + index)
        drawn = [actions.sample() for _ in range(BATCH)]
        stacked = tree.map_structure(lambda *leaves: torch.as_tensor(np.stack(leaves)), *drawn)
        obs = torch.rand(BATCH, *observations.shape, generator=generator) * 2 - 1
        module = learner.module[module_id]
        with torch.no_grad():
            logits = module.forward_train({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
            old = module.get_exploration_action_dist_cls().from_logits(logits)
            logp = old.logp(stacked)
        batch[module_id] = {
            Columns.OBS: obs,
            Columns.ACTIONS: stacked,
            Columns.ACTION_DIST_INPUTS: logits + 0.1,
            Columns.ACTION_LOGP: logp,
            Postprocessing.ADVANTAGES: torch.randn(BATCH, generator=generator),
            Postprocessing.VALUE_TARGETS: torch.randn(BATCH, generator=generator),
        }
    return batch


def training_step(learner: Any) -> Callable[[Any], Any]:
    """The part of the learner's update that RLlib compiles, as one function."""

    def step(batch: Any) -> Any:
        learner._compute_off_policyness(batch)
        fwd_out = learner.module.forward_train(batch)
        return fwd_out, learner.compute_losses(fwd_out=fwd_out, batch=batch)

    return step


def train_once(learner: Any, step: Callable[[Any], Any], batch: Any) -> dict[str, Any]:
    """One update: the step, backward, one Adam step. Returns everything to compare."""
    fwd_out, losses = step(batch)
    gradients = learner.compute_gradients(losses)
    grads = [gradient.detach().clone() for gradient in gradients.values()]
    learner.apply_gradients(gradients)
    return {
        "fwd_out": tree.map_structure(lambda t: t.detach().clone(), fwd_out),
        "losses": {key: loss.detach().clone() for key, loss in losses.items()},
        "gradients": grads,
        "parameters": {
            f"{module_id}.{name}": parameter.detach().clone()
            for module_id in sorted(learner.module.keys())
            for name, parameter in learner.module[module_id].named_parameters()
        },
        "metrics": tree.map_structure(_plain, learner.metrics.peek()),
    }


def _plain(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return value
