"""webrlx.onnx.patterns: softmax(q k^T * scale + padding mask) @ v, as exports spell it, becomes
the attention op (counted in the imported graph) and agrees with onnxruntime; look-alikes that
are not key-padding attention (a causal float mask, a 2-D (q, k) mask) stay unfused and agree."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from webrlx.onnx import InferenceSession, import_model  # noqa: E402

B, H, L, D = 2, 3, 5, 4
F = TensorProto.FLOAT


def _c(name: str, value) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
        np.asarray(value), name + "_v"))


def _model(mask_kind: str, scale_kind: str) -> tuple[bytes, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2])]
    if scale_kind == "div":
        nodes += [helper.make_node("MatMul", ["q", "kt"], ["qk"]), _c("s", np.float32(2.0)),
                  helper.make_node("Div", ["qk", "s"], ["scores"])]
    elif scale_kind == "mul_both":        # opset 23 Attention's expansion: sqrt(scale) on each
        nodes += [_c("s", np.float32(0.5 ** 0.5)), helper.make_node("Mul", ["q", "s"], ["qs"]),
                  helper.make_node("Mul", ["kt", "s"], ["kts"]),
                  helper.make_node("MatMul", ["qs", "kts"], ["scores"])]
    else:
        nodes += [helper.make_node("MatMul", ["q", "kt"], ["qk"]), _c("s", np.float32(0.5)),
                  helper.make_node("Mul", ["s", "qk"], ["scores"])]
    inputs = [helper.make_tensor_value_info(n, F, [B, H, L, D]) for n in "qkv"]
    feeds = {n: rng.standard_normal((B, H, L, D)).astype(np.float32) for n in "qkv"}
    pad = np.ones((B, L), np.int64)
    pad[1, 3:] = 0
    logits = "scores"
    if mask_kind == "one_minus":         # BERT: (1 - m[:, None, None, :]) * -10000
        nodes += [_c("axes", np.array([1, 2], np.int64)),
                  helper.make_node("Unsqueeze", ["m", "axes"], ["m4"]),
                  helper.make_node("Cast", ["m4"], ["mf"], to=F), _c("one", np.float32(1)),
                  helper.make_node("Sub", ["one", "mf"], ["inv"]),
                  _c("big", np.float32(-10000.0)), helper.make_node("Mul", ["inv", "big"],
                                                                    ["add_mask"])]
    elif mask_kind in ("where", "sdpa"):  # torch's sdpa mask: where(ones(q) & m != 0, 0, min)
        nodes += [_c("axes", np.array([1, 2], np.int64)),
                  helper.make_node("Unsqueeze", ["m", "axes"], ["m4"]), _c("zero_i", np.int64(0)),
                  helper.make_node("Equal", ["m4", "zero_i"], ["is0"]),
                  helper.make_node("Not", ["is0"], ["keep"]),
                  _c("rows", np.ones((1, 1, L, 1), bool)),
                  helper.make_node("And", ["rows", "keep"], ["keep_all"]),
                  _c("zero", np.float32(0)),
                  _c("fmin", np.float32(np.finfo(np.float32).min if mask_kind == "where"
                                        else -np.inf)),
                  helper.make_node("Where", ["keep_all", "zero", "fmin"], ["add_mask"])]
        if mask_kind == "sdpa":          # -inf: a batch row with every key masked
            pad[0] = 0
    elif mask_kind == "causal_float":    # a float (q, k) mask input: not a padding mask
        inputs.append(helper.make_tensor_value_info("add_mask", F, [L, L]))
        feeds["add_mask"] = np.triu(np.full((L, L), -1e9, np.float32), 1)
    elif mask_kind == "bool_2d":         # where(mask(q, k), 0, -inf): rank 2 is (q, k)
        inputs.append(helper.make_tensor_value_info("b", TensorProto.BOOL, [L, L]))
        feeds["b"] = np.tril(np.ones((L, L), bool))
        nodes += [_c("zero", np.float32(0)), _c("ninf", np.float32(-np.inf)),
                  helper.make_node("Where", ["b", "zero", "ninf"], ["add_mask"])]
    elif mask_kind == "from_shapes":     # transformers 5's ViT: an all-keep mask made of shapes
        nodes += [helper.make_node("Shape", ["q"], ["qshape"]), _c("i2", np.array([2], np.int64)),
                  helper.make_node("Gather", ["qshape", "i2"], ["len"], axis=0),
                  _c("z", np.array([0], np.int64)), _c("one1", np.array([1], np.int64)),
                  helper.make_node("Concat", ["one1", "one1", "one1", "len"], ["mshape"], axis=0),
                  helper.make_node("ConstantOfShape", ["mshape"], ["ones_i"],
                                   value=numpy_helper.from_array(np.array([1], np.int64))),
                  helper.make_node("GreaterOrEqual", ["ones_i", "z"], ["keep_all"]),
                  _c("zero", np.float32(0)), _c("fmin", np.float32(np.finfo(np.float32).min)),
                  helper.make_node("Where", ["keep_all", "zero", "fmin"], ["add_mask"])]
    elif mask_kind == "const_pad":       # a key-padding mask as an initializer-like constant
        m = np.zeros((1, 1, 1, L), np.float32)
        m[..., 5:] = np.finfo(np.float32).min
        nodes += [_c("add_mask", m)]
    if mask_kind in ("one_minus", "where", "sdpa"):
        inputs.append(helper.make_tensor_value_info("m", TensorProto.INT64, [B, L]))
        feeds["m"] = pad
    if mask_kind != "none":
        nodes.append(helper.make_node("Add", ["scores", "add_mask"], ["masked"]))
        logits = "masked"
    nodes.append(helper.make_node("Softmax", [logits], ["sm" if mask_kind == "sdpa" else "p0"],
                                  axis=-1))
    if mask_kind == "sdpa":              # torch's sdpa export: where(isnan(p), 0, p)
        nodes += [helper.make_node("IsNaN", ["sm"], ["nan"]), _c("zero_p", np.float32(0)),
                  helper.make_node("Where", ["nan", "zero_p", "sm"], ["p0"])]
    # as transformers 5 exports: casts to the same type between softmax and @ v
    nodes += [helper.make_node("Cast", ["p0"], ["p1"], to=F),
              helper.make_node("Cast", ["p1"], ["p"], to=F),
              helper.make_node("MatMul", ["p", "v"], ["y"])]
    g = helper.make_graph(nodes, "attn", inputs,
                          [helper.make_tensor_value_info("y", F, [B, H, L, D])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]
                             ).SerializeToString(), feeds


@pytest.mark.parametrize("mask_kind, scale_kind, fused", [
    ("none", "div", True), ("one_minus", "div", True), ("where", "mul", True),
    ("one_minus", "mul_both", True), ("causal_float", "div", False), ("bool_2d", "mul", False),
    ("from_shapes", "mul", True), ("const_pad", "div", True), ("sdpa", "mul_both", True),
])
def test_attention_pattern(mask_kind: str, scale_kind: str, fused: bool) -> None:
    data, feeds = _model(mask_kind, scale_kind)
    shapes = {n: a.shape for n, a in feeds.items()}
    graph, _, _ = import_model(data, shapes)
    assert sum(n.op == "attention" for n in graph.nodes) == int(fused)
    (ref,) = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    for device in (None, "reference"):
        (got,) = InferenceSession(data, device=device).run(None, feeds)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))


def _gelu_model(form: str) -> bytes:
    nodes = [_c("r2", np.float32(2 ** 0.5)), _c("ir2", np.float32(2 ** -0.5)),
             _c("one", np.float32(1.0)), _c("half", np.float32(0.5 if form != "not" else 0.4))]
    if form == "torch":                   # torch.onnx: x * 0.5 * (1 + erf(x / sqrt 2)) ...
        nodes += [helper.make_node("Div", ["x", "r2"], ["s"]),
                  helper.make_node("Erf", ["s"], ["e"]), helper.make_node("Add", ["e", "one"],
                                                                         ["p"]),
                  helper.make_node("Mul", ["x", "p"], ["xp"]),
                  helper.make_node("Mul", ["xp", "half"], ["y"])]
    else:                                 # ... or (0.5 * x) * (erf(x * (1 / sqrt 2)) + 1)
        nodes += [helper.make_node("Mul", ["x", "ir2"], ["s"]),
                  helper.make_node("Erf", ["s"], ["e"]), helper.make_node("Add", ["one", "e"],
                                                                         ["p"]),
                  helper.make_node("Mul", ["half", "x"], ["hx"]),
                  helper.make_node("Mul", ["hx", "p"], ["y"])]
    g = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", F, [4, 16])],
                          [helper.make_tensor_value_info("y", F, [4, 16])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("form, fused", [("torch", True), ("grouped", True), ("not", False)])
def test_erf_gelu_pattern(form: str, fused: bool) -> None:
    data = _gelu_model(form)
    graph, outs, _ = import_model(data)
    assert (graph.nodes[outs[0].id].op == "gelu") == fused
    x = np.random.default_rng(5).standard_normal((4, 16)).astype(np.float32) * 3
    (ref,) = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    (got,) = InferenceSession(data).run(None, {"x": x})
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("biases, weights", [("all", "initializers"), ("none", "initializers"),
                                             ("two", "initializers"), ("all", "constants")])
def test_sibling_matmuls_merge(biases: str, weights: str) -> None:
    """q, k, v projections of one input become one MatMul (+ bias) and Slices; also where the
    weights and biases are Constant nodes (torch.onnx on a module called from a closure)."""
    rng = np.random.default_rng(6)
    nodes, inits, outs = [helper.make_node("Relu", ["x"], ["h"])], [], []

    def tensor(a: np.ndarray, name: str) -> None:
        if weights == "constants":
            nodes.append(_c(name, a))
        else:
            inits.append(numpy_helper.from_array(a, name))
    for j, n in enumerate((8, 8, 5)):
        tensor(rng.standard_normal((6, n)).astype(np.float32), f"w{j}")
        has_bias = biases == "all" or (biases == "two" and j < 2)
        nodes.append(helper.make_node("MatMul", ["h", f"w{j}"], [f"m{j}" if has_bias
                                                                  else f"y{j}"]))
        if has_bias:
            tensor(rng.standard_normal(n).astype(np.float32), f"b{j}")
            nodes.append(helper.make_node("Add", [f"m{j}", f"b{j}"], [f"y{j}"]))
        outs.append(helper.make_tensor_value_info(f"y{j}", F, [3, 4, n]))
    g = helper.make_graph(nodes, "qkv", [helper.make_tensor_value_info("x", F, [3, 4, 6])],
                          outs, inits)
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    graph, outputs, params = import_model(data)
    live = {o.id for o in outputs}
    for n in reversed(graph.nodes):
        if n.id in live:
            live |= set(n.inputs)
    matmuls = [n for n in graph.nodes if n.op == "matmul" and n.id in live]
    assert len(matmuls) == {"all": 1, "none": 1, "two": 2}[biases]
    x = rng.standard_normal((3, 4, 6)).astype(np.float32)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = InferenceSession(data).run(None, {"x": x})
    for g_, r in zip(got, ref):
        np.testing.assert_allclose(g_, r, rtol=1e-5, atol=1e-5)


def test_constant_node_weights_become_params() -> None:
    """A Constant node as big as a weight becomes a param (one device copy for a session's
    plans), as an initializer does; a small one stays a graph constant (patterns read it)."""
    from webrlx.onnx.importer import WEIGHT_SIZE
    rng = np.random.default_rng(7)
    n = int(np.ceil(WEIGHT_SIZE / 32))
    big = rng.standard_normal((32, n)).astype(np.float32)
    small = rng.standard_normal((n, 4)).astype(np.float32)
    g = helper.make_graph([_c("wbig", big), _c("wsmall", small),
                           helper.make_node("MatMul", ["x", "wbig"], ["h"]),
                           helper.make_node("MatMul", ["h", "wsmall"], ["y"])], "w",
                          [helper.make_tensor_value_info("x", F, [2, 32])],
                          [helper.make_tensor_value_info("y", F, [2, 4])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    _, _, params = import_model(data)
    assert "wbig" in params and "wsmall" not in params
    x = rng.standard_normal((2, 32)).astype(np.float32)
    (ref,) = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    (got,) = InferenceSession(data).run(None, {"x": x})
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))


def test_layers_share_one_keep_mask() -> None:
    """Two attention blocks on one BERT-style mask build the keep-mask once (a copy per layer
    was a small dispatch each)."""
    data, feeds = _model("one_minus", "div")
    model = onnx.load_from_string(data)
    g = model.graph
    # a second attention on the first one's output, with the same additive mask
    g.node.extend([helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 1, 3, 2]),
                   helper.make_node("MatMul", ["y", "yt"], ["qk2"]),
                   helper.make_node("Div", ["qk2", "s"], ["scores2"]),
                   helper.make_node("Add", ["scores2", "add_mask"], ["masked2"]),
                   helper.make_node("Softmax", ["masked2"], ["p2"], axis=-1),
                   helper.make_node("MatMul", ["p2", "v"], ["y2"])])
    del g.output[:]
    g.output.extend([helper.make_tensor_value_info("y2", F, [B, H, L, D])])
    data = model.SerializeToString()
    graph, _, _ = import_model(data, {n: a.shape for n, a in feeds.items()})
    attn = [n for n in graph.nodes if n.op == "attention"]
    assert len(attn) == 2 and len(attn[0].inputs) == 4 and attn[0].inputs[3] == attn[1].inputs[3]
    (ref,) = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    (got,) = InferenceSession(data).run(None, feeds)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))
