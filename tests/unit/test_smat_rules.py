"""compiler/smat.py's rules without a device: when subgroup-matrix kernels are available,
what a forced one says where they are not, alignment, workgroup sizes and the default shape."""
from __future__ import annotations

import dataclasses

import pytest

from webrlx.compiler import smat
from webrlx.device_info import DeviceInfo

F16_MATRIX = ("f16", "f32", 16, 16, 16)
LIMITS = {"max-compute-workgroup-storage-size": 49152,
          "max-compute-invocations-per-workgroup": 1024}


def _info(features=(smat.FEATURE, "shader-f16"), configs=(F16_MATRIX,)) -> DeviceInfo:
    return DeviceInfo("NVIDIA H100", "navigator.gpu", dict(LIMITS), frozenset(features),
                      subgroup_matrix_configs=tuple(configs))


def test_available_needs_feature_f16_and_the_config():
    assert smat.available(_info())
    assert not smat.available(_info(features=("shader-f16",)))
    assert not smat.available(_info(features=(smat.FEATURE,)))
    assert not smat.available(_info(configs=(("f16", "f16", 16, 16, 16),)))
    assert not smat.available(DeviceInfo("llvmpipe", "wgpu (Vulkan)"))


@pytest.mark.parametrize("features,missing", [
    ((), smat.FEATURE), (("shader-f16",), smat.FEATURE), ((smat.FEATURE,), "shader-f16"),
    ((smat.FEATURE, "shader-f16"), "16x16x16")])
def test_forcing_names_what_is_missing(features, missing):
    info = _info(features=features, configs=())
    with pytest.raises(smat.SubgroupMatrixUnavailable, match=missing):
        smat.check_forced(info, smat.SHAPES[0].name)
    smat.check_forced(info, "matmul_vec4")           # other kernels: nothing to check


def test_eligible_alignment():
    assert smat.eligible(130, 264, 256, {}, (0, 0))
    assert not smat.eligible(130, 260, 256, {}, (0, 0))          # N % 8
    assert not smat.eligible(130, 264, 252, {}, (0, 0))          # K % 8
    assert not smat.eligible(130, 264, 256, {"a_off": 4}, (0, 0))
    assert not smat.eligible(130, 264, 256, {}, (12, 0))


def test_every_shape_fits_an_h100_and_not_a_16k_adapter():
    for sh in smat.SHAPES:
        assert smat.fits(_info(), sh), sh.name
        assert sh.bk % 16 == 0 and sh.workgroup_bytes() <= 49152
        # quant/qmatmul_smat.wgsl: its B tile as [n][k], and whole (row, unit) pairs of 8 k a
        # thread a step for both tiles (its LA / LB register arrays)
        assert smat.fits(_info(), sh, b_by_n=True), sh.name
        assert sh.bm * sh.bk // 8 % sh.threads == 0 and sh.bn * sh.bk // 8 % sh.threads == 0
    small = DeviceInfo("x", "navigator.gpu", {"max-compute-workgroup-storage-size": 16384})
    assert not any(smat.fits(small, sh) for sh in smat.SHAPES)
    assert len({sh.name for sh in smat.SHAPES}) == len(smat.SHAPES)


def test_default_shape_by_grid():
    def first(m, n, b=1):
        return min(smat.SHAPES, key=lambda sh: smat.default_rank(sh, m, n, b))
    assert first(4096, 4096).bm * first(4096, 4096).bn >= 128 * 128
    assert first(128, 384).bm == 64                 # MiniLM's 128 tokens: small tiles


def test_slots_fill_the_shader():
    from webrlx.kernels import kernel
    for sh in smat.SHAPES:
        for builtin in (True, False):
            src = kernel("matmul/matmul_smat", T="f16", **smat.slots(sh, builtin)).source
            # the K loop takes two steps a turn (loads two steps ahead), each with its products
            per_step = sh.tm * sh.tn * sh.bk // 16
            assert src.count("subgroupMatrixMultiplyAccumulate") == 2 * per_step
            assert ("@builtin(subgroup_id) sg: u32" in src) == builtin
            one = dataclasses.replace(sh, pf1=True)     # loads one step ahead: one a turn
            src = kernel("matmul/matmul_smat", T="f16", **smat.slots(one, builtin)).source
            assert src.count("subgroupMatrixMultiplyAccumulate") == per_step


def test_loads_and_stores_take_the_current_forms():
    """Every subgroup-matrix load and store the slots write takes its layout as a template
    argument (Tint's current form); the 4- and 5-argument forms with a bool are deprecated
    (Dawn warns at each pipeline) and will be removed."""
    import re

    from webrlx.kernels import kernel
    sources = [kernel("matmul/matmul_smat", T="f16", **smat.slots(sh)).source
               for sh in smat.SHAPES]
    sources += [kernel("quant/qmatmul_smat_fused", T="f32", **smat.fused_slots(sh, w2)).source
                for sh in smat.FUSED_SHAPES for w2 in (True, False)]
    sources += [kernel("attention/attention_smat", T="f16", QKV="vec4<f16>",
                       **smat.attention_slots(d)).source
                for d in smat.ATTENTION_DIMS]
    for src in sources:
        code = re.sub(r"//[^\n]*", "", src)                  # (comments name them too)
        calls = re.findall(r"subgroupMatrix(?:Load|Store)[^;]*;", code)
        assert calls
        for call in calls:
            assert re.search(r"(row|col)_major", call), call
            assert not re.search(r",\s*(true|false)\s*,", call), call


def _norm_layer_calls(rows: int, mode, monkeypatch):
    """The calls of `x + qlinear(rms_norm(x))` (Q4_K, 256 wide, `rows` rows) lowered for an
    H100 under Dawn (_info) with smat.MODE = mode."""
    import webrlx as wr
    from webrlx import nn, quant
    from webrlx.compiler.lower import lower
    monkeypatch.setattr(smat, "MODE", mode)
    g = wr.Graph()
    x = g.input("x", (rows, 256), "float32")
    w = g.param("w", (quant.nwords("q4_k", 256, 256),), "uint32")
    gain = g.param("g", (256,), "float32")
    y = x + nn.qlinear(nn.rms_norm(x, gain, 1e-5), w, "q4_k", 256, 256)
    return lower(g, [y.id], {}, _info()).calls


@pytest.mark.parametrize("rows,tensor_cores", [(300, True), (40, False), (8, False)])
def test_quantized_prefills_on_tensor_cores(rows, tensor_cores, monkeypatch):
    """Where subgroup matrices are offered, a quantized layer of more than fuse.GEMV_MAX_M rows
    lowers its projection to quant/qmatmul_smat.wgsl; shorter prefills keep their fusions
    (quant/qmatmul_smat_fused.wgsl: test_fused_prefills_on_tensor_cores), and every prefill
    with smat.MODE "off" keeps the f32 kernels."""
    def calls(mode):
        return [c.name for c in _norm_layer_calls(rows, mode, monkeypatch)]

    on, off = calls(None), calls("off")
    assert any(n.startswith("qmatmul_smat") for n in on) == tensor_cores, on
    assert not any(n.startswith("qmatmul_smat") for n in off), off


def test_quantized_smat_k_pieces_where_tiles_are_few(monkeypatch):
    """qsmat_pieces: K cut in pieces (a sum after) where the 128x128 tiles give few workgroups
    (the 1B prefill's q / o / down projections), none where they are many (gate / up) or K is
    short; a forced count that does not cut K into whole steps names K."""
    from webrlx.compiler import lower_quant
    big = next(sh for sh in smat.SHAPES if sh.name == "matmul_smat_128x128_s2x4_k32")
    pieces = lower_quant.qsmat_pieces
    assert pieces(512, 2048, 2048, big) == 4 and pieces(512, 2048, 8192, big) == 4
    assert pieces(512, 8192, 2048, big) == 1 and pieces(512, 2048, 512, big) == 1
    monkeypatch.setattr(lower_quant, "QSMAT_SPLIT", 3)
    with pytest.raises(ValueError, match="K 2048"):
        pieces(512, 2048, 2048, big)


def test_quantized_smat_split_lowers_to_pieces_and_a_sum(monkeypatch):
    """A 512-row qmatmul of few tiles: the smat kernel over K pieces (grid z) into a temp of
    pieces x M x N, then one sum adding the bias, into the output."""
    import webrlx as wr
    from webrlx import nn, quant
    from webrlx.compiler import lower_quant
    from webrlx.compiler.lower import lower
    monkeypatch.setattr(smat, "MODE", None)
    n, k = 512, 2048
    g = wr.Graph()
    x = g.input("x", (512, k), "float32")
    w = g.param("w", (quant.nwords("q4_k", n, k),), "uint32")
    b = g.param("b", (n,), "float32")
    y = nn.qlinear(x, w, "q4_k", n, k, bias=b)
    prog = lower(g, [y.id], {}, _info())
    names = [c.name for c in prog.calls]
    split = [c for c in prog.calls if "[split-k" in c.name]
    assert len(split) == 1 and split[0].name.startswith("qmatmul_smat"), names
    want = lower_quant.qsmat_pieces(512, n, k, next(
        sh for sh in smat.SHAPES if split[0].name.startswith(f"q{sh.name}")))
    assert want > 1 and split[0].grid[2] == want and split[0].overrides["KSPLIT"] == want
    assert split[0].writes.nbytes == want * 512 * n * 4
    assert names[-1] == "elementwise[qmatmul split-K sum]", names


def test_attention_smat_needs_32_lane_subgroups_and_its_head_dims():
    """attention_smat: the f16 subgroup matrices, head dims 16 / 32 / 64, subgroups of exactly
    32 lanes (checked natively, or the browser's subgroupMinSize == subgroupMaxSize == 32), its
    threads, and its workgroup memory."""
    from dataclasses import replace
    info = replace(_info(), subgroup_sizes=(32, 32))
    assert all(smat.attention_ok(info, d) for d in (16, 32, 64))
    assert not smat.attention_ok(info, 128) and not smat.attention_ok(info, 8)
    assert not smat.attention_ok(_info(), 64)                      # size unknown
    assert not smat.attention_ok(replace(info, subgroup_sizes=(16, 32)), 64)
    assert smat.attention_ok(replace(_info(), subgroup_size=32), 64)
    small = replace(info, limits={**LIMITS, "max-compute-workgroup-storage-size": 40960})
    assert smat.attention_workgroup_bytes(64) > 40960 and not smat.attention_ok(small, 64)
    assert smat.attention_ok(small, 16)
    assert not smat.attention_ok(replace(info, features=frozenset({"shader-f16"})), 64)
    # 8 subgroups (256 threads) at head dims 32 and 64, 4 at 16: an adapter allowing 128
    # threads a workgroup keeps attention_flash there
    assert [smat.attention_subgroups(d) for d in (16, 32, 64)] == [4, 8, 8]
    few = replace(info, limits={**LIMITS, "max-compute-invocations-per-workgroup": 128})
    assert smat.attention_ok(few, 16) and not smat.attention_ok(few, 32)
    assert not smat.attention_ok(few, 64)


@pytest.mark.parametrize("rows,lead", [(128, "smat"), (16, "smat"), (8, "gemv"), (300, None)])
def test_fused_prefills_on_tensor_cores(rows, lead, monkeypatch):
    """Fused prefill projections (norm prologue + residual here) of TILE_MIN_M..GEMV_MAX_M rows
    lead with quant/qmatmul_smat_fused.wgsl where subgroup matrices are offered (the f32 tiles
    and GEMVs its variants); batched decode rows (8) keep the GEMV first with the smat shapes
    as variants; past GEMV_MAX_M nothing fuses; smat.MODE "off" leaves none; a forced fused
    shape is the only one."""
    def calls(mode):
        return [c for c in _norm_layer_calls(rows, mode, monkeypatch)
                if c.name.startswith("qgemv[")]

    on = calls(None)
    if lead is None:
        assert not on
        return
    (call,) = on
    names = [call.name, *(v.name for v in call.variants)]
    smats = [n for n in names if "_smat_" in n]
    assert ("_smat_" in call.name) == (lead == "smat"), names
    assert len(smats) == sum(256 % sh.bk == 0 for sh in smat.FUSED_SHAPES), names
    assert any(n.endswith("_tile1") for n in names), names
    (off,) = calls("off")
    assert not any("_smat_" in v.name for v in [off, *off.variants])
    shape = smat.FUSED_SHAPES[1]
    (forced,) = calls(shape.name)
    assert [n for n in [forced.name, *(v.name for v in forced.variants)] if "_smat_" in n] == \
        [f"qgemv[rms_norm+res]_smat_{shape.bm}x{shape.bn}_k{shape.bk}"]


def test_fused_smat_shapes_fit_and_rank():
    """Every fused shape fits an H100's 48 KB (with SwiGLU's second tiles, not all: those are
    left out where they do not fit, lower_quant._fused_smat); whole (row, unit) pairs a
    thread for both tiles; whole threads a row for the norm prologue; the
    default takes the biggest tiles with FUSED_SMAT_WORKGROUPS workgroups, else the most
    workgroups."""
    from webrlx.compiler import lower_quant
    for sh in smat.FUSED_SHAPES:
        assert smat.fused_workgroup_bytes(sh, False) <= 49152, sh.name
        assert sh.bm * sh.bk // 8 % sh.threads == 0 and sh.bn * sh.bk // 8 % sh.threads == 0
        assert sh.threads % sh.bm == 0           # the norm prologue's threads a row
    def first(m, n):
        return min(smat.FUSED_SHAPES,
                   key=lambda sh: lower_quant.fused_smat_rank(sh, m, n))
    assert (first(128, 576).bm, first(128, 576).bn) == (32, 32)        # 72 workgroups
    assert (first(256, 3072).bm, first(256, 3072).bn) == (64, 64)      # 192
    assert first(128, 576).bk == 64                 # (k64 where K allows it: see the rank)


def test_fused_slots_fill_the_shader():
    from webrlx.kernels import kernel
    for sh in smat.FUSED_SHAPES:
        for w2 in (False, True):
            src = kernel("quant/qmatmul_smat_fused", T="f32", **smat.fused_slots(sh, w2)).source
            products = sh.tm * sh.tn * sh.bk // 16
            assert src.count("subgroupMatrixMultiplyAccumulate") == products * (1 + w2)
            assert src.count("epilogue(r, c + 4u,") == sh.tm * sh.tn
            assert ("St2[sg][s]" in src) == w2


@pytest.mark.parametrize("rows,buffers,mode,grouped", [
    (128, 10, None, True), (40, 10, None, True), (128, 8, None, False), (128, 10, "off", False),
    (8, 10, None, True), (128, 10, "matmul_smat_128x128_s2x4_k32", False)])
def test_prefill_qkv_on_tensor_cores_in_one_dispatch(rows, buffers, mode, grouped, monkeypatch):
    """Where fused prefills run on subgroup matrices (smat.fused_prefills) and 10 storage
    buffers bind, a prefill's q, k and v group into one call led by
    quant/qmatmul_smat_qkv.wgsl (the qkv GEMV its variant); decode rows group as before (the
    GEMV leads); smat.MODE "off" or naming an unfused shape, or 8 buffers, keep them apart."""
    import sys
    from dataclasses import replace
    from pathlib import Path

    from webrlx.compiler.lower import lower
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backend"))
    from test_smat import _decoder_layer
    monkeypatch.setattr(smat, "MODE", mode)
    info = replace(_info(), limits={**LIMITS, "max-storage-buffers-per-shader-stage": buffers})
    g, outs, _ = _decoder_layer("q4_k", rows)
    calls = lower(g, [o.id for o in outs], {}, info).calls
    qkv = [c for c in calls if c.name.startswith("qgemv[q+k+v]")]
    assert bool(qkv) == grouped, [c.name for c in calls]
    if grouped:
        assert ("_smat_" in qkv[0].name) == (rows >= 16), qkv[0].name
        assert any(v.name.startswith("qgemv[q+k+v]_") and "_smat_" not in v.name
                   for v in qkv[0].variants) or rows < 16
