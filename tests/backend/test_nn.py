"""Layers: layer_norm, rms_norm, fused attention, conv2d and pooling against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check, force_regs_rows, rand

import webrlx as wr


def _ln(x, w=None, b=None, eps=1e-5):
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


# rows of <= 1024 run 8 per workgroup, longer ones one per workgroup
@pytest.mark.parametrize("n", [1, 3, 384, 1000, 1500, 5000])
def test_layer_norm(backend, n):
    check(backend, lambda x, w, b: wr.nn.layer_norm(x, w, b, eps=1e-5), _ln,
          rand(2, 3, n, high=4), rand(n, seed=1), rand(n, seed=2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [384, 2000])
def test_layer_norm_near_constant_rows(backend, n):
    # eps=1e-12 (BERT's) leaves nothing to hide a mean that is off by one ulp: constant rows
    # must give 0, and rows within 1e-4 of a constant their float64 values (a one-pass or
    # plain two-pass f32 variance gives errors of order 0.1 here)
    rng = np.random.default_rng(n)
    consts = np.array([1.0, 0.1, 1000.5, -3.3, 7e-3, 123.456], np.float32)[:, None]
    rows = np.concatenate([np.broadcast_to(consts, (6, n)),
                           consts * (1 + 1e-4 * rng.standard_normal((6, n)))]).astype(np.float32)
    check(backend, lambda x: wr.nn.layer_norm(x, eps=1e-12), lambda x: _ln(x, eps=1e-12),
          rows, rtol=0, atol=3e-3)


def test_layer_norm_no_affine(backend):
    check(backend, lambda x: wr.nn.layer_norm(x), _ln, rand(5, 64), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [64, 576, 2048])
def test_rms_norm(backend, n):
    check(backend, lambda x, w: wr.nn.rms_norm(x, w, eps=1e-6),
          lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w,
          rand(3, n), rand(n, seed=1), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [2049, 2500])
def test_norms_of_long_rows_split_over_workgroups(backend, n, monkeypatch):
    """Few long rows: norm/norm_parts + norm_finish, chunks of 1024 of a row per workgroup
    (2049: a last chunk of one element), with and without residual, weight and bias."""
    from webrlx.compiler import lower_rows
    monkeypatch.setattr(lower_rows, "SPLIT_ROW_MIN_N", 2000)
    monkeypatch.setattr(lower_rows, "SPLIT_ROW_CHUNK", 1024)
    x = rand(3, n) * 3 + 50             # a large mean: the chunk statistics must centre
    check(backend, lambda x, r, w, b: wr.nn.layer_norm(x + r, w, b),
          lambda x, r, w, b: _ln(x + r, w, b), x, rand(3, n, seed=1), rand(n, seed=2),
          rand(n, seed=3), rtol=1e-4, atol=1e-4)
    check(backend, lambda x, w: wr.nn.rms_norm(x, w, eps=1e-6),
          lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w, x,
          rand(n, seed=1), rtol=1e-4, atol=1e-5)
    check(backend, lambda x: wr.nn.layer_norm(x), _ln, x, rtol=1e-4, atol=1e-4)


def _attn(q, k, v, mask=None, causal=False):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = s + np.where(mask[:, None, None, :] != 0, 0, -np.inf)
    if causal:
        lq, lk = s.shape[-2:]
        s = np.where(np.tril(np.ones((lq, lk), bool), lk - lq), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("b,h,lq,lk,d", [(1, 1, 1, 1, 8), (2, 3, 7, 7, 32), (1, 2, 5, 300, 64),
                                         (1, 1, 3, 9, 256),
                                         # (lower_attention.attention_path picks the kernel)
                                         (2, 2, 70, 70, 32), (1, 1, 16, 100, 64),
                                         (1, 1, 20, 30, 128),
                                         (1, 2, 33, 33, 20)], ids=str)
def test_attention(backend, b, h, lq, lk, d):
    check(backend, wr.nn.attention, _attn, rand(b, h, lq, d), rand(b, h, lk, d, seed=1),
          rand(b, h, lk, d, seed=2), rtol=1e-4, atol=1e-5)


def test_attention_mask(backend):
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    check(backend, lambda q, k, v, m: wr.nn.attention(q, k, v, mask=m), _attn,
          rand(2, 2, 5, 16), rand(2, 2, 5, 16, seed=1), rand(2, 2, 5, 16, seed=2), mask,
          rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lq,lk", [(4, 6), (40, 40), (20, 90)])
def test_attention_causal(backend, lq, lk):
    check(backend, lambda q, k, v: wr.nn.attention(q, k, v, causal=True),
          lambda q, k, v: _attn(q, k, v, causal=True), rand(1, 2, lq, 16),
          rand(1, 2, lk, 16, seed=1), rand(1, 2, lk, 16, seed=2), rtol=1e-4, atol=1e-5)


def test_attention_mask_many_rows(backend):
    mask = np.ones((2, 40), np.int32)
    mask[0, 25:] = 0
    check(backend, lambda q, k, v, m: wr.nn.attention(q, k, v, mask=m), _attn,
          rand(2, 3, 40, 32), rand(2, 3, 40, 32, seed=1), rand(2, 3, 40, 32, seed=2), mask,
          rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lq", [5, 40, 130])
def test_attention_fully_masked_rows_are_zero(backend, lq):
    """A batch row whose keys are all masked gives 0 (softmax over no key is NaN in numpy's
    formula; every kernel and the reference zero it, as torch's scaled_dot_product_attention
    export does with where(isnan(p), 0, p), which webrlx.onnx fuses into this op)."""
    mask = np.ones((2, lq), np.int32)
    mask[0] = 0
    mask[1, lq // 2:] = 0

    def want(q, k, v, m):
        with np.errstate(invalid="ignore"):
            return np.nan_to_num(_attn(q, k, v, m), nan=0.0)
    check(backend, lambda q, k, v, m: wr.nn.attention(q, k, v, mask=m), want,
          rand(2, 2, lq, 32), rand(2, 2, lq, 32, seed=1), rand(2, 2, lq, 32, seed=2), mask,
          rtol=1e-4, atol=1e-5)


def _conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for oc in range(o):
        g = oc // (o // groups)
        for y in range(oh):
            for xx in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, y * stride: y * stride + dilation * (kh - 1) + 1:
                           dilation, xx * stride: xx * stride + dilation * (kw - 1) + 1: dilation]
                out[:, oc, y, xx] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return out if b is None else out + b[None, :, None, None]


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 1),
                                                            (1, 2, 2, 1), (1, 1, 1, 2),
                                                            (2, 0, 1, 4)], ids=str)
def test_conv2d(backend, stride, padding, dilation, groups):
    check(backend, lambda x, w, b: wr.nn.conv2d(x, w, b, stride, padding, dilation, groups),
          lambda x, w, b: _conv(x, w, b, stride, padding, dilation, groups),
          rand(2, 4, 9, 8), rand(8, 4 // groups, 3, 3, seed=1), rand(8, seed=2), rtol=1e-5,
          atol=1e-5)


def _pool(x, k, s, p, kind):
    fill = -np.inf if kind == "max" else 0
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    oh, ow = (x.shape[2] + 2 * p - k) // s + 1, (x.shape[3] + 2 * p - k) // s + 1
    out = np.zeros(x.shape[:2] + (oh, ow))
    for y in range(oh):
        for xx in range(ow):
            win = xp[:, :, y * s: y * s + k, xx * s: xx * s + k]
            out[:, :, y, xx] = win.max(axis=(2, 3)) if kind == "max" else win.mean(axis=(2, 3))
    return out


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 1, 1), (3, 2, 1)], ids=str)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool2d(backend, kind, k, s, p):
    fn = wr.nn.max_pool2d if kind == "max" else wr.nn.avg_pool2d
    check(backend, lambda x: fn(x, k, s, p), lambda x: _pool(x, k, s, p, kind),
          rand(2, 3, 7, 8), rtol=1e-5, atol=1e-6)


def test_residual_add_layer_norm(backend):
    check(backend, lambda x, r, w, b: wr.nn.layer_norm(x + r, w, b),
          lambda x, r, w, b: _ln(x + r, w, b), rand(3, 4, 48), rand(3, 4, 48, seed=1),
          rand(48, seed=2), rand(48, seed=3), rtol=1e-4, atol=1e-5)


def test_attention_on_permuted_views(backend):
    def build(q, k, v):
        heads = [t.reshape(2, 5, 4, 8).permute(0, 2, 1, 3) for t in (q, k, v)]
        return wr.nn.attention(*heads).permute(0, 2, 1, 3).reshape(2, 5, 32)

    def ref(q, k, v):
        heads = [t.reshape(2, 5, 4, 8).transpose(0, 2, 1, 3) for t in (q, k, v)]
        return _attn(*heads).transpose(0, 2, 1, 3).reshape(2, 5, 32)
    check(backend, build, ref, rand(2, 5, 32), rand(2, 5, 32, seed=1), rand(2, 5, 32, seed=2),
          rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shared", [True, False])     # one buffer in 3 bindings, or copies
@pytest.mark.parametrize("path", ["regs", "rows", "row", "flash", "matmul"])
def test_attention_on_heads_of_one_fused_projection(backend, path, shared, monkeypatch):
    """q, k and v as head views of slices of one (B, L, 3H) projection (BERT's fused QKV):
    the fused kernels read all three from the one buffer at their offsets, without copies,
    through q's binding (K_IN_Q, V_IN), whether or not the device allows one buffer in
    several bindings (natively it does; the browser's WebGPU rejects it where the dispatch
    also writes that buffer)."""
    from webrlx.compiler import lower_attention
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(lower_attention, "FORCE_PATH", path)
    if not shared or backend.info.backend != "navigator.gpu":
        monkeypatch.setattr(DeviceInfo, "shared_read_bindings", property(lambda self: shared))

    def heads(t, j):
        return t[..., j * 32:(j + 1) * 32].reshape(2, 5, 4, 8).permute(0, 2, 1, 3)

    def build(qkv):
        return wr.nn.attention(*(heads(qkv, j) for j in range(3))).permute(0, 2, 1, 3)

    def ref(qkv):
        q, k, v = (qkv[..., j * 32:(j + 1) * 32].reshape(2, 5, 4, 8).transpose(0, 2, 1, 3)
                   for j in range(3))
        return _attn(q, k, v).transpose(0, 2, 1, 3)
    x = rand(2, 5, 96)
    check(backend, build, ref, x, rtol=1e-4, atol=1e-5)
    if backend.name != "reference" and path != "matmul":
        g = wr.Graph()
        exe = wr.compile(g, outputs=[build(g.input("x", x.shape))], device=backend)
        calls = exe.plan({}).program.calls
        names = [c.name for c in calls]
        assert names[-1] in ("attention_regs", "attention_rows", "attention",
                             "attention_flash"), names
        assert len(names) == 1, names
        assert calls[-1].overrides["K_IN_Q"] and calls[-1].overrides["V_IN"] == 1


@pytest.mark.parametrize("path", ["regs", "rows", "row", "flash"])
def test_attention_keys_and_values_of_one_projection(backend, path, monkeypatch):
    """q from its own projection, k and v as head views of one (B, L, 2H) projection (a
    cross-attention's fused KV): v is read through k's binding (V_IN 2), no copy."""
    from webrlx.compiler import lower_attention
    monkeypatch.setattr(lower_attention, "FORCE_PATH", path)

    def heads(t, j):
        return t[..., j * 32:(j + 1) * 32].reshape(2, 5, 4, 8).permute(0, 2, 1, 3)

    def build(q, kv):
        return wr.nn.attention(heads(q, 0), heads(kv, 0), heads(kv, 1)).permute(0, 2, 1, 3)

    def ref(q, kv):
        qh, kh, vh = (t[..., j * 32:(j + 1) * 32].reshape(2, 5, 4, 8).transpose(0, 2, 1, 3)
                      for t, j in ((q, 0), (kv, 0), (kv, 1)))
        return _attn(qh, kh, vh).transpose(0, 2, 1, 3)
    q, kv = rand(2, 5, 32), rand(2, 5, 64, seed=1)
    check(backend, build, ref, q, kv, rtol=1e-4, atol=1e-5)
    if backend.name != "reference":
        g = wr.Graph()
        exe = wr.compile(g, outputs=[build(g.input("q", q.shape), g.input("kv", kv.shape))],
                         device=backend)
        calls = exe.plan({}).program.calls
        assert len(calls) == 1, [c.name for c in calls]
        assert not calls[-1].overrides["K_IN_Q"] and calls[-1].overrides["V_IN"] == 2


@pytest.mark.parametrize("software", [False, True])     # key tiles of 32 or 16
@pytest.mark.parametrize("threads", [64 * 12, 2 * 64 * 12, 4 * 64 * 12,   # 1, 2, 4, 8 per row
                                     8 * 64 * 12])
def test_attention_key_split_per_row(backend, threads, software, monkeypatch):
    from webrlx.compiler import lower_attention
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(DeviceInfo, "software", property(lambda self: software))
    monkeypatch.setattr(lower_attention, "ATTENTION_THREADS", threads)
    monkeypatch.setattr(lower_attention, "MATMUL_ATTENTION_ROWS", 1 << 30)   # the fused kernel
    mask = np.ones((1, 64), np.int32)
    mask[0, 50:] = 0
    check(backend, lambda q, k, v, m: wr.nn.attention(q, k, v, mask=m), _attn,
          rand(1, 12, 64, 32), rand(1, 12, 64, 32, seed=1), rand(1, 12, 64, 32, seed=2), mask,
          rtol=1e-4, atol=1e-5)



@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lq,lk", [(64, 64), (100, 132), (8, 8)])
def test_attention_by_matmul(backend, lq, lk, causal, monkeypatch):
    from webrlx.compiler import lower_attention
    monkeypatch.setattr(lower_attention, "MATMUL_ATTENTION_ROWS", 8)     # two matmuls + softmax
    mask = np.ones((2, lk), np.int32)
    mask[1, lk // 2:] = 0
    check(backend, lambda q, k, v, m: wr.nn.attention(q, k, v, mask=m, causal=causal),
          lambda q, k, v, m: _attn(q, k, v, mask=m, causal=causal), rand(2, 3, lq, 32),
          rand(2, 3, lk, 32, seed=1), rand(2, 3, lk, 32, seed=2), mask, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("path", ["row", "rows", "regs", "flash", "matmul"])
@pytest.mark.parametrize("lq,lk,causal", [(1, 40, False), (12, 12, False), (6, 70, True),
                                          (70, 70, True)])
def test_attention_each_kernel(backend, path, lq, lk, causal, monkeypatch):
    """Every attention kernel on every backend, whatever attention_path would pick here."""
    from webrlx.compiler import lower_attention
    monkeypatch.setattr(lower_attention, "FORCE_PATH", path)
    mask = np.ones((3, lk), np.int32)
    mask[2, lk // 3:] = 0
    check(backend, lambda q, k, v, m: wr.nn.attention(q, k, v, mask=m, causal=causal),
          lambda q, k, v, m: _attn(q, k, v, mask=m, causal=causal), rand(3, 4, lq, 32),
          rand(3, 4, lk, 32, seed=1), rand(3, 4, lk, 32, seed=2), mask, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("path", ["row", "rows", "regs", "flash", "matmul"])
def test_attention_each_kernel_float16(backend, path, monkeypatch):
    """Every attention kernel with f16 q, k, v (f16 MiniLM's attention; the flash kernel's
    key-chunk branch must compile for f16 too, though only f32 takes it)."""
    from webrlx.compiler import lower_attention
    monkeypatch.setattr(lower_attention, "FORCE_PATH", path)
    mask = np.ones((2, 70), np.int32)
    mask[1, 20:] = 0
    q, k, v = (rand(2, 4, n, 32, seed=s).astype(np.float16).astype(np.float32)
               for n, s in ((40, 0), (70, 1), (70, 2)))

    def build(q, k, v, m):
        return wr.nn.attention(q.cast("float16"), k.cast("float16"), v.cast("float16"),
                               mask=m).cast("float32")
    check(backend, build, lambda q, k, v, m: _attn(q, k, v, mask=m), q, k, v, mask,
          rtol=1e-2, atol=3e-3)


@pytest.mark.parametrize("subgroups", [True, False])
@pytest.mark.parametrize("d,lq,lk,causal", [(4, 64, 64, False), (8, 130, 200, True),
                                            (16, 65, 129, False), (32, 129, 190, False),
                                            (32, 100, 300, True)])
def test_flash_attention_tiles(backend, d, lq, lk, causal, subgroups, monkeypatch):
    """attention_flash (64 query rows x 64-key tiles, online softmax) on every backend: head
    dims 4..32 (keys split 16..2 ways in P V), partial query and key tiles, padding masks
    that blank whole tiles, causal rows, the row max and sum over subgroups (where the device
    has them in runs of 16+) or workgroup memory."""
    from webrlx.compiler import lower_attention
    monkeypatch.setattr(lower_attention, "FORCE_PATH", "flash")
    monkeypatch.setattr(lower_attention, "FLASH_SUBGROUPS", subgroups)
    mask = np.ones((2, lk), np.int32)
    mask[1, 10:] = 0                   # row 1: keys 10.. masked (whole tiles of them)
    check(backend, lambda q, k, v, m: wr.nn.attention(q, k, v, mask=m, causal=causal),
          lambda q, k, v, m: _attn(q, k, v, mask=m, causal=causal), rand(2, 3, lq, d) * 3,
          rand(2, 3, lk, d, seed=1) * 3, rand(2, 3, lk, d, seed=2), mask, rtol=1e-4,
          atol=1e-5)


@pytest.mark.parametrize("splits", [2, 3])
def test_flash_attention_key_chunks(backend, splits, monkeypatch):
    """attention_flash with the keys cut into chunks, one workgroup each (SPLITS), merged by
    attention/flash_combine: causal rows whose later chunks hold no keys, a batch whose mask
    blanks whole chunks, partial last tiles, the output permuted to (B, L, H, D)."""
    from webrlx.compiler import lower_attention
    monkeypatch.setattr(lower_attention, "FORCE_PATH", "flash")
    monkeypatch.setattr(lower_attention, "FLASH_SPLITS", splits)
    mask = np.ones((2, 300), np.int32)
    mask[1, 40:] = 0
    for causal in (False, True):
        check(backend, lambda q, k, v, m, c=causal: wr.nn.attention(q, k, v, mask=m, causal=c),
              lambda q, k, v, m, c=causal: _attn(q, k, v, mask=m, causal=c), rand(2, 3, 130, 32),
              rand(2, 3, 300, 32, seed=1) * 2, rand(2, 3, 300, 32, seed=2), mask, rtol=1e-4,
              atol=1e-5)
    check(backend, lambda q, k, v: wr.nn.attention(q, k, v).permute(0, 2, 1, 3),
          lambda q, k, v: _attn(q, k, v).transpose(0, 2, 1, 3), rand(1, 2, 70, 16),
          rand(1, 2, 200, 16, seed=1), rand(1, 2, 200, 16, seed=2), rtol=1e-4, atol=1e-5)
    if backend.name != "reference":
        g = wr.Graph()
        ins = [g.input(n, (1, 2, 70 if n == "q" else 200, 16)) for n in "qkv"]
        exe = wr.compile(g, outputs=[wr.nn.attention(*ins)], device=backend)
        names = [c.name for c in exe.plan({}).program.calls]
        assert names == [f"attention_flash[{splits} key chunks]", "flash_combine"], names


def test_flash_attention_key_chunk_counts():
    """flash_splits: key chunks double while batch x heads x query tiles x chunks stay under
    FLASH_SPLIT_WGS and each chunk keeps FLASH_SPLIT_MIN_KEYS keys (at most 8)."""
    from webrlx.compiler.lower_attention import flash_splits
    assert flash_splits(1, 12, 1024, 1024) == 2          # 192 workgroups -> 384
    assert flash_splits(1, 12, 2048, 2048) == 1          # 384 already
    assert flash_splits(1, 12, 512, 512) == 1            # chunks would be too short
    assert flash_splits(32, 12, 128, 128) == 1           # MiniLM: 768 workgroups already
    assert flash_splits(1, 1, 64, 8192) == 8


@pytest.mark.parametrize("rows,n,min_n", [(3, 2048, None), (2, 8188, None), (4, 4100, None),
                                          (9, 1000, 4), (5, 64, 4)])
def test_norms_with_rows_in_registers(backend, rows, n, min_n, monkeypatch):
    """norm/layer_norm_regs (the GPUs' default for rows of 128..8192, n % 4 == 0), forced on
    every backend: residual, weight and bias each on and off, rms_norm, a large mean, near-
    constant rows, 1 or 8 rows a workgroup and rows past the end in a workgroup."""
    used = force_regs_rows(monkeypatch, min_n)
    x = rand(rows, n) * 3 + 50
    check(backend, lambda x, r, w, b: wr.nn.layer_norm(x + r, w, b),
          lambda x, r, w, b: _ln(x + r, w, b), x, rand(rows, n, seed=1), rand(n, seed=2),
          rand(n, seed=3), rtol=1e-4, atol=1e-4)
    check(backend, lambda x: wr.nn.layer_norm(x, eps=1e-12), lambda x: _ln(x, eps=1e-12),
          np.broadcast_to(np.float32([1000.5, -3.3, 7e-3])[:, None], (3, n)).copy(),
          rtol=0, atol=3e-3)
    check(backend, lambda x, w: wr.nn.rms_norm(x, w, eps=1e-6),
          lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w, x,
          rand(n, seed=1), rtol=1e-4, atol=1e-5)
    assert backend.name == "reference" or used == ["norm/layer_norm_regs"] * 3


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lq,lk", [(64, 64), (100, 132), (8, 8), (5, 40)])
def test_attention_by_matmul_with_rows_in_registers(backend, lq, lk, causal, monkeypatch):
    """Attention's two-matmul form with its masked, scaled softmax in reduce/softmax_regs (the
    GPUs' pick for keys of 128..8192), forced on every backend for short rows."""
    from webrlx.compiler import lower_attention
    monkeypatch.setattr(lower_attention, "FORCE_PATH", "matmul")
    used = force_regs_rows(monkeypatch, 4)       # (lower_rows.softmax_rows_kernel builds it)
    mask = np.ones((2, lk), np.int32)
    mask[1, lk // 2 + 1:] = 0
    check(backend, lambda q, k, v, m: wr.nn.attention(q, k, v, mask=m, causal=causal),
          lambda q, k, v, m: _attn(q, k, v, mask=m, causal=causal), rand(2, 3, lq, 32),
          rand(2, 3, lk, 32, seed=1), rand(2, 3, lk, 32, seed=2), mask, rtol=1e-4, atol=1e-5)
    assert backend.name == "reference" or used == ["reduce/softmax_regs"]
