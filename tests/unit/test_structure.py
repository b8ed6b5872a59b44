"""Structural rules of the codebase, read from the source: imports flow one way, every op has a
row in each rule table, kernels declare what their rules pass, public API has docstrings."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import webrlx as wr
from webrlx import nn
from webrlx.compiler.lower import LOWERINGS
from webrlx.compiler.lower_matmul import regs_slots, tiled_db_slots, tiled_slots, wide_slots
from webrlx.graph import SOURCES as graph_sources
from webrlx.kernels import _builtin_slots, all_shaders, kernel, parse_signature, raw_shader
from webrlx.ops import OPS
from webrlx.reference import REFERENCE
from webrlx.tensor import Tensor

PACKAGE = Path(wr.__file__).resolve().parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imports_of(path: Path) -> set[str]:
    """webrlx modules a file imports (at any depth, except under `if TYPE_CHECKING:`)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "webrlx")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "webrlx":
                for a in node.names:       # `from . import x` may name a submodule
                    sub = f"{target}.{a.name}"
                    found.add(sub if _exists(sub) else target)
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(ast.parse(path.read_text()))
    return {m for m in found if m != module}


def _exists(module: str) -> bool:
    rel = Path(*module.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def import_graph() -> dict[str, set[str]]:
    return {_module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the import graph (package __init__ edges to children ignored), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for dep in sorted(graph.get(m, ())):
            if dep.startswith(m + "."):        # a package importing its own submodules
                continue
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if state.get(dep) is None and dep in graph:
                cycle = dfs(dep)
                if cycle:
                    return cycle
        stack.pop()
        state[m] = 2
        return None
    for m in sorted(graph):
        if m not in state:
            cycle = dfs(m)
            if cycle:
                return cycle
    return None


def test_the_import_graph_has_no_cycles():
    assert find_cycle(import_graph()) is None, " -> ".join(find_cycle(import_graph()))


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_compiler_imports_no_backend_or_runtime():
    for mod, deps in import_graph().items():
        if mod.startswith("webrlx.compiler"):
            bad = [d for d in deps if d.startswith(("webrlx.backends", "webrlx.runtime"))]
            assert not bad, f"{mod} imports {bad}"


def test_graph_does_not_import_tensor():
    assert "webrlx.tensor" not in import_graph()["webrlx.graph"]


def test_core_layers_do_not_import_the_command_line_tools():
    for mod, deps in import_graph().items():
        if not mod.startswith(("webrlx.cli", "webrlx.__main__")):
            assert not [d for d in deps if d.startswith("webrlx.cli")], mod


# -- one row per op in each rule table -----------------------------------------------------------
SOURCES = set(graph_sources)


def test_every_op_has_a_reference_and_a_lowering_rule():
    ops = set(OPS) - SOURCES
    assert ops - set(REFERENCE) == set(), "ops without a numpy reference rule"
    assert ops - set(LOWERINGS) == set(), "ops without a lowering rule"
    assert set(REFERENCE) - ops == set(), "reference rules for unknown ops"
    assert set(LOWERINGS) - ops == set(), "lowering rules for unknown ops"


@pytest.mark.parametrize("table", ["REFERENCE", "LOWERINGS"])
def test_the_coverage_check_fails_when_a_rule_is_removed(table, monkeypatch):
    rules = {"REFERENCE": REFERENCE, "LOWERINGS": LOWERINGS}[table]
    monkeypatch.delitem(rules, "add")
    with pytest.raises(AssertionError):
        test_every_op_has_a_reference_and_a_lowering_rule()


# -- kernels declare what rules pass -------------------------------------------------------------
@pytest.mark.parametrize("name", [n for n in all_shaders() if not n.startswith("common/")])
def test_every_shader_declares_a_checked_signature(name):
    slots = {"T": "f32", "C": "f32", "OUT": "f32", "ACC": "f32", "LOWEST": "0.0",
             "HIGHEST": "1.0", "SCALE": "1.0", "MAX": "fmax_", "MIN": "fmin_",
             "ISNAN": "false", "D4": "8", "KT": "32", "KD": "256", "VPT": "4", "WG": "256",
             "D": "32", "ROW_TILES": raw_shader("common/flash_rows"),
             **(regs_slots(8, 2) if name == "matmul/matmul_regs" else
                wide_slots() if name == "matmul/matmul_wide" else
                tiled_db_slots() if name == "matmul/matmul_tiled_db" else tiled_slots(1))}
    text = open(next(PACKAGE.parent.glob(f"shaders/{name}.wgsl"))).read()
    # the slots of its includes and of the generated blocks count too
    text += "".join(v for k, v in _builtin_slots().items() if "{{" + k + "}}" in text)
    text += "".join(v for k, v in slots.items() if "{{" + k + "}}" in text)
    k = kernel(name, **{s: v for s, v in slots.items() if "{{" + s + "}}" in text})
    assert k.sig.bindings, name
    assert all(t in ("u32", "i32", "f32") for _, t in k.sig.params), name


def test_signature_rejects_wrong_names_and_types():
    k = kernel("reduce/softmax", T="f32")
    assert k.sig.bindings == ("x", "mask", "out")
    args = {"rows": 1, "n": 4, "per_batch": 1, "lq": 1, "q_off": 0, "scale": 0.5}
    bufs, words = k.pack({"x": 1, "mask": 2, "out": 3}, args)
    assert bufs == [1, 2, 3] and words[-1] == 0x3F000000      # 0.5 as f32 bits
    with pytest.raises(wr.kernels.KernelArgumentError, match="reduce/softmax.*missing.*scale"):
        k.pack({"x": 1, "mask": 2, "out": 3}, {a: v for a, v in args.items() if a != "scale"})
    with pytest.raises(wr.kernels.KernelArgumentError, match="unknown.*'y'"):
        k.pack({"x": 1, "mask": 2, "out": 3, "y": 4}, args)
    with pytest.raises(wr.kernels.KernelArgumentError, match="'rows' \\(u32\\)"):
        k.pack({"x": 1, "mask": 2, "out": 3}, {**args, "rows": 1.5})
    with pytest.raises(wr.kernels.KernelArgumentError, match="'rows' \\(u32\\)"):
        k.pack({"x": 1, "mask": 2, "out": 3}, {**args, "rows": -1})
    with pytest.raises(wr.kernels.KernelArgumentError, match="unknown overrides.*NOPE"):
        k.check_overrides({"NOPE": 1})


def test_signature_parser_enforces_the_binding_convention():
    bad = ("struct Params { n: u32 }\n@group(0) @binding(0) var<uniform> p: Params;\n"
           "@group(0) @binding(1) var<storage, read_write> out: array<f32>;")
    with pytest.raises(wr.kernels.KernelArgumentError, match="last binding"):
        parse_signature("bad", bad)


# -- docstrings on the public API ------------------------------------------------------------
def _public(cls_or_mod, names=None):
    for name, obj in inspect.getmembers(cls_or_mod):
        if name.startswith("_") or not (inspect.isfunction(obj) or isinstance(obj, property)):
            continue
        if inspect.ismodule(cls_or_mod) and getattr(obj, "__module__", "") != \
                cls_or_mod.__name__:
            continue
        yield name, obj


def test_that_all_docstrings_are_there():
    missing = [f"Tensor.{n}" for n, o in _public(Tensor) if not (o.__doc__ or "").strip()]
    missing += [f"Graph.{n}" for n, o in _public(wr.Graph) if not (o.__doc__ or "").strip()]
    missing += [f"Executable.{n}" for n, o in _public(wr.Executable)
                if not (o.__doc__ or "").strip()]
    missing += [f"nn.{n}" for n, o in _public(nn) if not (o.__doc__ or "").strip()]
    assert not missing, f"public API without a docstring: {missing}"
