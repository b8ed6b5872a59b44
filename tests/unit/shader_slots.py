"""Slot values that render every shipped (non-common) shader with f32 types: the shader tests of
test_compiler.py (renders without unknown slots) and test_structure.py (checked signatures)."""
from __future__ import annotations

from webrlx.compiler import smat
from webrlx.compiler.lower_matmul import regs_slots, tiled_db_slots, tiled_slots, wide_slots
from webrlx.kernels import raw_shader


def render_slots(name: str) -> dict[str, str]:
    """Slots for shaders/<name>.wgsl: the shared f32 ones and the generated blocks it takes."""
    slots = dict(T="f32", C="f32", OUT="f32", ACC="f32", LOWEST="0.0", HIGHEST="1.0",
                 SCALE="1.0", MAX="fmax_", MIN="fmin_", ISNAN="false", D4="8", KT="32",
                 KD="256", VPT="4", WG="256", D="32", ROW_TILES=raw_shader("common/flash_rows"),
                 MR="8", RPT="2", TM="4", TN="4", V="4", W="vec4<u32>",
                 WORDS=raw_shader("common/qi8_words_vec4"),
                 QI8_PIECES=raw_shader("common/qi8_pieces"))
    slots.update(regs_slots(8, 2) if name == "matmul/matmul_regs" else
                 wide_slots() if name == "matmul/matmul_wide" else
                 tiled_db_slots() if name == "matmul/matmul_tiled_db" else
                 smat.slots(smat.SHAPES[0]) if name in ("matmul/matmul_smat",
                                                        "quant/qmatmul_smat") else
                 smat.fused_slots(smat.SHAPES[-1], True) if name == "quant/qmatmul_smat_fused"
                 else smat.fused_slots(smat.SHAPES[-1], False)
                 if name == "quant/qmatmul_smat_qkv"
                 else smat.attention_slots(32) if name == "attention/attention_smat" else
                 smat.mmq_slots(smat.MMQ_SHAPES[0]) if name == "quant/qmatmul_mmq" else
                 tiled_slots(1))
    return slots
