"""The pooling, convolution, normalization and image-sampling rows (pool.py, nn.py, resize.py) on
variants the ONNX node tests leave out (1-D Indices, storage_order, ceil_mode with dilations and
asymmetric pads, grouped strided ConvTranspose, antialiased 3-D Resize, cubic GridSample with
reflection, strided grouped DeformConv, ...), each checked against onnx's reference evaluator.
Every input is a graph input: the rows run on the default device."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator  # noqa: E402
from single_node import single_node_model  # noqa: E402  (tests/onnx/single_node.py)

import webrlx as wr  # noqa: E402
from webrlx.onnx import InferenceSession  # noqa: E402

RNG = np.random.default_rng(0)


def _f(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _u(lo: float, hi: float, *shape: int) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def _i(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


POOL = {"kernel_shape": [3, 2], "strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 0, 1],
        "ceil_mode": 1}
CASES = {
    "maxpool_1d_indices": ("MaxPool", [_f(2, 3, 11)], {"kernel_shape": [3], "strides": [2],
                                                      "pads": [1, 2]}, 2),
    "maxpool_2d_indices_storage_order": ("MaxPool", [_f(1, 2, 6, 5)],
                                         {"kernel_shape": [2, 3], "storage_order": 1,
                                          "strides": [1, 2]}, 2),
    "maxpool_2d_ceil_dilated_asymmetric": ("MaxPool", [_f(2, 2, 9, 8)], POOL, 1),
    "averagepool_2d_ceil_dilated_exclude_pad": ("AveragePool", [_f(2, 2, 9, 8)], POOL, 1),
    "averagepool_1d_ceil_include_pad": ("AveragePool", [_f(1, 3, 10)],
                                        {"kernel_shape": [4], "strides": [3], "pads": [2, 1],
                                         "ceil_mode": 1, "count_include_pad": 1}, 1),
    "lppool_3d_p3_strided": ("LpPool", [_f(1, 2, 5, 6, 4)],
                             {"kernel_shape": [2, 3, 2], "strides": [2, 2, 1], "p": 3}, 1),
    "maxunpool_strided_pads": ("MaxUnpool", [_f(1, 2, 2, 3), _i(0, 5, 9, 14, 19, 23, 26, 31, 35,
                                                                40, 44, 47).reshape(1, 2, 2, 3)],
                               {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0]},
                               1),
    "convtranspose_2d_group_strided_dilated": ("ConvTranspose", [_f(2, 4, 3, 4), _f(4, 3, 3, 2),
                                                                 _f(6)],
                                               {"group": 2, "strides": [2, 3],
                                                "dilations": [2, 1], "pads": [1, 0, 2, 1],
                                                "output_padding": [1, 2]}, 1),
    "convtranspose_1d_same_lower": ("ConvTranspose", [_f(1, 2, 5), _f(2, 3, 4)],
                                    {"auto_pad": "SAME_LOWER", "strides": [2]}, 1),
    "convtranspose_3d_strided": ("ConvTranspose", [_f(1, 2, 2, 3, 2), _f(2, 2, 2, 2, 3)],
                                 {"strides": [2, 1, 2], "pads": [0, 1, 1, 1, 0, 0]}, 1),
    "conv_3d_grouped_strided_dilated": ("Conv", [_f(2, 4, 5, 6, 7), _f(6, 2, 2, 3, 2), _f(6)],
                                        {"group": 2, "strides": [1, 2, 2],
                                         "dilations": [2, 1, 1], "pads": [1, 0, 1, 0, 2, 1]}, 1),
    "conv_3d_same_upper": ("Conv", [_f(1, 3, 4, 5, 3), _f(2, 3, 3, 2, 3)],
                           {"auto_pad": "SAME_UPPER", "strides": [2, 1, 2]}, 1),
    "col2im_strided_dilated_padded": ("Col2Im", [_f(1, 8, 9), _i(6, 7), _i(2, 2)],
                                      {"strides": [2, 2], "dilations": [1, 2],
                                       "pads": [1, 0, 0, 1]}, 1),
    "resize_linear_antialias_3d_axes": ("Resize", [_f(2, 9, 7, 5), None,
                                                   np.array([0.5, 0.6], np.float32)],
                                        {"mode": "linear", "antialias": 1, "axes": [1, 2]}, 1),
    "resize_cubic_pytorch_half_pixel_exclude": ("Resize", [_f(1, 2, 5, 7), None, None,
                                                           _i(1, 2, 8, 3)],
                                                {"mode": "cubic", "exclude_outside": 1,
                                                 "cubic_coeff_a": -0.6,
                                                 "coordinate_transformation_mode":
                                                     "pytorch_half_pixel"}, 1),
    "resize_nearest_int_ceil_asymmetric": ("Resize", [RNG.integers(-50, 50, (1, 1, 4, 5))
                                                      .astype(np.int32), None,
                                                      np.array([1, 1, 1.7, 0.6], np.float32)],
                                           {"mode": "nearest", "nearest_mode": "ceil",
                                            "coordinate_transformation_mode": "asymmetric"}, 1),
    "resize_tf_crop_nearest": ("Resize", [_f(1, 1, 6, 6), np.array([0, 0, 0.2, -0.1, 1, 1, 0.9,
                                                                    1.2], np.float32),
                                          None, _i(1, 1, 4, 5)],
                               {"mode": "nearest", "extrapolation_value": -3.0,
                                "coordinate_transformation_mode": "tf_crop_and_resize"}, 1),
    "gridsample_cubic_reflection": ("GridSample", [_f(2, 3, 5, 6), _u(-1.7, 1.7, 2, 4, 3, 2)],
                                    {"mode": "cubic", "padding_mode": "reflection"}, 1),
    "gridsample_linear_reflection_aligned": ("GridSample", [_f(1, 2, 4, 5),
                                                            _u(-1.5, 1.5, 1, 3, 6, 2)],
                                             {"padding_mode": "reflection",
                                              "align_corners": 1}, 1),
    "gridsample_nearest_border_3d": ("GridSample", [_f(1, 2, 3, 4, 5),
                                                    _u(-1.4, 1.4, 1, 2, 3, 2, 3)],
                                     {"mode": "nearest", "padding_mode": "border"}, 1),
    "roialign_avg_scaled": ("RoiAlign", [_f(2, 3, 8, 9),
                                         np.array([[1, 2, 10, 12], [0, 0, 6, 5], [3.5, 1.2, 7.9,
                                                                                  14.0]],
                                                  np.float32), _i(1, 0, 1)],
                            {"output_height": 3, "output_width": 2, "sampling_ratio": 3,
                             "spatial_scale": 0.5}, 1),
    "deformconv_grouped_strided": ("DeformConv", [_f(1, 4, 6, 7), _f(6, 2, 2, 3),
                                                  _f(1, 2 * 6 * 2, 3, 3) * 1.5, _f(6),
                                                  _u(0, 1, 1, 2 * 6, 3, 3)],
                                   {"group": 2, "offset_group": 2, "strides": [2, 2],
                                    "dilations": [2, 1], "pads": [1, 0, 1, 0]}, 1),
    "group_normalization_3d": ("GroupNormalization", [_f(2, 6, 3, 2, 2), _f(6), _f(6)],
                               {"num_groups": 3}, 1),
    "lrn_batched": ("LRN", [_f(3, 7, 3, 2)], {"size": 5, "alpha": 0.01, "bias": 2.0}, 1),
    "center_crop_pad_odd": ("CenterCropPad", [_f(5, 4, 3), _i(2, 7)], {"axes": [0, 1]}, 1),
    "affine_grid_3d_aligned": ("AffineGrid", [_f(2, 3, 4), _i(2, 1, 3, 2, 4)],
                               {"align_corners": 1}, 1),
}

# the reference evaluator is wrong here (LRN loops c over the batch dim; ConvTranspose with groups
# and dilations reshapes wrongly; 3-D SAME_UPPER Conv drops the ceil): onnxruntime is the oracle
ORT_ORACLE = {"lrn_batched", "convtranspose_2d_group_strided_dilated", "conv_3d_same_upper"}


def _model(op: str, inputs: list, attrs: dict, outs: int) -> tuple[bytes, dict]:
    return single_node_model(op, inputs, attrs, outs, opset=22)


@pytest.mark.parametrize("case", sorted(CASES))
def test_row_matches_reference_evaluator(case: str) -> None:
    op, inputs, attrs, outs = CASES[case]
    model, feeds = _model(op, inputs, attrs, outs)
    if case in ORT_ORACLE:
        ort = pytest.importorskip("onnxruntime")
        want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    else:
        want = ReferenceEvaluator(model).run(None, feeds)
    got = InferenceSession(model, device=wr.device()).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 if w.dtype.kind == "f" else 0)


def test_lrn_even_size_and_global_lp_pool_against_the_spec() -> None:
    """Neither oracle runs these (onnxruntime: odd LRN sizes only, no GlobalLpPool-2): the
    expected values are the spec's formulas in numpy."""
    x = _f(2, 6, 3, 2)
    model, feeds = _model("LRN", [x], {"size": 4, "alpha": 0.02, "beta": 0.6, "bias": 1.5}, 1)
    (got,) = InferenceSession(model, device=wr.device()).run(None, feeds)
    sq = np.stack([(x[:, max(0, c - 1):c + 3] ** 2).sum(1) for c in range(6)], 1)
    np.testing.assert_allclose(got, x / (1.5 + 0.02 / 4 * sq) ** 0.6, rtol=1e-5, atol=1e-6)
    model, feeds = _model("GlobalLpPool", [x], {"p": 3}, 1)
    (got,) = InferenceSession(model, device=wr.device()).run(None, feeds)
    want = (np.abs(x.astype(np.float64)) ** 3).sum((2, 3), keepdims=True) ** (1 / 3)
    np.testing.assert_allclose(got, want, rtol=1e-5)
