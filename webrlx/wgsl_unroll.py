"""`// @unroll`: a kernel's marked `for` loops written out, one block per pass, at render time.

Why: Tint's robustness transform (on in Chrome, and in Dawn by default) clamps every index into
a function-scope array or vector that is not a constant: `s[r][c]` in a loop over r and c
becomes `s[min(r, 3)][min(c, 3)]`. An NVIDIA driver then keeps such an array in local memory
instead of registers, for every access of it, the constant ones in the hot loops included.
Flash attention ran 2.6-5.8x its native time under Dawn on an H200, and as fast as native with
robustness off (bench/results/2026-11-27-h200-dawn-robustness.json). Written out with the loop
variable a `const` in each block, every index is a constant expression, which the transform
leaves alone; naga and the drivers see the same code they unrolled themselves before.

The form: a line `// @unroll` right above `for (var X = A; X < B; X++) {`, where A and B are
integer literals or module-scope `const` integers (simple expressions of them: + - * / % and
min / max). A loop whose bounds are not known at render time, or whose body has `break` or
`continue`, stays a loop (the marker is a comment: the kernel is correct either way).
"""
from __future__ import annotations

import ast
import re

_MARK = re.compile(r"^[ \t]*// @unroll[ \t]*\n", re.M)
_FOR = re.compile(r"[ \t]*for\s*\(\s*var\s+(\w+)\s*=\s*([^;]+);\s*(\w+)\s*<\s*([^;]+);"
                  r"\s*(\w+)\s*\+\+\s*\)\s*\{")
_CONST = re.compile(r"^\s*const\s+(\w+)\s*:\s*[iu]32\s*=\s*([^;]+);", re.M)
_INT = re.compile(r"\b(\d+)[iu]\b")
MAX_PASSES = 64                         # a longer loop stays a loop (code size)


def _eval(expr: str, known: dict[str, int]) -> int | None:
    """An integer const expression of literals and known consts, or None."""
    try:
        tree = ast.parse(_INT.sub(r"\1", expr.strip()), mode="eval")
    except SyntaxError:
        return None

    def ev(n: ast.AST) -> int:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name) and n.id in known:
            return known[n.id]
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.Div: lambda: a // b, ast.Mod: lambda: a % b,
                   ast.LShift: lambda: a << b, ast.RShift: lambda: a >> b}
            if type(n.op) in ops:
                return ops[type(n.op)]()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                n.func.id in ("min", "max") and len(n.args) == 2 and not n.keywords:
            x, y = ev(n.args[0]), ev(n.args[1])
            return min(x, y) if n.func.id == "min" else max(x, y)
        raise ValueError(n)

    try:
        return ev(tree)
    except (ValueError, ZeroDivisionError):
        return None


def _consts(source: str) -> dict[str, int]:
    known: dict[str, int] = {}
    for m in _CONST.finditer(source):
        v = _eval(m.group(2), known)
        if v is not None:
            known[m.group(1)] = v
    return known


def _block_end(source: str, open_at: int) -> int:
    """Index just past the `}` that closes the `{` at open_at (comments skipped)."""
    depth, i = 0, open_at
    while i < len(source):
        if source.startswith("//", i):
            i = source.find("\n", i)
            if i < 0:
                break
            continue
        c = source[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced braces after an @unroll loop")


def unroll(source: str, known: dict[str, int] | None = None) -> str:
    """Return source with each `// @unroll` loop written out (see the module docstring)."""
    if "@unroll" not in source:
        return source
    known = _consts(source) if known is None else known
    out, pos = [], 0
    for m in _MARK.finditer(source):
        if m.start() < pos:             # inside a loop written out already (handled there)
            continue
        f = _FOR.match(source, m.end())
        if not f or not (f.group(1) == f.group(3) == f.group(5)):
            continue
        end = _block_end(source, f.end() - 1)
        body = source[f.end():end - 1]
        lo, hi = _eval(f.group(2), known), _eval(f.group(4), known)
        if lo is None or hi is None or hi - lo > MAX_PASSES or \
                re.search(r"\b(break|continue)\b", re.sub(r"//[^\n]*", "", body)):
            continue
        indent = source[m.end():f.start(1)].split("for")[0]
        ty = "u" if re.search(r"\d+u\b|^\s*[A-Za-z_]", f.group(2)) else "i"
        inner = unroll(body, known)     # marked loops inside
        blocks = [f"{indent}{{ const {f.group(1)} = {k}{ty};{inner}}}\n" for k in range(lo, hi)]
        out.append(source[pos:m.start()])
        out.append("".join(blocks))
        pos = end + (1 if source[end:end + 1] == "\n" else 0)
    out.append(source[pos:])
    return "".join(out)
