"""Pattern fusions found on the graph before lowering (elementwise chains fuse lazily while
emitting, see emit.py): matmul + bias + activation epilogues, residual add + norm, attention
whose only consumer is the (0, 2, 1, 3) permute back to (batch, seq, heads, dim), and the
quantized GEMV's neighbours in a decoder layer (rms_norm before it, gate/up + silu * mul,
residual add after it: quant/qgemv_fused.wgsl), and a layer's q, k and v GEMVs as one
dispatch (quant/qgemv_qkv.wgsl) where the device binds enough storage buffers: decode rows,
and prefills too where they run on tensor cores (quant/qmatmul_smat_qkv.wgsl).

Each pattern is one function over a node; find_fusions runs them all.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..activations import activation_of
from ..graph import SOURCES, Graph, Node
from . import int8_decode

__all__ = ["Fusions", "find_fusions", "consumers_of"]


@dataclass
class Epilogue:
    bias: int | None = None       # node id of a (N,) bias
    activation: str = "none"
    last: int = -1                # the node whose value the fused matmul produces


@dataclass
class QGemv:
    """What a quantized GEMV (a qmatmul of at most GEMV_MAX_M rows) takes in besides x @ w."""
    up: int | None = None         # SWIGLU: the up-projection qmatmul: out = silu(this) * up
    res: int | None = None        # node id of a residual added to the result
    rope: int | None = None       # the rope node over the (B, S, heads, hd) reshaped result
    cache: int | None = None      # the cache_write node the result (or its rope) goes to
    last: int = -1                # the node whose value the fused kernel produces


# rows up to which a qmatmul runs as a GEMV (lower_quant), so it can fuse. 128-token prefill of
# SmolLM2 on an H100: 46 ms with the tiled kernel past 64 rows (its 210 calls 37 ms of GPU
# time), 18 ms with the fused GEMVs at 128 and 256; on lavapipe 6.3 s vs 6.8 s
# (bench/probes/prefill_probe.py, bench/results/2026-11-23-h100-prefill-probe.json)
GEMV_MAX_M = 256
# q, k and v of up to this many rows (decode) run as one dispatch (quant/qgemv_qkv.wgsl) on
# devices with at least QKV_STORAGE_BUFFERS storage bindings per stage
QKV_MAX_M = 15       # (a batched engine's decode rows; from lower_quant.TILE_MIN_M = 16
                     # rows the tiled kernel leads, which q/k/v in one dispatch has not; on
                     # tensor cores, smat.fused_prefills, up to GEMV_MAX_M)
QKV_STORAGE_BUFFERS = 10
# a norm read by GEMVs of 5-15 rows runs as their prologue while the prologues read at most
# this many x bytes in all (_prologue_bytes), else as its own kernel: on an H200, 8 rows of the
# 1B model's head (16,032 workgroups) re-read 1 GB of x for the sums of squares (770 us
# against 282 us for 1 row)
PROLOGUE_MAX_BYTES = 32 << 20
# workgroup memory quant/qgemv_fused.wgsl declares besides the merged x row of COMBINE
GEMV_WORKGROUP_BYTES = 8448


@dataclass
class Fusions:
    epilogues: dict[int, Epilogue] = field(default_factory=dict)      # matmul id -> epilogue
    residuals: dict[int, tuple[int, int]] = field(default_factory=dict)  # norm id -> (x, r)
    bshd_attention: dict[int, int] = field(default_factory=dict)     # attention id -> permute id
    qgemv: dict[int, QGemv] = field(default_factory=dict)            # qmatmul id -> extras
    norm_prologue: dict[int, tuple[int, int, float]] = field(default_factory=dict)
    # ^ rms_norm id -> (x, weight, eps): every consumer (a qmatmul GEMV) normalizes x itself
    absorbed: set[int] = field(default_factory=set)                  # nodes not lowered alone
    qkv: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    # ^ the first member's qmatmul id -> (q, k, v qmatmul ids, -1 where that one runs
    #   alone): one dispatch; the other members are absorbed
    attn_combine: dict[int, int] = field(default_factory=dict)
    # ^ qmatmul id -> the cached_attention (one query row) whose per-chunk partials it merges


def consumers_of(graph: Graph, live: set[int], skip: set[int]) -> dict[int, list[int]]:
    """Return node id -> consumer ids, one entry per input slot (x * x counts twice)."""
    users: dict[int, list[int]] = {}
    for n in graph.nodes:
        if n.id in live and n.id not in skip:
            for i in n.inputs:
                users.setdefault(i, []).append(n.id)
    return users


@dataclass
class _Scan:
    """The graph facts every pattern reads, and the Fusions they fill in."""
    nodes: list[Node]
    users: dict[int, list[int]]
    outputs: set[int]
    shapes: dict[int, tuple[int, ...]]
    found: Fusions
    storage_buffers: int = 8          # the device's storage bindings per shader stage
    workgroup_bytes: int = 16384      # and its workgroup memory
    qkv_max_m: int = QKV_MAX_M        # rows up to which q, k and v group (find_fusions)
    # (m, n, k, x dtype) -> whether that qmatmul decodes its weight first and runs the f32
    # matmul (lower_quant.dequant_first): then it is no GEMV and fuses nothing
    dequant_first: Callable[[int, int, int, str], bool] = lambda m, n, k, t: False

    def only_user(self, i: int) -> int | None:
        u = self.users.get(i, [])
        return u[0] if len(u) == 1 and i not in self.outputs else None


def _matmul_epilogue(s: _Scan, n: Node) -> None:
    """matmul -> add (N,) bias -> activation: one kernel with a fused epilogue."""
    if n.op != "matmul" or len(n.inputs) != 2 or n.attrs.get("activation") != "none":
        return
    ep, cur = Epilogue(last=n.id), n.id
    u = s.only_user(cur)
    if u is not None and s.nodes[u].op == "add":
        other = [i for i in s.nodes[u].inputs if i != cur]
        if len(other) == 1 and s.shapes[other[0]] == (s.shapes[n.id][-1],) and \
                (other[0] < n.id or s.nodes[other[0]].op in SOURCES) and \
                s.nodes[other[0]].dtype == n.dtype and s.shapes[u] == s.shapes[n.id]:
            ep.bias, cur = other[0], u
            s.found.absorbed.add(u)
    u = s.only_user(cur)
    act = activation_of(s.nodes[u].op, s.nodes[u].attrs) if u is not None else None
    if u is not None and act is not None:
        ep.activation, cur = act, u
        s.found.absorbed.add(u)
    if cur != n.id:
        ep.last = cur
        s.found.epilogues[n.id] = ep


def _residual_norm(s: _Scan, n: Node) -> None:
    """norm(x + r) with x, r of one shape: the norm kernel adds them itself."""
    if n.op not in ("layer_norm", "rms_norm"):
        return
    a = s.nodes[n.inputs[0]]
    if a.op == "add" and s.only_user(a.id) == n.id and a.id not in s.found.absorbed and \
            s.shapes[a.inputs[0]] == s.shapes[a.inputs[1]] == s.shapes[a.id] and \
            s.nodes[a.inputs[0]].dtype == s.nodes[a.inputs[1]].dtype == a.dtype:
        s.found.residuals[n.id] = (a.inputs[0], a.inputs[1])
        s.found.absorbed.add(a.id)


def _bshd_attention(s: _Scan, n: Node) -> None:
    """attention whose only consumer permutes it to (B, L, H, D): write that layout directly."""
    if n.op != "attention":
        return
    u = s.only_user(n.id)
    if u is not None and s.nodes[u].op == "permute" and \
            tuple(s.nodes[u].attrs["axes"]) == (0, 2, 1, 3):
        s.found.bshd_attention[n.id] = u


def _gemv_rows(s: _Scan, n: Node) -> int | None:
    """Rows of a bias-free qmatmul that runs as a GEMV (None: another kernel or op)."""
    if n.op != "qmatmul" or len(n.inputs) != 2 or n.id in s.found.absorbed:
        return None
    m = 1
    for d in s.shapes[n.inputs[0]][:-1]:
        m *= d
    if s.dequant_first(m, n.attrs["n"], n.attrs["k"], s.nodes[n.inputs[0]].dtype.name):
        return None
    return m if m <= GEMV_MAX_M else None


def _norm_prologue(s: _Scan, n: Node) -> None:
    """rms_norm(x, w) read only by quantized GEMVs: each of them normalizes x in its prologue."""
    if n.op != "rms_norm" or len(n.inputs) != 2 or n.id in s.found.residuals or \
            n.id in s.outputs:
        return
    users = s.users.get(n.id, [])
    if users and all(s.nodes[u].inputs[0] == n.id and n.id not in s.nodes[u].inputs[1:] and
                     _gemv_rows(s, s.nodes[u]) is not None for u in users) and \
            _prologue_bytes(s, users) <= PROLOGUE_MAX_BYTES:
        s.found.norm_prologue[n.id] = (n.inputs[0], n.inputs[1], float(n.attrs["eps"]))
        s.found.absorbed.add(n.id)


def _prologue_bytes(s: _Scan, users: list[int]) -> int:
    """The x bytes the GEMVs' norm prologues would read, where a batched decode's rows
    (GEMV_ROWS < M < TILE_MIN_M) run as GEMVs: every workgroup of 8 weight rows sums the
    squares of all M rows itself (0 for other M: their cost was measured as fused; 0 for
    GEMVs on int8 x: quant/qx8.wgsl normalizes x once for them)."""
    m = _gemv_rows(s, s.nodes[users[0]]) or 0
    if m <= 4 or m > QKV_MAX_M:         # (4: lower_quant.GEMV_ROWS)
        return 0
    return sum(-(-s.nodes[u].attrs["n"] // 8) * m * s.nodes[u].attrs["k"] * 4 for u in users
               if not int8_decode.applies(m, s.nodes[u].attrs["format"], s.nodes[u].attrs["n"],
                                          s.nodes[u].attrs["k"],
                                          s.nodes[s.nodes[u].inputs[0]].dtype.name))


def _qgemv_epilogue(s: _Scan, n: Node) -> None:
    """qmatmul GEMV -> [silu(.) * an up qmatmul of the same x] -> [+ residual]: one kernel."""
    if _gemv_rows(s, n) is None:
        return
    q, cur = QGemv(last=n.id), n.id
    act = s.only_user(cur)
    mul = s.only_user(act) if act is not None and s.nodes[act].op == "silu" else None
    if act is not None and mul is not None and s.nodes[mul].op == "mul":
        other = [i for i in s.nodes[mul].inputs if i != act]
        o = s.nodes[other[0]] if len(other) == 1 else None
        if o is not None and _gemv_rows(s, o) is not None and o.inputs[0] == n.inputs[0] and \
                o.attrs == n.attrs and s.only_user(o.id) == mul and o.id not in s.found.qgemv:
            q.up, cur = o.id, mul
            s.found.absorbed.update((act, mul, o.id))
    u = s.only_user(cur)
    if u is not None and s.nodes[u].op == "add":
        other = [i for i in s.nodes[u].inputs if i != cur]
        if len(other) == 1 and s.shapes[other[0]] == s.shapes[cur] == s.shapes[u] and \
                s.nodes[other[0]].dtype == s.nodes[u].dtype and \
                (other[0] < n.id or s.nodes[other[0]].op in SOURCES):
            q.res, cur = other[0], u
            s.found.absorbed.add(u)
    if q.up is None and q.res is None:
        cur = _rope_cache(s, cur, q)
    if cur != n.id:
        q.last = cur
        s.found.qgemv[n.id] = q


def _rope_cache(s: _Scan, cur: int, q: QGemv) -> int:
    """qmatmul -> reshape (B, S, heads, hd) -> [interleaved rope, Llama 3's frequency factors
    too (they are in its table)] -> [cache_write]: the GEMV rotates its output pairs and
    writes the KV cache itself, at pos (1,) or at per-row positions and slots, pos (2, B) (a
    batched engine's step; common/row_positions.wgsl). Returns the new last node."""
    r = s.only_user(cur)
    if r is None or s.nodes[r].op != "reshape" or len(s.shapes[r]) != 4 or \
            s.shapes[r][-1] % 2 or s.shapes[r][2] * s.shapes[r][3] != s.shapes[cur][-1]:
        return cur
    chain, nxt = [r], s.only_user(r)
    if nxt is not None and s.nodes[nxt].op == "rope" and s.nodes[nxt].inputs[0] == r and \
            s.nodes[nxt].attrs.get("interleaved") and _positions(s, s.nodes[nxt].inputs[1], r):
        q.rope, chain, nxt = nxt, chain + [nxt], s.only_user(nxt)
    if nxt is not None and s.nodes[nxt].op == "cache_write" and \
            s.nodes[nxt].inputs[1] == chain[-1] and s.nodes[nxt].inputs[0] != chain[-1] and \
            _positions(s, s.nodes[nxt].inputs[2], r) and \
            (q.rope is None or s.nodes[nxt].inputs[2] == s.nodes[q.rope].inputs[1]):
        q.cache, chain = nxt, chain + [nxt]
    if q.rope is None and q.cache is None:
        return cur
    s.found.absorbed.update(chain)
    return chain[-1]


def _positions(s: _Scan, pos: int, rows: int) -> bool:
    """pos is one a fused GEMV reads (common/row_positions.wgsl): (1,), or (2, B) for the B
    batch rows of `rows`' (B, S, heads, hd)."""
    shape = s.shapes[pos]
    return len(shape) == 1 or (len(shape) == 2 and shape[0] == 2 and
                               shape[1] == s.shapes[rows][0])


def _qkv_group(s: _Scan, n: Node) -> None:
    """rms_norm read by exactly three decode GEMVs of one K: q (its output, maybe rotated),
    then k (maybe rotated) and v, each written into its KV cache at the same position, with
    one rope table: the three run as one dispatch (quant/qgemv_qkv.wgsl), with a weight
    format a segment where they differ (Q4_K_M files keep v in Q6_K in some layers)."""
    if n.id not in s.found.norm_prologue or s.storage_buffers < QKV_STORAGE_BUFFERS:
        return
    users = sorted(set(s.users.get(n.id, [])))
    if len(users) != 3 or any((_gemv_rows(s, s.nodes[u]) or s.qkv_max_m + 1) > s.qkv_max_m
                              for u in users):
        return
    q, k, v = (s.found.qgemv.get(u, QGemv(last=u)) for u in users)
    if any(e.up is not None or e.res is not None for e in (q, k, v)) or \
            q.cache is not None or k.cache is None or v.cache is None or v.rope is not None:
        return
    ropes = [s.nodes[e.rope] for e in (q, k) if e.rope is not None]
    if len({(r.attrs["base"], tuple(r.attrs.get("factors", ())), r.inputs[1])
            for r in ropes}) > 1:
        return
    cache_pos = {s.nodes[e.cache].inputs[2] for e in (k, v) if e.cache is not None}
    if len(cache_pos) != 1 or any(r.inputs[1] not in cache_pos for r in ropes):
        return
    hd = {s.shapes[s.nodes[e.cache].inputs[1]][-1] for e in (k, v) if e.cache is not None}
    if q.rope is not None:
        hd.add(s.shapes[q.rope][-1])
    if len(hd) != 1 or len({s.nodes[u].attrs["k"] for u in users}) != 1:
        return
    group = (users[0], users[1], users[2])
    members = list(group)
    s.found.qkv[members[0]] = group
    s.found.absorbed.update(members[1:])


def _attention_combine(s: _Scan, n: Node) -> None:
    """cached_attention of one query row -> reshape (1, 1, H * D) -> a GEMV (its x): the GEMV
    merges the attention's per-chunk partials itself, in workgroup memory, where
    decoder/attn_combine would run as its own dispatch (quant/qgemv_fused.wgsl COMBINE)."""
    if n.op != "cached_attention" or len(s.shapes[n.inputs[3]]) != 1:
        return
    b, rows, h, d = s.shapes[n.inputs[0]]
    r = s.only_user(n.id)
    if b * rows != 1 or r is None or s.nodes[r].op != "reshape" or \
            s.shapes[r] != (1, 1, h * d) or 4 * h * d + GEMV_WORKGROUP_BYTES > s.workgroup_bytes:
        return
    u = s.only_user(r)
    if u is None or s.nodes[u].inputs[0] != r or _gemv_rows(s, s.nodes[u]) != 1:
        return
    s.found.attn_combine[u] = n.id
    s.found.absorbed.add(r)


PATTERNS: tuple[Callable[[_Scan, Node], None], ...] = (_matmul_epilogue, _residual_norm,
                                                      _bshd_attention, _norm_prologue,
                                                      _qgemv_epilogue, _attention_combine)


def find_fusions(graph: Graph, live: set[int], users: dict[int, list[int]], outputs: set[int],
                 shapes: dict[int, tuple[int, ...]], storage_buffers: int = 8,
                 workgroup_bytes: int = 16384, qkv_max_m: int = QKV_MAX_M,
                 dequant_first: Callable[[int, int, int, str], bool] | None = None) -> Fusions:
    """Run every pattern over the live nodes, in graph order, then group q/k/v GEMVs (their
    epilogues must be known first) of up to qkv_max_m rows (GEMV_MAX_M where prefills' q, k
    and v run on tensor cores in one dispatch: quant/qmatmul_smat_qkv.wgsl)."""
    scan = _Scan(graph.nodes, users, outputs, shapes, Fusions(), storage_buffers,
                 workgroup_bytes, qkv_max_m)
    if dequant_first is not None:
        scan.dequant_first = dequant_first
    for n in graph.nodes:
        if n.id in live:
            for pattern in PATTERNS:
                pattern(scan, n)
    for n in graph.nodes:
        if n.id in live:
            _qkv_group(scan, n)
    return scan.found
