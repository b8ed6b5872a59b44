"""Structural rules of the codebase, read from the source: imports flow one way, every op has a
row in each rule table, kernels declare what their rules pass, public API has docstrings."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from shader_slots import render_slots

import webrlx as wr
from webrlx import nn
from webrlx.compiler.lower import LOWERINGS
from webrlx.graph import SOURCES as graph_sources
from webrlx.kernels import _builtin_slots, all_shaders, kernel, parse_signature
from webrlx.ops import OPS
from webrlx.reference import REFERENCE
from webrlx.tensor import Tensor

PACKAGE = Path(wr.__file__).resolve().parent


# -- the import graph ----------------------------------------------------------------------------
def _module_name(path: Path, root: Path) -> str:
    """Dotted name of the module at path, in the package whose directory is root."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(path: Path, root: Path, modules: set[str]) -> set[str]:
    """The modules of `modules` that a file imports, at module or function level alike, except
    under `if TYPE_CHECKING:`. `from pkg import name` imports pkg.name where that is a module,
    else pkg; relative imports resolve against the file's package."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                found.add(sub if sub in modules else target)
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(ast.parse(path.read_text(), str(path)))
    return {m for m in found if m in modules and m != module}


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the modules it imports, for every module of the package at root."""
    paths = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    return {m: imports_of(p, root, set(paths)) for m, p in paths.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for dep in sorted(graph.get(m, ())):
            if dep not in index:
                connect(dep)
                low[m] = min(low[m], low[dep])
            elif dep in on_stack:
                low[m] = min(low[m], index[dep])
        if low[m] == index[m]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == m:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))
    for m in sorted(graph):
        if m not in index:
            connect(m)
    return cycles


def describe(graph: dict[str, set[str]], component: list[str]) -> str:
    """One import path around a component: a -> b -> ... -> a."""
    members = set(component)
    path = [component[0]]
    while True:                         # in a strongly connected component every walk closes
        nxt = min(d for d in graph[path[-1]] if d in members)
        if nxt in path:
            return " -> ".join(path[path.index(nxt):] + [nxt])
        path.append(nxt)


def check_no_import_cycles(root: Path) -> None:
    """Fail naming every import cycle among the modules of the package at root."""
    graph = import_graph(root)
    cycles = import_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(
        f"  {describe(graph, c)}  (component: {', '.join(c)})" for c in cycles)


def test_the_import_graph_has_no_cycles():
    check_no_import_cycles(PACKAGE)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "pkg"


@pytest.mark.parametrize("a_imports", [
    "from . import b",                             # a submodule named in from-import
    "from .b import f",
    "import pkg.b",
    "def g():\n    from pkg.b import f",            # at function level
    "from .sub import c",                          # through a subpackage
])
def test_the_cycle_check_fails_on_a_cycle(tmp_path, a_imports):
    root = _package(tmp_path, {"__init__.py": "", "a.py": a_imports + "\n",
                               "b.py": "from .sub.c import h\n", "sub/__init__.py": "",
                               "sub/c.py": "from ..a import g\n"})
    with pytest.raises(AssertionError, match=r"pkg\.a -> pkg\.(b|sub\.c) -> .*pkg\.a"):
        check_no_import_cycles(root)


def test_the_cycle_check_skips_type_checking_imports(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "", "a.py": "from .b import f\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import g\n"})
    check_no_import_cycles(root)
    assert import_graph(root) == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": set()}


def test_a_package_that_imports_its_importer_is_a_cycle(tmp_path):
    root = _package(tmp_path, {"__init__.py": "from .a import f\n",
                               "a.py": "import pkg\ndef f():\n    return pkg\n"})
    assert import_cycles(import_graph(root)) == [["pkg", "pkg.a"]]


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
    slots = render_slots(name)
    text = open(next(PACKAGE.parent.glob(f"shaders/{name}.wgsl"))).read()
    # the slots of its includes and of the generated blocks count too
    for _ in range(3):               # (includes within includes: ATTENTION_IO's {{QKV}})
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


def test_test_file_basenames_are_unique():
    """tests/ has no __init__.py files: pytest's rootdir imports refuse two test files of one
    basename in different folders, and the whole run stops at collection."""
    tests = Path(__file__).resolve().parents[1]
    seen: dict[str, list[str]] = {}
    for path in sorted(tests.rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(tests)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"rename one of each: {clashes}"
