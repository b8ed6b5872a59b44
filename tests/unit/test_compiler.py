"""Compiler passes without a GPU: binding, folding, lowering decisions, the memory plan."""
from __future__ import annotations

import numpy as np
import pytest
from shader_slots import render_slots

import webrlx as wr
from webrlx.backends.base import DeviceInfo
from webrlx.compiler.lower import lower
from webrlx.compiler.lower_matmul import tiled_slots
from webrlx.compiler.memory import lifetimes, peak_live_bytes, plan_memory
from webrlx.kernels import all_shaders, raw_shader, render

INFO = DeviceInfo("test", "none", {"min-storage-buffer-offset-alignment": 256,
                                   "max-storage-buffer-binding-size": 1 << 20,
                                   "max-buffer-size": 1 << 20}, frozenset())
BIG = DeviceInfo("test", "none", {"min-storage-buffer-offset-alignment": 256,
                                  "max-storage-buffer-binding-size": 1 << 27,
                                  "max-buffer-size": 1 << 28}, frozenset())


def _chain(n_layers: int = 6):
    g = wr.Graph()
    x = g.input("x", ("b", 64))
    h = x
    for i in range(n_layers):
        h = (h @ g.param(f"w{i}", (64, 64))).relu()
    return g, h


def test_lowering_kernel_counts():
    g, y = _chain(3)
    prog = lower(g, [y.id], {"b": 100}, INFO)
    assert [c.name for c in prog.calls] == ["matmul_vec4_64"] * 3   # relu: fused epilogue
    prog = lower(g, [y.id], {"b": 128 * 128}, BIG)
    assert [c.name for c in prog.calls] == ["matmul_vec4_db"] * 3   # big: 128x128 tiles (GPUs)
    # past a 1 MiB binding limit the same 4 MiB activations run in row ranges (split.py)
    prog = lower(g, [y.id], {"b": 128 * 128}, INFO)
    assert len(prog.calls) > 3 and all(c.windows for c in prog.calls)
    assert max(c.bound_bytes(i) for c in prog.calls for i in range(4)) <= 1 << 20
    prog = lower(g, [y.id], {"b": 2}, INFO)
    assert [c.name for c in prog.calls] == ["gemv"] * 3


def test_reshape_aliases_and_permute_copies():
    g = wr.Graph()
    x = g.input("x", (2, 3, 4))
    y = x.reshape(6, 4).T
    prog = lower(g, [y.id], {}, INFO)
    assert [c.name for c in prog.calls] == ["elementwise[permute]"]


def test_constant_folding():
    g = wr.Graph()
    x = g.input("x", (3,))
    c = (g.constant(np.arange(3, dtype=np.float32)) * 2 + 1).exp()
    prog = lower(g, [(x + c).id], {}, INFO)
    assert [c.name for c in prog.calls] == ["elementwise[add]"]
    assert np.allclose(prog.consts[0].value, np.exp(np.arange(3) * 2 + 1), rtol=1e-6)


def test_dead_code_is_dropped():
    g = wr.Graph()
    x = g.input("x", (3,))
    _unused = (x * 5).exp()
    prog = lower(g, [(x + 1).id], {}, INFO)
    assert len(prog.calls) == 1


def test_symbolic_binding_shapes():
    g, y = _chain(1)
    assert lower(g, [y.id], {"b": 7}, INFO).outputs[0].shape == (7, 64)
    with pytest.raises(wr.ShapeError, match="symbol 'b' is not bound"):
        lower(g, [y.id], {}, INFO)


def test_memory_plan_reuses_memory_and_respects_lifetimes():
    g, y = _chain(8)
    prog = lower(g, [y.id], {"b": 100}, INFO)
    plan_memory(prog, 256, 1 << 20)
    life = lifetimes(prog)
    temps = {b.id: b for b in prog.temps()}
    total = sum(-(-b.nbytes // 256) * 256 for b in temps.values())
    peak = peak_live_bytes(prog, 256)
    arena = sum(prog.arena_sizes)
    assert peak <= arena <= 2 * peak < total          # reuse: far below "one slot per tensor"
    for a in temps:                                   # no two live-overlapping temps overlap
        for b in temps:
            if a < b:
                (fa, la), (fb, lb) = life[a], life[b]
                oa, ob = prog.offsets[a], prog.offsets[b]
                if fa <= lb and fb <= la and oa[0] == ob[0]:
                    sa = -(-temps[a].nbytes // 256) * 256
                    sb = -(-temps[b].nbytes // 256) * 256
                    assert oa[1] + sa <= ob[1] or ob[1] + sb <= oa[1]
    assert all(off % 256 == 0 for _, off in prog.offsets.values())


def test_memory_plan_splits_arenas_at_binding_limit():
    g = wr.Graph()
    x = g.input("x", (1000, 100))
    h = [(x * float(i)).softmax(-1) for i in range(4)]
    y = h[0] + h[1] + h[2] + h[3]
    prog = lower(g, [y.id], {}, INFO)
    plan_memory(prog, 256, 1 << 19)                   # 512 KiB arenas, 400 KB tensors
    assert len(prog.arena_sizes) > 1
    assert all(s <= 1 << 19 for s in prog.arena_sizes)


def test_every_shader_renders_without_unknown_slots():
    names = all_shaders()
    assert {"matmul/matmul", "reduce/reduce", "attention/attention", "conv/conv2d"} <= set(names)
    for name in names:
        text = raw_shader(name)
        assert "fn " in text or name.endswith("_decls")     # (declarations only)
        if not name.startswith("common/"):
            out = render(name, **render_slots(name))
            assert "{{" not in out and "@compute" in out


def test_float16_storage_falls_back_to_f32_without_shader_f16():
    g = wr.Graph()
    x = g.input("x", (5,), "float16")
    prog = lower(g, [(x * 2).id], {}, INFO)
    assert prog.inputs["x"][0].nbytes == 20 and "f16" not in prog.calls[0].source


def _kernels(build, env=None, **inputs):
    g = wr.Graph()
    ts = {k: g.input(k, v) for k, v in inputs.items()}
    y = build(g, **ts)
    return [c.name for c in lower(g, [y.id], env or {}, INFO).calls]


def test_elementwise_chain_fuses_into_one_kernel():
    names = _kernels(lambda g, x, y: ((x * 2 + y).exp() - 1).relu().T.cast("float16") / 3,
                     x=(8, 3), y=(3,))
    assert names == ["elementwise[div]"]


def test_matmul_bias_activation_epilogue_fuses():
    names = _kernels(lambda g, x: (x @ g.param("w", (16, 8)) + g.param("b", (8,))).gelu(),
                     x=(4, 16))
    assert names == ["gemv"]
    names = _kernels(lambda g, x: (x @ g.param("w", (16, 8)) + g.param("b", (8,))).relu(),
                     x=(40, 16))
    assert names == ["matmul_vec4_64"]


def test_residual_add_layer_norm_fuses():
    names = _kernels(lambda g, x, r: wr.nn.layer_norm(x + r, g.param("w", (8,))), x=(4, 8),
                     r=(4, 8))
    assert names == ["add+layer_norm"]


def test_attention_reads_views_and_writes_bshd():
    def build(g, q, k, v):
        heads = [t.reshape(2, 5, 4, 8).permute(0, 2, 1, 3) for t in (q, k, v)]
        return wr.nn.attention(*heads).permute(0, 2, 1, 3).reshape(2, 5, 32) * 2
    assert _kernels(build, q=(2, 5, 32), k=(2, 5, 32), v=(2, 5, 32)) == [
        "attention_rows", "elementwise[mul]"]


def test_shared_value_is_materialized_once():
    names = _kernels(lambda g, x: (x.exp() + 1) * x.exp().sum(), x=(8,))
    assert names.count("reduce[sum]") == 1 and len(names) <= 4


def test_workgroup_size_follows_the_adapter_limit():
    small = DeviceInfo("small", "none", {**INFO.limits, "max-compute-invocations-per-workgroup":
                                         64}, frozenset())
    g = wr.Graph()
    x = g.input("x", (1000,))
    (call,) = lower(g, [(x * 2).id], {}, small).calls
    assert call.overrides["WG"] == 64 and call.grid == (16, 1, 1)
    (call,) = lower(g, [(x * 2).id], {}, INFO).calls
    assert call.overrides["WG"] == 256 and call.grid == (4, 1, 1)


def test_f16_is_enabled_only_for_f16_code():
    assert "enable f16;" not in render("matmul/matmul_tiled", T="f32", C="f32", **tiled_slots(2))
    assert render("matmul/matmul_tiled", T="f16", C="f32",
                  **tiled_slots(2)).startswith("enable f16;")


def test_the_default_matmul_tile_by_adapter_kind():
    """128x128 tiles (2) or 64x64 (1): GPUs by workgroup count, software adapters by shape
    (what the tuner picked there for MiniLM's shapes)."""
    from webrlx.compiler.lower_matmul import BIG_GRID, big_tile_first
    assert big_tile_first(1024, 384, 1, software=False) == 1            # 24 workgroups
    assert big_tile_first(128 * 16, 128 * 8, 1, software=False) == 2    # 128 of them
    assert BIG_GRID == 128
    assert big_tile_first(1024, 384, 1, software=True) == 2
    assert big_tile_first(96, 1536, 1, software=True) == 2
    assert big_tile_first(48, 1536, 1, software=True) == 1
    assert big_tile_first(128, 32, 96, software=True) == 1


@pytest.mark.parametrize("name,shared", [("test", False), ("SwiftShader Device", True)])
def test_tiled_matmuls_share_a_pipeline_on_software_adapters(name, shared, monkeypatch):
    """On CPU adapters bias and activation are uniforms (RUNTIME_EPILOGUE), so matmuls of one
    tile size differ only in their uniforms; on GPUs they stay specialized overrides."""
    from webrlx.compiler import lower_matmul
    monkeypatch.setattr(lower_matmul, "SPLIT_K_BELOW", 0)       # no split-K on the GPU side
    info = DeviceInfo(name, "none", INFO.limits, INFO.features)
    g = wr.Graph()
    x = g.input("x", (40, 32))
    w1, w2 = g.input("w1", (32, 64)), g.input("w2", (64, 32))
    b = g.input("b", (64,))
    y = x.matmul(w1, bias=b, activation="gelu").matmul(w2).relu()
    calls = [c for c in lower(g, [y.id], {}, info).calls
             if c.name.startswith(("matmul_vec4", "matmul_regs"))]
    assert len(calls) == 2
    keys = {(c.source, tuple(sorted(c.overrides.items()))) for c in calls}
    assert (len(keys) == 1) == shared


def test_thin_f32_matmuls_split_k_on_gpus_only():
    g = wr.Graph()
    x, w = g.input("x", (128, 384)), g.input("w", (384, 384))
    gpu = [c.name for c in lower(g, [(x @ w).id], {}, INFO).calls]   # 1 MB bindings: 4 parts
    cpu = [c.name for c in lower(g, [(x @ w).id], {}, DeviceInfo(
        "llvmpipe", "none", INFO.limits, INFO.features)).calls]
    assert gpu == ["matmul_vec4_64[split-k 4]", "elementwise[matmul split-K sum]"], gpu
    assert len(cpu) == 1 and cpu[0].startswith("matmul_regs"), cpu


def test_reshape_strides_walks_views_as_numpy_does():
    """lower_elementwise.reshape_strides: for random permuted and sliced views and new shapes,
    strides exactly where numpy can reshape without a copy, walking the same elements."""
    from webrlx.compiler.lower_elementwise import reshape_strides
    rng = np.random.default_rng(0)
    found = 0
    for _ in range(400):
        a = np.arange(int(np.prod(base := rng.integers(1, 5, size=rng.integers(1, 5)))))
        a = a.reshape(base).transpose(rng.permutation(len(base)))
        a = a[tuple(slice(0, max(1, n - int(rng.integers(0, 2)))) for n in a.shape)]
        sizes = [f for f in (2, 3, 4) for _ in range(3) if rng.random() < 0.5]
        new, rest = [], a.size
        for f in sizes:
            if rest % f == 0:
                new.append(f)
                rest //= f
        new = tuple(int(v) for v in rng.permutation(new + [rest])) + ((1,) if rng.random() < 0.3
                                                                       else ())
        strides = tuple(s // a.itemsize for s in a.strides)
        got = reshape_strides(a.shape, strides, new)
        try:
            view = a.view()
            view.shape = new
        except AttributeError:
            assert got is None, (a.shape, strides, new, got)
            continue
        found += 1
        assert got is not None, (a.shape, strides, new)
        walked = np.lib.stride_tricks.as_strided(a, new, [s * a.itemsize for s in got])
        np.testing.assert_array_equal(walked, a.reshape(new))
    assert found > 200



def test_gpus_pick_flash_attention_for_short_sequences():
    """attention_path: GPUs take attention_flash for 64.. FLASH_MAX_KEYS keys at head dim 64
    (twice as many at 32), up to FLASH_LONG_MAX_KEYS with few query tiles, where its tiles
    fit the workgroup memory, the two matmuls beyond; software adapters never take it."""
    from types import SimpleNamespace

    from webrlx.compiler.lower_attention import attention_path

    def ctx(software: bool, storage: int) -> SimpleNamespace:
        return SimpleNamespace(info=SimpleNamespace(
            software=software, max_binding_size=1 << 30,
            limit=lambda name, default: storage if "workgroup-storage" in name else default))
    gpu = ctx(False, 49152)
    assert attention_path(gpu, 32, 12, 128, 128, 32) == "flash"      # MiniLM, batch 32
    assert attention_path(gpu, 1, 12, 128, 128, 64) == "flash"
    assert attention_path(gpu, 4, 12, 1024, 1024, 32) == "flash"
    assert attention_path(gpu, 1, 12, 512, 512, 64) == "flash"
    assert attention_path(gpu, 1, 12, 1024, 1024, 64) == "flash"     # 192 query tiles
    assert attention_path(gpu, 1, 12, 2048, 2048, 64) == "flash"     # 384
    assert attention_path(gpu, 4, 12, 1024, 1024, 64) == "matmul"    # 768
    assert attention_path(gpu, 1, 12, 4096, 4096, 64) == "matmul"
    assert attention_path(gpu, 1, 12, 128, 128, 48) == "matmul"       # 16 % (48 / 4) != 0
    assert attention_path(ctx(False, 32768), 1, 12, 128, 128, 64) == "matmul"   # 48 KB
    assert attention_path(ctx(True, 49152), 32, 12, 128, 128, 32) != "flash"
