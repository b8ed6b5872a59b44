"""A tiny Llama decoder laid out as onnxruntime-genai's model builder lays out its int4
CPU/WebGPU models, written with onnx.helper from a config with random weights: Gather
embeddings, SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization, MatMulNBits
projections (4-bit, block 32, zero points; accuracy_level 0, so onnxruntime multiplies in
float32 as webrlx does, where genai's CPU builds take 4: int8 activations), com.microsoft
GroupQueryAttention with rotary (cos/sin caches), past_key_values.N.key/value inputs and
present.N.key/value outputs, seqlens_k and total_sequence_length computed from attention_mask,
SiLU-gated MLP, lm_head.
Run: `python -m tests.onnx.models.llama_genai` -> build/onnx/llama_genai.onnx."""
from __future__ import annotations

from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[3] / "build" / "onnx" / "llama_genai.onnx"
CONFIG = dict(vocab=256, hidden=64, layers=2, heads=4, kv_heads=2, inter=128, max_pos=128,
              block=32, theta=10000.0, eps=1e-5)


def quantize4(w: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(k, n) float weight -> MatMulNBits' B (n, blocks, block / 2) uint8, scales (n * blocks),
    zero points (n, ceil(blocks / 2)) uint8: asymmetric 4-bit per block of k."""
    k, n = w.shape
    blocks = k // block
    wb = w.T.reshape(n, blocks, block)
    lo, hi = wb.min(-1), wb.max(-1)
    scale = np.maximum(hi - lo, 1e-8) / 15.0
    zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
    q = np.clip(np.round(wb / scale[..., None]) + zp[..., None], 0, 15).astype(np.uint8)
    packed = q[..., 0::2] | (q[..., 1::2] << 4)
    zpad = np.concatenate([zp, np.zeros((n, blocks % 2), np.uint8)], 1)
    return packed, scale.astype(np.float32).ravel(), zpad[:, 0::2] | (zpad[:, 1::2] << 4)


def build(out: Path = OUT, seed: int = 0) -> Path:
    """Write the model and return its path."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    c = CONFIG
    rng = np.random.default_rng(seed)
    h, d = c["hidden"], c["hidden"] // c["heads"]
    kvh = c["kv_heads"] * d
    nodes, inits = [], []

    def init(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(op: str, ins: list[str], outs: list[str], domain: str = "", **attrs) -> None:
        nodes.append(helper.make_node(op, ins, outs, name=f"{op}_{len(nodes)}", domain=domain,
                                      **attrs))

    def linear(x: str, k: int, n: int, name: str) -> str:
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        b, s, z = quantize4(w, c["block"])
        node("MatMulNBits", [x, init(name + ".qweight", b), init(name + ".scales", s),
                             init(name + ".qzeros", z)], [name + ".out"], "com.microsoft",
             K=k, N=n, bits=4, block_size=c["block"], accuracy_level=0)
        return name + ".out"

    def norm_w(name: str) -> str:
        return init(name, (1 + 0.1 * rng.standard_normal(h)).astype(np.float32))

    inv = 1.0 / c["theta"] ** (np.arange(0, d, 2) / d)
    ang = np.arange(c["max_pos"])[:, None] * inv[None]
    init("cos_cache", np.cos(ang).astype(np.float32))
    init("sin_cache", np.sin(ang).astype(np.float32))
    # seqlens_k = sum(mask) - 1 (int32), total_sequence_length = mask's length (genai's way)
    init("one", np.array(1, np.int64))
    node("ReduceSum", ["attention_mask", init("axes1", np.array([1], np.int64))], ["msum"],
         keepdims=0)
    node("Sub", ["msum", "one"], ["msum1"])
    node("Cast", ["msum1"], ["seqlens_k"], to=TensorProto.INT32)
    node("Shape", ["attention_mask"], ["mshape"])
    node("Gather", ["mshape", "one"], ["total64"], axis=0)
    node("Cast", ["total64"], ["total_seq"], to=TensorProto.INT32)
    emb = init("embed_tokens", (0.5 * rng.standard_normal((c["vocab"], h))).astype(np.float32))
    node("Gather", [emb, "input_ids"], ["x0"])
    node("SimplifiedLayerNormalization", ["x0", norm_w("l0.input_norm")], ["n0"],
         axis=-1, epsilon=c["eps"])
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch", "total"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             ["batch", "seq", c["vocab"]])]
    residual, normed = "x0", "n0"
    for i in range(c["layers"]):
        p = f"l{i}"
        q = linear(normed, h, h, p + ".q_proj")
        k = linear(normed, h, kvh, p + ".k_proj")
        v = linear(normed, h, kvh, p + ".v_proj")
        pk, pv = f"past_key_values.{i}.key", f"past_key_values.{i}.value"
        for name in (pk, pv):
            inputs.append(helper.make_tensor_value_info(
                name, TensorProto.FLOAT, ["batch", c["kv_heads"], "past", d]))
            outputs.append(helper.make_tensor_value_info(
                name.replace("past_key_values", "present"), TensorProto.FLOAT,
                ["batch", c["kv_heads"], "total", d]))
        node("GroupQueryAttention", [q, k, v, pk, pv, "seqlens_k", "total_seq", "cos_cache",
                                     "sin_cache"],
             [p + ".attn", f"present.{i}.key", f"present.{i}.value"], "com.microsoft",
             num_heads=c["heads"], kv_num_heads=c["kv_heads"], do_rotary=1,
             rotary_interleaved=0, scale=float(1 / np.sqrt(d)), local_window_size=-1)
        o = linear(p + ".attn", h, h, p + ".o_proj")
        node("SkipSimplifiedLayerNormalization", [residual, o, norm_w(p + ".post_norm")],
             [p + ".n2", "", "", p + ".r2"], "com.microsoft", epsilon=c["eps"])
        gate = linear(p + ".n2", h, c["inter"], p + ".gate_proj")
        up = linear(p + ".n2", h, c["inter"], p + ".up_proj")
        node("Sigmoid", [gate], [p + ".sig"])
        node("Mul", [gate, p + ".sig"], [p + ".silu"])
        node("Mul", [p + ".silu", up], [p + ".act"])
        down = linear(p + ".act", c["inter"], h, p + ".down_proj")
        nxt = f"l{i + 1}.input_norm" if i + 1 < c["layers"] else "final_norm"
        node("SkipSimplifiedLayerNormalization", [p + ".r2", down, norm_w(nxt)],
             [nxt + ".out", "", "", nxt + ".res"], "com.microsoft", epsilon=c["eps"])
        residual, normed = nxt + ".res", nxt + ".out"
    head = init("lm_head", (rng.standard_normal((h, c["vocab"])) / np.sqrt(h)).astype(
        np.float32))
    node("MatMul", [normed, head], ["logits"])
    graph = helper.make_graph(nodes, "llama_genai", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out))
    return out


def empty_past(batch: int = 1) -> dict[str, np.ndarray]:
    """past_key_values.* of length 0."""
    c = CONFIG
    shape = (batch, c["kv_heads"], 0, c["hidden"] // c["heads"])
    return {f"past_key_values.{i}.{kv}": np.zeros(shape, np.float32)
            for i in range(c["layers"]) for kv in ("key", "value")}


if __name__ == "__main__":
    print(build())
