"""Every subgroup-matrix kernel the compiler emits compiles under Tint (tools/tint_check.mjs,
Dawn's null backend), on a machine without a GPU that has them. Those kernels (matmul_smat,
quant/qmatmul_smat*, attention_smat) run only where an adapter offers Dawn's
chromium-experimental-subgroup-matrix (an NVIDIA GPU under Dawn: the device tool's Dawn runner
checks their results), so without this CI would never compile them. The graphs are lowered for
an H200-like DeviceInfo; every call's default kernel and every autotuner variant that enables
subgroup matrices is compiled with its overrides. Sizes the null adapter's default limits
refuse (48 KB of workgroup memory, 256+ threads: attention_smat's 512 at head dim 64) are
checked against the H200's instead. So does a quantized prefill lowered for a GPU without
them, whose weights are decoded first (quant/qdequant_t.wgsl), a path SwiftShader never takes."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import webrlx as wr
from webrlx import nn, quant
from webrlx.cli.dawn import dawn_package
from webrlx.cli.web_assets import WebAssets
from webrlx.compiler import lower_attention, smat
from webrlx.compiler.lower import lower
from webrlx.device_info import DeviceInfo
from webrlx.kernels import kernel

ROOT = Path(__file__).resolve().parents[2]
H200 = DeviceInfo(
    "NVIDIA H200", "navigator.gpu",
    {"max-compute-workgroup-storage-size": 49152, "max-compute-invocations-per-workgroup": 1024,
     "max-compute-workgroup-size-x": 1024, "max-storage-buffers-per-shader-stage": 10,
     "max-storage-buffer-binding-size": 1 << 31},
    frozenset({smat.FEATURE, "shader-f16", "subgroups"}), subgroup_size=32,
    subgroup_sizes=(32, 32), subgroup_matrix_configs=(("f16", "f32", 16, 16, 16),))
MARK = "chromium_experimental_subgroup_matrix"
PROBE_SHAPES = (smat.SmatShape(2, 4, 4, 4, 16, pf1=True), smat.SmatShape(2, 2, 2, 2, pf1=True))


def _graphs() -> list[tuple[str, wr.Graph, list[Any]]]:
    """(what, graph, outputs): f16 matmuls with bias and GELU, f16 attention at head dims 16,
    32, 64 (masked, causal), quantized prefill projections of four formats, and a decoder
    layer's fused prefill projections (norm, rope, KV cache, SwiGLU, residual; q, k, v as one)."""
    out = []
    for m, k, n in ((130, 256, 264), (4096, 512, 4096), (37, 384, 1544)):
        g = wr.Graph()
        x, w, b = (g.input("x", (m, k), "float16"), g.input("w", (k, n), "float16"),
                   g.input("b", (n,), "float16"))
        out.append((f"matmul {m}x{k}x{n}", g, [x.matmul(w, bias=b, activation="gelu")]))
    for d in smat.ATTENTION_DIMS:
        g = wr.Graph()
        q, k_, v = (g.input(c, (1, 2, 130, d), "float16") for c in "qkv")
        mask = g.input("mask", (1, 130), "int32")
        out.append((f"attention d{d}", g, [nn.attention(q, k_, v, mask=mask),
                                           nn.attention(q, k_, v, causal=True)]))
    for fmt in ("q4_1", "q8_0", "q4_k", "q6_k"):
        g = wr.Graph()
        x = g.input("x", (130, 256))
        w = g.param("w", quant.words(quant.random_blocks(fmt, 264, 256)).shape, "uint32")
        out.append((f"qlinear {fmt}", g, [nn.qlinear(x, w, fmt, 264, 256,
                                                    bias=g.param("b", (264,)))]))
    out.append(("decoder layer q4_k", *_decoder_layer("q4_k")))
    return out


def _decoder_layer(fmt: str, s: int = 40, k: int = 256, ffn: int = 512
                   ) -> tuple[wr.Graph, list[Any]]:
    """A SmolLM2-style layer's prefill (tests/backend/test_smat.py's _decoder_layer, without
    its arrays): q roped, k roped and v into KV caches, o plus residual, SwiGLU, down plus
    residual."""
    hd, heads, kv, cap = k // 8, 8, 2, 64
    g = wr.Graph()
    x = g.input("x", (1, s, k))
    pos = g.input("pos", (1,), "int32")
    shapes = {"wq": (heads * hd, k), "wk": (kv * hd, k), "wv": (kv * hd, k), "wo": (k, k),
              "wg": (ffn, k), "wu": (ffn, k), "wd": (k, ffn)}
    p = {n_: g.param(n_, quant.words(quant.random_blocks(fmt, *sh)).shape, "uint32")
         for n_, sh in shapes.items()}
    h = nn.rms_norm(x, g.param("g1", (k,)), 1e-5)
    q = nn.rope(nn.qlinear(h, p["wq"], fmt, heads * hd, k).reshape(1, s, heads, hd), pos,
                10000.0)
    kr = nn.rope(nn.qlinear(h, p["wk"], fmt, kv * hd, k).reshape(1, s, kv, hd), pos, 10000.0)
    kc = nn.cache_write(g.state("kc", (1, kv, cap, hd)), kr, pos)
    vc = nn.cache_write(g.state("vc", (1, kv, cap, hd)),
                        nn.qlinear(h, p["wv"], fmt, kv * hd, k).reshape(1, s, kv, hd), pos)
    x1 = x + nn.qlinear(q.reshape(1, s, heads * hd), p["wo"], fmt, k, k)
    h2 = nn.rms_norm(x1, g.param("g2", (k,)), 1e-5)
    gate, up = nn.qlinear(h2, p["wg"], fmt, ffn, k), nn.qlinear(h2, p["wu"], fmt, ffn, k)
    return g, [q * 1.0, kc * 1.0, vc * 1.0, x1 + nn.qlinear(gate.silu() * up, p["wd"], fmt, k, ffn)]


def _smat_kernels(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """name -> {code, constants, workgroup threads} of every subgroup-matrix kernel (default or
    variant, distinct source and overrides) in the lowered graphs; attention's flash path
    forced so that every head dim takes attention_smat."""
    monkeypatch.setattr(lower_attention, "FORCE_PATH", "smat")
    found: dict[str, dict[str, Any]] = {}
    for what, g, outs in _graphs():
        program = lower(g, [t.id for t in outs], {}, H200)
        for call in program.calls:
            for name, code, over in [(call.name, call.source, call.overrides)] + \
                    [(v.name, v.source, v.overrides) for v in call.variants]:
                if MARK not in code:
                    continue
                constants = {k: float(v) for k, v in over.items()}
                key = f"{what}: {name} {json.dumps(constants, sort_keys=True)}"
                found.setdefault(key, {"name": key, "code": code, "constants": constants})
    for sh in PROBE_SHAPES:              # bench/probes/smat_probe.py's extra forms
        found[sh.name] = {"name": sh.name, "constants": {"HAS_BIAS": 1.0, "ACT": 1.0},
                          "code": kernel("matmul/matmul_smat", T="f16", **smat.slots(sh)).source}
    return found


def _tint_check(node: str, tmp_path: Path, shaders: list[dict[str, Any]]) -> dict[str, Any]:
    """tools/tint_check.mjs's report on shaders ({name, code, constants}), asserting that
    Tint accepted every one."""
    src, out = tmp_path / "shaders.json", tmp_path / "out.json"
    src.write_text(json.dumps(shaders))
    run = subprocess.run([node, str(ROOT / "tools" / "tint_check.mjs"), str(src), str(out),
                          "--dawn", str(dawn_package(WebAssets(ROOT)))],
                         capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert out.exists(), run.stderr[-3000:]
    report = json.loads(out.read_text())
    bad = [r for r in report["results"] if not r["ok"]]
    assert not bad and run.returncode == 0, json.dumps(bad[:3], indent=1)[-4000:]
    return report


def test_every_subgroup_matrix_kernel_compiles_under_tint(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    node = shutil.which("node")
    assert node, "node is not installed (tools/setup.sh installs it)"
    kernels = _smat_kernels(monkeypatch)
    # each family of subgroup-matrix kernel is there: the f16 matmul, the quantized prefill
    # GEMM, the fused prefill projections (q, k, v as one among them), attention
    names = " ".join(kernels)
    for family in (": matmul_smat_", "qmatmul_smat_", "qgemv[res]_smat", "qgemv[q+k+v]_smat",
                   "qgemv[rms_norm+swiglu]_smat", "attention_smat"):
        assert family in names, family
    report = _tint_check(node, tmp_path, list(kernels.values()))
    assert smat.FEATURE in report["adapter"]["features"], report["adapter"]
    assert len(report["results"]) == len(kernels) >= 20, len(report["results"])
    # what the null adapter's default limits refused: within the H200's under Dawn (48 KB of
    # workgroup memory, 10 storage buffers a stage)
    bounds = {"workgroup storage": H200.limit("max-compute-workgroup-storage-size"),
              "storage buffers": H200.limit("max-storage-buffers-per-shader-stage"),
              "workgroup_size": H200.max_workgroup_invocations}
    for r in report["results"]:
        if r["limited"]:
            what = next(w for w in bounds if w in r["limited"])
            used = int(re.search(r"\((\d+)", r["limited"]).group(1))
            assert used <= bounds[what], r


def test_a_wrong_subgroup_matrix_kernel_is_rejected(tmp_path: Path) -> None:
    """The check can fail: a product of mismatched subgroup-matrix shapes (a 16x16 left times
    an 8-column right into a 16x16 result) is refused with Tint's message."""
    node = shutil.which("node")
    assert node, "node is not installed (tools/setup.sh installs it)"
    code = ("enable f16;\nenable chromium_experimental_subgroup_matrix;\n"
            "@group(0) @binding(0) var<storage, read_write> a: array<f16>;\n"
            "@compute @workgroup_size(32) fn main() {\n"
            "  let l = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, row_major>(\n"
            "    &a, 0u, 16u);\n"
            "  let r = subgroupMatrixLoad<subgroup_matrix_right<f16, 8, 16>, row_major>(\n"
            "    &a, 0u, 8u);\n"
            "  var c = subgroup_matrix_result<f32, 16, 16>();\n"
            "  c = subgroupMatrixMultiplyAccumulate(l, r, c);\n}\n")
    shaders, out = tmp_path / "s.json", tmp_path / "o.json"
    shaders.write_text(json.dumps([{"name": "mismatch", "code": code, "constants": {}}]))
    run = subprocess.run([node, str(ROOT / "tools" / "tint_check.mjs"), str(shaders), str(out),
                          "--dawn", str(dawn_package(WebAssets(ROOT)))],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stderr[-2000:]
    res = json.loads(out.read_text())["results"][0]
    assert not res["ok"] and "mismatch:" in res["errors"][0], res


def test_a_prefill_that_decodes_its_weights_first_compiles_under_tint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chrome on a GPU without subgroup matrices runs a quantized prefill through
    quant/qdequant_t.wgsl and the f32 matmuls (lower_quant.dequant_first), which the browser
    suite's SwiftShader (a software adapter) never takes: the decoder layer's every kernel and
    variant, lowered for an H200-like DeviceInfo as the browser reports it without the feature
    (every product decoded first), compiles under Tint."""
    from webrlx.compiler import lower_quant
    node = shutil.which("node")
    assert node, "node is not installed (tools/setup.sh installs it)"
    monkeypatch.setattr(lower_quant, "DEQUANT_MIN_WORK", 0)
    plain = DeviceInfo(H200.name, H200.backend, dict(H200.limits),    # (subgroup_size 0: the
                       frozenset({"shader-f16", "subgroups"}),         # browser's row kernels,
                       subgroup_sizes=(32, 32))                         # js_webgpu)
    g, outs = _decoder_layer("q4_k")
    program = lower(g, [t.id for t in outs], {}, plain)
    found: dict[str, dict[str, Any]] = {}
    for call in program.calls:
        for name, code, over in [(call.name, call.source, call.overrides)] + \
                [(v.name, v.source, v.overrides) for v in call.variants]:
            constants = {k: float(v) for k, v in over.items()}
            key = f"{name} {json.dumps(constants, sort_keys=True)}"
            found.setdefault(key, {"name": key, "code": code, "constants": constants})
    assert sum(k.startswith("qdequant_t[q4_k]") for k in found) == 1, sorted(found)
    report = _tint_check(node, tmp_path, list(found.values()))
    assert len(report["results"]) == len(found), len(report["results"])


def test_the_int8_prefill_compiles_under_tint(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The opt-in int8 prefill (smat.INT8: quant/qrows_i8.wgsl for x and for the weight, then
    quant/qmatmul_mmq.wgsl on i8 subgroup matrices), lowered for an H200-like DeviceInfo that
    lists i8 -> i32 16x16x32 matrices: the decoder layer (groups of 256) and products of
    K 576 (groups of 64, 64-k steps) in three formats, every tile shape as a variant."""
    import dataclasses
    node = shutil.which("node")
    assert node, "node is not installed (tools/setup.sh installs it)"
    monkeypatch.setattr(smat, "INT8", True)
    info = dataclasses.replace(H200, subgroup_matrix_configs=(
        ("f16", "f32", 16, 16, 16), ("i8", "i32", 16, 16, 32)))
    graphs = [_decoder_layer("q4_k")]
    for fmt in ("q4_1", "q8_0", "q6_k"):
        g = wr.Graph()
        x = g.input("x", (130, 576 if fmt != "q6_k" else 512))
        k = x.shape[-1]
        w = g.param("w", quant.words(quant.random_blocks(fmt, 264, k)).shape, "uint32")
        graphs.append((g, [nn.qlinear(x, w, fmt, 264, k, bias=g.param("b", (264,)))]))
    found: dict[str, dict[str, Any]] = {}
    for i, (g, outs) in enumerate(graphs):
        calls = lower(g, [t.id for t in outs], {}, info).calls
        if i == 0:      # the layer's 7 products read 4 distinct x (q, k, v one; gate, up one)
            names_ = [c.name for c in calls]
            assert sum(n.startswith("qmatmul_mmq") for n in names_) == 7, names_
            assert names_.count("qrows_i8[x]") == 4, names_
        for call in calls:
            for name, code, over in [(call.name, call.source, call.overrides)] + \
                    [(v.name, v.source, v.overrides) for v in call.variants]:
                if "qrows_i8" not in name and "qmatmul_mmq" not in name:
                    continue
                constants = {k: float(v) for k, v in over.items()}
                key = f"{name} {json.dumps(constants, sort_keys=True)}"
                found.setdefault(key, {"name": key, "code": code, "constants": constants})
    names = " ".join(found)
    for shape in smat.MMQ_SHAPES:
        assert smat.mmq_name(shape) in names, (shape, sorted(found))
    assert "qrows_i8[x]" in names and "qrows_i8[q6_k]" in names and '"G": 64.0' in names
    report = _tint_check(node, tmp_path, list(found.values()))
    assert len(report["results"]) == len(found), len(report["results"])
