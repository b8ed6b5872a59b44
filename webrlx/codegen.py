"""WGSL emitter for (fused) elementwise kernels.

An elementwise kernel evaluates an expression DAG once per output element. Each leaf reads an
operand through (offset, strides) over the output index, so broadcasts (stride 0), transposes,
slices and concat pieces are all just strided reads or writes. Sizes live in the uniform, so a
kernel's text depends only on structure (ops, dtypes, rank, contiguity) and is shared widely.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import dtype as dt
from .activations import unary_wgsl
from .kernels import Kernel, from_source, raw_shader
from .shape import strides_of

WORKGROUP = 256   # threads per workgroup; <= every adapter's maxComputeInvocationsPerWorkgroup


@dataclass(frozen=True)
class Strided:
    """A strided view of binding `binding` over the output index space (element units)."""
    binding: int
    dtype: dt.DType
    offset: int
    strides: tuple[int, ...]


@dataclass(frozen=True)
class Expr:
    """A node of the elementwise expression DAG: op over args (Exprs or operand indices)."""
    op: str                          # "load" | an elementwise op name
    args: tuple = ()                 # Exprs, or (operand index,) for "load"
    dtype: dt.DType = dt.float32
    attrs: tuple = field(default=())  # sorted (key, value) pairs


def value_type(d: dt.DType, f16: bool) -> str:
    """WGSL type an element is computed in (f16 math only where the device has shader-f16)."""
    return {"float32": "f32", "float16": "f16" if f16 else "f32", "int32": "i32",
            "uint32": "u32", "bool": "bool"}[d.name]


def storage_type(d: dt.DType, f16: bool) -> str:
    """WGSL element type of a storage buffer holding d (f16 falls back to f32 storage)."""
    return "f32" if d == dt.float16 and not f16 else d.wgsl


def convert(e: str, src: dt.DType, dst: dt.DType, f16: bool) -> str:
    ts, td = value_type(src, f16), value_type(dst, f16)
    if ts == td:
        return e
    if td == "bool":
        return f"({e} != {ts}(0))"
    if ts == "bool":
        return f"select({td}(0), {td}(1), {e})"
    return f"{td}({e})"


_UNARY = {
    "neg": "(-{0})", "abs": "abs({0})", "floor": "floor({0})", "ceil": "ceil({0})",
    "round": "round({0})", "exp": "exp_({0})", "log": "log_({0})", "sqrt": "sqrt({0})",
    "rsqrt": "inverseSqrt({0})", "sin": "sin({0})", "cos": "cos({0})", "erf": "erf_({0})",
    "relu": "max({0}, {t}(0))",                     # integer relu (float: the activation)
    "bitwise_not": "(~{0})",
}
# helpers in common/ieee and common/math are f32 (activations: webrlx/activations.py)
_F32_ONLY = {"erf", "exp", "log"}
_BINARY = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
           "div": "({0} / {1})", "maximum": "max({0}, {1})", "minimum": "min({0}, {1})",
           "bitwise_and": "({0} & {1})", "bitwise_or": "({0} | {1})", "bitwise_xor": "({0} ^ {1})",
           "shl": "({0} << u32({1}))", "shr": "({0} >> u32({1}))"}   # WGSL: count mod 32
_FLOAT_BINARY = {"maximum": "fmax_", "minimum": "fmin_"}   # NaN propagates (common/ieee)
_BOOL_BINARY = {"mul": "({0} && {1})", "maximum": "({0} || {1})", "minimum": "({0} && {1})",
                "add": "({0} || {1})"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _emit_op(e: Expr, args: list[tuple[str, dt.DType]], f16: bool) -> str:
    t = value_type(e.dtype, f16)
    attrs = dict(e.attrs)
    if e.op == "cast":
        (a, ad), = args
        if ad.is_float and e.dtype.is_int:
            return f"{t}(trunc({a}))"
        return convert(a, ad, e.dtype, f16)
    if e.op == "bitcast":
        return f"bitcast<{t}>({args[0][0]})"
    if e.op == "where":
        (c, cd), (a, ad), (b, bd) = args
        return f"select({convert(b, bd, e.dtype, f16)}, {convert(a, ad, e.dtype, f16)}, {c})"
    if e.op in _COMPARE:
        (a, ad), (b, bd) = args
        common = dt.result_dtype(ad, bd)
        a, b = convert(a, ad, common, f16), convert(b, bd, common, f16)
        if e.op == "ne" and common.is_float:     # `!=` may compile to an ordered compare
            return f"(!({a} == {b}))"
        return f"({a} {_COMPARE[e.op]} {b})"
    if e.op in _BINARY or e.op == "pow":
        a, b = (convert(x, d, e.dtype, f16) for x, d in args)
        if e.op == "pow":
            r = f"pow_(f32({a}), f32({b}))"
            return f"{t}(round({r}))" if e.dtype.is_int else f"{t}({r})"
        if e.dtype == dt.bool_:
            return _BOOL_BINARY[e.op].format(a, b)
        if e.op in _FLOAT_BINARY and e.dtype.is_float:
            return f"{t}({_FLOAT_BINARY[e.op]}(f32({a}), f32({b})))"
        return _BINARY[e.op].format(a, b)
    (a, ad), = args
    a = convert(a, ad, e.dtype, f16)
    if e.op == "neg" and t == "u32":
        return f"(0u - {a})"
    if e.op == "abs" and t == "u32":
        return a
    act = unary_wgsl(e.op, attrs, f"f32({a})") if e.dtype.is_float else None
    if act is not None:                              # activations: one table, f32 math
        return f"{t}{act}"
    if e.op in _F32_ONLY and t != "f32":
        return f"{t}({_UNARY[e.op].format(f'f32({a})', t='f32')})"
    return _UNARY[e.op].format(a, t=t)


def merge_dims(shape: tuple[int, ...], views: list[tuple[int, ...]]
               ) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Drop size-1 dims and merge neighbours every view walks contiguously (fewer divisions)."""
    if not shape:                                   # rank 0: one element at offset 0
        return (1,), [(0,) for _ in views]
    keep = [i for i, n in enumerate(shape) if n != 1] or [0]
    dims = [shape[i] for i in keep]
    vs = [[v[i] if shape[i] != 1 else 0 for i in keep] for v in views]
    i = len(dims) - 2
    while i >= 0:
        if all(v[i] == v[i + 1] * dims[i + 1] for v in vs):
            dims[i] *= dims[i + 1]
            del dims[i + 1]
            for v in vs:
                v[i] = v[i + 1]
                del v[i + 1]
        i -= 1
    return tuple(dims), [tuple(v) for v in vs]


def grid_1d(n_threads: int, wg: int = WORKGROUP, max_dim: int = 65535) -> tuple[int, int, int]:
    """Return a (x, y, 1) grid of workgroups covering n_threads (x*y may overshoot)."""
    groups = max(1, -(-n_threads // wg))
    x = min(groups, max_dim)
    return (x, -(-groups // x), 1)


_ENTRY = """@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid;
    if (i >= p.n) { return; }
"""


class _Indexer:
    """Collects the uniform fields of one kernel and writes index expressions over them."""

    def __init__(self, mshape: tuple[int, ...]) -> None:
        self.rank = len(mshape)
        self.cont = strides_of(mshape)
        self.fields: dict[str, int] = {"n": 1}
        for d in mshape:
            self.fields["n"] *= d
        for d in range(1, self.rank):
            self.fields[f"s{d}"] = mshape[d]
        self.need_decomp = False

    def index(self, tag: str, view: tuple[int, ...], offset: int) -> str:
        """The element index of a strided view at output index i (fields p.<tag>o, p.<tag>sD)."""
        self.fields[f"{tag}o"] = offset
        if all(st == 0 for st in view):
            return f"p.{tag}o"
        if view == self.cont:
            return f"(p.{tag}o + i)"
        self.need_decomp = True
        terms = []
        for d, st in enumerate(view):
            if st:
                self.fields[f"{tag}s{d}"] = st
                terms.append(f"i{d} * p.{tag}s{d}")
        return f"(p.{tag}o + {' + '.join(terms)})"

    def decomposition(self) -> list[str]:
        """WGSL lines splitting the flat index i into i0..i{rank-1} (when a view needs them)."""
        if not self.need_decomp:
            return []
        lines = ["    var r = i;"]
        for d in range(self.rank - 1, 0, -1):
            lines.append(f"    let i{d} = r % p.s{d}; r = r / p.s{d};")
        return lines + ["    let i0 = r;"]


def _load(v: Strided, idx: str, f16: bool) -> str:
    """WGSL reading element idx of binding v.binding, converted to v.dtype's value type."""
    raw = f"b{v.binding}[{idx}]"
    if v.dtype == dt.bool_:
        return f"({raw} != 0u)"
    if storage_type(v.dtype, f16) != value_type(v.dtype, f16):
        return f"{value_type(v.dtype, f16)}({raw})"
    return raw


def _body(expr: Expr, loads: list[str], f16: bool) -> tuple[list[str], str]:
    """One `let` per distinct subexpression (a DAG is evaluated once); return lines, result."""
    names: dict[Expr, str] = {}
    body: list[str] = []

    def emit(e: Expr) -> str:
        if e in names:
            return names[e]
        if e.op == "load":
            code = loads[e.args[0]]
        else:
            code = _emit_op(e, [(emit(a), a.dtype) for a in e.args], f16)
        name = f"v{len(names)}"
        names[e] = name
        body.append(f"    let {name}: {value_type(e.dtype, f16)} = {code};")
        return name
    return body, emit(expr)


def _store(out: Strided, result: str, f16: bool) -> str:
    """The value written to the output binding, in its storage type."""
    if out.dtype == dt.bool_:
        return f"select(0u, 1u, {result})"
    if storage_type(out.dtype, f16) != value_type(out.dtype, f16):
        return f"{storage_type(out.dtype, f16)}({result})"
    return result


def elementwise(expr: Expr, bindings: list[dt.DType], views: list[Strided], out: Strided,
                shape: tuple[int, ...], f16: bool) -> tuple[Kernel, dict[str, int]]:
    """Return (kernel, named params) computing out[idx] = expr over `shape`.

    bindings: dtype of each input buffer (binding k, named bk); views: strided reads (leaf
    "load" k reads views[k]); out: the strided write into the output buffer (the last binding).
    """
    mshape, mviews = merge_dims(shape, [v.strides for v in views] + [out.strides])
    ix = _Indexer(mshape)
    loads = [_load(v, ix.index(f"a{k}", mv, v.offset), f16)
             for k, (v, mv) in enumerate(zip(views, mviews))]
    body, result = _body(expr, loads, f16)
    o_idx = ix.index("o", mviews[-1], out.offset)
    ob = len(bindings)
    decls = [f"@group(0) @binding({k}) var<storage, read_write> b{k}: "
             f"array<{storage_type(d, f16)}>;" for k, d in enumerate([*bindings, out.dtype])]
    src = _source("generated elementwise kernel: bindings = inputs, output, params; "
                  "1 thread/element", ix, decls,
                  [raw_shader("common/ieee"), raw_shader("common/math")],
                  body + [f"    b{ob}[{o_idx}] = {_store(out, result, f16)};"])
    if f16:
        src = "enable f16;\n" + src
    return from_source("elementwise", src, trusted=True), dict(ix.fields)


def _source(title: str, ix: _Indexer, decls: list[str], helpers: list[str],
            body: list[str]) -> str:
    """A generated one-thread-per-item kernel: Params from ix's fields, the storage decls and
    the uniform after them, helper text, the entry point splitting i as ix needs, then body."""
    return "\n".join([
        f"// {title}", "override WG: u32 = 256;",
        "struct Params { " + ", ".join(f"{f}: u32" for f in ix.fields) + " }",
        *decls, f"@group(0) @binding({len(decls)}) var<uniform> p: Params;", *helpers,
        _ENTRY + "\n".join(ix.decomposition() + body), "}", ""])


def copy_vec4(view: Strided, out: Strided, shape: tuple[int, ...]
              ) -> tuple[Kernel, dict[str, int]] | None:
    """A copy of 4-byte elements (a permute or slice of one buffer) as vec4 moves: the kernel
    and its params, or None unless both views walk the last dim contiguously and every
    stride, offset and that dim's length are multiples of 4. Why: a thread per element made
    MiniLM's head splits (4096x384 f32 permutes) cost ~11 us each on an H200."""
    if not shape or shape[-1] % 4 or view.strides[-1] != 1 or out.strides[-1] != 1:
        return None
    if any(v % 4 for v in (*view.strides[:-1], *out.strides[:-1], view.offset, out.offset)):
        return None
    shape4 = shape[:-1] + (shape[-1] // 4,)
    quarter = [tuple(st // 4 if d < len(shape) - 1 else 1 for d, st in enumerate(v.strides))
               for v in (view, out)]
    mshape, mviews = merge_dims(shape4, quarter)
    ix = _Indexer(mshape)
    a_idx = ix.index("a0", mviews[0], view.offset // 4)
    o_idx = ix.index("o", mviews[1], out.offset // 4)
    decls = [f"@group(0) @binding({k}) var<storage, read_write> b{k}: array<vec4<u32>>;"
             for k in range(2)]
    src = _source("generated copy kernel: 4 elements (vec4<u32>) a thread; bindings = input, "
                  "output, params", ix, decls, [], [f"    b1[{o_idx}] = b0[{a_idx}];"])
    return from_source("copy_vec4", src, trusted=True), dict(ix.fields)

