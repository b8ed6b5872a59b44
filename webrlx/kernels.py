"""Kernels: WGSL sources with their declared signature, read once and checked at every call.

`kernel("reduce/softmax", T="f32")` loads shaders/<family>/<name>.wgsl, fills its {{KEY}} slots
(the only template syntax, used for element types and shared helpers) and parses what the
shader declares: storage bindings by name, the fields of `struct Params` with their types, and
its `override` constants. `Kernel.pack` turns named arguments into binding order and uniform
words, rejecting missing, extra or mistyped names with an error that names the shader.

Conventions every kernel follows (the loader checks the first two):
- bindings in order: storage inputs, the storage output last, then one uniform `p: Params`;
- `override WG: u32` (when declared) is the threads per workgroup, set from the adapter;
- tile sizes and switches are `override` constants, set at pipeline creation;
- storage bindings are written `var<storage, read_write>`; the loader declares the ones a
  kernel never writes `var<storage, read>` (read_only_storage), and a plan declares one
  read_write again for a dispatch that also writes its buffer (runtime/plan.py).
"""
from __future__ import annotations

import functools
import numbers
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import dtype as dt
from .wgsl_unroll import unroll

_SLOT = re.compile(r"\{\{([A-Z0-9_]+)\}\}")
_BINDING = re.compile(r"@binding\((\d+)\)\s*var(?:<([^>]*)>)?\s+(\w+)\s*:")
_PARAMS = re.compile(r"struct\s+Params\s*\{([^}]*)\}")
_OVERRIDE = re.compile(r"\boverride\s+(\w+)\s*:\s*(\w+)")
_COMMENT = re.compile(r"//[^\n]*")


class KernelArgumentError(ValueError):
    """A kernel was called with bindings, params or overrides its shader does not declare."""


def shader_dir() -> Path:
    """Return the shaders folder: inside the wheel, or at the checkout's top level."""
    here = Path(__file__).resolve().parent
    for cand in (here / "shaders", here.parent / "shaders"):
        if cand.is_dir():
            return cand
    raise FileNotFoundError("webrlx: shaders/ not found next to the package; reinstall webrlx")


@functools.cache
def raw_shader(name: str) -> str:
    """Return the text of shaders/<name>.wgsl (name like "matmul/matmul")."""
    path = shader_dir() / f"{name}.wgsl"
    if not path.is_file():
        raise FileNotFoundError(f"webrlx: no shader {name!r} at {path}")
    return path.read_text()


def all_shaders() -> list[str]:
    """Names of every shipped shader, e.g. "matmul/gemv" (common/ helpers included)."""
    return sorted(str(p.relative_to(shader_dir()).with_suffix("")).replace("\\", "/")
                  for p in shader_dir().rglob("*.wgsl"))


@functools.cache
def _builtin_slots() -> dict[str, str]:
    from .activations import wgsl_activate
    ieee = raw_shader("common/ieee")
    return {"IEEE": ieee,
            "MATH": ieee + "\n" + raw_shader("common/math") + "\n" + wgsl_activate(),
            "ROW_REDUCE": raw_shader("common/row_reduce"),
            "ROW_STATS": raw_shader("common/row_stats"),
            "VEC4_IO": raw_shader("common/matmul_vec4_io"),
            "NCHW": raw_shader("common/nchw"),
            "QBLOCKS": raw_shader("common/qblocks"),
            "QFORMATS": raw_shader("common/qformats"),
            "QFORMAT_DECLS": raw_shader("common/qformat_decls"),
            "SEGMENT_FORMAT": "",       # quant/qgemv_qkv: one format (else set_format(seg);)
            "ROPE_TURN": raw_shader("common/rope_turn"),
            "ROW_POSITIONS": raw_shader("common/row_positions"),
            "REDUCE_OPS": raw_shader("common/reduce_ops"),
            "ONLINE_SOFTMAX": raw_shader("common/online_softmax"),
            "QFUSED_IO": raw_shader("common/qfused_io"),
            "QSMAT_TILES": raw_shader("common/qsmat_tiles"),
            "QSMAT_BODY": raw_shader("common/qsmat_body"),
            "QFUSED_STORE": raw_shader("common/qfused_store"),
            "QKV_IO": raw_shader("common/qkv_io"),
            "QKV_SEGMENTS": raw_shader("common/qkv_segments"),
            "ROWS_I8_UNIT": raw_shader("common/rows_i8_unit"),
            "QGEMV_BODY": raw_shader("common/qgemv_body"),
            "ATTENTION_IO": raw_shader("common/attention_io"),
            "QKV": "{{T}}",             # attention_io's element (attention_flash: vec4)
            "KV_ATTENTION_IO": raw_shader("common/kv_attention_io"),
            "KV_CHUNKS": raw_shader("common/kv_chunks")}


# Storage bindings a kernel never writes are declared `var<storage, read>` when it is rendered
# (read_only_storage): the driver may then load them through the read-only cache path, and
# Dawn lets one buffer fill several of them in a dispatch. WEBRLX_READ_ONLY_BINDINGS=0 keeps
# every binding read_write as written (for A/B probes).
READ_ONLY_BINDINGS = os.environ.get("WEBRLX_READ_ONLY_BINDINGS", "1") != "0"
_RW_DECL = re.compile(r"(var\s*<\s*storage\s*,\s*)read_write(\s*>\s*(\w+)\s*:([^;]*);)")
_ASSIGN = re.compile(r"\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|\s*(?:\+\+|--)")
_SPACE = re.compile(r"\s*")
_MEMBER = re.compile(r"\.\s*\w+")
_ARRAY_LENGTH = re.compile(r"arrayLength\s*\(\s*$")


def _written(code: str, var: str) -> bool:
    """Whether comment-free WGSL code may write storage variable `var`: an assignment (plain,
    compound, ++/--) to it or to any element or member of it, or its address taken anywhere
    but in arrayLength (atomics, pointer arguments)."""
    for m in re.finditer(rf"(?<![\w.])(&?)\s*{var}\b", code):
        if m.group(1):
            if not _ARRAY_LENGTH.search(code, 0, m.start()):
                return True
            continue
        i = m.end()
        while True:                                  # skip [..] indices and .member accesses
            i = _SPACE.match(code, i).end()  # type: ignore[union-attr]
            if code.startswith("[", i):
                depth = 0
                while i < len(code):
                    depth += {"[": 1, "]": -1}.get(code[i], 0)
                    i += 1
                    if depth == 0:
                        break
            elif (member := _MEMBER.match(code, i)) is not None:
                i = member.end()
            else:
                break
        if _ASSIGN.match(code, i):
            return True
    return False


def read_only_storage(source: str) -> str:
    """Return source with every `var<storage, read_write>` binding that the code never writes
    (see _written; atomics stay read_write) declared `var<storage, read>`. Off when
    READ_ONLY_BINDINGS is false."""
    return _read_only_storage(source) if READ_ONLY_BINDINGS else source


@functools.lru_cache(maxsize=1024)
def _read_only_storage(source: str) -> str:
    """read_only_storage's work, once per source (every emitted call renders its kernel)."""
    code = _COMMENT.sub("", source)

    def one(m: re.Match[str]) -> str:
        if "atomic" in m.group(4) or _written(code, m.group(3)):
            return m.group(0)
        return m.group(1) + "read" + m.group(2)
    return _RW_DECL.sub(one, source)


_RO_DECL = re.compile(r"(var\s*<\s*storage\s*,\s*)read(\s*>\s*(\w+)\s*:)")


@functools.lru_cache(maxsize=1024)
def read_only_bindings(source: str) -> frozenset[str]:
    """The storage bindings source declares `var<storage, read>`."""
    return frozenset(m.group(3) for m in _RO_DECL.finditer(_COMMENT.sub("", source)))


def writable(source: str, names: frozenset[str] | set[str]) -> str:
    """Return source with the read-only storage bindings in `names` declared read_write again:
    for a dispatch where such a binding's buffer is also one the kernel writes (two windows of
    one arena), which WebGPU forbids for a read-only binding (runtime.plan)."""
    if not names:
        return source
    return _RO_DECL.sub(lambda m: m.group(1) + "read_write" + m.group(2)
                        if m.group(3) in names else m.group(0), source)


def render(name: str, **slots: str) -> str:
    """Return shader `name` with every {{KEY}} replaced; the IEEE (NaN/inf), MATH (IEEE's
    helpers too, and `activate`), ROW_REDUCE, ROW_STATS, VEC4_IO, NCHW, QBLOCKS, QFORMATS
    (QFORMAT_DECLS), ROPE_TURN, ROW_POSITIONS, REDUCE_OPS, ONLINE_SOFTMAX, QFUSED_IO, QKV_IO
    (QKV_SEGMENTS), ROWS_I8_UNIT, QGEMV_BODY, ATTENTION_IO, KV_ATTENTION_IO and KV_CHUNKS
    helpers are built in."""
    slots = {**_builtin_slots(), **slots}
    text = raw_shader(name)
    missing = sorted({m for m in _SLOT.findall(text) if m not in slots})
    if missing:
        raise KeyError(f"shader {name!r}: no value for slots {missing}")
    for _ in range(4):                        # helpers hold helpers (and {{T}} slots)
        text = _SLOT.sub(lambda m: slots.get(m.group(1), m.group(0)), text)
    left = sorted(set(_SLOT.findall(text)))
    if left:
        raise KeyError(f"shader {name!r}: no value for slots {left}")
    code = _COMMENT.sub("", text)             # comments may mention f16 freely
    if re.search(r"\bf16\b", code) and "enable f16;" not in code:
        text = "enable f16;\n" + text
    return read_only_storage(unroll(text))


@dataclass(frozen=True)
class Signature:
    """What a shader declares: storage bindings in order (the output last), the uniform's
    fields with their WGSL types, and its override constants with theirs."""
    bindings: tuple[str, ...]
    params: tuple[tuple[str, str], ...]
    overrides: tuple[tuple[str, str], ...]

    @property
    def output(self) -> str:
        return self.bindings[-1]


def parse_signature(name: str, source: str) -> Signature:
    """Read a shader's bindings, Params fields and overrides; check the binding convention."""
    code = _COMMENT.sub("", source)
    found = sorted((int(i), kind or "", var) for i, kind, var in _BINDING.findall(code))
    if [i for i, _, _ in found] != list(range(len(found))):
        raise KernelArgumentError(f"kernel {name!r}: bindings must be numbered 0..n-1 in "
                                  f"group 0, got {[i for i, _, _ in found]}")
    storage = tuple(var for _, kind, var in found if kind.startswith("storage"))
    uniforms = [(i, var) for i, kind, var in found if kind.startswith("uniform")]
    if not storage:
        raise KernelArgumentError(f"kernel {name!r}: declares no storage binding to write")
    if len(uniforms) > 1 or (uniforms and uniforms[0][0] != len(found) - 1):
        raise KernelArgumentError(f"kernel {name!r}: the one uniform (Params) must be the last "
                                  f"binding, got {uniforms}")
    params: tuple[tuple[str, str], ...] = ()
    m = _PARAMS.search(code)
    if m:
        fields = [f.strip() for f in m.group(1).replace("\n", " ").split(",") if f.strip()]
        params = tuple((f.split(":")[0].strip(), f.split(":")[1].strip()) for f in fields)
        bad = [(f, t) for f, t in params if t not in ("u32", "i32", "f32")]
        if bad:
            raise KernelArgumentError(f"kernel {name!r}: Params fields must be u32, i32 or "
                                      f"f32 scalars, got {bad}")
    if bool(m) != bool(uniforms):
        raise KernelArgumentError(f"kernel {name!r}: declare `struct Params` and bind it as "
                                  "the last binding, or neither")
    return Signature(storage, params, tuple(_OVERRIDE.findall(code)))


@dataclass(frozen=True)
class Kernel:
    """A WGSL compute kernel (entry point `main`) and its declared signature."""
    name: str
    source: str
    sig: Signature

    def pack(self, bindings: Mapping[str, Any], params: Mapping[str, Any]
             ) -> tuple[list[Any], list[int]]:
        """Return (bindings in binding order, uniform words) from named arguments."""
        _same_names(self.name, "bindings", set(bindings), self.sig.bindings)
        _same_names(self.name, "params", set(params), tuple(f for f, _ in self.sig.params))
        words = []
        for field_name, wgsl_type in self.sig.params:
            value = params[field_name]
            if not isinstance(value, numbers.Real):
                raise KernelArgumentError(f"kernel {self.name!r}: param {field_name!r} "
                                          f"({wgsl_type}) must be a number, got {value!r}")
            try:
                # any numbers.Real (numpy scalars too) converts with float() and int()
                words.append(dt.word(value, wgsl_type))  # type: ignore[arg-type]
            except ValueError as e:
                raise KernelArgumentError(f"kernel {self.name!r}: param {field_name!r} "
                                          f"({wgsl_type}): {e}") from None
        return [bindings[b] for b in self.sig.bindings], words

    def check_overrides(self, overrides: Mapping[str, Any]) -> None:
        """Raise KernelArgumentError for an override the shader does not declare."""
        declared = {o for o, _ in self.sig.overrides}
        extra = sorted(set(overrides) - declared)
        if extra:
            raise KernelArgumentError(f"kernel {self.name!r}: unknown overrides {extra}; it "
                                      f"declares {sorted(declared)}")


def _same_names(kernel_name: str, what: str, got: set[str], want: tuple[str, ...]) -> None:
    missing, extra = sorted(set(want) - got), sorted(got - set(want))
    if missing or extra:
        raise KernelArgumentError(
            f"kernel {kernel_name!r}: {what} do not match the shader's declaration "
            f"{list(want)}" + (f"; missing {missing}" if missing else "") +
            (f"; unknown {extra}" if extra else ""))


@functools.cache
def _file_signature(name: str, source: str) -> Signature:
    return parse_signature(name, source)


# slots that change a kernel's declarations (not only types): its signature is read with them
DECL_SLOTS = ("QFORMAT_DECLS",)


def kernel(name: str, **slots: str) -> Kernel:
    """Load shaders/<name>.wgsl with its slots filled, and its signature (parsed once)."""
    source = render(name, **slots)
    decls = tuple((k, v) for k, v in sorted(slots.items()) if k in DECL_SLOTS)
    return Kernel(name, source, _file_signature(name, _signature_text(name, decls)))


@functools.cache
def _signature_text(name: str, decls: tuple[tuple[str, str], ...] = ()) -> str:
    """The shader with helper slots filled (decls: DECL_SLOTS given) and type slots set to
    f32: enough to read names."""
    text = raw_shader(name)
    slots = {**_builtin_slots(), **dict(decls)}
    for _ in range(4):
        text = _SLOT.sub(lambda m: slots.get(m.group(1), "f32"), text)
    return text


# First line of a kernel the native backend compiles with every runtime check on (bounds
# checks, loop bounding): user kernels. webrlx's own kernels run without them there
# (backends/wgpu_native.SHADER_CHECKS).
RUNTIME_CHECKS_MARK = "// webrlx: user kernel, runtime checks on\n"


def from_source(name: str, source: str, trusted: bool = False) -> Kernel:
    """Wrap WGSL text written elsewhere (a custom op, generated code) as a checked Kernel.
    Untrusted (user) sources get RUNTIME_CHECKS_MARK: an out-of-bounds index there is clamped,
    as wgpu does by default, and keep their declarations as written; trusted ones are webrlx's
    generated kernels, whose unwritten bindings become read-only (read_only_storage)."""
    return _from_source(name, source, trusted, READ_ONLY_BINDINGS)


@functools.lru_cache(maxsize=256)
def _from_source(name: str, source: str, trusted: bool, read_only: bool) -> Kernel:
    # read_only (READ_ONLY_BINDINGS) is only part of the cache key: the A/B switch may flip
    if not trusted and not source.startswith(RUNTIME_CHECKS_MARK):
        source = RUNTIME_CHECKS_MARK + source
    if trusted:
        source = read_only_storage(source)
    return Kernel(name, source, parse_signature(name, source))
