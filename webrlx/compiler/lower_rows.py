"""Lowering rules of row ops: reductions, softmax, cumsum, norms and top-k. Each moves its axis
last (one copy when needed), runs a [rows, n] kernel, and moves the result back."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .. import dtype as dt
from ..graph import Node
from ..kernels import Kernel, kernel, raw_shader
from . import split
from .emit import EmitContext, PartsSum
from .memory import BindingLimitError
from .program import Buf
from .registry import lowering

_REDUCE_OP = {"sum": 0, "mean": 0, "max": 1, "min": 2, "prod": 3, "argmax": 4}
_LIMITS = {"f32": ("inf_(0x80000000u)", "inf_(0u)"),
           "i32": ("(-2147483647i - 1i)", "2147483647i"), "u32": ("0u", "0xffffffffu")}


# elements one 256-thread workgroup reduces in a row: 32,768 loop iterations per thread
# (llvmpipe ends a loop nest after 65,535 without a word); longer rows reduce in pieces
ROW_RUN = 32768 * 256
# rows of up to this many elements reduce one thread each (reduce/reduce_short): a 256-thread
# workgroup per 12-element row cost MiniLM's pooling 100 ms on SwiftShader
SHORT_ROW_N = 64


def rows_per_workgroup(n: int) -> int:
    """Rows a ROW_REDUCE kernel handles per 256-thread workgroup: 8 (32 threads each) for
    rows of up to 1024 elements, else 1."""
    return 8 if n <= 1024 else 1


# subgroup row reductions (common/row_reduce_subgroup) where the device's subgroups were
# checked (DeviceInfo.subgroup_size: GPUs natively); False: the workgroup tree everywhere
SUBGROUP_ROWS = True


def row_reduce_slots(L: EmitContext, rpw: int, wg: int = 256) -> dict[str, str]:
    """The ROW_REDUCE helper of a kernel whose rows take wg // rpw threads: subgroup
    operations where the device's subgroup layout was checked and a row is whole subgroups,
    else (no slots given) the workgroup-memory tree of common/row_reduce."""
    sg = L.info.subgroup_size
    if SUBGROUP_ROWS and sg and ((wg // rpw) % sg == 0 or sg % (wg // rpw) == 0):
        return {"ROW_REDUCE": raw_shader("common/row_reduce_subgroup"), "SG": str(sg)}
    return {}


@lowering("sum", "mean", "max", "min", "prod", "argmax")
def _reduce(L: EmitContext, node: Node) -> Buf:
    x = L.graph.nodes[node.inputs[0]]
    rank = len(L.shape(x.id))
    if node.op == "argmax":
        axes: tuple[int, ...] = (node.attrs["axis"] % max(rank, 1),)
    else:
        axes = tuple(range(rank)) if node.attrs["axes"] is None else \
            tuple(sorted(a % rank for a in node.attrs["axes"]))
    buf, rows, n, _ = L.rows_last(x.id, axes)
    out = L.temp(L.shape(node.id), node.dtype)
    scale = (1.0 / n if n else float("nan")) if node.op == "mean" else 1.0
    reduce_rows(L, buf, out, rows, n, scale, x.dtype, node)
    return out


def _reduce_kernel(L: EmitContext, x_dtype: dt.DType, node: Node, short: bool = False
                   ) -> Kernel:
    """reduce/reduce (a workgroup per row), or reduce/reduce_short (a thread per row)."""
    acc = "f32" if x_dtype.is_float else x_dtype.wgsl
    out_t = "i32" if node.op == "argmax" else L.T(node.dtype)
    result = "acc" if short else "vals[lid]"
    scale = f"{result} * p.scale" if acc == "f32" else result
    lo, hi = _LIMITS[acc]
    f = acc == "f32"
    return kernel("reduce/reduce_short" if short else "reduce/reduce", T=L.T(x_dtype),
                  OUT=out_t, ACC=acc, LOWEST=lo, HIGHEST=hi,
                  SCALE=scale, MAX="fmax_" if f else "max", MIN="fmin_" if f else "min",
                  ISNAN="isnan_(v)" if f else "false")


def reduce_rows(L: EmitContext, x: Buf, out: Buf, rows: int, n: int, scale: float,
                x_dtype: dt.DType, node: Node) -> None:
    """out[r] = reduce(x[r, :n]) * scale; over the binding limit, ranges of rows bind windows
    (split.py), and rows that are too long on their own reduce in column pieces first."""
    name, op = f"reduce[{node.op}]", {"OP": _REDUCE_OP[node.op]}
    short = n <= SHORT_ROW_N
    k = _reduce_kernel(L, x_dtype, node, short)
    xs, os = L.itemsize(x_dtype), L.itemsize(node.dtype)
    too_long = n > ROW_RUN                  # (one workgroup per row: see ROW_RUN)
    if too_long and node.op == "argmax":
        L.check_loop(node, -(-n // 256))
    ranges = None
    if not too_long:
        ranges = split.row_ranges(rows, [n * xs, os], L.limit, L.align, exact=False) \
            if L.over_limit(x, out) else [(0, rows)]
    if ranges is None and node.op == "argmax":   # (index bookkeeping across pieces: not yet;
        ranges = [(0, rows)]                     # over the limit, check_binding_limits says so)
    if ranges is not None:
        rpw = rows_per_workgroup(n)
        for r0, r1 in ranges:
            wins, offs = L.place({"x": ("x_off", x, r0 * n, r1 * n, xs),
                                  "out": ("out_off", out, r0, r1, os)})
            L.emit(k, {"x": x, "out": out}, {"rows": r1 - r0, "n": n, **offs, "scale": scale},
                   L.grid(r1 - r0) if short else L.grid(-(-(r1 - r0) // rpw), 1),
                   op if short else {**op, "RPW": rpw}, name=name, windows=wins)
        return
    # rows too long for one binding or one workgroup: column pieces, then their results
    cols = split.row_ranges(n, [xs], min(L.limit, ROW_RUN * xs + L.align + 16), L.align,
                            exact=False)
    assert cols is not None
    if rows * len(cols) > split.MAX_PIECES:
        raise BindingLimitError(f"{name} (node {node.id}): {rows} rows of {n * xs} bytes "
                                f"need over {split.MAX_PIECES} pieces")
    partial = L.temp((rows, len(cols)), node.dtype)     # stage 1: one value per piece
    for r in range(rows):
        for j, (c0, c1) in enumerate(cols):
            wins, offs = L.place({"x": ("x_off", x, r * n + c0, r * n + c1, xs)})
            L.emit(k, {"x": x, "out": partial},
                   {"rows": 1, "n": c1 - c0, **offs, "out_off": r * len(cols) + j,
                    "scale": 1.0}, (1, 1, 1), op, name=name, windows=wins)
    # stage 2: the pieces' values (a sum's partial sums, a max's maxima), scaled for a mean
    reduce_rows(L, partial, out, rows, len(cols), scale, node.dtype, node)


def _row_op(L: EmitContext, node: Node, k: Kernel, rpw: int | None,
            overrides: Mapping[str, Any], params: Mapping[str, Any] | None = None,
            extra: Mapping[str, Buf] | None = None, wg: int = 256) -> Buf:
    """Run the [rows, n] kernel k over node.attrs['axis'] (moved last and back when needed):
    one thread per row (rpw None), or rpw rows per workgroup of wg threads (ROW_REDUCE
    kernels; wg is 256 but for reduce/softmax_regs' wide rows)."""
    shape = L.shape(node.id)
    axis = node.attrs.get("axis", -1) % len(shape)
    buf, rows, n, perm = L.rows_last(node.inputs[0], (axis,))
    out = L.temp(shape, node.dtype)
    if rpw is not None:
        overrides = {**overrides, "RPW": rpw}
    L.check_loop(node, -(-n // 8) if rpw is None else -(-n // (wg // rpw)))
    emit_rows(L, k, {"x": buf, **(extra or {}), "out": out}, ("x", "out"), rows, n,
              params or {}, lambda nr: L.grid(nr) if rpw is None else
              L.grid(-(-nr // rpw), 1), overrides, node.op)
    return L.unpermute(out, perm, tuple(shape[a] for a in perm), node.dtype)


def softmax_rows_kernel(L: EmitContext, dtype: dt.DType, n: int) -> tuple[Kernel, int]:
    """The one-workgroup-per-RPW-rows softmax kernel for rows of n elements and its RPW:
    reduce/softmax_regs (the row in registers, GPUs: regs_row_shape) or reduce/softmax (the
    loop kernel). Softmax and attention's two-matmul form both take it."""
    regs = regs_row_shape(L, n)
    if regs is None:
        rpw = rows_per_workgroup(n)
        return kernel("reduce/softmax", T=L.T(dtype), **row_reduce_slots(L, rpw)), rpw
    rpw, vpt = regs
    return kernel("reduce/softmax_regs", T=L.T(dtype), VPT=str(vpt), WG="256",
                  **row_reduce_slots(L, rpw)), rpw


def emit_rows(L: EmitContext, k: Kernel, bindings: Mapping[str, Buf], row_major: tuple[str, ...],
              rows: int, n: int, params: Mapping[str, Any], grid: Any,
              overrides: Mapping[str, Any], name: str) -> None:
    """Emit a [rows, n] kernel (params rows and n); when a `row_major` binding (whole rows of
    it per row) is over the binding limit, one call per range of rows, each binding windows
    that start exactly on an aligned byte (these kernels take no offset params)."""
    big = [b for b in row_major if L.over_limit(bindings[b])]
    ranges = None
    if big:
        row_bytes = {b: bindings[b].nbytes // max(rows, 1) for b in row_major}
        ranges = split.row_ranges(rows, [row_bytes[b] for b in row_major], L.limit, L.align,
                                  exact=True)
    if ranges is None:     # under the limit, or one row is too big (check_binding_limits says)
        L.emit(k, bindings, {"rows": rows, "n": n, **params}, grid(rows), overrides, name=name)
        return
    for r0, r1 in ranges:
        wins = {b: split.window(bindings[b].nbytes, r0 * row_bytes[b], r1 * row_bytes[b],
                                L.align) for b in big}
        L.emit(k, bindings, {"rows": r1 - r0, "n": n, **params}, grid(r1 - r0), overrides,
               name=name, windows=wins)


# rows held in registers (reduce/softmax_regs, norm/layer_norm_regs): on GPUs, rows of
# REGS_ROW_MIN_N to 4 * REGS_ROW_MAX_VPT * 256 elements with n % 4 == 0 (VPT vec4 a thread).
# H100 GPU time, loop kernels -> these (bench/probes/submit_gap_probe.py,
# bench/probes/rows_probe.py):
# softmax 4096x4096 85 -> 60 us, layer_norm 4096x4096 85 -> 57, softmax / layer_norm 4096x384
# 14.1 / 13.6 -> 10.4 / 9.3, 6144x512 19.9 / 18.4 -> 14.6 / 12.6, 1024x1024 19.6 / 17.5 ->
# 8.8 / 8.7, 4096x128 8.6 / 8.3 -> 7.3 / 7.4; attention's softmax at 12x512 keys 20.7 ->
# 15.1. Software adapters keep the loop kernels (a 16-float register array there ran lavapipe
# 1.8x and SwiftShader 1.3x slower); tests force these on every backend.
REGS_ROW_MIN_N = 64
REGS_ROW_MAX_VPT = 8
REGS_ROWS_ON_SOFTWARE = False
REGS_ROW_TPR: int | None = None   # (probe) threads a row, 32..256; None: the default


def regs_rows_per_workgroup(n: int) -> int:
    """Rows a register-row workgroup takes: 16 (16 threads, one vec4 each) up to 64 elements,
    8 (32 threads each) up to 512, 2 (128 threads, 2 vec4 each) up to 1024, else 1. H100 GPU
    time at 1024x1024 with 32 / 64 / 128 threads a row: softmax 11.6 / 9.3 / 8.8 us,
    layer_norm 10.7 / 8.8 / 8.7; at rows of 128, 384 and 512, 32 threads stayed fastest
    (bench/probes/rows_probe.py --tpr 64,128, 2026-11-25-h100-rows-probe-tpr.json). Rows of 64
    (H200, 262144 rows, ms a run, bench/probes/row_lengths_probe.py --tpr ,16 --min-n 128,64,
    2026-11-26-h200-row-lengths-probe-tpr.json): softmax 0.097 in the loop kernel, 0.078 here
    with 32 threads a row (half of them idle), 0.064 with 16 (torch 0.040); layer_norm 0.085 /
    0.071 / 0.067."""
    return 16 if n <= 64 else 8 if n <= 512 else 2 if n <= 1024 else 1


def regs_row_shape(L: EmitContext, n: int) -> tuple[int, int] | None:
    """(RPW, VPT) of the register-row kernels for rows of n elements, or None where they do
    not apply: n % 4 != 0, n out of range, or a software adapter."""
    if n % 4 or n < REGS_ROW_MIN_N or n > 4 * REGS_ROW_MAX_VPT * 256:
        return None
    if L.info.software and not REGS_ROWS_ON_SOFTWARE:
        return None
    rpw = regs_rows_per_workgroup(n)
    if REGS_ROW_TPR is not None and -(-n // (4 * REGS_ROW_TPR)) <= REGS_ROW_MAX_VPT:
        rpw = 256 // REGS_ROW_TPR
    return rpw, -(-n // (4 * (256 // rpw)))


# wide rows in registers (reduce/softmax_regs with up to 1024 threads a workgroup, one row
# each): softmax rows of 8193 to 4 * WIDE_ROW_MAX_VPT * 1024 elements on GPUs, n % 4 == 0, at
# least WIDE_ROW_MIN_ROWS rows; x is read once and out written once. H200 wall time per run,
# split form or loop kernel -> wide (bench/probes/wide_rows_probe.py, torch in brackets): 64x16384
# 17.0 -> 12.9 us (10.5), 256x12288 33.4 -> 20.1 (10.5); but with few rows, one SM a row is
# slower than the split form's chunks over many SMs: 32x49152 26.2 -> 28.2 (15.3), 8x32768
# 15.5 -> 19.9, 1x49152 18.8 -> 26.9 (13.5), so those keep the split form.
WIDE_ROW_MAX_VPT = 12
WIDE_ROW_MIN_ROWS = 64
WIDE_ROWS = True           # (probe) False: long rows keep the split form / loop kernel


def wide_row_shape(L: EmitContext, rows: int, n: int) -> tuple[int, int] | None:
    """(threads a workgroup, VPT) of reduce/softmax_regs for one row of n elements a
    workgroup, or None where it does not apply (see WIDE_ROW_MAX_VPT)."""
    wg = min(1024, L.info.max_workgroup_invocations)
    if n % 4 or n <= 4 * REGS_ROW_MAX_VPT * 256 or wg < 512 or rows < WIDE_ROW_MIN_ROWS:
        return None
    if L.info.software and not REGS_ROWS_ON_SOFTWARE:
        return None
    vpt = -(-n // (4 * wg))
    return (wg, vpt) if vpt <= WIDE_ROW_MAX_VPT else None


SPLIT_ROW_MIN_N = 8192     # rows from this long may be split over workgroups, when
SPLIT_ROW_MAX_WGS = 128    # one-workgroup-per-row would run fewer than this many workgroups
SPLIT_ROW_CHUNK = 2048     # elements a workgroup of the split form takes, at least: doubled
SPLIT_ROW_MAX_CHUNK = 16384   # (up to this) while rows x chunks > SPLIT_ROW_MAX_PIECES
SPLIT_ROW_MAX_PIECES = 512


def split_chunk(rows: int, n: int) -> int:
    """Elements a workgroup of the split form takes. Every finish workgroup combines all of its
    row's chunk results, so many small chunks cost rows x chunks^2 reads: H200 wall time of
    softmax 32x49152 with chunks of 1024 / 2048 / 4096 / 8192: 55.6 / 26.3 / 20.9 / 28.2 us,
    layer_norm 55.9 / 25.2 / 20.3 / 25.9; but 8x32768 and 1x49152 were fastest at 2048
    (13.8 / 15.2 us; 17.7 / 18.7 at 4096): few workgroups leave SMs idle
    (bench/probes/split_chunk_probe.py, 2026-11-26-h200-split-chunk-probe.json)."""
    chunk = SPLIT_ROW_CHUNK
    while rows * -(-n // chunk) > SPLIT_ROW_MAX_PIECES and chunk < SPLIT_ROW_MAX_CHUNK:
        chunk *= 2
    return chunk


def split_long_rows(rows: int, n: int) -> bool:
    """Whether softmax (reduce/softmax_parts + softmax_finish) and the norms (norm/norm_parts
    + norm_finish) run with chunks of a row over workgroups: long rows that one workgroup
    each would leave a GPU mostly idle (on an H100, 32 softmax rows of 49152 ran 148 us, 0.10
    of torch; split, 43 us)."""
    return n >= SPLIT_ROW_MIN_N and -(-rows // rows_per_workgroup(n)) < SPLIT_ROW_MAX_WGS


def _emit_split_rows(L: EmitContext, node: Node, shader: str, rows: int, n: int,
                     reads: Mapping[str, Buf], finish_extra: Mapping[str, Buf], out: Buf,
                     params: Mapping[str, Any], parts_overrides: Mapping[str, Any],
                     overrides: Mapping[str, Any]) -> None:
    """The split form of a row op: `{shader}_parts` writes each chunk's two statistics to a
    [rows, nparts, 2] temp, `{shader}_finish` combines a row's and writes its chunk of out;
    both over a (nparts, rows) grid and the same uniform."""
    chunk = split_chunk(rows, n)
    nparts = -(-n // chunk)
    L.check_loop(node, max(nparts, chunk // 256))   # (finish loops over nparts)
    parts = L.temp((rows, nparts, 2), dt.float32)
    params = {"rows": rows, "n": n, "chunk": chunk, "nparts": nparts, **params}
    t = L.T(node.dtype)
    L.emit(kernel(f"{shader}_parts", T=t, **row_reduce_slots(L, 1)), {**reads, "parts": parts},
           params,
           (nparts, rows, 1), dict(parts_overrides), name=f"{node.op}[parts]")
    L.emit(kernel(f"{shader}_finish", T=t), {**reads, **finish_extra, "parts": parts,
                                             "out": out},
           params, (nparts, rows, 1), dict(overrides), name=f"{node.op}[finish]")


@lowering("softmax", "log_softmax")
def _softmax(L: EmitContext, node: Node) -> Buf:
    shape = L.shape(node.id)
    axis = node.attrs.get("axis", -1) % len(shape)
    n = shape[axis]
    fits = math.prod(shape) * L.itemsize(node.dtype) <= L.limit     # x and out: one binding
    rows = math.prod(shape) // max(n, 1)
    overrides = {"LOG": node.op == "log_softmax"}
    params = {"per_batch": 1, "lq": 1, "q_off": 0, "scale": 1.0}
    wide = wide_row_shape(L, rows, n) if WIDE_ROWS else None
    if wide is not None:
        wg, vpt = wide
        k = kernel("reduce/softmax_regs", T=L.T(node.dtype), VPT=str(vpt), WG=str(wg),
                   **row_reduce_slots(L, 1, wg))
        return _row_op(L, node, k, 1, overrides, params, {"mask": L.dummy(0)}, wg=wg)
    if fits and split_long_rows(rows, n):
        buf, rows, n, perm = L.rows_last(node.inputs[0], (axis,))
        out = L.temp(shape, node.dtype)
        _emit_split_rows(L, node, "reduce/softmax", rows, n, {"x": buf}, {}, out,
                         {"scale": 1.0}, {}, overrides)
        return L.unpermute(out, perm, tuple(shape[a] for a in perm), node.dtype)
    k, rpw = softmax_rows_kernel(L, node.dtype, n)
    return _row_op(L, node, k, rpw, overrides, params, {"mask": L.dummy(0)})


@lowering("cumsum")
def _cumsum(L: EmitContext, node: Node) -> Buf:
    acc = "f32" if node.dtype.is_float else node.dtype.wgsl
    return _row_op(L, node, kernel("scan/cumsum", T=L.T(node.dtype), ACC=acc), None, {})


@lowering("layer_norm", "rms_norm")
def _norm(L: EmitContext, node: Node) -> Buf:
    shape = L.shape(node.id)
    residual = L.fusions.residuals.get(node.id)
    rows, n = math.prod(shape[:-1]), shape[-1]
    summed = _summed_parts(L, node, residual, rows, n)
    if summed is not None:           # x: a split-K matmul's partial products, summed here
        x = summed[0].parts
        r = L.buf(summed[1]) if summed[1] is not None else L.dummy(0)
    else:
        x, r = (L.buf(i) for i in residual) if residual else (L.buf(node.inputs[0]),
                                                               L.dummy(0))
    wb = [L.buf(i) for i in node.inputs[1:]]
    w = wb[0] if len(wb) > 0 else L.dummy(1)
    b = wb[1] if len(wb) > 1 else L.dummy(2)
    out = L.temp(shape, node.dtype)
    overrides: dict[str, bool | int] = {"RMS": node.op == "rms_norm", "HAS_W": len(wb) > 0,
                                        "HAS_B": len(wb) > 1, "HAS_RES": residual is not None}
    if split_long_rows(rows, n) and not L.over_limit(x, r, out):
        # few long rows: chunks of a row over workgroups (norm/norm_parts + norm_finish)
        _emit_split_rows(L, node, "norm/norm", rows, n, {"x": x, "r": r}, {"w": w, "b": b},
                         out, {"eps": node.attrs["eps"]},
                         {"RMS": overrides["RMS"], "HAS_RES": overrides["HAS_RES"]}, overrides)
        return out
    regs = regs_row_shape(L, n)
    params: dict[str, Any] = {"eps": node.attrs["eps"]}
    if regs is not None:                # the row in registers: one read of x (and r)
        rpw, vpt = regs
        k = kernel("norm/layer_norm_regs", T=L.T(node.dtype), VPT=str(vpt),
                   **row_reduce_slots(L, rpw))
        params["part"] = summed[0].stride // 4 if summed else 0
        overrides["PARTS"] = summed[0].pieces if summed else 1
    else:                               # (_summed_parts only where the regs kernel runs)
        rpw = rows_per_workgroup(n)
        L.check_loop(node, -(-n // (256 // rpw)))
        k = kernel("norm/layer_norm", T=L.T(node.dtype), **row_reduce_slots(L, rpw))
    emit_rows(L, k,
              {"x": x, "r": r, "w": w, "b": b, "out": out},
              ("x", "r", "out") if residual else ("x", "out"), rows, n,
              params, lambda nr: L.grid(-(-nr // rpw), 1),
              {**overrides, "RPW": rpw},
              f"{'split-K sum+' if summed else ''}{'add+' if residual else ''}{node.op}")
    return out


def _summed_parts(L: EmitContext, node: Node, residual: tuple[int, int] | None, rows: int,
                  n: int) -> tuple[PartsSum, int | None] | None:
    """(the parts, the residual's other operand) where the norm's input (or one operand of its
    fused residual add) is a split-K matmul's partial products still unsummed
    (lower_matmul._split_k) and the register-row kernel takes the rows whole; else None, and
    the caller's L.buf materializes that value with its sum kernel as before."""
    ids = list(residual) if residual else [node.inputs[0]]
    at = next((j for j, i in enumerate(ids) if i in L.parts_sums and i in L.lazy), None)
    if at is None or n % 4 or regs_row_shape(L, n) is None or split_long_rows(rows, n):
        return None
    ps = L.parts_sums[ids[at]]
    other = ids[1 - at] if residual else None
    if L.over_limit(ps.parts, *([L.buf(other)] if other is not None else [])):
        return None
    del L.parts_sums[ids[at]], L.lazy[ids[at]]   # (a + b == b + a: x may be either operand)
    return ps, other


@lowering("layer_norm_grad", "rms_norm_grad")
def _norm_grad(L: EmitContext, node: Node) -> Buf:
    shape = L.shape(node.id)
    x, dy = L.buf(node.inputs[0]), L.buf(node.inputs[1])
    w = L.buf(node.inputs[2]) if len(node.inputs) > 2 else L.dummy(0)
    out = L.temp(shape, node.dtype)
    rows, n = math.prod(shape[:-1]), shape[-1]
    rpw = rows_per_workgroup(n)
    L.check_loop(node, -(-n // (256 // rpw)))
    emit_rows(L, kernel("norm/norm_grad", T=L.T(node.dtype), **row_reduce_slots(L, rpw)),
              {"x": x, "dy": dy, "w": w, "out": out}, ("x", "dy", "out"), rows, n,
              {"eps": node.attrs["eps"]}, lambda nr: L.grid(-(-nr // rpw), 1),
              {"RMS": node.op == "rms_norm_grad", "HAS_W": len(node.inputs) > 2, "RPW": rpw},
              node.op)
    return out


@lowering("argtopk")
def _argtopk(L: EmitContext, node: Node) -> Buf:
    shape = L.shape(node.id)
    axis = node.attrs["axis"] % len(shape)
    x = L.graph.nodes[node.inputs[0]]
    buf, rows, n, perm = L.rows_last(x.id, (axis,))
    out = L.temp(shape, node.dtype)
    L.check_loop(node, node.attrs["k"] * -(-n // 256))
    emit_rows(L, kernel("index/topk", T=L.T(x.dtype)), {"x": buf, "out": out}, ("x", "out"),
              rows, n, {"k": node.attrs["k"]}, lambda nr: L.grid(nr, 1), {}, "argtopk")
    return L.unpermute(out, perm, tuple(shape[a] for a in perm), node.dtype)
