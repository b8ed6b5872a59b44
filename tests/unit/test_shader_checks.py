"""Shader runtime checks on the native backend: webrlx's own kernels are compiled without them
(wgpuDeviceCreateShaderModuleTrusted, wgpu_native.SHADER_CHECKS), user kernels made with
kernels.from_source keep them: an out-of-range index into a workgroup array is clamped there.
Native only (lavapipe in CI, which tools/setup.sh installs): the browser compiles every module
with its checks."""
from __future__ import annotations

import numpy as np

import webrlx as wr
from webrlx.backends import wgpu_native
from webrlx.compiler.registry import LOWERINGS, lowering
from webrlx.kernels import RUNTIME_CHECKS_MARK, from_source, read_only_storage

# out[i] = t[i + p.shift] for a workgroup array t of 4 values 10, 11, 12, 13: with checks on,
# an index past the end reads t[3] (wgpu's bounds-check policy clamps it)
OOB_WGSL = """
struct Params { n: u32, shift: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
var<workgroup> t: array<f32, 4>;

@compute @workgroup_size(4)
fn main(@builtin(local_invocation_index) lid: u32) {
    t[lid] = 10.0 + f32(lid) + x[0];
    workgroupBarrier();
    out[lid] = t[lid + p.shift];
}
"""


def _shifted(ctx, node):
    out = ctx.temp((4,), node.dtype)
    ctx.emit(from_source("shifted", OOB_WGSL), {"x": ctx.buf(node.inputs[0]), "out": out},
             {"n": 4, "shift": 2}, (1, 1, 1), name="shifted")
    return out


def test_user_sources_are_marked_and_generated_ones_are_not():
    assert from_source("user", OOB_WGSL).source.startswith(RUNTIME_CHECKS_MARK)
    # trusted: no mark; only the declarations of bindings it never writes change (read-only)
    assert from_source("ours", OOB_WGSL, trusted=True).source == read_only_storage(OOB_WGSL)
    assert "var<storage, read> x" in read_only_storage(OOB_WGSL)
    g = wr.Graph()
    x = g.input("x", (8,))
    exe = wr.compile(g, outputs=[(x * 2.0).exp() + 1.0], device=wr.device())
    assert not any(c.source.startswith(RUNTIME_CHECKS_MARK)
                   for c in exe.plan({}).program.calls), \
        "a generated kernel was marked as a user one"


def test_own_kernels_skip_the_checks_and_user_kernels_keep_them(monkeypatch):
    dev = wgpu_native.WgpuBackend(wgpu_native.request_adapter())
    made = []
    real = wgpu_native.WgpuBackend._shader_module

    def spy(self, source):
        module = real(self, source)
        made.append((source.startswith(RUNTIME_CHECKS_MARK), module))
        return module

    monkeypatch.setattr(wgpu_native, "SHADER_CHECKS", 0)
    monkeypatch.setattr(wgpu_native.WgpuBackend, "_shader_module", spy)
    trusted_calls = []
    lib = dev._c_api()[1]
    real_trusted = lib.wgpuDeviceCreateShaderModuleTrusted
    monkeypatch.setattr(lib, "wgpuDeviceCreateShaderModuleTrusted",
                        lambda *a: trusted_calls.append(a[2]) or real_trusted(*a),
                        raising=False)
    g = wr.Graph()
    x = g.input("x", (4,))
    with monkeypatch.context() as m:
        m.setitem(LOWERINGS, "neg", LOWERINGS["neg"])
        lowering("neg")(_shifted)
        exe = wr.compile(g, outputs=[-x], device=dev)
        got = exe.run({"x": np.zeros(4, np.float32)})[0]
    # lanes 0, 1 read t[2], t[3]; lanes 2, 3 read past the end, clamped to t[3]
    np.testing.assert_array_equal(got, [12, 13, 13, 13])
    assert [user for user, _ in made] == [True] and trusted_calls == []
    g2 = wr.Graph()
    y = g2.input("y", (64, 64))
    exe2 = wr.compile(g2, outputs=[y.softmax(-1)], device=dev)
    want = np.exp(np.ones((64, 64), np.float32)) / (64 * np.e)
    np.testing.assert_allclose(exe2.run({"y": np.ones((64, 64), np.float32)})[0], want,
                               rtol=1e-6)
    assert [user for user, _ in made[1:]] == [False] * len(made[1:]) and made[1:]
    assert trusted_calls == [0] * len(made[1:])
