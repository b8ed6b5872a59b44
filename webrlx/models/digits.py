"""A small classifier of scikit-learn's `load_digits` (8x8 images of 0-9, 1797 of them)
trained with wr.train_step: the example model of training on the GPU. An MLP 64-128-10 with
ReLU and softmax cross-entropy; `split()` is the fixed train/test split the tests use."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import optim
from ..tensor import Graph

HIDDEN = 128


def split(seed: int = 0, test: int = 360) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_test, y_test): pixels scaled to [0, 1], a fixed permutation."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    return x[test:], y[test:], x[:test], y[:test]


def init_params(seed: int = 0) -> dict[str, np.ndarray]:
    """He-initialized weights (float32), zero biases."""
    rng = np.random.default_rng(seed)
    return {"w1": (rng.standard_normal((64, HIDDEN)) * np.sqrt(2 / 64)).astype(np.float32),
            "b1": np.zeros(HIDDEN, np.float32),
            "w2": (rng.standard_normal((HIDDEN, 10)) * np.sqrt(2 / HIDDEN)).astype(np.float32),
            "b2": np.zeros(10, np.float32)}


def build(g: Graph) -> tuple[Any, Any, list[Any]]:
    """(logits, loss, params) over inputs x ("batch", 64) and one-hot y ("batch", 10)."""
    x, y = g.input("x", ("batch", 64)), g.input("y", ("batch", 10))
    w1, b1 = g.param("w1", (64, HIDDEN)), g.param("b1", (HIDDEN,))
    w2, b2 = g.param("w2", (HIDDEN, 10)), g.param("b2", (10,))
    logits = x.matmul(w1, bias=b1, activation="relu").matmul(w2, bias=b2)
    loss = -(logits.log_softmax(axis=-1) * y).sum(axis=-1).mean()
    return logits, loss, [w1, b1, w2, b2]


def train(device: Any = None, epochs: int = 30, batch: int = 64, lr: float = 3e-3,
          seed: int = 0, on_epoch: Callable[[int, float], None] | None = None
          ) -> tuple[dict[str, np.ndarray], list[float]]:
    """Train on the fixed split with AdamW; return (params, mean loss per epoch)."""
    x, y, _, _ = split(seed)
    onehot = np.eye(10, dtype=np.float32)[y]
    g = Graph()
    _, loss, params = build(g)
    step = optim.train_step(loss, params, optim.AdamW(lr=lr, weight_decay=1e-4), device)
    step.set_params(init_params(seed))
    rng = np.random.default_rng(seed + 1)
    history = []
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        losses = [step.run({"x": x[order[i:i + batch]], "y": onehot[order[i:i + batch]]})
                  for i in range(0, len(x) - batch + 1, batch)]     # full batches: one plan
        history.append(float(np.mean(losses)))
        if on_epoch is not None:
            on_epoch(epoch, history[-1])
    return step.params(), history


def accuracy(params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    """Test accuracy of the trained MLP, computed in numpy."""
    h = np.maximum(x @ params["w1"] + params["b1"], 0)
    return float(((h @ params["w2"] + params["b2"]).argmax(-1) == y).mean())
