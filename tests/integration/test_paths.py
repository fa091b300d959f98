"""Beyond torch.compile of a function: torch.export, dynamic shapes, training, torch.func.

Each test compares with eager and, where it compiles, asserts the graph count or uses
fullgraph=True, so a tree-caused graph break fails it.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch._dynamo.testing import CompileCounter

import dynamo_tree_compat
from tests.helpers.structures import assert_identical

tree = pytest.importorskip("tree")
optree = pytest.importorskip("optree")


class TreeModule(torch.nn.Module):
    """A module whose forward calls dm-tree and optree on its inputs and parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.encode = torch.nn.Linear(6, 8)
        self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(8, 2), "b": torch.nn.Linear(8, 3)})

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        inputs = tree.flatten(batch)
        features = torch.cat(tree.map_structure(lambda t: t * 2.0, inputs), dim=-1)
        hidden = torch.relu(self.encode(features))
        outputs = {name: head(hidden) for name, head in self.heads.items()}
        tree.assert_same_structure(outputs, {"a": 0, "b": 0})
        outputs = optree.tree_map(torch.tanh, outputs)
        total = sum(leaf.sum() for leaf in optree.tree_leaves(outputs))
        return {**outputs, "total": total}


def _batch(rows: int = 4) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(rows)
    return {
        "x": torch.randn(rows, 2, generator=generator),
        "rest": [
            torch.randn(rows, 3, generator=generator),
            torch.randn(rows, 1, generator=generator),
        ],
    }


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _close(expected: Any, actual: Any) -> None:
    assert tree.map_structure(lambda a, b: torch.allclose(a, b, atol=1e-6), expected, actual) == (
        tree.map_structure(lambda _: True, expected)
    )


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "non-strict"])
def test_torch_export(strict: bool) -> None:
    module = TreeModule().eval()
    batch = _batch()
    exported = torch.export.export(module, (batch,), strict=strict)
    _close(module(batch), exported.module()(batch))
    other = _batch()
    _close(module(other), exported.module()(other))


def test_dynamic_shapes_recompile_no_more_than_without_tree_calls() -> None:
    def with_tree(batch: dict[str, Any]) -> torch.Tensor:
        return sum(tree.flatten(tree.map_structure(lambda t: t.sum() * t.shape[0], batch)))

    def without_tree(batch: dict[str, Any]) -> torch.Tensor:
        rest, x = batch["rest"], batch["x"]
        return sum(t.sum() * t.shape[0] for t in (rest[0], rest[1], x))

    frames = {}
    for function in (with_tree, without_tree):
        torch._dynamo.reset()
        counter = CompileCounter()
        compiled = torch.compile(function, backend=counter, dynamic=True, fullgraph=True)
        for rows in (2, 3, 5, 8, 13):
            batch = _batch(rows)
            _close(function(batch), compiled(batch))
        frames[function.__name__] = counter.frame_count
    assert frames["with_tree"] == frames["without_tree"], frames


def test_mark_dynamic_with_tree_calls() -> None:
    counter = CompileCounter()

    def step(batch: dict[str, Any]) -> Any:
        return tree.map_structure(lambda t: t.cumsum(0), batch)

    compiled = torch.compile(step, backend=counter, fullgraph=True)
    for rows in (3, 4, 7):
        batch = _batch(rows)
        for leaf in tree.flatten(batch):
            torch._dynamo.mark_dynamic(leaf, 0)
        _close(step(batch), compiled(batch))
    assert counter.frame_count == 1


def _train(compiled: bool, steps: int = 3) -> tuple[list[float], dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    module = TreeModule()
    params = dict(module.named_parameters())

    def forward(batch: dict[str, Any]) -> torch.Tensor:
        outputs = module(batch)
        return outputs["total"] + sum(leaf.pow(2).mean() for leaf in tree.flatten(outputs))

    def update(lr: float) -> None:
        with torch.no_grad():
            grads = {name: param.grad for name, param in params.items()}
            updated = tree.map_structure(lambda p, g: p - lr * g, params, grads)
            momentum = optree.tree_map(lambda g: 0.5 * g, grads)
            for name, param in params.items():
                param.copy_(updated[name] - 0.01 * momentum[name])
                param.grad = None

    if compiled:
        # aot_eager: the backward pass is compiled too, from the one forward graph.
        forward = torch.compile(forward, backend="aot_eager", fullgraph=True)
        update = torch.compile(update, backend="eager", fullgraph=True)
    losses = []
    for index in range(steps):
        loss = forward(_batch(4 + index))
        loss.backward()
        losses.append(loss.item())
        update(0.1)
    return losses, {name: param.detach().clone() for name, param in params.items()}


def test_training_forward_backward_and_tree_optimizer_step_match_eager() -> None:
    eager_losses, eager_params = _train(compiled=False)
    compiled_losses, compiled_params = _train(compiled=True)
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-5)
    _close(eager_params, compiled_params)


def test_torch_func_grad_and_vmap_inside_compiled_code() -> None:
    params = {"w": torch.randn(3, 3), "b": [torch.randn(3)]}

    def loss(p: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
        w, (b,) = p["w"], p["b"]
        return sum(leaf.sum() for leaf in tree.flatten({"out": x @ w + b, "reg": [w * 0.1]}))

    def per_example(p: dict[str, Any], xs: torch.Tensor) -> Any:
        grads = torch.func.grad(loss)(p, xs[0])
        scaled = torch.func.vmap(lambda x: tree.map_structure(lambda t: t * x.sum(), p))(xs)
        return tree.map_structure(lambda g: g.norm(), grads), scaled

    xs = torch.randn(4, 3)
    expected = per_example(params, xs)
    actual = torch.compile(per_example, backend="eager", fullgraph=True)(params, xs)
    _close(expected, actual)
    shape_of = tree.map_structure  # same containers, types and keys on both sides
    assert_identical(shape_of(lambda _: 0, expected), shape_of(lambda _: 0, actual))


def test_scopes_apply_to_export_too() -> None:
    module = TreeModule().eval()
    with dynamo_tree_compat.disabled(), pytest.raises(Exception, match=r"graph break|untraced"):
        torch.export.export(module, (_batch(),), strict=True)
