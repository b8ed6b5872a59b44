"""Bad input (issue 30 item 6): each failure is one clear error raised before anything is
compiled, and the same device then still runs a good model. External data loads from a
directory and from a dict of bytes."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import webrlx as wr  # noqa: E402
from webrlx.onnx import InferenceSession, OnnxFormatError, OnnxImportError  # noqa: E402
from webrlx.onnx import session as session_mod  # noqa: E402

W = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)


def _model(nodes=None, inits=(), inputs=None, outputs=None, opsets=(("", 17),)):
    nodes = nodes or [helper.make_node("MatMul", ["x", "w"], ["h"]),
                      helper.make_node("Tanh", ["h"], ["y"])]
    g = helper.make_graph(
        nodes, "g",
        inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        outputs or [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])],
        list(inits) or [numpy_helper.from_array(W, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


@pytest.fixture(scope="module")
def device():
    return wr.device()


def _still_runs(device) -> None:
    """A good model on the same device after a failed load."""
    sess = InferenceSession(_model().SerializeToString(), device=device)
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, np.tanh(x @ W), rtol=1e-4, atol=1e-5)


@pytest.fixture
def no_compile(monkeypatch):
    """Fail the test if the session compiles anything."""
    def refuse(*a, **k):
        raise AssertionError("compiled before the error")
    monkeypatch.setattr(session_mod, "compile_graph", refuse)


def test_unsupported_ops_one_error_before_compiling(device, no_compile) -> None:
    then = helper.make_graph(
        [helper.make_node("Zork", ["x"], ["t"], name="zork_in_branch", domain="com.example")],
        "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["t2"])], "else", [],
                              [helper.make_tensor_value_info("t2", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Frob", ["h"], ["a"], name="frob1", domain="com.example"),
             helper.make_node("Frob", ["a"], ["b"], name="frob2", domain="com.example"),
             helper.make_node("StringNormalizer", ["b"], ["c"], name="norm"),
             helper.make_node("Constant", [], ["cond"], value=numpy_helper.from_array(
                 np.array(True), "cv")),
             helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then,
                              else_branch=other)]
    model = _model(nodes, opsets=(("", 17), ("com.example", 3)))
    with pytest.raises(OnnxImportError) as e:
        InferenceSession(model.SerializeToString(), device=device)
    text = str(e.value)
    assert "3 unsupported op(s); nothing was compiled" in text
    assert "com.example::Frob (opset 3): nodes frob1, frob2" in text
    assert "ai.onnx::StringNormalizer (opset 17): nodes norm" in text
    assert "com.example::Zork (opset 3): nodes zork_in_branch" in text
    assert text.count("Frob") == 1


def test_unsupported_ops_leave_device_usable(device) -> None:
    model = _model([helper.make_node("Frob", ["x"], ["y"], domain="com.example")],
                   opsets=(("", 17), ("com.example", 1)))
    with pytest.raises(OnnxImportError):
        InferenceSession(model.SerializeToString(), device=device)
    _still_runs(device)


@pytest.mark.parametrize("cut", [1, 9, 200, 4000])
def test_truncated_file_names_file_and_offset(tmp_path, device, cut) -> None:
    data = _model().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:len(data) - cut])
    with pytest.raises(OnnxFormatError, match=r"cut\.onnx: byte \d+: .*truncated") as e:
        InferenceSession(str(path), device=device)
    offset = int(str(e.value).split("byte ")[1].split(":")[0])
    assert 0 <= offset < len(data) - cut
    _still_runs(device)


@pytest.mark.parametrize("data, what", [
    (b"\x3a\x05ab", "runs past the end"),            # field 7 claims 5 bytes, has 2
    (b"\x0f\x00", "unknown wire type 7"),
    (b"\x00\x01", "field number 0"),
    (b"\x08" + b"\xff" * 11, "varint"),
    (b"\x08\x01", "no graph"),                         # a valid message, not a model
    (b"not an onnx file at all, just text", "byte"),
])
def test_malformed_bytes_name_offset(device, data, what) -> None:
    with pytest.raises(OnnxFormatError, match=r"<bytes>: byte \d+: .*" + what):
        InferenceSession(data, device=device)
    _still_runs(device)


def test_malformed_inner_message_offset(tmp_path, device) -> None:
    """A corrupt length inside the graph: the offset points into the file, not at 0."""
    data = bytearray(_model().SerializeToString())
    i = data.index(b"Tanh") - 1                      # op_type's length byte
    data[i] = 0x7f
    path = tmp_path / "bad.onnx"
    path.write_bytes(bytes(data))
    with pytest.raises(OnnxFormatError, match=r"bad\.onnx: byte (\d+)") as e:
        InferenceSession(str(path), device=device)
    assert int(str(e.value).split("byte ")[1].split(":")[0]) > 0
    _still_runs(device)


def _external(tmp_path, location="weights.bin"):
    path = tmp_path / "ext.onnx"
    onnx.save(_model(), str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location=location, size_threshold=0)
    return path


def test_external_data_from_directory_and_dict(tmp_path, device) -> None:
    path = _external(tmp_path)
    x = np.random.default_rng(2).standard_normal((2, 64)).astype(np.float32)
    want = np.tanh(x @ W)
    assert len(path.read_bytes()) < W.nbytes            # the weights are outside the model
    (y,) = InferenceSession(str(path), device=device).run(None, {"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (tmp_path / "weights.bin").rename(moved / "weights.bin")
    (y,) = InferenceSession(str(path), device=device, external_data=str(moved)).run(
        None, {"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    blobs = {"weights.bin": (moved / "weights.bin").read_bytes()}
    (y,) = InferenceSession(path.read_bytes(), device=device, external_data=blobs).run(
        None, {"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def test_missing_external_data_named(tmp_path, device, no_compile) -> None:
    path = _external(tmp_path, "w_missing.bin")
    (tmp_path / "w_missing.bin").unlink()
    with pytest.raises(FileNotFoundError, match=r"ext\.onnx: tensor 'w': external data file "
                                                r"'.*w_missing\.bin' is missing"):
        InferenceSession(str(path), device=device)
    with pytest.raises(FileNotFoundError, match=r"'w_missing\.bin' is not among the files "
                                                r"given \(\['other\.bin'\]\)"):
        InferenceSession(path.read_bytes(), device=device, external_data={"other.bin": b""})


def test_missing_external_data_leaves_device_usable(tmp_path, device) -> None:
    path = _external(tmp_path, "gone.bin")
    (tmp_path / "gone.bin").unlink()
    with pytest.raises(FileNotFoundError):
        InferenceSession(str(path), device=device)
    _still_runs(device)


@pytest.mark.parametrize("kind", ["string_input", "complex_init", "complex128_init"])
def test_unsupported_dtype_names_the_tensor(device, no_compile, kind) -> None:
    if kind == "string_input":
        model = _model([helper.make_node("Identity", ["names"], ["y"])],
                       inputs=[helper.make_tensor_value_info("names", TensorProto.STRING, [2])],
                       outputs=[helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
        want = r"input 'names' \(string\)"
    else:
        etype = TensorProto.COMPLEX64 if kind == "complex_init" else TensorProto.COMPLEX128
        z = helper.make_tensor("zeta", etype, [2], [1 + 2j, 3 - 1j])
        model = _model([helper.make_node("Add", ["x", "zeta"], ["y"])], inits=[z])
        want = r"initializer 'zeta' \(complex(64|128)\)"
    with pytest.raises(OnnxImportError, match=want):
        InferenceSession(model.SerializeToString(), device=device)


def test_unsupported_dtype_leaves_device_usable(device) -> None:
    z = helper.make_tensor("zeta", TensorProto.COMPLEX64, [1], [1j])
    with pytest.raises(OnnxImportError, match="zeta"):
        InferenceSession(_model([helper.make_node("Add", ["x", "zeta"], ["y"])],
                                inits=[z]).SerializeToString(), device=device)
    _still_runs(device)


def test_failing_rule_names_node_and_leaves_device_usable(device) -> None:
    """A rule that fails while building (a Reshape to an impossible shape) names its node."""
    nodes = [helper.make_node("Constant", [], ["shp"], value=numpy_helper.from_array(
                 np.array([7, 5], np.int64), "s")),
             helper.make_node("Reshape", ["x", "shp"], ["y"], name="bad_reshape")]
    model = _model(nodes, inits=[numpy_helper.from_array(W, "w")])
    sess = InferenceSession(model.SerializeToString(), device=device)
    with pytest.raises(OnnxImportError, match="bad_reshape"):
        sess.run(None, {"x": np.zeros((2, 64), np.float32)})
    _still_runs(device)
