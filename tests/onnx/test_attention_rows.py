"""The ONNX Attention row on forms the node tests leave out, against onnx's reference evaluator:
nonpad_kv_seqlen on the fused kernel, is_causal with past keys (aligned and not), the four
qk_matmul_output modes with softcap, a broadcast bool mask shorter than the keys."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from webrlx.onnx import InferenceSession  # noqa: E402

NAMES = ("Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen")


def _model(attrs: dict, feeds: dict, outs: tuple[str, ...]) -> onnx.ModelProto:
    ins = [n if n in feeds else "" for n in NAMES]
    while not ins[-1]:
        ins.pop()
    node = helper.make_node("Attention", ins, list(outs), **attrs)
    gi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
          for n, x in feeds.items()]
    go = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs if o]
    return helper.make_model(helper.make_graph([node], "g", gi, go),
                             opset_imports=[helper.make_opsetid("", 24)])


def _check(attrs: dict, feeds: dict, outs: tuple[str, ...] = ("Y",),
           ref_mask: np.ndarray | None = None) -> None:
    """Compare webrlx with the reference evaluator; ref_mask: an all-zero float mask handed to
    the reference only (it cannot add nonpad_kv_seqlen's padding to a mask without batch)."""
    ref_feeds = dict(feeds) if ref_mask is None else {**feeds, "attn_mask": ref_mask}
    ref_feeds = {n: ref_feeds[n] for n in NAMES if n in ref_feeds}
    want = ReferenceEvaluator(_model(attrs, ref_feeds, outs)).run(None, ref_feeds)
    got = InferenceSession(_model(attrs, feeds, outs).SerializeToString()).run(None, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def _rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


def test_nonpad_kv_seqlen_gqa() -> None:
    feeds = {"Q": _rand(2, 6, 5, 8), "K": _rand(2, 3, 7, 8), "V": _rand(2, 3, 7, 8),
             "nonpad_kv_seqlen": np.array([3, 7], np.int64)}
    _check({}, feeds, ref_mask=np.zeros((2, 1, 5, 7), np.float32))


@pytest.mark.parametrize("new_keys", [4, 6])   # 4: aligned with the queries (fused kernel)
def test_causal_with_past(new_keys: int) -> None:
    feeds = {"Q": _rand(2, 3, 4, 8), "K": _rand(2, 3, new_keys, 8),
             "V": _rand(2, 3, new_keys, 8), "past_key": _rand(2, 3, 5, 8),
             "past_value": _rand(2, 3, 5, 8)}
    _check({"is_causal": 1}, feeds, ("Y", "present_key", "present_value"))


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_qk_output_modes(mode: int) -> None:
    feeds = {"Q": _rand(2, 3, 4, 8), "K": _rand(2, 3, 6, 8), "V": _rand(2, 3, 6, 10),
             "nonpad_kv_seqlen": np.array([5, 6], np.int64)}
    _check({"softcap": 1.5, "qk_matmul_output_mode": mode, "is_causal": 1}, feeds,
           ("Y", "", "", "qk"), ref_mask=np.zeros((2, 1, 4, 6), np.float32))


def test_short_broadcast_bool_mask() -> None:
    mask = np.random.default_rng(1).random((1, 4, 5)) > 0.3
    feeds = {"Q": _rand(2, 3, 4, 8), "K": _rand(2, 3, 6, 8), "V": _rand(2, 3, 6, 8),
             "attn_mask": mask}
    _check({}, feeds)
