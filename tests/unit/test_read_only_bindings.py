"""kernels.read_only_storage: a storage binding a kernel never writes is declared
`var<storage, read>`; every write form keeps read_write; runtime.plan declares one read_write
again where its buffer is also written in the same dispatch (WebGPU forbids that mix)."""
from __future__ import annotations

import re

import pytest

from webrlx import kernels
from webrlx.runtime import plan

DECLS = "\n".join(f"@group(0) @binding({i}) var<storage, read_write> {n}: array<{t}>;"
                  for i, (n, t) in enumerate([("a", "f32"), ("b", "vec4<f32>"),
                                              ("c", "atomic<u32>"), ("out", "f32")]))


def kinds(body: str) -> dict[str, str]:
    src = kernels.read_only_storage(DECLS + "\nfn main() {\n" + body + "\n}")
    return {n: ("read" if n in kernels.read_only_bindings(src) else "read_write")
            for n in ("a", "b", "c", "out")}


@pytest.mark.parametrize("write", ["a[i] = 1.0;", "a[i + f(b[j])] += 2.0;", "a [ i ] *= 2.0;",
                                   "b[i].x = 1.0;", "b[i][2] = 0.0;", "b[a[i]].y -= 1.0;",
                                   "a[i]++;", "g(&a);", "a[i] <<= 1u;"])
def test_every_write_form_keeps_read_write(write: str) -> None:
    var = write.lstrip("g(&")[0]
    got = kinds(f"let x = out[0]; {write} out[0] = 1.0;")
    assert got[var] == "read_write" and got["out"] == "read_write", (write, got)


def test_reads_become_read_only_and_atomics_stay() -> None:
    got = kinds("let n = arrayLength(&a); let v = b[a[0] == 1.0] + b[i].x; "
                "let z = a[i] == 2.0; let q = atomicLoad(&c[0]); out[i] = v.x;")
    assert got == {"a": "read", "b": "read", "c": "read_write", "out": "read_write"}


def test_comments_do_not_count_as_writes() -> None:
    assert kinds("// a[i] = 2.0;\nout[0] = a[0];")["a"] == "read"


def test_switch_off_keeps_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "READ_ONLY_BINDINGS", False)
    assert kinds("out[0] = a[0];")["a"] == "read_write"


def test_every_shipped_kernel_keeps_what_it_writes() -> None:
    """Each shipped kernel keeps a writable binding, and the ones it writes by the plainest
    form (`name[...] =`) are all among them: a write form the detector missed would show here
    or as a WGSL compile error (a store to a read-only binding), never as a silent change."""
    checked = 0
    for name in kernels.all_shaders():
        if name.startswith("common/"):
            continue
        try:
            k = kernels.kernel(name, T="f32")
        except KeyError:                  # slots beyond T: rendered by their lowerings
            continue
        ro = kernels.read_only_bindings(k.source)
        code = kernels._COMMENT.sub("", k.source)
        stored = {b for b in k.sig.bindings if re.search(rf"\b{b}\s*\[[^;]*\]\s*=[^=]", code)}
        assert set(k.sig.bindings) - ro and not stored & ro, (name, ro, stored)
        checked += 1
    assert checked > 30           # the rest take slots their lowerings fill (backend tests)


def test_writable_restores_named_bindings() -> None:
    src = kernels.read_only_storage(DECLS + "\nfn main() { out[0] = a[0] + b[0].x; }")
    back = kernels.writable(src, {"a"})
    assert kernels.read_only_bindings(back) == {"b"}


def test_plan_declares_a_shared_buffer_read_write_again() -> None:
    """An input and the output bound from one buffer (two windows of the memory plan's arena)
    make that input read_write again; an input alone in its buffer stays read-only, even bound
    twice. (tests/backend/test_quant_formats.py's fused layers run such dispatches.)"""
    src = kernels.read_only_storage(DECLS + "\nfn main() { out[0] = a[0] + b[0].x; }")
    arena, other, counts = object(), object(), object()
    names = ("a", "b", "c", "out")
    entries = [(arena, 0, 16), (other, 0, 16), (counts, 0, 16), (arena, 256, 16)]
    assert plan._aliased_reads(src, names, entries) == {"a"}
    entries = [(other, 0, 16), (other, 0, 16), (counts, 0, 16), (arena, 256, 16)]
    assert plan._aliased_reads(src, names, entries) == set()
    # c (atomic) stays read_write though this kernel never touches it: b beside it goes back
    entries = [(other, 0, 16), (counts, 0, 16), (counts, 16, 16), (arena, 256, 16)]
    assert plan._aliased_reads(src, names, entries) == {"b"}
