"""Subgroup-matrix (tensor core) matmul variants: shaders/matmul/matmul_smat.wgsl's tile shapes,
the code its slots take, and the rule that offers them.

They are offered only for f16 matmuls on an adapter whose DeviceInfo lists f16 -> f32 16x16x16
subgroup matrices (Dawn's `chromium-experimental-subgroup-matrix` feature: Chrome / Dawn on
Vulkan with VK_KHR_cooperative_matrix, or Metal); everywhere else the register-tiled kernels
stay. The autotuner treats them as variants of the vec4 matmul call. Forcing one
(`autotune.PREFER = "matmul_smat_..."`) where the adapter lacks the feature raises
SubgroupMatrixUnavailable naming the missing feature instead of failing in the driver.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..device_info import DeviceInfo

FEATURE = "chromium-experimental-subgroup-matrix"
# None: offered (and the default) where available; "off": never; a shape's name (e.g.
# "matmul_smat_128x128_k32"): only that one, and an error where the adapter lacks the feature
# (tests and probes force each shape this way)
MODE: str | None = None
# the subgroup index from `@builtin(subgroup_id)` (True) or from the thread index (False)
SGID_BUILTIN = True
# workgroups from which the big tiles lead (an H100 has 132 SMs)
BIG_TILE_WORKGROUPS = 128


class SubgroupMatrixUnavailable(RuntimeError):
    """A subgroup-matrix kernel was forced on an adapter that cannot run it."""


@dataclass(frozen=True)
class SmatShape:
    """Subgroups along M and N (SGM x SGN, 32 lanes each), 16x16 tiles a subgroup (TM x TN),
    and the k of a step (BK): a workgroup computes (SGM*TM*16) x (SGN*TN*16)."""
    sgm: int
    sgn: int
    tm: int
    tn: int
    bk: int = 32
    pf1: bool = False    # matmul_smat: the tiles' loads one step ahead (before 2026-11-28), not two

    @property
    def name(self) -> str:
        extra = "_pf1" * self.pf1
        return f"matmul_smat_{self.bm}x{self.bn}_s{self.sgm}x{self.sgn}_k{self.bk}{extra}"

    @property
    def bm(self) -> int:
        return self.sgm * self.tm * 16

    @property
    def bn(self) -> int:
        return self.sgn * self.tn * 16

    @property
    def threads(self) -> int:
        return self.sgm * self.sgn * 32

    def workgroup_bytes(self, b_by_n: bool = False) -> int:
        """Two A and B tile buffers (rows padded by 8 halves; B's rows along k, or along n
        with b_by_n) and 1 KB of f32 staging a subgroup."""
        b = self.bn * (self.bk + 8) if b_by_n else self.bk * (self.bn + 8)
        tiles = 2 * (self.bm * (self.bk + 8) + b) * 2
        return tiles + self.sgm * self.sgn * 1024


# (H100 under Dawn: see shaders/matmul/matmul_smat.wgsl's header for what each measured)
SHAPES = (SmatShape(2, 4, 4, 2), SmatShape(2, 2, 4, 4), SmatShape(4, 2, 2, 4),
          SmatShape(2, 4, 4, 4, 16), SmatShape(2, 2, 2, 2))


# quant/qmatmul_smat_fused.wgsl's and quant/qmatmul_smat_qkv.wgsl's tile shapes: small tiles,
# for the fused projections of prefills of at most fuse.GEMV_MAX_M rows (a SmolLM2 128-token
# prefill: q / o 128x576x576 make 18 workgroups of 64x64 tiles, 72 of 32x32, on a GPU of 132
# SMs); lower_quant.fused_smat_rank orders them
# FUSED_TUNED_ONLY (32x16, 16x16; k 128 / 192) are for the residual projections (o, down:
# N = 576 at SmolLM2's width), whose 72 workgroups of 32x32 each wait on 9-24 serial k steps
# (about 20 us a call on an H100 for 42-113 MFLOP): more workgroups and fewer, fuller steps.
# Only the autotuner picks them (lower_quant.fused_smat_rank ranks them last). The deepest do
# not fit with SwiGLU's second tiles (fused_workgroup_bytes: left out there).
FUSED_TUNED_ONLY = (SmatShape(2, 1, 1, 1, 96), SmatShape(2, 1, 1, 1, 192),
                    SmatShape(1, 1, 1, 1, 96), SmatShape(2, 2, 1, 1, 128))
FUSED_SHAPES = (SmatShape(2, 2, 1, 1), SmatShape(2, 2, 1, 1, 64), SmatShape(2, 2, 1, 1, 96),
                SmatShape(2, 2, 1, 2), SmatShape(2, 2, 1, 2, 64), SmatShape(2, 2, 2, 1),
                SmatShape(2, 2, 2, 2), *FUSED_TUNED_ONLY)


def fused_prefills(info: DeviceInfo | None) -> bool:
    """Whether fused prefill projections run on subgroup matrices here (the fused shapes offered
    and not ruled out by MODE): then a prefill's q, k and v group into one dispatch
    (fuse.find_fusions' qkv_max_m), which only those kernels make fast at prefill rows."""
    return info is not None and available(info) and \
        (MODE is None or MODE in {sh.name for sh in FUSED_SHAPES})


def default_rank(shape: SmatShape, m: int, n: int, batch: int) -> tuple[int, int]:
    """Sort key of the shapes for one call: the first is the default. Big tiles when their
    grid still has BIG_TILE_WORKGROUPS workgroups, else the smallest tiles; SHAPES' order
    within a class."""
    wgs = -(-m // shape.bm) * -(-n // shape.bn) * batch
    big = shape.bm * shape.bn >= 128 * 128
    fills = wgs >= BIG_TILE_WORKGROUPS
    return (0 if big == fills else 1, SHAPES.index(shape))


def available(info: DeviceInfo) -> bool:
    """Whether the adapter runs matmul_smat: the feature, f16, and f16 -> f32 16x16x16."""
    return info.subgroup_matrix_f16


def _unavailable(name: str, info: DeviceInfo, missing: list[str], flag: str
                 ) -> SubgroupMatrixUnavailable:
    return SubgroupMatrixUnavailable(
        f"kernel {name!r} needs {', '.join(missing)}, which adapter {info.name!r} "
        f"({info.backend}) does not offer; it runs only where DeviceInfo.{flag} "
        "is true (Chrome/Dawn with the feature enabled)")


def check_forced(info: DeviceInfo, name: str) -> None:
    """Raise SubgroupMatrixUnavailable when variant `name` needs what `info` lacks."""
    if name.startswith(("matmul_smat", "attention_smat")) and not available(info):
        missing = [FEATURE] if FEATURE not in info.features else []
        if "shader-f16" not in info.features:
            missing.append("shader-f16")
        if not missing:
            missing.append("an f16 -> f32 16x16x16 subgroup matrix configuration")
        raise _unavailable(name, info, missing, "subgroup_matrix_f16")


def fits(info: DeviceInfo, shape: SmatShape, b_by_n: bool = False) -> bool:
    """Whether a shape's workgroup fits the adapter's limits (b_by_n: the B tile as
    quant/qmatmul_smat.wgsl holds it, see SmatShape.workgroup_bytes)."""
    return shape.threads <= info.max_workgroup_invocations and \
        shape.workgroup_bytes(b_by_n) <= info.limit("max-compute-workgroup-storage-size", 16384)


LEFT, RIGHT = "subgroup_matrix_left<f16, 16, 16>", "subgroup_matrix_right<f16, 16, 16>"


# Tint's current forms of the loads and stores: the layout is a template argument (row_major /
# col_major). The older forms with a bool argument are deprecated (Dawn warned at every
# pipeline that used them, 2026-11-28) and will go.
def mload(kind: str, ptr: str, offset: str, col_major: bool, stride: str) -> str:
    """A subgroupMatrixLoad of a `kind` matrix from ptr at offset, rows `stride` apart."""
    layout = "col_major" if col_major else "row_major"
    return f"subgroupMatrixLoad<{kind}, {layout}>({ptr}, {offset}, {stride})"


def mstore(ptr: str, offset: str, value: str, stride: str) -> str:
    """A row-major subgroupMatrixStore of value to ptr at offset, rows `stride` apart."""
    return f"subgroupMatrixStore<row_major>({ptr}, {offset}, {value}, {stride})"


def slots(shape: SmatShape, sgid_builtin: bool = True, copy: bool = True, products: bool = True,
          b_by_n: bool = False) -> dict[str, str]:
    """matmul_smat's slots for one shape: the subgroup index, the accumulators, one step's
    loads and multiply-accumulates (its BK / 16 k tiles written out), and the epilogue.
    copy=False / products=False leave out the tile copies / the products of the K loop (wrong
    results: probes time the two halves apart). b_by_n: the B tile is held [n][k] in 16-row
    panels as the A tile (pb its subgroup's first panel) and loaded column-major, as
    quant/qmatmul_smat.wgsl keeps it; else [k][n] flat (cb its subgroup's first column).

    Robustness (Tint, in Chrome): a subgroupMatrixLoad / Store whose offset, stride and array
    length are not all constants is wrapped in a bounds check and a branch. So the tiles are
    arrays of 16-row panels: each load takes `&As[pa + i]` (one clamped index) at a constant
    offset and stride, and the epilogue stores into its subgroup's own `St[sg]` at offset 0.
    Only the flat [k][n] B tile of matmul_smat.wgsl keeps a dynamic offset."""
    tiles = [(i, j) for i in range(shape.tm) for j in range(shape.tn)]
    acc = "\n".join(f"    var acc{i}_{j}: subgroup_matrix_result<f32, 16, 16>;" for i, j in tiles)
    mma = []
    for kk in range(shape.bk // 16 if products else 0):
        mma.append("        {")
        mma += [f"            let a{i} = "
                + mload(LEFT, f"&As[pa + {i}u]", f"{16 * kk}u", False, "SA") + ";"
                for i in range(shape.tm)]
        mma += [f"            let b{j} = "
                + (mload(RIGHT, f"&Bs[pb + {j}u]", f"{16 * kk}u", True, "SB") if b_by_n else
                   mload(RIGHT, "&Bs", f"cb + {16 * kk}u * SB + {16 * j}u", False, "SB")) + ";"
                for j in range(shape.tn)]
        mma += [f"            acc{i}_{j} = subgroupMatrixMultiplyAccumulate(a{i}, b{j}, "
                f"acc{i}_{j});" for i, j in tiles]
        mma.append("        }")
    stores = []
    for i, j in tiles:
        stores += [
            f"    {mstore('&St[sg]', '0u', f'acc{i}_{j}', '16u')};",
            "    workgroupBarrier();",
            "    {",
            f"        let r = row0 + (sm * TM + {i}u) * 16u + er;",
            f"        let c4 = (col0 + (sn * TN + {j}u) * 16u + ec) / 4u;",
            "        let s = er * 16u + ec;",
            "        store(wid.z, r, c4, vec4<f32>(St[sg][s], St[sg][s + 1u], St[sg][s + 2u], "
            "St[sg][s + 3u]));",
            "        store(wid.z, r, c4 + 1u, vec4<f32>(St[sg][s + 4u], St[sg][s + 5u], "
            "St[sg][s + 6u], St[sg][s + 7u]));",
            "    }",
            "    workgroupBarrier();"]
    return {"SGM": str(shape.sgm), "SGN": str(shape.sgn), "TM": str(shape.tm),
            "TN": str(shape.tn), "BK": str(shape.bk), "COPY": "true" if copy else "false",
            "KLOOP": _k_loop(shape, "\n".join(mma)),
            "SGID": "@builtin(subgroup_id) sg: u32" if sgid_builtin else "",
            "SGID_LET": "" if sgid_builtin else "let sg = tid / 32u;",
            "ACC_DECL": acc, "MMA": "\n".join(mma), "STORES": "\n".join(stores)}


def _k_loop(shape: SmatShape, mma: str) -> str:
    """matmul_smat's K loop around the products `mma` (which read the A panels from pa and the
    B columns from cb of their step's tile buffer): each step fetches a later step's tiles into
    registers (fetch), multiplies, stashes the registers into the other buffer and waits at
    one barrier. Two steps ahead (ra, rb and ra2, rb2, the loop taking two steps a turn, the
    second under a uniform `if` where K ends); with shape.pf1 one (ra, rb), as before.
    H200 under Dawn, 4096^3 (bench/device_dawn.sh smatpf, 2026-11-28): 128x256 k16 1.00 ->
    0.85 ms (its copies alone 0.94 -> 0.59, its products alone 0.72 -> 0.67), 128x128 s2x4
    k32 1.16 -> 1.01; torch f16 0.27."""
    def step(buf: int, ahead: str, regs: str, other: str) -> list[str]:
        return [f"        let pa = {buf}u * (BM / 16u) + sm * TM;",
                f"        let cb = {buf}u * TILE_B + sn * TN * 16u;",
                f"        if (COPY) {{ fetch(tid, a_base, b_base, row0, col0, {ahead}, {regs}); }}",
                mma,
                f"        if (COPY) {{ stash(tid, {1 - buf}u, {other}); }}",
                "        workgroupBarrier();"]
    if shape.pf1:
        return "\n".join(
            ["    for (var k0 = 0u; k0 < p.K; k0 += BK) {",
             "        let odd = (k0 / BK) & 1u;",
             "        let pa = odd * (BM / 16u) + sm * TM;     // the subgroup's first A panel",
             "        let cb = odd * TILE_B + sn * TN * 16u;   // its first B column",
             "        if (COPY) {",
             "            fetch(tid, a_base, b_base, row0, col0, k0 + BK, &ra, &rb);",
             "        }",
             mma,
             "        if (COPY) { stash(tid, 1u - odd, ra, rb); }",
             "        workgroupBarrier();",
             "    }"])
    return "\n".join(
        ["    var ra2: array<vec4<u32>, LA>;",
         "    var rb2: array<vec4<u32>, LB>;",
         "    fetch(tid, a_base, b_base, row0, col0, BK, &ra2, &rb2);",
         "    for (var k0 = 0u; k0 < p.K; k0 += 2u * BK) {",
         "      {",
         *step(0, "k0 + 2u * BK", "&ra, &rb", "ra2, rb2"),
         "      }",
         "      if (k0 + BK < p.K) {",
         *step(1, "k0 + 3u * BK", "&ra2, &rb2", "ra, rb"),
         "      }",
         "    }"])


def fused_slots(shape: SmatShape, w2: bool, sgid_builtin: bool = True) -> dict[str, str]:
    """quant/qmatmul_smat_fused.wgsl's slots for one shape: slots()' subgroup index and products
    (b_by_n), with w2 (SWIGLU's second weight) a second set of accumulators (acc2_<i>_<j>) over
    the Bs2 tile for the same columns; and the epilogue: each result tile (and its w2 tile)
    through the subgroup's St (St2), then each lane's 8 columns of one row to `epilogue`."""
    base = slots(shape, sgid_builtin, b_by_n=True)
    tiles = [(i, j) for i in range(shape.tm) for j in range(shape.tn)]
    acc, mma = [base["ACC_DECL"]], base["MMA"].split("\n")
    if w2:
        acc += [f"    var acc2_{i}_{j}: subgroup_matrix_result<f32, 16, 16>;" for i, j in tiles]
        out, step = [], 0
        for line in mma:                # each k tile's block: w2's loads and products last
            if line == "        }":
                out += [f"            let c{j} = "
                        f"{mload(RIGHT, f'&Bs2[pb + {j}u]', f'{16 * step}u', True, 'SB')};"
                        for j in range(shape.tn)]
                out += [f"            acc2_{i}_{j} = subgroupMatrixMultiplyAccumulate(a{i}, "
                        f"c{j}, acc2_{i}_{j});" for i, j in tiles]
                step += 1
            out.append(line)
        mma = out
    def four(st: str, at: str) -> str:
        return f"vec4<f32>({st}[sg][{at}], {st}[sg][{at} + 1u], {st}[sg][{at} + 2u], " \
               f"{st}[sg][{at} + 3u])"
    stores = []
    for i, j in tiles:
        stores.append(f"    {mstore('&St[sg]', '0u', f'acc{i}_{j}', '16u')};")
        if w2:
            stores.append(f"    {mstore('&St2[sg]', '0u', f'acc2_{i}_{j}', '16u')};")
        stores += ["    workgroupBarrier();", "    {",
                   f"        let r = row0 + (sm * TM + {i}u) * 16u + er;",
                   f"        let c = col0 + (sn * TN + {j}u) * 16u + ec;",
                   "        let s = er * 16u + ec;"]
        for h in (0, 4):
            at = f"s + {h}u" if h else "s"
            b = four("St2", at) if w2 else "vec4<f32>(0.0)"
            stores.append(f"        epilogue(r, c{' + 4u' if h else ''}, {four('St', at)}, {b});")
        stores += ["    }", "    workgroupBarrier();"]
    return {**base, "W2": "true" if w2 else "false", "ACC_DECL": "\n".join(acc),
            "MMA": "\n".join(mma), "STORES": "\n".join(stores)}


def fused_workgroup_bytes(shape: SmatShape, w2: bool) -> int:
    """quant/qmatmul_smat_fused.wgsl's workgroup memory: the A and B tiles, w2's B tiles, St
    and St2 (1 KB a subgroup each) and the rows' scales; where w2 is false its arrays keep
    one element."""
    panel = 16 * (shape.bk + 8) * 2
    a, b = 2 * shape.bm // 16 * panel, 2 * shape.bn // 16 * panel
    subgroups = shape.sgm * shape.sgn
    return a + b + (b if w2 else panel) + subgroups * 1024 + \
        (subgroups * 1024 if w2 else 1024) + shape.bm * 4 + 16


def eligible(m: int, n: int, k: int, offsets: dict[str, int], batch_strides: tuple[int, int]
             ) -> bool:
    """Whether a matmul call meets matmul_smat's alignment: K and N multiples of 8, and A's and
    B's element offsets and batch strides multiples of 8 (vec4<u32> loads of 8 halves)."""
    offs = [offsets.get("a_off", 0), offsets.get("b_off", 0), *batch_strides]
    return m > 0 and k % 8 == 0 and n % 8 == 0 and all(o % 8 == 0 for o in offs)


# attention/attention_smat.wgsl: flash attention on subgroup matrices (f16, head dims 16..64)
ATTENTION_DIMS = (16, 32, 64)


def attention_ok(info: DeviceInfo, d: int) -> bool:
    """Whether attention_smat runs an f16 attention of head dim d here: f16 -> f32 16x16x16
    subgroup matrices, 32-lane subgroups (its lanes split rows in halves or quarters), its
    threads (attention_subgroups(d) x 32) and its workgroup memory (44 KB at d 64)."""
    return available(info) and d in ATTENTION_DIMS and \
        (info.subgroup_size == 32 or info.subgroup_sizes == (32, 32)) and \
        attention_subgroups(d) * 32 <= info.max_workgroup_invocations and \
        attention_workgroup_bytes(d) <= info.limit("max-compute-workgroup-storage-size", 16384)


def attention_workgroup_bytes(d: int) -> int:
    """Ks and Vs (64 keys x (d + 8) halves), the key flags, Ps (64 x 72 halves) and Ss
    (64 x 68 floats)."""
    return 2 * 64 * (d + 8) * 2 + 64 * 4 + 64 * 72 * 2 + 64 * 68 * 4


def attention_subgroups(d: int) -> int:
    """attention_smat's subgroups of 32 lanes at head dim d (its workgroup is 32x that): 8 at
    head dims 32 and 64 (a row's softmax over 4 lanes), 4 at 16 (its O has 4 tiles, one a
    subgroup). 8 against 4 at 1x12x2048x64 under Dawn on an H200: 0.220-0.222 ms against
    0.269-0.272, MiniLM f16 32x128 1.35 against 1.43
    (bench/results/2026-11-28-h200-dawn-attention-smat-8-subgroups.json)."""
    return 8 if d >= 32 else 4


def _attention_split_slots(d: int) -> dict[str, str]:
    """attention_smat's Q loads and products, split across its subgroups so that each loaded
    Q, K (and at 4 subgroups P and V) tile feeds two products. With 4 subgroups, s computes S's
    rows 32 (s / 2) .. x keys 32 (s % 2) .. (2 x 2 tiles: 2 x d/16 Q tiles kept, 2 x d/16 K
    tiles a key tile) and O's tiles of rows `rt` x dims `dt` (d 64: 2 x 2, d 32: 2 x 1, d 16:
    1 x 1); with 8, S's rows 32 (s / 4) .. x keys 16 (s % 4) .. (2 x 1) and O's d 64: 2 x 1,
    d 32: 1 x 1. Each tile goes into the Ss panel of its 16 rows, where the lanes read them.
    At head dim 64 and 4 subgroups that is 24 matrix loads a subgroup a key tile, against 36
    when each subgroup took its own 16 rows: 1x12x2048x64 0.272-0.277 ms against 0.299-0.300
    under Dawn on an H200 (bench/results/2026-11-28-h200-dawn-attention-smat-split.json).
    A tile's first product is subgroupMatrixMultiply, then accumulates into that `var`, not an
    accumulate into a zeroed `var` declared in the key loop: that form kept the last tile's sums
    under Dawn on an H100 (outputs wrong past the first key tile)."""
    dc = d // 16
    nsg = attention_subgroups(d)
    if nsg == 4:
        rows = [f"2u * (sg / 2u) + {i}u" for i in range(2)]
        keys = [f"32u * (sg % 2u) + {16 * j}u" for j in range(2)]
        rt = rows if d >= 32 else ["sg"]
        dt = {64: ["2u * (sg % 2u)", "2u * (sg % 2u) + 1u"], 32: ["sg % 2u"], 16: ["0u"]}[d]
    else:
        rows = [f"2u * (sg / 4u) + {i}u" for i in range(2)]
        keys = ["16u * (sg % 4u)"]
        rt, dt = (rows, ["sg % 4u"]) if d == 64 else (["sg / 2u"], ["sg % 2u"])
    q_load = [f"    let q{i}{c} = {mload(LEFT, f'&Ps[{rows[i]}]', f'{16 * c}u', False, 'SP')};"
              for i in range(2) for c in range(dc)]
    s_mma = []
    for j, key in enumerate(keys):           # keys `key` .. + 16 of the tile
        at = f"({key}) * SK"
        s_mma += [f"        let k{j}{c} = {mload(RIGHT, '&Ks', f'{at} + {16 * c}u', True, 'SK')};"
                  for c in range(dc)]
        for i in range(2):
            s_mma.append(f"        var s{i}{j} = subgroupMatrixMultiply<f32>(q{i}0, k{j}0);")
            s_mma += [f"        s{i}{j} = subgroupMatrixMultiplyAccumulate(q{i}{c}, k{j}{c}, "
                      f"s{i}{j});" for c in range(1, dc)]
            s_mma.append(f"        {mstore(f'&Ss[{rows[i]}]', key, f's{i}{j}', 'SS')};")
    pv = [f"        let p{i}{c} = {mload(LEFT, f'&Ps[{r}]', f'{16 * c}u', False, 'SP')};"
          for i, r in enumerate(rt) for c in range(4)]
    for j, t in enumerate(dt):               # dims 16 dt .. of O
        pv += [f"        let v{c}{j} = "
               f"{mload(RIGHT, '&Vs', f'{16 * c}u * SK + 16u * ({t})', False, 'SK')};"
               for c in range(4)]
        for i, r in enumerate(rt):
            pv.append(f"        var o{i}{j} = subgroupMatrixMultiply<f32>(p{i}0, v0{j});")
            pv += [f"        o{i}{j} = subgroupMatrixMultiplyAccumulate(p{i}{c}, v{c}{j}, o{i}{j});"
                   for c in range(1, 4)]
            pv.append(f"        {mstore(f'&Ss[{r}]', f'16u * ({t})', f'o{i}{j}', 'SS')};")
    # where a lane starts its reads of S and O: the 32 lanes on 32 banks (row stride 68 floats;
    # halves: rows rl, rl + 8 apart by 2; quarters: parts 0..3 at 0, 2, 1, 3)
    rot = "(rl / 8u) * 2u + part" if nsg == 4 else "part / 2u + 2u * (part % 2u)"
    return {"NSG": str(nsg), "ROT": rot, "Q_LOAD": "\n".join(q_load),
            "S_MMA": "\n".join(s_mma), "PV_MMA": "\n".join(pv)}


def attention_slots(d: int, sgid_builtin: bool = True) -> dict[str, str]:
    """attention_smat's slots for head dim d: its subgroup index, the Q tiles' loads, and one
    key tile's two products written out (_attention_split_slots)."""
    return {"D": str(d), "SGID": "@builtin(subgroup_id) sg: u32, "
            "@builtin(subgroup_invocation_id) lane: u32" if sgid_builtin else "",
            "SGID_LET": "" if sgid_builtin else "let sg = lid / 32u;\n    let lane = lid % 32u;",
            **_attention_split_slots(d)}


# quant/qmatmul_mmq.wgsl: the int8 prefill on i8 -> i32 16x16x32 subgroup matrices (opt-in:
# INT8). Its tile shapes, (2, 4, 4, 2) first (128x128, the f16 kernel's lead); BK 32 or 64.
INT8 = False
# a shape's name (mmq_name): the int8 path with only that shape, an error where the adapter
# cannot run it (tests, probes)
MMQ_FORCE: str | None = None
MMQ_SHAPES = (SmatShape(2, 4, 4, 2), SmatShape(4, 2, 2, 4), SmatShape(2, 2, 2, 2, 64),
              SmatShape(2, 2, 2, 2))
LEFT_I8, RIGHT_I8 = "subgroup_matrix_left<i8, 32, 16>", "subgroup_matrix_right<i8, 16, 32>"


def available_i8(info: DeviceInfo) -> bool:
    """Whether the adapter runs qmatmul_mmq: the feature, i8 -> i32 16x16x32 matrices and
    32-lane subgroups (quant/qrows_i8.wgsl shares a group's max across neighbouring lanes)."""
    return info.subgroup_matrix_i8 and \
        (info.subgroup_size == 32 or info.subgroup_sizes == (32, 32))


def check_forced_i8(info: DeviceInfo) -> None:
    """Raise SubgroupMatrixUnavailable when MMQ_FORCE names an int8 kernel that `info` cannot
    run (smat.INT8 alone is a preference: without the feature the usual kernels stay)."""
    if MMQ_FORCE is None or available_i8(info):
        return
    missing = [FEATURE] if FEATURE not in info.features else []
    if not info.subgroup_matrix_i8:
        missing.append("an i8 -> i32 16x16x32 subgroup matrix configuration")
    if not missing:
        missing.append("32-lane subgroups")
    raise _unavailable(MMQ_FORCE, info, missing, "subgroup_matrix_i8")


def mmq_name(shape: SmatShape) -> str:
    """A qmatmul_mmq shape's variant name (MMQ_FORCE may name it to force it)."""
    return f"qmatmul_mmq_{shape.bm}x{shape.bn}_s{shape.sgm}x{shape.sgn}_k{shape.bk}"


def mmq_rank(shape: SmatShape, m: int, n: int) -> tuple[int, int]:
    """Sort key of MMQ_SHAPES for an m x n call: 128x128 tiles when their grid has
    BIG_TILE_WORKGROUPS workgroups, else the 64x64 ones; MMQ_SHAPES' order within a class."""
    wgs = -(-m // shape.bm) * -(-n // shape.bn)
    big = shape.bm * shape.bn >= 128 * 128
    return (0 if big == (wgs >= BIG_TILE_WORKGROUPS) else 1, MMQ_SHAPES.index(shape))


def mmq_workgroup_bytes(shape: SmatShape) -> int:
    """Two buffers of the A and B tiles (int8, rows padded by 16 bytes) and two 1 KB St slots a
    subgroup."""
    return 2 * (shape.bm + shape.bn) * (shape.bk + 16) + 2 * shape.sgm * shape.sgn * 1024


def mmq_slots(shape: SmatShape, sgid_builtin: bool = True) -> dict[str, str]:
    """qmatmul_mmq's slots for one shape: the i32 accumulators and f32 sums, a step's products
    (a group's first step starts each sum with subgroupMatrixMultiply: an accumulate into a
    reset `var` kept stale sums under Dawn, see _attention_split_slots), the group epilogue
    (each tile stored to its subgroup's St slot, alternating two so one barrier a tile
    suffices, and scaled into the lane's floats) and the final stores."""
    tiles = [(i, j) for i in range(shape.tm) for j in range(shape.tn)]
    acc = [f"    var acc{i}_{j}: subgroup_matrix_result<i32, 16, 16>;" for i, j in tiles]
    acc += [f"    var f{i}_{j}a = vec4<f32>(0.0);\n    var f{i}_{j}b = vec4<f32>(0.0);"
            for i, j in tiles]

    # an i8 load's offset and stride from an array<i32> in the array's words (SW a panel row,
    # 8 words a 32-k step): the Tint of npm webgpu 0.6.2 validates them so (in int8 elements
    # it refuses a 16-row panel as "too small"), and its SPIR-V agrees (results equal numpy)
    stride = "SW"

    def off(kk: int) -> str:
        return f"{8 * kk}u"

    def products(first: bool) -> str:
        out = []
        for kk in range(shape.bk // 32):
            out.append("            {")
            out += [f"                let a{i} = "
                    + mload(LEFT_I8, f"&As[pa + {i}u]", off(kk), False, stride) + ";"
                    for i in range(shape.tm)]
            out += [f"                let b{j} = "
                    + mload(RIGHT_I8, f"&Bs[pb + {j}u]", off(kk), True, stride) + ";"
                    for j in range(shape.tn)]
            if first and kk == 0:
                out += [f"                acc{i}_{j} = subgroupMatrixMultiply<i32>(a{i}, b{j});"
                        for i, j in tiles]
            else:
                out += [f"                acc{i}_{j} = subgroupMatrixMultiplyAccumulate(a{i}, "
                        f"b{j}, acc{i}_{j});" for i, j in tiles]
            out.append("            }")
        return "\n".join(out)
    epi, stores = [], []
    for t, (i, j) in enumerate(tiles):
        r = f"row0 + (sm * TM + {i}u) * 16u + er"
        c = f"col0 + (sn * TN + {j}u) * 16u + ec"
        slot = f"2u * sg + {t % 2}u"
        epi += ["            {",
                f"                {mstore(f'&St[{slot}]', '0u', f'acc{i}_{j}', '16u')};",
                "                workgroupBarrier();",
                f"                let v = scaled({slot}, g, {r}, {c}, e);",
                f"                f{i}_{j}a += v[0];",
                f"                f{i}_{j}b += v[1];",
                "            }"]
        stores += [f"    store({r}, {c}, f{i}_{j}a);", f"    store({r}, {c} + 4u, f{i}_{j}b);"]
    return {"SGM": str(shape.sgm), "SGN": str(shape.sgn), "TM": str(shape.tm),
            "TN": str(shape.tn), "BK": str(shape.bk),
            "SGID": "@builtin(subgroup_id) sg: u32" if sgid_builtin else "",
            "SGID_LET": "" if sgid_builtin else "let sg = tid / 32u;",
            "ACC_DECL": "\n".join(acc), "MMA_FIRST": products(True), "MMA": products(False),
            "EPILOGUE": "\n".join(epi), "STORES": "\n".join(stores)}
