"""Functional layers built from ops: linear, norms, attention, convolution, pooling."""
from __future__ import annotations

import math

from .tensor import Tensor


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str = "none"
           ) -> Tensor:
    """x @ weight (+ bias) with an optional fused activation; weight is [in, out]."""
    return x.matmul(weight, bias=bias, activation=activation)


def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalize over the last axis, then scale and shift."""
    if bias is not None and weight is None:
        raise ValueError("layer_norm: a bias needs a weight")
    extra = [t for t in (weight, bias) if t is not None]
    return x._op("layer_norm", *extra, eps=float(eps))


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """x / rms(x) over the last axis, then scale (Llama's RMSNorm)."""
    extra = [weight] if weight is not None else []
    return x._op("rms_norm", *extra, eps=float(eps))


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
              scale: float | None = None, causal: bool = False) -> Tensor:
    """softmax(q k^T * scale + mask) v in one fused kernel.

    q: (batch, heads, q_len, head_dim); k, v: (batch, heads, kv_len, head_dim);
    mask: (batch, kv_len) int32, 0 = ignore that key (padding); causal: query i sees keys
    up to i + kv_len - q_len.
    """
    if scale is None:
        d = q.shape[-1]
        if not isinstance(d, int):
            raise ValueError("attention: head_dim must be static")
        scale = 1.0 / math.sqrt(d)
    extra = []
    if mask is not None:
        extra.append(mask.cast("int32"))
    return q._op("attention", k, v, *extra, scale=float(scale), causal=bool(causal))


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None,
           stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0,
           dilation: int | tuple[int, int] = 1, groups: int = 1) -> Tensor:
    """2-D convolution, NCHW input, weight (out, in/groups, kh, kw), zero padding."""
    extra = [bias] if bias is not None else []
    return x._op("conv2d", weight, *extra, stride=_pair(stride), padding=_pair(padding),
                 dilation=_pair(dilation), groups=int(groups))


def max_pool2d(x: Tensor, kernel: int | tuple[int, int], stride: int | tuple[int, int] | None
               = None, padding: int | tuple[int, int] = 0) -> Tensor:
    """Max pooling over NCHW windows (stride defaults to the kernel size)."""
    return x._op("max_pool2d", kernel=_pair(kernel), stride=_pair(stride or kernel),
                 padding=_pair(padding))


def avg_pool2d(x: Tensor, kernel: int | tuple[int, int], stride: int | tuple[int, int] | None
               = None, padding: int | tuple[int, int] = 0) -> Tensor:
    """Average pooling over NCHW windows; padded zeros count (torch's default)."""
    return x._op("avg_pool2d", kernel=_pair(kernel), stride=_pair(stride or kernel),
                 padding=_pair(padding))


def embedding(table: Tensor, ids: Tensor) -> Tensor:
    """Rows of table [vocab, dim] picked by int ids [...] -> [..., dim]."""
    return table.gather(ids, axis=0)
