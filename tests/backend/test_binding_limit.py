"""Tensors over maxStorageBufferBindingSize. Elementwise ops, reductions, norms, softmax,
cumsum, top-k, matmuls (big activations and big weights), gathers (big tables, many ids) and
inputs/outputs work past the limit: kernels bind windows of the big buffers (compiler/split.py),
and the results match the reference device. A kernel that cannot split gives a clear
BindingLimitError naming it, the size and the limit, before anything is submitted, and the
device stays usable. The limit is lowered on purpose (1 MiB, on a private device) so this runs
fast; the windows are real (the device's true limit is larger, its alignment is its own)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import limited_device

import webrlx as wr
from webrlx import nn

LIMIT = 1 << 20


@pytest.fixture(scope="module")
def small_device():
    return limited_device(LIMIT)


RNG = np.random.default_rng(7)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# name -> (build(graph) -> (outputs, feeds)); every case binds some tensor over 1 MiB
CASES = {
    "elementwise": lambda g: ([g.input("x", (300_000,)) * 2 + 1], {"x": _x(300_000)}),
    "broadcast+permute": lambda g: (
        [g.input("x", (700, 600)).permute((1, 0)) + g.input("b", (700,))],
        {"x": _x(700, 600), "b": _x(700)}),
    "concat": lambda g: ([wr.concat([g.input("x", (200, 800)), g.input("y", (200, 800))], 0)],
                         {"x": _x(200, 800), "y": _x(200, 800)}),
    "sum rows": lambda g: ([g.input("x", (1000, 300)).sum(axis=1)], {"x": _x(1000, 300)}),
    "max axis 0": lambda g: ([g.input("x", (1000, 300)).max(axis=0)], {"x": _x(1000, 300)}),
    "mean of all": lambda g: ([g.input("x", (300_000,)).mean()], {"x": _x(300_000)}),
    "sum of long rows": lambda g: ([g.input("x", (3, 100_000)).sum(axis=1)],
                                   {"x": _x(3, 100_000)}),
    "softmax": lambda g: ([g.input("x", (1000, 300)).softmax(-1)], {"x": _x(1000, 300)}),
    "layer_norm": lambda g: ([nn.layer_norm(g.input("x", (1000, 300)))], {"x": _x(1000, 300)}),
    "cumsum": lambda g: ([g.input("x", (1000, 300)).cumsum(axis=1)], {"x": _x(1000, 300)}),
    "matmul activations": lambda g: ([g.input("x", (1200, 300)) @ g.constant(_x(300, 256))],
                                     {"x": _x(1200, 300)}),
    "matmul weight": lambda g: ([g.input("x", (40, 1000)) @ g.constant(_x(1000, 404))],
                                {"x": _x(40, 1000)}),
    "matmul weight+bias+relu": lambda g: (
        [(g.input("x", (33, 1000)) @ g.param("w", (1000, 404)) + g.constant(_x(404))).relu()],
        {"x": _x(33, 1000)}),
    "gemv weight": lambda g: ([g.input("x", (2, 1000)) @ g.constant(_x(1000, 404))],
                              {"x": _x(2, 1000)}),
    "gather table": lambda g: ([g.constant(_x(1000, 300)).gather(g.input("ids", (7,), "int32"))],
                               {"ids": RNG.integers(0, 1000, 7).astype(np.int32)}),
    "gather many ids": lambda g: (
        [g.constant(_x(50, 300)).gather(g.input("ids", (1200,), "int32"))],
        {"ids": RNG.integers(0, 50, 1200).astype(np.int32)}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_over_the_binding_limit_runs_through_windows(small_device, case):
    g = wr.Graph()
    outs, feeds = CASES[case](g)
    exe = wr.compile(g, outputs=outs, device=small_device)
    ref = wr.compile(g, outputs=outs, device="reference")
    for e in (exe, ref):
        if "w" in g.params:
            e.set_params({"w": np.linspace(-1, 1, 1000 * 404, dtype=np.float32
                                           ).reshape(1000, 404)})
    got, want = exe.run(feeds)[0], ref.run(feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    calls = exe.plan({}).program.calls
    assert any(c.windows for c in calls), "no kernel bound a window"
    assert all(c.bound_bytes(i) <= LIMIT for c in calls for i in range(len(c.buffers)))


def test_a_kernel_that_cannot_split_is_a_clear_error_before_submit(small_device):
    g = wr.Graph()
    x = g.input("x", (1, 3, 300, 300))              # 1.08 MB > 1 MiB: conv2d binds it whole
    y = nn.conv2d(x, g.constant(np.ones((4, 3, 3, 3), np.float32)))
    exe = wr.compile(g, outputs=[y], device=small_device)
    before = dict(small_device.stats)
    with pytest.raises(wr.BindingLimitError, match=rf"conv.*needs \d+ bytes, over this "
                                                    rf"device's maxStorageBufferBindingSize "
                                                    rf"of {LIMIT} bytes"):
        exe.run({"x": np.ones((1, 3, 300, 300), np.float32)})
    assert small_device.stats.get("submits", 0) == before.get("submits", 0)
    # the device still works for tensors under the limit
    g2 = wr.Graph()
    x2 = g2.input("x", (1000,))
    exe2 = wr.compile(g2, outputs=[x2 * 2], device=small_device)
    np.testing.assert_array_equal(exe2.run({"x": np.ones(1000, np.float32)})[0], 2)


def test_inputs_and_params_over_the_buffer_limit(small_device):
    big = 17 * LIMIT // 4                           # elements: 17 MiB of float32 > 16 MiB
    g = wr.Graph()
    x = g.input("x", (big,))
    exe = wr.compile(g, outputs=[x.narrow(0, 0, 4)], device=small_device)
    with pytest.raises(wr.BindingLimitError, match=r"input 'x' .* over this device's "
                                                    r"maxBufferSize"):
        exe.run({"x": np.zeros(big, np.float32)})
    g = wr.Graph()
    w = g.param("w", (big,))
    exe = wr.compile(g, outputs=[w.narrow(0, 0, 4)], device=small_device)
    with pytest.raises(wr.BindingLimitError, match=r"param 'w' .* maxBufferSize"):
        exe.set_params({"w": np.zeros(big, np.float32)})
        exe.run({})
