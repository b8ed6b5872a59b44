"""Program: the compiler's output. Virtual buffers, kernel calls in order, and the memory plan."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtype as dt

_ids = itertools.count()


@dataclass(eq=False)
class Buf:
    """A virtual buffer: where one contiguous tensor lives on the device."""
    nbytes: int
    kind: str                            # "input" | "param" | "state" | "const" | "temp"
    name: str | None = None              # input / param name
    value: np.ndarray | None = field(default=None, repr=False)   # const bytes, storage dtype
    id: int = field(default_factory=lambda: next(_ids))

    def __repr__(self) -> str:
        return f"Buf#{self.id}({self.kind}{' ' + self.name if self.name else ''}, {self.nbytes}B)"


@dataclass
class KernelCall:
    """One dispatch: shader text + overrides, buffers in binding order, uniform words, grid."""
    name: str                            # e.g. "matmul", "elementwise[add]"
    source: str
    buffers: list[Buf]                   # storage bindings in order; the uniform comes last
    writes: Buf                          # the buffer this call writes (the last binding)
    params: list[int]                    # uniform words (u32; f32 as bit patterns)
    grid: tuple[int, int, int]
    overrides: dict[str, Any] = field(default_factory=dict)
    node: int = -1                       # graph node it lowers
    # same bindings and params, other kernels: the autotuner may pick one (tune_key names
    # the problem, e.g. "matmul f32 128x384x384x1"); the fields above are the default
    variants: list[Variant] = field(default_factory=list)
    tune_key: str = ""
    shader: str = ""                     # the kernel's name, e.g. "reduce/softmax"
    args: dict[str, Any] = field(default_factory=dict)        # named params, as passed
    binding_names: tuple[str, ...] = ()  # the shader's names of `buffers`
    # binding index -> (byte offset, bytes): a window of a buffer over the binding limit
    # (split.py); other bindings bind their whole buffer
    windows: dict[int, tuple[int, int]] = field(default_factory=dict)

    def bound_bytes(self, i: int) -> int:
        """Bytes binding i binds: its window, or its whole buffer."""
        return self.windows[i][1] if i in self.windows else self.buffers[i].nbytes


@dataclass
class Variant:
    """Another kernel for a KernelCall: same bindings and uniform, its own text and grid."""
    name: str
    source: str
    grid: tuple[int, int, int]
    overrides: dict[str, Any] = field(default_factory=dict)
    signature: Any = None                # kernels.Signature: must equal the call's

    @classmethod
    def of(cls, name: str, kernel: Any, grid: tuple[int, int, int],
           overrides: dict[str, Any]) -> Variant:
        """A variant running kernels.Kernel `kernel` under `name`."""
        return cls(name, kernel.source, grid, dict(overrides), kernel.sig)


@dataclass
class Output:
    buf: Buf
    shape: tuple[int, ...]
    dtype: dt.DType


@dataclass
class Program:
    calls: list[KernelCall]
    outputs: list[Output]
    inputs: dict[str, tuple[Buf, tuple[int, ...], dt.DType]]
    params: dict[str, Buf]
    consts: list[Buf]
    states: dict[str, Buf] = field(default_factory=dict)
    offsets: dict[int, tuple[int, int]] = field(default_factory=dict)  # temp id -> (arena, off)
    arena_sizes: list[int] = field(default_factory=list)
    values: dict[int, Buf] = field(default_factory=dict)   # node id -> buffer holding it
    shapes: dict[int, tuple[int, ...]] = field(default_factory=dict)   # node id -> shape
    labels: dict[int, str] = field(default_factory=dict)   # node id -> "add 2x384 float32"

    def temps(self) -> list[Buf]:
        seen: dict[int, Buf] = {}
        for c in self.calls:
            for b in c.buffers:
                if b.kind == "temp":
                    seen.setdefault(b.id, b)
        for o in self.outputs:
            if o.buf.kind == "temp":
                seen.setdefault(o.buf.id, o.buf)
        return list(seen.values())

    def schedule(self) -> str:
        """Return a readable listing of the dispatches and the memory plan."""
        lines = [f"{'#':>3} {'kernel':<26} {'node (op shape dtype)':<34} {'workgroups':<15} "
                 "bindings -> written"]
        for i, c in enumerate(self.calls):
            node = f"%{c.node} {self.labels.get(c.node, '')}" if c.node >= 0 else "-"
            names = c.binding_names or tuple(f"b{k}" for k in range(len(c.buffers)))
            args = ", ".join(f"{n}=#{b.id}" for n, b in zip(names, c.buffers))
            lines.append(f"{i:3d} {c.name:<26} {node:<34} {str(c.grid):<15} {args} "
                         f"-> #{c.writes.id}")
        lines.append(f"{len(self.calls)} kernels; arenas: {self.arena_sizes} bytes; "
                     f"temps: {len(self.temps())}")
        return "\n".join(lines)
