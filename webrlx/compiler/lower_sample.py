"""Lowering rule of token sampling: op `sample` is a greedy pre-pass of many workgroups
(shaders/sample/sample_max.wgsl: chunk maxima) and one dispatch of one workgroup a row
(shaders/sample/sample.wgsl, grid (r, 1, 1)) that reads the sampling settings from device
buffers, so changing temperature, top_k, top_p, the penalty, seed or step reuses the compiled
plan."""
from __future__ import annotations

from .. import dtype as dt
from ..graph import Node
from ..kernels import kernel
from .emit import EmitContext
from .program import Buf
from .registry import lowering

MAX_CHUNK = 4096    # logits a workgroup of sample/sample_max.wgsl (PER * WG)


@lowering("sample")
def _sample(L: EmitContext, node: Node) -> Buf:
    """The r tokens (r, the rows of logits (r, V); 1 for (V,)). With one row, seen[token] = 1
    is written in place when `seen` lives in a state buffer (directly or through in-place ops
    such as scatter_set); any other `seen` is only read: an input (whose upload is skipped
    while the fed array is unchanged, so a write would go stale), a constant, or a temp that
    later nodes may read."""
    logits, seen, fparams, iparams = node.inputs
    seen_buf = L.buf(seen)
    n = L.shape(seen)[0]
    r = L.shape(node.id)[0]
    scratch = L.temp((r * 8 * -(-n // 4),), dt.uint32)  # keys, then weights, vec4 slots a row
    out = L.temp((r,), dt.int32)
    t = L.T(L.dtype(logits))
    # the greedy pre-pass: chunk maxima of every row over many workgroups (sample_max.wgsl)
    chunks = -(-n // MAX_CHUNK)
    partials = L.temp((r * chunks * 2,), dt.uint32)
    L.emit(kernel("sample/sample_max", T=t),
           {"logits": L.buf(logits), "seen": seen_buf, "fparams": L.buf(fparams),
            "partials": partials}, {"n": n, "chunks": chunks}, (chunks, r, 1),
           name="sample_max")
    L.emit(kernel("sample/sample", T=t),
           {"logits": L.buf(logits), "seen": seen_buf, "fparams": L.buf(fparams),
            "iparams": L.buf(iparams), "scratch": scratch, "out": out, "partials": partials},
           {"n": n, "mark": int(seen_buf.kind == "state" and r == 1), "chunks": chunks},
           (r, 1, 1), {"PRE": True}, name="sample")
    return out
