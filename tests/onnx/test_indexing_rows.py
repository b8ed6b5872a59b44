"""The indexing, linear-algebra, value-shaped and inverse-trig/bitwise rows on variants the ONNX
node tests leave out (negative pads beside reflect, slice scatters, int32 values past 2^24,
batch_dims with negative indices, pivoting determinants, ...), each checked against onnx's
reference evaluator. Every input is a graph input: the rows run on the default device."""
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


def _i(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


CASES = {
    "pad_reflect": ("Pad", [_f(3, 5, 4), _i(0, 2, 1, 0, 3, 1)], {"mode": "reflect"}),
    "pad_wrap_axes": ("Pad", [_f(2, 6), _i(4, 1), None, _i(-1)], {"mode": "wrap"}),
    "pad_edge_3d": ("Pad", [_f(2, 3, 4), _i(1, 0, 2, 0, 3, 1)], {"mode": "edge"}),
    "pad_constant_value": ("Pad", [_f(2, 3), _i(1, 0, 0, 2), np.array(2.5, np.float32)], {}),
    "scatternd_slices_none": ("ScatterND", [_f(5, 3), _i(3, 0).reshape(2, 1), _f(2, 3)], {}),
    "scatternd_slices_mul": ("ScatterND", [_f(4, 3), _i(1, 1, 2).reshape(3, 1), _f(3, 3)],
                             {"reduction": "mul"}),
    "scatternd_slices_max": ("ScatterND", [_f(3, 4), _i(2, 0, 2).reshape(3, 1), _f(3, 4)],
                             {"reduction": "max"}),
    "scatternd_points_none": ("ScatterND", [_f(3, 4), _i(0, 1, 2, 3, -1, 0).reshape(3, 2),
                                            _f(3)], {}),
    "scatter_elements_big_ints": ("ScatterElements", [
        np.array([[2**30 + 1, -7, 3], [5, 2**28 + 3, -(2**29) - 1]], np.int32),
        _i(2, 0, 1, 1).reshape(2, 2), np.array([[2**27 + 1, 9], [-(2**26) - 3, 11]], np.int32)],
        {"axis": 1}),
    "scatter_elements_add_axis0": ("ScatterElements", [_f(3, 3), _i(1, 1, 1, 0, 2, 0)
                                                       .reshape(2, 3), _f(2, 3)],
                                   {"axis": 0, "reduction": "add"}),
    "gathernd_batch_negative": ("GatherND", [_f(2, 3, 4, 5), _i(-1, 0, 2, -2, 0, 1, 1, 3)
                                             .reshape(2, 2, 2)], {"batch_dims": 1}),
    "topk_smallest_int_ties": ("TopK", [np.array([[3, 1, 1, 7, -2, 1], [0, 0, 5, 5, -1, 9]],
                                                 np.int32), _i(4)], {"largest": 0}),
    "topk_axis0": ("TopK", [_f(6, 3), _i(2)], {"axis": 0}),
    "cumsum_exclusive_reverse_3d": ("CumSum", [_f(2, 5, 3), np.array(1)], {"exclusive": 1,
                                                                     "reverse": 1}),
    "cumprod_reverse_int": ("CumProd", [np.arange(1, 13, dtype=np.int32).reshape(3, 4) % 5 - 2,
                                        np.array(-1)], {"reverse": 1}),
    "onehot_float_axis0": ("OneHot", [np.array([[1.0, -1.0], [2.0, -4.0]], np.float32),
                                      np.array(4.0, np.float32), np.array([-1, 3], np.int32)],
                           {"axis": 0}),
    "reversesequence_batch0": ("ReverseSequence", [_f(3, 5, 2), _i(5, 1, 3)],
                               {"batch_axis": 0, "time_axis": 1}),
    "depthtospace_crd_b3": ("DepthToSpace", [_f(1, 18, 2, 3)], {"blocksize": 3, "mode": "CRD"}),
    "spacetodepth_b2": ("SpaceToDepth", [_f(2, 3, 4, 6)], {"blocksize": 2}),
    "tril_batched": ("Trilu", [_f(2, 4, 6), _i(-1)], {"upper": 0}),
    "compress_axis1": ("Compress", [_f(3, 4), np.array([0, 1, 0, 1], bool)], {"axis": 1}),
    "einsum_chain": ("Einsum", [_f(2, 3, 4), _f(4, 5), _f(5, 6)], {"equation": "abc,cd,de->abe"}),
    "einsum_ellipsis_broadcast": ("Einsum", [_f(2, 1, 3, 4), _f(2, 5, 4, 2)],
                                  {"equation": "...ij,...jk"}),
    "einsum_trace_outer": ("Einsum", [_f(3, 3, 2), _f(4)], {"equation": "iij,k->jk"}),
    "det_pivoting": ("Det", [np.array([[[0, 2, 1], [3, 0, 4], [1, 1, 0]],
                                       [[1, 2, 3], [2, 4, 6], [0, 1, 5]]], np.float32)], {}),
    "det_5x5": ("Det", [_f(3, 5, 5)], {}),
    "unique_unsorted_axis": ("Unique", [np.array([[2, 1], [0, 3], [2, 1], [0, 3], [4, 4]],
                                                 np.float32)], {"sorted": 0, "axis": 0}),
    "nonzero_3d": ("NonZero", [(_f(2, 3, 4) > 0.3).astype(np.int32)], {}),
    "atan_wide": ("Atan", [np.array([-1e30, -40.0, -2.5, -0.5, -1e-20, 0.0, 3e-5, 0.41, 0.42,
                                     2.41, 2.42, 1e8, np.inf], np.float32)], {}),
    "asin_acos_edges": ("Asin", [np.array([-1.0, -0.9999, -0.3, 0.0, 1e-6, 0.7, 1.0],
                                          np.float32)], {}),
    "acos_edges": ("Acos", [np.array([-1.0, -0.9999, -0.3, 0.0, 1e-6, 0.99999, 1.0],
                                     np.float32)], {}),
    "bitwise_xor_negative": ("BitwiseXor", [np.array([-1, -2**31, 5, 2**31 - 1], np.int32),
                                            np.array([7, -1, -6, 12345], np.int32)], {}),
    "bitshift_right_uint8": ("BitShift", [np.array([255, 128, 7], np.uint8),
                                          np.array([1, 7, 0], np.uint8)], {"direction": "RIGHT"}),
}


def _model(op: str, inputs: list, attrs: dict) -> tuple[bytes, dict]:
    return single_node_model(op, inputs, attrs, outs={"TopK": 2, "Unique": 4}.get(op, 1))


@pytest.mark.parametrize("case", sorted(CASES))
def test_row_matches_reference_evaluator(case: str) -> None:
    op, inputs, attrs = CASES[case]
    model, feeds = _model(op, inputs, attrs)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = InferenceSession(model, device=wr.device()).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=2e-6 if w.dtype.kind == "f" else 0,
                                   atol=1e-6 if op == "Det" or op == "Einsum" else 0)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_negative_pads_crop(mode: str) -> None:
    """Negative pads remove elements (numpy's pad, and so the reference evaluator, refuse them):
    the expected value is the crop, then np.pad of what is left."""
    x = _f(4, 6, 5)
    pads = _i(1, -2, 0, -1, 2, 3)           # dim 0: +1/-1, dim 1: -2/+2, dim 2: 0/+3
    model, feeds = _model("Pad", [x, pads], {"mode": mode})
    (got,) = InferenceSession(model, device=wr.device()).run(None, feeds)
    want = np.pad(x[:-1, 2:, :], [(1, 0), (0, 2), (0, 3)], mode=mode)
    np.testing.assert_array_equal(got, want)
