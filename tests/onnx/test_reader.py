"""webrlx.onnx's own protobuf reader against the `onnx` package, on every node-test model of
onnx 1.22 (graph, attributes, initializers, inputs/outputs, the test data tensors), plus the
bad-input cases: truncated files, missing external data, unsupported dtypes."""
from __future__ import annotations

import glob
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

from webrlx.onnx import reader  # noqa: E402
from webrlx.onnx.tensors import OnnxDtypeError, TensorData  # noqa: E402
from webrlx.onnx.wire import OnnxFormatError  # noqa: E402

NODE_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
CASES = sorted(glob.glob(os.path.join(NODE_DIR, "*", "model.onnx")))


def _same_array(ours: TensorData, ref_proto: object, where: str) -> None:
    try:
        ref = numpy_helper.to_array(ref_proto)
    except Exception:            # onnx itself cannot decode it: nothing to compare
        return
    try:
        got = ours.numpy()
    except OnnxDtypeError as e:
        assert ours.name in str(e) or "<unnamed>" in str(e)
        assert ref.dtype.kind in "OUSc" or ref.dtype.itemsize == 1 or "float8" in str(ref.dtype) \
            or "float4" in str(ref.dtype) or "int2" in str(ref.dtype) or "e8m0" in str(ref.dtype)
        return
    assert got.shape == ref.shape, where
    if ref.dtype.type.__module__.startswith("ml_dtypes"):   # bfloat16, float8, int4, ...:
        ref = ref.astype(got.dtype)                          # read as arrays of their values
    else:
        assert got.dtype == ref.dtype, where
    np.testing.assert_array_equal(got, ref, err_msg=where)


def _same_type(ours: reader.TypeInfo, ref: object, where: str) -> None:
    kind = ref.WhichOneof("value")
    if kind == "tensor_type":
        assert ours.kind == "tensor" and ours.elem_type == ref.tensor_type.elem_type, where
        if ref.tensor_type.HasField("shape"):
            dims = tuple(d.dim_value if d.HasField("dim_value") else
                         d.dim_param if d.HasField("dim_param") else None
                         for d in ref.tensor_type.shape.dim)
            assert ours.shape == dims, where
        else:
            assert ours.shape is None, where
    elif kind in ("sequence_type", "optional_type"):
        assert ours.kind == kind.split("_")[0], where
        _same_type(ours.elem, getattr(ref, kind).elem_type, where)


def _same_graph(ours: reader.GraphDef, ref: object, where: str) -> None:
    assert ours.name == ref.name
    assert [v.name for v in ours.inputs] == [v.name for v in ref.input], where
    assert [v.name for v in ours.outputs] == [v.name for v in ref.output], where
    for a, b in zip(ours.inputs + ours.outputs, list(ref.input) + list(ref.output)):
        _same_type(a.type, b.type, f"{where}: {b.name}")
    assert sorted(ours.initializers) == sorted(t.name for t in ref.initializer), where
    for t in ref.initializer:
        _same_array(ours.initializers[t.name], t, f"{where}: initializer {t.name}")
    assert len(ours.nodes) == len(ref.node), where
    for n, r in zip(ours.nodes, ref.node):
        w = f"{where}: node {r.name or r.op_type}"
        assert (n.op_type, n.domain, n.name) == (r.op_type, r.domain.replace("ai.onnx", "")
                                                 if r.domain == "ai.onnx" else r.domain,
                                                 r.name), w
        assert (n.inputs, n.outputs) == (list(r.input), list(r.output)), w
        assert set(n.attrs) | set(n.attr_refs) == {a.name for a in r.attribute}, w
        for a in r.attribute:
            if a.ref_attr_name:
                assert n.attr_refs[a.name] == a.ref_attr_name, w
                continue
            _same_attr(n.attrs[a.name], a, f"{w} attr {a.name}")


def _same_attr(got: object, a: object, where: str) -> None:
    ref = helper.get_attribute_value(a)
    if a.type == onnx.AttributeProto.TENSOR:
        _same_array(got, ref, where)
    elif a.type == onnx.AttributeProto.GRAPH:
        _same_graph(got, ref, where)
    elif a.type == onnx.AttributeProto.GRAPHS:
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            _same_graph(g, r, where)
    elif a.type == onnx.AttributeProto.TENSORS:
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            _same_array(g, r, where)
    elif a.type == onnx.AttributeProto.TYPE_PROTO:
        _same_type(got, ref, where)
    elif a.type in (onnx.AttributeProto.FLOAT, onnx.AttributeProto.FLOATS):
        np.testing.assert_array_equal(np.float32(got), np.float32(ref), err_msg=where)
    else:
        assert got == ref, where


def test_every_node_test_model_reads_like_onnx() -> None:
    assert len(CASES) == 1765
    for path in CASES:
        ref = onnx.load(path)
        ours = reader.load(path)
        where = os.path.basename(os.path.dirname(path))
        assert ours.ir_version == ref.ir_version
        assert ours.opsets == {("" if o.domain == "ai.onnx" else o.domain): o.version
                               for o in ref.opset_import}, where
        _same_graph(ours.graph, ref.graph, where)
        for pb in sorted(glob.glob(os.path.join(os.path.dirname(path), "test_data_set_0",
                                                "*.pb"))):
            kind = os.path.basename(pb).split("_")[0]
            vis = ref.graph.input if kind == "input" else ref.graph.output
            i = int(os.path.basename(pb).split("_")[1].split(".")[0])
            if i >= len(vis) or vis[i].type.WhichOneof("value") != "tensor_type":
                continue
            t = onnx.TensorProto()
            with open(pb, "rb") as f:
                t.ParseFromString(f.read())
            _same_array(reader.load_tensor(pb), t, f"{where}: {os.path.basename(pb)}")


def test_typed_fields_and_packing() -> None:
    cases = {
        "f": helper.make_tensor("f", onnx.TensorProto.FLOAT, [2], [1.5, -2.0]),
        "h": helper.make_tensor("h", onnx.TensorProto.FLOAT16, [2],
                                np.array([1.5, -2.0], np.float16)),
        "i8": helper.make_tensor("i8", onnx.TensorProto.INT8, [3], [-128, 0, 127]),
        "u8": helper.make_tensor("u8", onnx.TensorProto.UINT8, [2], [0, 255]),
        "i64": helper.make_tensor("i64", onnx.TensorProto.INT64, [2], [-(2 ** 40), 7]),
        "d": helper.make_tensor("d", onnx.TensorProto.DOUBLE, [2], [0.1, -1e300]),
        "u64": helper.make_tensor("u64", onnx.TensorProto.UINT64, [1], [2 ** 63 + 1]),
        "u32": helper.make_tensor("u32", onnx.TensorProto.UINT32, [1], [2 ** 32 - 1]),
        "b": helper.make_tensor("b", onnx.TensorProto.BOOL, [2], [True, False]),
        "bf": helper.make_tensor("bf", onnx.TensorProto.BFLOAT16, [2], [1.0, -3.0]),
        "raw": numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3), "raw"),
    }
    for name, proto in cases.items():
        _same_array(reader.load_tensor(proto.SerializeToString()), proto, name)


def test_raw_data_is_a_view_when_aligned() -> None:
    proto = numpy_helper.from_array(np.arange(1000, dtype=np.float32), "w")
    data = proto.SerializeToString()
    t = reader.load_tensor(data)
    arr = t.numpy()
    np.testing.assert_array_equal(arr, np.arange(1000, dtype=np.float32))
    if arr.ctypes.data % 4 == 0 and t.raw is not None:
        assert not arr.flags.owndata


def _model_bytes() -> bytes:
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])],
                          [w])
    return helper.make_model(g).SerializeToString()


def test_truncated_file_names_file_and_offset(tmp_path) -> None:
    data = _model_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) - 7])
    with pytest.raises(OnnxFormatError, match=r"cut\.onnx: byte \d+"):
        reader.load(path)
    with pytest.raises(OnnxFormatError, match="byte 0"):
        reader.load(b"\xff\xff")


def test_external_data_directory_and_dict(tmp_path) -> None:
    from onnx.external_data_helper import convert_model_to_external_data
    model = onnx.load_from_string(_model_bytes())
    convert_model_to_external_data(model, location="w.bin", size_threshold=0)
    onnx.save(model, tmp_path / "m.onnx")
    want = np.ones((4, 4), np.float32)
    m = reader.load(tmp_path / "m.onnx")
    np.testing.assert_array_equal(m.graph.initializers["w"].numpy(), want)
    blob = (tmp_path / "w.bin").read_bytes()
    m2 = reader.load((tmp_path / "m.onnx").read_bytes(), external_data={"w.bin": blob})
    np.testing.assert_array_equal(m2.graph.initializers["w"].numpy(), want)
    (tmp_path / "w.bin").unlink()
    with pytest.raises(FileNotFoundError, match="w.bin"):
        reader.load(tmp_path / "m.onnx").graph.initializers["w"].numpy()


def test_unsupported_dtype_names_the_tensor() -> None:
    proto = helper.make_tensor("names", onnx.TensorProto.STRING, [1], [b"a"])
    with pytest.raises(OnnxDtypeError, match="'names'.*string"):
        reader.load_tensor(proto.SerializeToString()).numpy()
