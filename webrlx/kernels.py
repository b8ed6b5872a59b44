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
    """Return shader `name` with every {{KEY}} replaced; the MATH, ROW_REDUCE and VEC4_IO
    helpers are built in."""
    slots.setdefault("MATH", raw_shader("common/math"))
    slots.setdefault("ROW_REDUCE", raw_shader("common/row_reduce"))
    slots.setdefault("VEC4_IO", raw_shader("common/matmul_vec4_io"))
    text = raw_shader(name)
    missing = sorted({m for m in _SLOT.findall(text) if m not in slots})
    if missing:
        raise KeyError(f"shader {name!r}: no value for slots {missing}")
    for _ in range(2):                        # shared helpers may hold {{T}} slots themselves
        text = _SLOT.sub(lambda m: slots.get(m.group(1), m.group(0)), text)
    left = sorted(set(_SLOT.findall(text)))
    if left:
        raise KeyError(f"shader {name!r}: no value for slots {left}")
    code = re.sub(r"//[^\n]*", "", text)      # comments may mention f16 freely
    if re.search(r"\bf16\b", code) and "enable f16;" not in code:
        text = "enable f16;\n" + text
    return text
