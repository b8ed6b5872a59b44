"""Training speed for `python -m webrlx bench --only train`: steps/s of one AdamW training step
(forward, backward, update; the loss read back each step) for an MLP 784-1024-1024-10 at batch
256, the digits CNN (webrlx.models.digits: two 3x3 convs with ReLU and 2x2 max pools, dense
64 -> 10) and the digits MLP 64-128-10 at batch 64, beside torch eager (CUDA where present,
else CPU) on the same model, optimizer and batch in the same run.
ratio = webrlx steps/s / torch's."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

import webrlx as wr


def _mlp(g: wr.Graph, sizes: list[int]) -> tuple[wr.Tensor, list[wr.Tensor]]:
    x, y = g.input("x", ("batch", sizes[0])), g.input("y", ("batch", sizes[-1]))
    params, h = [], x
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        w, bias = g.param(f"w{i}", (a, b)), g.param(f"b{i}", (b,))
        params += [w, bias]
        last = i == len(sizes) - 2
        h = h.matmul(w, bias=bias, activation="none" if last else "relu")
    return -(h.log_softmax(axis=-1) * y).sum(axis=-1).mean(), params


def _init(sizes: list[int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        out[f"w{i}"] = (rng.standard_normal((a, b)) * np.sqrt(2 / a)).astype(np.float32)
        out[f"b{i}"] = np.zeros(b, np.float32)
    return out


def _webrlx_steps_per_s(sizes: list[int] | None, batch: int, steps: int) -> float:
    """sizes: an MLP's widths; None: the digits CNN."""
    from ..models import digits
    rng = np.random.default_rng(0)
    g = wr.Graph()
    if sizes is None:
        _, loss, params = digits.build(g, "cnn")
        init, n_in, n_out = digits.init_params("cnn"), 64, 10
    else:
        (loss, params), init, n_in, n_out = _mlp(g, sizes), _init(sizes, rng), sizes[0], sizes[-1]
    step = wr.train_step(loss, params, wr.optim.AdamW(lr=1e-3))
    step.set_params(init)
    x = rng.standard_normal((batch, n_in)).astype(np.float32)
    y = np.eye(n_out, dtype=np.float32)[rng.integers(0, n_out, batch)]
    for _ in range(3):
        step.run({"x": x, "y": y})            # compile, tune, warm
    t = time.perf_counter()
    for _ in range(steps):
        step.run({"x": x, "y": y})
    return steps / (time.perf_counter() - t)


def _torch_model(torch: Any, sizes: list[int] | None) -> Any:
    nn = torch.nn
    if sizes is None:                      # the digits CNN, layer for layer
        return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 8, 3, padding=1),
                             nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                             nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 10))
    layers: list[Any] = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _torch_steps_per_s(sizes: list[int] | None, batch: int, steps: int
                       ) -> tuple[float, str] | None:
    try:
        import torch
    except ImportError:
        return None
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = _torch_model(torch, sizes).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    n_in, n_out = (64, 10) if sizes is None else (sizes[0], sizes[-1])
    x = torch.randn(batch, n_in, device=dev)
    y = torch.randint(0, n_out, (batch,), device=dev)

    def one() -> float:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return float(loss.detach())              # reads the loss back, as webrlx's step does
    for _ in range(3):
        one()
    t = time.perf_counter()
    for _ in range(steps):
        one()
    return steps / (time.perf_counter() - t), dev


def train_cases(quick: bool, progress: Callable[[str], None] = lambda msg: None,
                peers: bool = True) -> list[dict[str, Any]]:
    """Steps/s of each model, webrlx beside torch (peers False: webrlx alone, bench
    --no-ref); progress(case) before each."""
    cases = []
    shapes: list[tuple[str, list[int] | None, int]] = [
        ("mlp 784-1024-1024-10", [784, 1024, 1024, 10], 256),
        ("digits cnn conv8-conv16-dense10", None, 64),
        ("digits mlp 64-128-10", [64, 128, 10], 64)]
    if quick:
        shapes[0] = ("mlp 784-256-256-10", [784, 256, 256, 10], 64)
    steps = 10 if quick else 50
    for name, sizes, batch in shapes:
        progress(f"train {name} batch {batch}")
        row: dict[str, Any] = {"case": f"train {name} batch {batch}", "optimizer": "AdamW",
                               "webrlx_steps_per_s": _webrlx_steps_per_s(sizes, batch, steps)}
        peer = _torch_steps_per_s(sizes, batch, steps) if peers else None
        if peer is not None:
            row["torch_steps_per_s"], row["torch_device"] = peer
            row["ratio_vs_torch"] = row["webrlx_steps_per_s"] / peer[0]
        cases.append(row)
    return cases
