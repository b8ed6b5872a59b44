"""Graph patterns imported ONNX models spell out node by node, recognized on the webrlx Graph
and rebuilt as the fused op a hand-built model uses.

- `fused_attention`: softmax(q @ k^T * scale + mask) @ v -> the attention op, where mask is a
  key-padding mask ((1 - m) * -big, or where(m, 0, -big)) as BERT-style exports write it, or
  such a mask folded to a constant on the host (transformers 5's ViT export adds an all-zero
  one built from shapes); also with torch's where(isnan(p), 0, p) of its
  scaled_dot_product_attention export.
- `erf_gelu`: x * 0.5 * (1 + erf(x / sqrt 2)) -> the gelu op (which a matmul epilogue then
  absorbs).
- `merge_sibling_matmuls`: the q, k, v projections of one input -> one wide MatMul (+ bias)
  and Slices, before import."""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from .. import nn
from ..graph import Node
from ..tensor import Tensor
from .reader import NodeDef

BIG_NEGATIVE = -1e4     # additive mask values at or below this zero a softmax term in float32


def _const(t: Tensor) -> np.ndarray | None:
    n = t.node
    return n.value if n.op == "constant" else None


def _scalar(t: Tensor) -> float | None:
    """The value of a constant holding one value (any shape), else None."""
    v = _const(t)
    if v is None or v.size == 0 or not np.all(v == v.flat[0]):
        return None
    return float(v.flat[0])


def _arg(t: Tensor, i: int) -> Tensor:
    return Tensor(t.graph, t.node.inputs[i])


def _strip_scale(t: Tensor) -> tuple[Tensor, float]:
    """t = x * c or x / c with c a constant scalar (repeatedly) -> (x, product of factors)."""
    scale = 1.0
    while t.node.op in ("mul", "div") and len(t.node.inputs) == 2:
        a, b = _arg(t, 0), _arg(t, 1)
        cb = _scalar(b)
        ca = _scalar(a) if t.node.op == "mul" else None
        if cb is not None and cb != 0 and tuple(b.shape) in ((), (1,)):
            scale *= cb if t.node.op == "mul" else 1.0 / cb
            t = a
        elif ca is not None and tuple(a.shape) in ((), (1,)):
            scale *= ca
            t = b
        else:
            break
    return t, scale


def _all_true(t: Tensor) -> bool:
    v = _const(t)
    return v is not None and v.size > 0 and bool(np.all(v != 0))


# keep-masks already built, per graph: (additive mask node, batch, kv) -> the keep tensor's
# node, so the layers of one model share one mask (a hand-built model computes it once; a
# copy per layer cost one small dispatch each, 6 of MiniLM's 63)
_KEEP_MASKS: weakref.WeakKeyDictionary[Any, dict[tuple[int, Any, Any], int]] = \
    weakref.WeakKeyDictionary()


def _shared_keep_mask(m: Tensor, batch: Any, kv: Any) -> Tensor | None:
    """_keep_mask, built once per (mask, batch, kv) in a graph."""
    built = _KEEP_MASKS.setdefault(m.graph, {})
    key = (m.node.id, batch, kv)
    if key not in built:
        keep = _keep_mask(m, batch, kv)
        if keep is None:
            return None
        built[key] = keep.node.id
    return Tensor(m.graph, built[key])


def _keep_mask(m: Tensor, batch: Any, kv: Any) -> Tensor | None:
    """The (batch, kv) int32 keep-mask (1 = attend) equal to additive mask m, else None."""
    n = m.node
    keep: Tensor | None = None
    const = _const(m)
    if const is not None:           # folded on the host: 0 keeps a key, <= BIG_NEGATIVE drops it
        if not np.all((const == 0) | (const <= BIG_NEGATIVE)):
            return None
        keep = Tensor(m.graph, m.graph.add_constant((const == 0).astype(np.int32)).id)
    elif n.op == "where":
        cond, a, b = (_arg(m, i) for i in range(3))
        va, vb = _scalar(a), _scalar(b)
        if va == 0.0 and vb is not None and vb <= BIG_NEGATIVE:
            keep = _strip_true(cond).cast("int32")
        elif vb == 0.0 and va is not None and va <= BIG_NEGATIVE:
            keep = 1 - _strip_true(cond).cast("int32")
    elif n.op == "mul":
        for x, c in ((_arg(m, 0), _arg(m, 1)), (_arg(m, 1), _arg(m, 0))):
            vc = _scalar(c)
            if vc is None or vc > BIG_NEGATIVE or tuple(c.shape) not in ((), (1,)):
                continue
            if x.node.op == "sub" and _scalar(_arg(x, 0)) == 1.0 and \
                    tuple(_arg(x, 0).shape) in ((), (1,)):
                keep = _strip_true(_arg(x, 1)).cast("int32")      # (1 - m) * -big
                break
    if keep is None:
        return None
    full = (1,) * (4 - len(keep.shape)) + tuple(keep.shape)      # numpy's right alignment
    if len(full) != 4 or full[1] != 1 or full[2] != 1 or full[3] != kv \
            or full[0] not in (1, batch):
        return None
    shape = (full[0], kv)
    keep = keep.reshape(shape)
    return keep if shape[0] == batch else keep.expand(batch, kv)


def _strip_true(cond: Tensor) -> Tensor:
    """cond without factors that are all-true constants (and / mul by ones): the broadcast they
    add along the query axis does not change which keys a row attends to."""
    while cond.node.op in ("mul", "logical_and", "and") and len(cond.node.inputs) == 2:
        a, b = _arg(cond, 0), _arg(cond, 1)
        if _all_true(a) and len(a.shape) <= len(b.shape):
            cond = b
        elif _all_true(b) and len(b.shape) <= len(a.shape):
            cond = a
        else:
            break
    return cond


def _key(kt: Tensor) -> Tensor:
    """k (batch, heads, kv, d) from kt (batch, heads, d, kv), undoing the export's permute."""
    n: Node = kt.node
    if n.op == "permute" and tuple(n.attrs["axes"]) == (0, 2, 3, 1):
        return _arg(kt, 0).permute(0, 2, 1, 3)
    return kt.permute(0, 1, 3, 2)


def _unless_nan(p: Tensor) -> Tensor:
    """x when p = where(isnan(x), 0, x) (isnan as x != x), else p."""
    n = p.node
    if n.op != "where" or len(n.inputs) != 3 or n.inputs[2] == n.inputs[0]:
        return p
    cond, zero, x = (_arg(p, i) for i in range(3))
    c = cond.node
    if _scalar(zero) == 0.0 and c.op == "ne" and list(c.inputs) == [x.id, x.id] and \
            tuple(x.shape) == tuple(p.shape):
        return x
    return p


def fused_attention(p: Tensor, v: Tensor) -> Tensor | None:
    """p @ v as the attention op when p = softmax(q @ kt * scale [+ mask]) over the last axis
    with q, k, v of one (batch, heads) and float32; None when p is anything else. p may also
    be where(isnan(s), 0, s) of such a softmax s (torch's export of scaled_dot_product_attention
    zeroes the rows whose keys are all masked so; the attention kernels give those rows 0)."""
    p = _unless_nan(p)
    sm = p.node
    if sm.op != "softmax" or len(p.shape) != 4 or sm.attrs.get("axis") not in (3, -1) \
            or p.dtype.name != "float32" or v.dtype.name != "float32" or len(v.shape) != 4:
        return None
    scores = _arg(p, 0)
    masks: list[Tensor] = []
    if scores.node.op == "add":
        a, b = _arg(scores, 0), _arg(scores, 1)
        scores, masks = (a, [b]) if _strip_scale(a)[0].node.op == "matmul" else (b, [a])
    s, scale = _strip_scale(scores)
    if s.node.op != "matmul" or s.node.attrs.get("activation", "none") != "none":
        return None
    (q, sq), (kt, sk) = _strip_scale(_arg(s, 0)), _strip_scale(_arg(s, 1))
    scale *= sq * sk
    if len(q.shape) != 4 or len(kt.shape) != 4 or q.dtype.name != "float32":
        return None
    batch, heads, _, d = q.shape
    kv = kt.shape[3]
    if tuple(kt.shape) != (batch, heads, d, kv) or tuple(v.shape)[:3] != (batch, heads, kv) \
            or v.shape[3] != d:
        return None
    mask = None
    if masks and _scalar(masks[0]) != 0.0:     # an all-zero constant mask hides nothing
        mask = _shared_keep_mask(masks[0], batch, kv)
        if mask is None:
            return None
    return nn.attention(q, _key(kt), v, mask=mask, scale=scale)


def _factors(t: Tensor, depth: int = 2) -> list[Tensor]:
    """The operands of a product tree of mul nodes, depth levels deep."""
    if depth == 0 or t.node.op != "mul" or len(t.node.inputs) != 2:
        return [t]
    return _factors(_arg(t, 0), depth - 1) + _factors(_arg(t, 1), depth - 1)


def _erf_arg(t: Tensor) -> Tensor | None:
    """x when t = 1 + erf(x / sqrt 2) (or erf(x * (1 / sqrt 2)) + 1), else None."""
    if t.node.op != "add" or len(t.node.inputs) != 2:
        return None
    a, b = _arg(t, 0), _arg(t, 1)
    e = a if _scalar(b) == 1.0 else b if _scalar(a) == 1.0 else None
    if e is None or e.node.op != "erf":
        return None
    x, scale = _strip_scale(_arg(e, 0))
    return x if abs(scale - 2 ** -0.5) < 1e-6 else None


def erf_gelu(a: Tensor, b: Tensor) -> Tensor | None:
    """a * b as the gelu op when it is x * 0.5 * (1 + erf(x / sqrt 2)) in any grouping."""
    fs = _factors(a) + _factors(b)
    if len(fs) != 3 or not all(f.dtype.is_float for f in fs):
        return None
    for i, f in enumerate(fs):
        x = _erf_arg(f)
        if x is None:
            continue
        rest = fs[:i] + fs[i + 1:]
        halves = [r for r in rest if _scalar(r) == 0.5 and len(r.shape) == 0]
        same = [r for r in rest if r.id == x.id]
        if len(halves) == 1 and len(same) == 1 and tuple(x.shape) == tuple(
                _broadcast_shape(a, b)):
            return x.gelu()
    return None


def _broadcast_shape(a: Tensor, b: Tensor) -> tuple[Any, ...]:
    """The broadcast shape of a and b (numpy's rule)."""
    sa, sb = tuple(a.shape), tuple(b.shape)
    n = max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb
    return tuple(y if x == 1 else x for x, y in zip(sa, sb))


def merge_sibling_matmuls(nodes: list[NodeDef], inits: dict[str, np.ndarray],
                          keep: set[str]) -> list[NodeDef]:
    """MatMuls of one input by 2-D initializer weights (q, k, v projections), each maybe
    followed by an Add of an initializer bias, become one MatMul (+ Add) by the concatenated
    weight and Slices of its last axis: one wide GEMM where the hand-built model runs one.
    New initializers go into inits; names in keep (graph outputs) are never absorbed."""
    users: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for name in n.inputs:
            users.setdefault(name, []).append(i)
    groups: dict[tuple[str, int], list[int]] = {}
    for i, n in enumerate(nodes):
        w = inits.get(n.inputs[1]) if n.op_type == "MatMul" and not n.domain and \
            len(n.inputs) == 2 else None
        if w is not None and w.ndim == 2 and w.dtype == np.float32 and n.inputs[0] not in inits:
            groups.setdefault((n.inputs[0], w.shape[0]), []).append(i)
    out, replace, drop = list(nodes), {}, set()
    for (src, _), members in groups.items():
        if len(members) < 2:
            continue
        parts: list[tuple[int, int | None, np.ndarray | None, str]] = []
        for i in members:          # (matmul index, add index or None, bias or None, output)
            n = nodes[i]
            after = users.get(n.outputs[0], [])
            add = nodes[after[0]] if len(after) == 1 else None
            bias = None
            if add is not None and add.op_type == "Add" and not add.domain and \
                    n.outputs[0] not in keep:
                other = [x for x in add.inputs if x != n.outputs[0]]
                b = inits.get(other[0]) if len(other) == 1 else None
                if b is not None and b.shape == (inits[n.inputs[1]].shape[1],):
                    bias = b
            if bias is not None and add is not None:
                parts.append((i, after[0], bias, add.outputs[0]))
            else:
                parts.append((i, None, None, n.outputs[0]))
        with_bias = [p for p in parts if p[2] is not None]
        if with_bias and len(with_bias) != len(parts):
            parts = with_bias                          # merge the biased ones only
            if len(parts) < 2:
                continue
        tag = f"webrlx_merged_{src}"
        inits[tag + ".w"] = np.concatenate([inits[nodes[i].inputs[1]] for i, *_ in parts], 1)
        fused = [NodeDef("MatMul", "", [src, tag + ".w"], [tag + ".mm"], tag)]
        merged = tag + ".mm"
        if parts[0][2] is not None:
            inits[tag + ".b"] = np.concatenate([p[2] for p in parts])
            fused.append(NodeDef("Add", "", [merged, tag + ".b"], [tag + ".out"], tag + "+b"))
            merged = tag + ".out"
        start = 0
        for j, (i, a, _, name) in enumerate(parts):
            n_out = inits[nodes[i].inputs[1]].shape[1]
            for key, v in (("s", start), ("e", start + n_out)):
                inits[f"{tag}.{j}{key}"] = np.array([v], np.int64)
            inits[tag + ".axis"] = np.array([-1], np.int64)
            fused.append(NodeDef("Slice", "", [merged, f"{tag}.{j}s", f"{tag}.{j}e",
                                              tag + ".axis"], [name], f"{tag}/{j}"))
            start += n_out
            drop.update({i} | ({a} if a is not None else set()))
        replace[min(i for i, *_ in parts)] = fused
    if not replace:
        return list(nodes)
    result: list[NodeDef] = []
    for i, n in enumerate(out):
        result += replace.get(i, [])
        if i not in drop:
            result.append(n)
    return result
