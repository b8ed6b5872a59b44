"""wr.optim + wr.train_step: SGD (momentum, weight decay) and AdamW update params on the device,
as torch.optim's formulas do (written out in numpy here, float64), with the loss the only
readback; bad hyperparameters give clear errors."""
from __future__ import annotations

import numpy as np
import pytest

import webrlx as wr


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    y = rng.standard_normal((8, 3)).astype(np.float32)
    w = rng.standard_normal((5, 3)).astype(np.float32)
    return x, y, w


def _loss_grad(x, y, w):
    r = x.astype(np.float64) @ w - y
    return float((r * r).mean()), 2 * x.T.astype(np.float64) @ r / r.size


def _numpy_sgd(x, y, w, steps, lr, momentum, wd):
    w, v, losses = w.astype(np.float64), None, []
    for _ in range(steps):
        loss, g = _loss_grad(x, y, w)
        losses.append(loss)
        d = g + wd * w
        v = d if v is None or not momentum else momentum * v + d
        w = w - lr * v
    return w, losses


def _numpy_adamw(x, y, w, steps, lr, b1, b2, eps, wd):
    w, m, v, losses = w.astype(np.float64), 0.0, 0.0, []
    for t in range(1, steps + 1):
        loss, g = _loss_grad(x, y, w)
        losses.append(loss)
        w = w * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return w, losses


def _step(backend, optimizer, seed=0):
    x, y, w = _problem(seed)
    g = wr.Graph()
    xi, yi = g.input("x", ("n", 5)), g.input("y", ("n", 3))
    wp = g.param("w", (5, 3))
    r = xi @ wp - yi
    step = wr.train_step((r * r).mean(), [wp], optimizer, device=backend)
    step.set_params({"w": w})
    return step, x, y, w


@pytest.mark.parametrize("momentum,wd", [(0.0, 0.0), (0.9, 0.0), (0.9, 0.1)])
def test_sgd_matches_the_formula(backend, momentum, wd):
    step, x, y, w = _step(backend, wr.optim.SGD(lr=0.1, momentum=momentum, weight_decay=wd))
    losses = [step.run({"x": x, "y": y}) for _ in range(4)]
    want_w, want_losses = _numpy_sgd(x, y, w, 4, 0.1, momentum, wd)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    np.testing.assert_allclose(step.params()["w"], want_w, rtol=1e-5, atol=1e-6)


def test_adamw_matches_the_formula(backend):
    opt = wr.optim.AdamW(lr=0.05, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01)
    step, x, y, w = _step(backend, opt)
    losses = [step.run({"x": x, "y": y}) for _ in range(5)]
    want_w, want_losses = _numpy_adamw(x, y, w, 5, 0.05, 0.9, 0.99, 1e-8, 0.01)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    np.testing.assert_allclose(step.params()["w"], want_w, rtol=1e-4, atol=1e-5)


def test_a_step_is_one_submit_and_reads_back_only_the_loss():
    """100 steps after the first: one submit and one readback (the loss) each, and no new
    buffers, pipelines or bind groups (the backend's creation counters)."""
    backend = wr.device("gpu")              # (the reference device submits nothing)
    step, x, y, _ = _step(backend, wr.optim.AdamW(lr=0.01))
    step.run({"x": x, "y": y})
    before = dict(backend.stats)
    for i in range(100):
        step.run({"x": x, "y": y}, lr=0.01 * 0.99 ** i)   # a schedule: lr per step, no recompile
    after = backend.stats
    assert after["submits"] - before["submits"] == 100
    assert after["readbacks"] - before.get("readbacks", 0) == 100
    for what in ("pipelines", "buffers", "bind_groups"):
        assert after[what] == before.get(what, 0), what
    assert step.executable.last_plan.readback_bytes <= 8       # the loss (one float32)


@pytest.mark.parametrize("make,match", [
    (lambda: wr.optim.SGD(lr=-1.0), "lr must be >= 0"),
    (lambda: wr.optim.SGD(momentum=1.0), r"momentum must be \[0.0, 1.0\)"),
    (lambda: wr.optim.AdamW(betas=(0.9, 1.5)), r"betas\[1\]"),
    (lambda: wr.optim.AdamW(eps=float("nan")), "eps must be a finite number"),
])
def test_bad_hyperparameters_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_train_step_needs_params():
    g = wr.Graph()
    x = g.input("x", (3,))
    with pytest.raises(ValueError, match=r"params\[0\] must be a graph param"):
        wr.train_step((x * x).sum(), [x], wr.optim.SGD())


def test_weights_save_and_load_as_safetensors(backend, tmp_path):
    step, x, y, w = _step(backend, wr.optim.SGD(lr=0.1))
    step.run({"x": x, "y": y})
    step.save(tmp_path / "w.safetensors")
    trained = step.params()["w"]
    fresh, *_ = _step(backend, wr.optim.SGD(lr=0.1))
    fresh.load(tmp_path / "w.safetensors")
    np.testing.assert_array_equal(fresh.params()["w"], trained)
    assert not np.array_equal(trained, w)
    from webrlx.models.safetensors import save_safetensors
    (tmp_path / "bad.safetensors").write_bytes(save_safetensors({"v": trained}))
    with pytest.raises(ValueError, match=r"\['v'\] are not params"):
        fresh.load(tmp_path / "bad.safetensors")
