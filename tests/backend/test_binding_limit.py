"""Tensors over maxStorageBufferBindingSize: a clear BindingLimitError naming the kernel, its
op, the size and the limit, raised while the plan is built (nothing created or submitted), and
the executable and device stay usable. The limit is lowered on purpose (1 MiB, on a private
device) so this runs fast. Splitting a tensor over several bindings is not implemented yet."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import webrlx as wr
from webrlx.backends import auto

LIMIT = 1 << 20


@pytest.fixture(scope="module")
def small_device():
    if sys.platform == "emscripten":
        from webrlx.backends.js_webgpu import create_backend
        dev = create_backend()
    else:
        dev, why = auto._native_gpu()
        assert dev is not None, why
    dev.info.limits["max-storage-buffer-binding-size"] = LIMIT   # webrlx plans with this
    dev.info.limits["max-buffer-size"] = 4 * LIMIT
    return dev


@pytest.mark.parametrize("case", ["elementwise", "sum", "matmul weight", "gather table"])
def test_over_the_binding_limit_is_a_clear_error_before_submit(small_device, case):
    g = wr.Graph()
    big = 300_000                                      # 1.2 MB of float32 > 1 MiB
    if case == "elementwise":
        x = g.input("x", (big,))
        y, feeds, what = x * 2 + 1, {"x": np.ones(big, np.float32)}, r"elementwise\[.*\]"
    elif case == "sum":
        x = g.input("x", (3, big // 3))
        y, feeds, what = x.sum(axis=1), {"x": np.ones((3, big // 3), np.float32)}, "reduce"
    elif case == "matmul weight":
        x = g.input("x", (2, 600))
        w = g.constant(np.ones((600, 500), np.float32))
        y, feeds, what = x @ w, {"x": np.ones((2, 600), np.float32)}, "gemv|matmul"
    else:
        ids = g.input("ids", (4,), "int32")
        table = g.constant(np.ones((1000, 300), np.float32))
        y, feeds, what = table.gather(ids), {"ids": np.arange(4, dtype=np.int32)}, "gather"
    exe = wr.compile(g, outputs=[y], device=small_device)
    before = dict(small_device.stats)
    with pytest.raises(wr.BindingLimitError, match=rf"({what}).*needs \d+ bytes, over this "
                                                    rf"device's maxStorageBufferBindingSize "
                                                    rf"of {LIMIT} bytes"):
        exe.run(feeds)
    assert small_device.stats.get("submits", 0) == before.get("submits", 0)
    # the device still works for tensors under the limit
    g2 = wr.Graph()
    x2 = g2.input("x", (1000,))
    exe2 = wr.compile(g2, outputs=[x2 * 2], device=small_device)
    np.testing.assert_array_equal(exe2.run({"x": np.ones(1000, np.float32)})[0], 2)


def test_inputs_and_params_over_the_buffer_limit(small_device):
    g = wr.Graph()
    x = g.input("x", (5 * LIMIT // 4,))
    exe = wr.compile(g, outputs=[x.narrow(0, 0, 4)], device=small_device)
    with pytest.raises(wr.BindingLimitError, match=r"input 'x' .* over this device's "
                                                    r"maxBufferSize"):
        exe.run({"x": np.zeros(5 * LIMIT // 4, np.float32)})
    g = wr.Graph()
    w = g.param("w", (5 * LIMIT // 4,))
    exe = wr.compile(g, outputs=[w.narrow(0, 0, 4)], device=small_device)
    with pytest.raises(wr.BindingLimitError, match=r"param 'w' .* maxBufferSize"):
        exe.set_params({"w": np.zeros(5 * LIMIT // 4, np.float32)})
        exe.run({})
