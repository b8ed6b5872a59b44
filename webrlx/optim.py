"""Optimizers that update weights on the GPU, and `train_step`: one executable that computes
the loss and its gradients (autodiff.grad) and updates the params and the optimizer's state in
place (the `assign` op), so a step is one submit whose only readback is the loss.

Each optimizer appends its update to the graph: `update(param, grad, lr)` assigns the new
param (and its state tensors, graph states named "<param>.<slot>") and returns nothing. The
learning rate is an input of the step ("lr", shape (1,)), so a schedule changes it per step
without recompiling. The formulas are torch.optim's (SGD with momentum and dampening 0,
AdamW with decoupled weight decay and bias correction).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from .autodiff import grad
from .tensor import Graph, Tensor, where


@dataclass
class SGD:
    """SGD: v = momentum * v + (g + weight_decay * w); w -= lr * v (v = g without momentum)."""
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        _check(self.lr, "lr", low=0.0)
        _check(self.momentum, "momentum", low=0.0, high=1.0, high_open=True)
        _check(self.weight_decay, "weight_decay", low=0.0)

    def update(self, g: Graph, w: Tensor, dw: Tensor, lr: Tensor, step: Tensor) -> None:
        d = dw + self.weight_decay * w if self.weight_decay else dw
        if self.momentum:
            v = g.state(f"{w.node.name}.momentum", w.shape)
            first = step <= 1.0                       # torch: v starts as the first gradient
            d = v.assign(where(first, d, self.momentum * v + d))
        w.assign(w - lr * d)


@dataclass
class AdamW:
    """AdamW: m, v moving averages of g and g^2 (bias-corrected); w -= lr * (m^ / (sqrt(v^) +
    eps) + weight_decay * w), the decay decoupled from the gradient."""
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.01

    def __post_init__(self) -> None:
        _check(self.lr, "lr", low=0.0)
        for i, b in enumerate(self.betas):
            _check(b, f"betas[{i}]", low=0.0, high=1.0, high_open=True)
        _check(self.eps, "eps", low=0.0)
        _check(self.weight_decay, "weight_decay", low=0.0)

    def update(self, g: Graph, w: Tensor, dw: Tensor, lr: Tensor, step: Tensor) -> None:
        b1, b2 = self.betas
        name = w.node.name
        m = g.state(f"{name}.exp_avg", w.shape)
        v = g.state(f"{name}.exp_avg_sq", w.shape)
        m = m.assign(b1 * m + (1.0 - b1) * dw)
        v = v.assign(b2 * v + (1.0 - b2) * dw * dw)
        c1 = 1.0 - (step * float(np.log(b1))).exp()        # 1 - b1^t, t = step (from 1)
        c2 = 1.0 - (step * float(np.log(b2))).exp()
        w.assign(w * (1.0 - lr * self.weight_decay) - lr * (m / c1) / ((v / c2).sqrt() + self.eps))


def _check(value: Any, name: str, low: float, high: float | None = None,
           high_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise ValueError(f"optimizer: {name} must be a finite number, got {value!r}")
    if value < low or (high is not None and (value >= high if high_open else value > high)):
        rng = f"[{low}, {high})" if high is not None else f">= {low}"
        raise ValueError(f"optimizer: {name} must be {rng}, got {value!r}")


class TrainStep:
    """A compiled training step. `run(feeds)` (or `await run_async(feeds)`) does one step and
    returns the loss as a float: forward, backward and the updates in one submit, the loss the
    only readback. The params and the optimizer state stay on the device; `params()` reads the
    weights back."""

    def __init__(self, loss: Tensor, params: Sequence[Tensor], optimizer: Any,
                 device: Any = None) -> None:
        from .runtime.executable import compile as compile_graph
        g = cast(Graph, loss.graph)            # the builder's Graph: tensors come from one
        for i, p in enumerate(params):
            if p.node.op != "param":
                raise ValueError(f"train_step: params[{i}] must be a graph param (g.param), "
                                 f"got %{p.id} {p.node.op}")
        self.names = [p.node.name for p in params]
        self.optimizer = optimizer
        self.lr_input = g.input("lr", (1,))
        self.step_input = g.input("step", (1,))
        grads = grad(loss, params)
        for p, dp in zip(params, grads):
            optimizer.update(g, p, dp, self.lr_input, self.step_input)
        self.executable = compile_graph(g, outputs=[loss], device=device)
        self.steps = 0

    def set_params(self, params: Mapping[str, Any]) -> None:
        """The starting weights (by name), uploaded once."""
        self.executable.set_params(params)

    def _feeds(self, feeds: Mapping[str, Any], lr: float | None) -> dict[str, Any]:
        rate = self.optimizer.lr if lr is None else lr
        _check(rate, "lr", low=0.0)
        self.steps += 1
        return {**feeds, "lr": np.array([rate], np.float32),
                "step": np.array([self.steps], np.float32)}

    def run(self, feeds: Mapping[str, Any], lr: float | None = None) -> float:
        """One step on feeds (the loss's inputs); lr overrides the optimizer's (a schedule)."""
        (loss,) = self.executable.run(self._feeds(feeds, lr))
        return float(np.asarray(loss).reshape(-1)[0])

    async def run_async(self, feeds: Mapping[str, Any], lr: float | None = None) -> float:
        """Async form of run()."""
        (loss,) = await self.executable.run_async(self._feeds(feeds, lr))
        return float(np.asarray(loss).reshape(-1)[0])

    def params(self) -> dict[str, np.ndarray]:
        """The current weights, read back from the device."""
        return {n: self.executable.read_param(n) for n in self.names}

    async def params_async(self) -> dict[str, np.ndarray]:
        """Async form of params()."""
        return {n: await self.executable.read_param_async(n) for n in self.names}

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the current weights to a .safetensors file."""
        from .models.safetensors import save_safetensors
        Path(path).write_bytes(save_safetensors(self.params()))

    def load(self, path: str | os.PathLike[str]) -> None:
        """Set the weights from a .safetensors file (as save wrote it); unknown names are an
        error naming them."""
        from .models.safetensors import load_safetensors
        arrays = load_safetensors(path)
        unknown = sorted(set(arrays) - set(self.names))
        if unknown:
            raise ValueError(f"TrainStep.load: {path}: tensors {unknown} are not params of this "
                             f"step ({self.names})")
        self.set_params(arrays)


def train_step(loss: Tensor, params: Sequence[Tensor], optimizer: Any,
               device: Any = None) -> TrainStep:
    """Compile one training step of `loss` over `params` with `optimizer` (SGD or AdamW):
    see TrainStep. The graph gains the inputs "lr" and "step" (fed by the step itself)."""
    return TrainStep(loss, params, optimizer, device)
