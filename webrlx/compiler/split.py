"""Tensors over the binding limit: kernels bind windows of them, one dispatch per piece.

WebGPU binds at most maxStorageBufferBindingSize bytes of a buffer at once (128 MiB on lavapipe
and in many browsers), while the buffer itself may be bigger (maxBufferSize). A kernel whose
work splits into independent pieces runs once per piece and binds, of every buffer over the
limit, only the window the piece touches (ORT-web and RLX split the same way):
- generated elementwise kernels (every fused chain, copy, permute and concat): ranges of the
  outermost merged dim, recursing into the next dim when one slab is still too big;
- row ops (reductions, softmax, norms, cumsum, top-k): ranges of rows, and a reduction whose
  single row is too big reduces column pieces first and then their partial results;
- matmul: ranges of A's rows; a weight over the limit is cut along K into partial products;
- gather: ranges of the table's rows, each piece writing the ids that fall inside it.
A window starts at a multiple of minStorageBufferOffsetAlignment and ends inside the buffer's
allocation (device_info.alloc_bytes); the kernel finds a piece's first element through an
offset param (elements from the window's start), or, for kernels without one, the piece starts
exactly on an aligned byte. Kernels that cannot split bind the whole buffer, and
memory.check_binding_limits names them before anything is created.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..codegen import merge_dims
from ..device_info import alloc_bytes
from .memory import BindingLimitError

MAX_PIECES = 4096   # dispatches one kernel may be split into before it is called too big


@dataclass(frozen=True)
class Window:
    """Bytes [start, start + size) of one buffer, bound in place of the whole buffer."""
    start: int
    size: int

    def shift(self, itemsize: int) -> int:
        """Elements before the window: subtract from an index into the whole buffer."""
        return self.start // itemsize


def window(nbytes: int, lo: int, hi: int, align: int) -> Window:
    """The window holding bytes [lo, hi) of an nbytes buffer: its start aligned down, its end
    rounded up to 16 bytes (a vec4 array binding) but inside the allocation."""
    start = lo // align * align
    end = min(max(-(-hi // 16) * 16, start + 16), alloc_bytes(nbytes))
    return Window(start, end - start)


@dataclass
class View:
    """A strided read or write of buffer `buf` (an index into the kernel's buffers)."""
    buf: int
    itemsize: int
    offset: int
    strides: tuple[int, ...]


@dataclass
class Piece:
    """One dispatch of a split elementwise kernel: its shape, each view's offset inside its
    window (or buffer) and strides over that shape, and the windows of the big buffers."""
    shape: tuple[int, ...]
    offsets: list[int]
    strides: list[tuple[int, ...]]
    windows: dict[int, Window]


def elementwise_pieces(shape: tuple[int, ...], views: Sequence[View], nbytes: Sequence[int],
                       limit: int, align: int, what: str) -> list[Piece]:
    """Split an elementwise kernel over `shape` so that no binding of a buffer bigger than
    `limit` (nbytes[k] of buffer k) binds more than `limit` bytes."""
    big = {k for k, n in enumerate(nbytes) if n > limit}
    mshape, mstrides = merge_dims(shape, [v.strides for v in views])
    if any(s < 0 for v, st in zip(views, mstrides) if v.buf in big for s in st):
        raise BindingLimitError(f"{what}: a view with negative strides over a tensor bigger "
                                f"than maxStorageBufferBindingSize ({limit} bytes)")
    pieces: list[Piece] = []

    def byte_range(d: int, offs: list[int], b: int, r: int, c: int) -> tuple[int, int]:
        lo = hi = None
        for v, o, st in zip(views, offs, mstrides):
            if v.buf != b:
                continue
            ext = sum((n - 1) * s for n, s in zip(mshape[d + 1:], st[d + 1:]))
            first = o + r * st[d]
            last = first + (c - 1) * st[d] + ext
            lo = first * v.itemsize if lo is None else min(lo, first * v.itemsize)
            hi = (last + 1) * v.itemsize if hi is None else max(hi, (last + 1) * v.itemsize)
        return lo or 0, hi or 0

    def windows(d: int, offs: list[int], r: int, c: int) -> dict[int, Window] | None:
        out = {}
        for b in big:
            w = window(nbytes[b], *byte_range(d, offs, b, r, c), align)
            if w.size > limit:
                return None
            out[b] = w
        return out

    def split(d: int, offs: list[int]) -> None:
        n, r = mshape[d], 0
        while r < n:
            if windows(d, offs, r, 1) is None:          # one slab is too big: go one dim in
                if d + 1 == len(mshape):
                    raise BindingLimitError(f"{what}: cannot split it under {limit} bytes")
                split(d + 1, [o + r * st[d] for o, st in zip(offs, mstrides)])
                r += 1
                continue
            lo, hi = 1, n - r                          # largest c whose windows fit
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if windows(d, offs, r, mid) is None:
                    hi = mid - 1
                else:
                    lo = mid
            wins = windows(d, offs, r, lo)
            assert wins is not None
            pieces.append(Piece(
                (lo, *mshape[d + 1:]),
                [o + r * st[d] - (wins[v.buf].shift(v.itemsize) if v.buf in wins else 0)
                 for v, o, st in zip(views, offs, mstrides)],
                [st[d:] for st in mstrides], wins))
            if len(pieces) > MAX_PIECES:
                raise BindingLimitError(f"{what}: more than {MAX_PIECES} pieces to stay "
                                        f"under {limit} bytes per binding")
            r += lo

    split(0, [v.offset for v in views])
    return pieces


def row_ranges(rows: int, row_bytes: Sequence[int], limit: int, align: int, exact: bool,
               multiple: int = 1) -> list[tuple[int, int]] | None:
    """Split rows into ranges whose bytes (row_bytes[k] per row of each big binding) fit a
    window under `limit`. exact: every range starts on an aligned byte of every binding (for
    kernels without an offset param); multiple: ranges are multiples of it where they can be
    (the vec4 matmuls want K % 4 == 0). None when one row (or one aligned group) is too big."""
    g = multiple
    if exact:
        for rb in row_bytes:
            g = math.lcm(g, align // math.gcd(rb, align))
    room = limit - align - 16                          # a window may start up to align early
    most = min((room // rb for rb in row_bytes if rb), default=rows)
    c = most // g * g
    if c < 1 and not exact:
        c = most
    if c < 1:
        return None
    return [(r, min(r + c, rows)) for r in range(0, rows, c)]
