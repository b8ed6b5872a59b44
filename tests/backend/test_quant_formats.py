"""Every GGUF block format of webrlx.quant.FORMATS dequantized inside the kernels (qgather, the
GEMV, the tiled prefill matmul, the fused decoder GEMVs) on random blocks, against numpy math
on the gguf package's dequantization (natively; inside Pyodide, where gguf is not installed,
on quant.dequantize, which tests/unit/test_quant_blocks.py holds bit-exact to gguf's)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import rand, run_graph

import webrlx as wr
from webrlx import nn, quant

FORMATS = list(quant.FORMATS)
N, K = 101, 512                    # odd rows; two K-quant blocks, 16 legacy blocks a row


def oracle(raw: np.ndarray, fmt: str, n: int, k: int) -> np.ndarray:
    """The (n, k) float64 weight that raw blocks hold, by gguf's numpy dequantize."""
    try:
        from gguf import GGMLQuantizationType, quants
    except ImportError:
        return quant.dequantize(raw, fmt, (n, k)).astype(np.float64)
    qtype = GGMLQuantizationType(quant.FORMATS[fmt].ggml)
    return quants.dequantize(raw.reshape(n, -1), qtype).reshape(n, k).astype(np.float64)


def qweight(fmt: str, n: int, k: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(uint32 words of random fmt blocks of an (n, k) weight, the weight in float64)."""
    raw = quant.random_blocks(fmt, n, k, seed=seed)
    return quant.words(raw), oracle(raw, fmt, n, k)


def run_with_names(backend, fn, x: np.ndarray, params: dict[str, np.ndarray]
                   ) -> tuple[list[np.ndarray], list[str]]:
    """Run fn(x, **params) once; return its outputs and the kernel variants that ran (none
    on the reference)."""
    g = wr.Graph()
    out = fn(g.input("x", x.shape, x.dtype),
             **{k: g.param(k, v.shape, v.dtype) for k, v in params.items()})
    exe = wr.compile(g, outputs=list(out) if isinstance(out, tuple) else [out], device=backend)
    exe.set_params(params)
    got = exe.run({"x": x})
    return got, [] if backend.name == "reference" else exe.plan({}).ran


@pytest.mark.parametrize("fmt", FORMATS)
def test_qembedding_every_format(backend, fmt):
    """qgather: deq8 of common/qformats.wgsl for every format, Q4_1 and Q8_0 too."""
    ids = np.array([[3, 0, 100], [57, 3, 99]], np.int32)
    w, wf = qweight(fmt, N, K)
    (got,) = run_graph(backend, lambda i, w: nn.qembedding(i, w, fmt, N, K), [ids], {"w": w})
    np.testing.assert_allclose(got, wf[ids], rtol=1e-6, atol=1e-6 * np.abs(wf).max())


# (rows, the kernel the autotuner is told to prefer): decode GEMVs (the CPU adapters' default
# 1x8 and the GPUs' split-K 8), a prefill GEMV over row quads, the 64- and 128-row tiles
CASES = [(1, None), (1, "qgemv_8"), (3, None), (13, "qgemv_4q2"), (37, "qmatmul_64"),
         (70, "qmatmul_128")]


@pytest.mark.parametrize("m,kernel", CASES, ids=str)
@pytest.mark.parametrize("fmt", FORMATS)
def test_qlinear_every_format(backend, fmt, m, kernel, monkeypatch):
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)        # the default, or PREFER
    if kernel is not None:
        monkeypatch.setattr(autotune, "PREFER", kernel)
    w, wf = qweight(fmt, N, K)
    bias = rand(N, seed=5)
    x = rand(m, K)
    (got,), ran = run_with_names(backend, lambda x, w, b: nn.qlinear(x, w, fmt, N, K, bias=b),
                                 x, {"w": w, "b": bias})
    assert backend.name == "reference" or kernel in (None, *ran), ran
    want = x.astype(np.float64) @ wf.T + bias
    assert got.shape == (m, N) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def _rms(x, g, eps=1e-5):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


@pytest.mark.parametrize("m,shape", [(1, None), (3, "16"), (40, "tile1")], ids=str)
@pytest.mark.parametrize("fmt,down", [("q4_k", "q6_k"), ("q5_0", "q8_0"), ("q3_k", "q2_k"),
                                      ("q5_k", "q4_0"), ("q5_1", "q4_1"), ("f16", "bf16")],
                         ids=str)
def test_fused_layer_mixed_formats(backend, fmt, down, m, shape, monkeypatch):
    """A decoder layer whose GEMVs fuse (rms_norm prologue, gate/up + silu * mul, residual
    adds; quant/qgemv_fused.wgsl, prefills quant/qmatmul_fused.wgsl) with the projections in
    one format and the down projection in another, as Q4_K_M files mix Q4_K and Q6_K."""
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    if shape is not None:
        monkeypatch.setattr(autotune, "PREFER", f"*_{shape}")
    k, ffn = 256, 512
    wq, wqf = qweight(fmt, k, k, seed=2)
    wg, wgf = qweight(fmt, ffn, k, seed=4)
    wu, wuf = qweight(fmt, ffn, k, seed=5)
    wd, wdf = qweight(down, k, ffn, seed=6)
    g1, g2 = rand(k, seed=7) + 1.5, rand(k, seed=8) + 1.5
    x = rand(m, k, seed=9)

    def layer(x, **p):
        x = x + nn.qlinear(nn.rms_norm(x, p["g1"], 1e-5), p["wq"], fmt, k, k)
        h = nn.rms_norm(x, p["g2"], 1e-5)
        gate, up = nn.qlinear(h, p["wg"], fmt, ffn, k), nn.qlinear(h, p["wu"], fmt, ffn, k)
        return x + nn.qlinear(gate.silu() * up, p["wd"], down, k, ffn)

    arrays = {"wq": wq, "wg": wg, "wu": wu, "wd": wd, "g1": g1, "g2": g2}
    (got,), ran = run_with_names(backend, layer, x, arrays)
    fused = [r for r in ran if r.startswith("qgemv[")]       # (and a copy of the input)
    assert backend.name == "reference" or (
        len(fused) == 3 and not any(r.startswith(("qgemv_", "qmatmul")) for r in ran) and
        all(shape is None or r.endswith(f"_{shape}") for r in fused)), ran
    x1 = x + _rms(x, g1) @ wqf.T
    h2 = _rms(x1, g2)
    a, b = h2 @ wgf.T, h2 @ wuf.T
    want = x1 + (a / (1 + np.exp(-a)) * b) @ wdf.T
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


def test_k_quant_rows_must_be_whole_blocks():
    import webrlx as wr
    g = wr.Graph()
    x, w = g.input("x", (1, 288)), g.param("w", (quant.nwords("q4_0", 4, 288),), "uint32")
    nn.qlinear(x, w, "q4_0", 4, 288)                      # 9 legacy blocks a row: fine
    with pytest.raises(wr.ShapeError, match="multiple of 256"):
        nn.qlinear(x, g.param("w2", (10,), "uint32"), "q4_k", 4, 288)
