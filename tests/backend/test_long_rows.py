"""Long rows: llvmpipe (lavapipe, the CI GPU) silently ends a shader's loop nest after 65,535
iterations, which made cumsum of a 70,000-element row end in zeros and sum of a 20M-element
row return 393,210. cumsum now scans 8 elements per iteration; reductions split rows longer
than one workgroup's run (lower_rows.ROW_RUN) into pieces and reduce their results; kernels
that would still loop too often on such a driver are refused with a clear error."""
from __future__ import annotations

import numpy as np
import pytest

import webrlx as wr
from webrlx import nn
from webrlx.backends.base import DeviceInfo
from webrlx.compiler import lower_rows
from webrlx.compiler.lower import LoweringError, lower


def test_cumsum_of_a_row_past_65535_elements(backend):
    n = 70_000
    g = wr.Graph()
    x = g.input("x", (2, n))
    exe = wr.compile(g, outputs=[x.cumsum(axis=1)], device=backend)
    a = np.ones((2, n), np.float32)
    a[1] = 2
    got = exe.run({"x": a})[0]
    np.testing.assert_array_equal(got[:, -1], [n, 2 * n])
    np.testing.assert_array_equal(got[0, ::9999], np.arange(1, n + 1, 9999))


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod"])
def test_rows_longer_than_one_workgroup_reduce_in_pieces(backend, op, monkeypatch):
    monkeypatch.setattr(lower_rows, "ROW_RUN", 1000)   # pieces of 1000: the path, cheaply
    rng = np.random.default_rng(3)
    a = rng.uniform(0.9, 1.1, (3, 4321)).astype(np.float32)
    g = wr.Graph()
    x = g.input("x", (3, 4321))
    y = getattr(x, op)(axis=1)
    exe = wr.compile(g, outputs=[y, getattr(x, op)()], device=backend)
    got_rows, got_all = exe.run({"x": a})
    want = getattr(a.astype(np.float64), op)
    rtol = 3e-3 if op == "prod" else 2e-4             # 13k rounded products
    np.testing.assert_allclose(got_rows, want(axis=1), rtol=rtol)
    np.testing.assert_allclose(got_all, want(), rtol=rtol)
    if backend.name != "reference":
        assert sum(c.name == f"reduce[{op}]" for c in exe.plan({}).program.calls) > 3


LLVMPIPE = DeviceInfo("llvmpipe (LLVM 15.0.6, 256 bits)", "wgpu (Vulkan)",
                      {"max-storage-buffer-binding-size": 1 << 27, "max-buffer-size": 1 << 31})


@pytest.mark.parametrize("op", ["argmax", "layer_norm", "softmax", "cumsum"])
def test_loops_past_llvmpipes_cap_are_refused_there(op):
    n = 20_000_000 if op != "cumsum" else 600_000
    g = wr.Graph()
    # softmax and layer_norm: 200 rows, too many for the split-row form (see below)
    x = g.input("x", (200 if op in ("layer_norm", "softmax") else 1, n))
    y = {"argmax": lambda: x.argmax(axis=1), "layer_norm": lambda: nn.layer_norm(x),
         "softmax": lambda: x.softmax(-1), "cumsum": lambda: x.cumsum(axis=1)}[op]()
    with pytest.raises(LoweringError, match=rf"{op}: its kernel would loop \d+ times per "
                                            r"thread here; llvmpipe .* silently stops a loop "
                                            r"after 65535"):
        lower(g, [y.id], {}, LLVMPIPE)
    other = DeviceInfo("NVIDIA H100", "wgpu (Vulkan)", LLVMPIPE.limits)
    assert lower(g, [y.id], {}, other).calls            # other drivers: no cap


@pytest.mark.parametrize("op", ["layer_norm", "softmax"])
def test_few_long_rows_split_keep_llvmpipes_loops_short(op):
    """One row of 20M: chunks of it over workgroups (lower_rows.split_long_rows), so no
    thread loops more than n / 2048 times and llvmpipe runs it."""
    g = wr.Graph()
    x = g.input("x", (1, 20_000_000))
    y = nn.layer_norm(x) if op == "layer_norm" else x.softmax(-1)
    names = [c.name for c in lower(g, [y.id], {}, LLVMPIPE).calls]
    assert names == [f"{op}[parts]", f"{op}[finish]"], names
    assert -(-20_000_000 // lower_rows.SPLIT_ROW_CHUNK) <= 65535
