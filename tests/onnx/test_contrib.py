"""com.microsoft contrib rows (webrlx/onnx/ops/contrib.py) against onnxruntime's CPU EP, each on
a one-node model built with onnx.helper from random inputs; outputs agree to 1e-4 x max|ref|
(1e-3 where 4-bit weights are dequantized: ORT and webrlx sum in different orders)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from webrlx.onnx import InferenceSession  # noqa: E402

MS = "com.microsoft"
RNG = np.random.default_rng(0)
TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32,
         np.dtype(np.int64): TensorProto.INT64, np.dtype(np.uint8): TensorProto.UINT8}


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def check(op_type: str, inputs: list, n_out: int | list, attrs: dict | None = None,
          domain: str = MS, inits: tuple = (), rtol: float = 1e-4, out_types: dict | None = None,
          expected: list | None = None) -> list[np.ndarray]:
    """Run one node on onnxruntime (or compare with `expected` where ORT's CPU EP lacks the op)
    and webrlx; inputs: (name, array) or None (omitted); names in inits become
    initializers. Returns webrlx's outputs."""
    names = [i[0] if i is not None else "" for i in inputs]
    outs = [f"out{i}" for i in range(n_out)] if isinstance(n_out, int) else n_out
    node = helper.make_node(op_type, names, outs, domain=domain, **(attrs or {}))
    graph_in, init, feeds = [], [], {}
    for item in inputs:
        if item is None:
            continue
        name, arr = item
        if name in inits:
            init.append(numpy_helper.from_array(arr, name))
        else:
            graph_in.append(helper.make_tensor_value_info(name, TYPES[arr.dtype], arr.shape))
            feeds[name] = arr
    out_types = out_types or {}
    graph_out = [helper.make_tensor_value_info(o, out_types.get(o, TensorProto.FLOAT), None)
                 for o in outs if o]
    model = helper.make_model(helper.make_graph([node], "g", graph_in, graph_out, init),
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid(MS, 1)])
    data = model.SerializeToString()
    ref = expected or ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
        None, feeds)
    got = InferenceSession(data).run(None, feeds)
    for o, r, g in zip([o for o in outs if o], ref, got):
        assert g.shape == r.shape, f"{o}: shape {g.shape} != {r.shape}"
        if r.dtype.kind == "f":
            scale = max(float(np.abs(r).max()), 1e-6)
            err = float(np.abs(g.astype(np.float64) - r).max())
            assert err <= rtol * scale, f"{o}: max error {err} vs max|ref| {scale}"
        else:
            np.testing.assert_array_equal(g, r, err_msg=o)
    return got


@pytest.mark.parametrize("bias", [False, True])
def test_skip_layer_norm(bias: bool) -> None:
    ins = [("x", f32(2, 5, 16)), ("skip", f32(2, 5, 16)), ("gamma", f32(16)), ("beta", f32(16))]
    if bias:
        ins.append(("bias", f32(16)))
    check("SkipLayerNormalization", ins, ["y", "", "", "sum"] if bias else 1,
          {"epsilon": 1e-5}, inits=("gamma", "beta", "bias"))


def test_skip_simplified_layer_norm() -> None:
    check("SkipSimplifiedLayerNormalization",
          [("x", f32(2, 5, 16)), ("skip", f32(2, 5, 16)), ("gamma", f32(16)), ("bias", f32(16))],
          ["y", "", "", "sum"], {"epsilon": 1e-6}, inits=("gamma",))


def test_simplified_layer_norm() -> None:
    check("SimplifiedLayerNormalization", [("x", f32(3, 7, 12)), ("scale", f32(12))], 1,
          {"epsilon": 1e-5, "axis": -1}, domain="", inits=("scale",))


@pytest.mark.parametrize("op_type, with_bias, attrs", [
    ("FastGelu", True, {}), ("FastGelu", False, {}), ("BiasGelu", True, {}),
    ("Gelu", False, {}), ("QuickGelu", False, {"alpha": 1.5}),
])
def test_activations(op_type: str, with_bias: bool, attrs: dict) -> None:
    ins = [("x", f32(2, 3, 8) * 3)] + ([("b", f32(8))] if with_bias else [])
    check(op_type, ins, 1, attrs, inits=("b",))


def test_bias_add() -> None:
    """onnxruntime has BiasAdd on CUDA only: numpy is the reference."""
    x, b, skip = f32(2, 4, 8), f32(8), f32(2, 4, 8)
    check("BiasAdd", [("x", x), ("b", b), ("skip", skip)], 1, expected=[x + b + skip])


def _pad_mask(b: int, t: int, dtype=np.int32) -> np.ndarray:
    m = np.ones((b, t), dtype)
    m[-1, t - 2:] = 0
    return m


@pytest.mark.parametrize("mask, unidirectional", [
    ("none", 0), ("raw", 0), ("end", 0), ("none", 1), ("raw3d", 0)])
def test_attention(mask: str, unidirectional: int) -> None:
    b, s, hidden, heads = 2, 5, 16, 2
    ins = [("x", f32(b, s, hidden)), ("w", f32(hidden, 3 * hidden) * 0.3),
           ("bias", f32(3 * hidden))]
    if mask == "raw":
        ins.append(("mask", _pad_mask(b, s)))
    elif mask == "end":
        ins.append(("mask", np.array([s, s - 2], np.int32)))
    elif mask == "raw3d":
        ins.append(("mask", np.tril(np.ones((s, s), np.int32))[None].repeat(b, 0)))
    check("Attention", ins, 1, {"num_heads": heads, "unidirectional": unidirectional},
          inits=("w", "bias"))


def test_attention_with_past() -> None:
    b, s, p, hidden, heads = 2, 1, 4, 16, 2
    past = f32(2, b, heads, p, hidden // heads)
    check("Attention", [("x", f32(b, s, hidden)), ("w", f32(hidden, 3 * hidden) * 0.3),
                        ("bias", f32(3 * hidden)), ("mask", np.ones((b, p + s), np.int32)),
                        ("past", past)], 2, {"num_heads": heads, "unidirectional": 1},
          inits=("w", "bias"))


@pytest.mark.parametrize("kind", ["plain", "bias_mask", "attn_bias", "past"])
def test_multi_head_attention(kind: str) -> None:
    b, s, l_, hidden, heads = 2, 4, 6, 16, 4
    ins = [("q", f32(b, s, hidden)), ("k", f32(b, l_, hidden)), ("v", f32(b, l_, hidden))]
    outs: int | list = 1
    if kind == "bias_mask":
        ins += [("bias", f32(3 * hidden)), ("kpm", _pad_mask(b, l_))]
    elif kind == "attn_bias":
        ins += [None, None, ("ab", f32(1, heads, s, l_))]
    elif kind == "past":
        ins += [None, None, None, ("pk", f32(b, heads, 3, hidden // heads)),
                ("pv", f32(b, heads, 3, hidden // heads))]
        outs = 3
    check("MultiHeadAttention", ins, outs, {"num_heads": heads})


def _rope_caches(max_pos: int, half: int) -> tuple[np.ndarray, np.ndarray]:
    inv = 1.0 / (10000 ** (np.arange(half) / half))
    ang = np.arange(max_pos)[:, None] * inv[None]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


@pytest.mark.parametrize("past, s, rotary, interleaved, padded", [
    (0, 5, 0, 0, False), (0, 5, 1, 0, False), (0, 5, 1, 0, True), (5, 1, 1, 0, False),
    (5, 1, 1, 1, False), (4, 3, 1, 0, False)])
def test_group_query_attention(past: int, s: int, rotary: int, interleaved: int,
                               padded: bool) -> None:
    # onnxruntime: rotary head_size a multiple of 16; batch 1 when a past meets s > 1
    b, n, kvn, d = 1 if past and s > 1 else 2, 4, 2, 16
    total = past + s
    lens = np.full((b,), total - 1, np.int32)
    if padded:                        # a right-padded prompt row
        lens[-1] = total - 3
    cos, sin = _rope_caches(16, d // 2)
    ins = [("q", f32(b, s, n * d)), ("k", f32(b, s, kvn * d)), ("v", f32(b, s, kvn * d)),
           ("pk", f32(b, kvn, past, d)), ("pv", f32(b, kvn, past, d)),
           ("seqlens", lens),
           ("total", np.array(total, np.int32))]
    if rotary:
        ins += [("cos", cos), ("sin", sin)]
    check("GroupQueryAttention", ins, 3,
          {"num_heads": n, "kv_num_heads": kvn, "do_rotary": rotary,
           "rotary_interleaved": interleaved}, inits=("cos", "sin"))


@pytest.mark.parametrize("interleaved, positions", [(0, "full"), (1, "full"), (0, "offset")])
def test_rotary_embedding(interleaved: int, positions: str) -> None:
    b, s, heads, d = 2, 5, 3, 8
    cos, sin = _rope_caches(16, d // 2)
    pos = (np.arange(s)[None] + np.array([[0], [3]])).astype(np.int64) if positions == "full" \
        else np.array([2], np.int64)
    check("RotaryEmbedding", [("x", f32(b, s, heads * d)), ("pos", pos), ("cos", cos),
                              ("sin", sin)], 1, {"interleaved": interleaved,
                                                 "num_heads": heads}, inits=("cos", "sin"))


def test_embed_layer_norm() -> None:
    b, s, h, vocab = 2, 6, 16, 50
    ids = RNG.integers(0, vocab, (b, s)).astype(np.int32)
    seg = RNG.integers(0, 2, (b, s)).astype(np.int32)
    check("EmbedLayerNormalization",
          [("ids", ids), ("seg", seg), ("we", f32(vocab, h)), ("pe", f32(32, h)),
           ("se", f32(2, h)), ("gamma", f32(h)), ("beta", f32(h)), ("mask", _pad_mask(b, s))],
          ["y", "mask_index"], {"epsilon": 1e-12}, inits=("we", "pe", "se", "gamma", "beta"),
          out_types={"mask_index": TensorProto.INT32})


@pytest.mark.parametrize("bits, block, zero_points, k", [
    (4, 16, False, 64), (4, 32, True, 64), (4, 16, True, 40), (8, 16, True, 32)])
def test_matmul_nbits(bits: int, block: int, zero_points: bool, k: int) -> None:
    n = 24
    blocks = -(-k // block)
    blob = block * bits // 8
    packed = RNG.integers(0, 256, (n, blocks, blob)).astype(np.uint8)
    scales = (RNG.random((n * blocks,)) * 0.1 + 0.01).astype(np.float32)
    ins = [("a", f32(2, 3, k)), ("b", packed), ("scales", scales)]
    if zero_points:
        per = 8 // bits
        zp = RNG.integers(0, 256, (n, -(-blocks // per))).astype(np.uint8)
        ins.append(("zp", zp))
    check("MatMulNBits", ins, 1, {"K": k, "N": n, "bits": bits, "block_size": block},
          inits=("b", "scales", "zp"), rtol=1e-3)


@pytest.mark.parametrize("zero_points", [False, True])
def test_gather_block_quantized(zero_points: bool) -> None:
    vocab, cols, block = 10, 64, 16
    data = RNG.integers(0, 256, (vocab, cols // 2)).astype(np.uint8)
    scales = (RNG.random((vocab, cols // block)) + 0.1).astype(np.float32)
    idx = np.array([[0, 9, 3], [3, 1, 7]], np.int64)
    ins = [("data", data), ("idx", idx), ("scales", scales)]
    if zero_points:
        ins.append(("zp", RNG.integers(0, 256, (vocab, cols // block // 2)).astype(np.uint8)))
    check("GatherBlockQuantized", ins, 1, {"block_size": block, "bits": 4},
          inits=("data", "scales", "zp"))
