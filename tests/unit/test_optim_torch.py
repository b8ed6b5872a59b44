"""wr.optim against torch.optim itself (native only: Pyodide has no torch): SGD with momentum
and weight decay, and AdamW, four steps on the same problem from the same weights."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

import webrlx as wr

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backend"))
from test_optim import _problem, _step  # noqa: E402


def test_torch_optimizers_agree():
    x, y, w = _problem(1)
    for make, ours in [(lambda p: torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.1),
                        wr.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.1)),
                       (lambda p: torch.optim.AdamW([p], lr=0.05, betas=(0.9, 0.99),
                                                    weight_decay=0.01),
                        wr.optim.AdamW(lr=0.05, betas=(0.9, 0.99), weight_decay=0.01))]:
        p = torch.tensor(w.astype(np.float64), requires_grad=True)
        opt = make(p)
        for _ in range(4):
            opt.zero_grad()
            xt, yt = torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
            loss = ((xt @ p - yt) ** 2).mean()
            loss.backward()
            opt.step()
        step, *_ = _step(wr.device("gpu"), ours, seed=1)
        for _ in range(4):
            step.run({"x": x, "y": y})
        np.testing.assert_allclose(step.params()["w"], p.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
