"""Shader sources: load shaders/<family>/<name>.wgsl and fill its {{KEY}} slots.

`{{KEY}}` is the only template syntax; it is used for element types and shared helpers.
Tile and workgroup sizes are WGSL `override` constants, set at pipeline creation.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

_SLOT = re.compile(r"\{\{([A-Z0-9_]+)\}\}")


def shader_dir() -> Path:
    """Return the shaders folder: inside the wheel, or at the checkout's top level."""
    here = Path(__file__).resolve().parent
    for cand in (here / "shaders", here.parent / "shaders"):
        if cand.is_dir():
            return cand
    raise FileNotFoundError("webrlx: shaders/ not found next to the package; reinstall webrlx")


@functools.lru_cache(maxsize=None)
def raw_shader(name: str) -> str:
    """Return the text of shaders/<name>.wgsl (name like "matmul/matmul")."""
    path = shader_dir() / f"{name}.wgsl"
    if not path.is_file():
        raise FileNotFoundError(f"webrlx: no shader {name!r} at {path}")
    return path.read_text()


def all_shaders() -> list[str]:
    return sorted(str(p.relative_to(shader_dir()).with_suffix(""))
                  for p in shader_dir().rglob("*.wgsl"))


def render(name: str, **slots: str) -> str:
    """Return shader `name` with every {{KEY}} replaced; the MATH and ROW_REDUCE helpers are
    built in."""
    slots.setdefault("MATH", raw_shader("common/math"))
    slots.setdefault("ROW_REDUCE", raw_shader("common/row_reduce"))
    text = raw_shader(name)
    missing = sorted({m for m in _SLOT.findall(text) if m not in slots})
    if missing:
        raise KeyError(f"shader {name!r}: no value for slots {missing}")
    text = _SLOT.sub(lambda m: slots[m.group(1)], text)
    code = re.sub(r"//[^\n]*", "", text)      # comments may mention f16 freely
    if re.search(r"\bf16\b", code) and "enable f16;" not in code:
        text = "enable f16;\n" + text
    return text
