"""tools/tint_spirv.mjs: the SPIR-V Tint writes for a webrlx kernel (Chrome's compile of it),
read through Dawn's dump_shaders toggle over SwiftShader. Robustness (Chrome's default) clamps
indices with UMin; the disable_robustness toggle takes most of them away, which the dump must
show; a shader Tint rejects exits 1 with Tint's message."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from webrlx.cli.dawn import SWIFTSHADER_ICD, dawn_package
from webrlx.cli.web_assets import WebAssets
from webrlx.kernels import kernel, raw_shader

ROOT = Path(__file__).resolve().parents[2]
CONSTANTS = '{"HAS_MASK": 1, "CAUSAL": 0, "SPLITS": 1}'


def tint(shader: Path, *args: str) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    assert node, "node is not installed (tools/setup.sh installs it)"
    return subprocess.run([node, str(ROOT / "tools" / "tint_spirv.mjs"), str(shader),
                           "--dawn", str(dawn_package(WebAssets(ROOT))), *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "VK_DRIVER_FILES": SWIFTSHADER_ICD})


@pytest.fixture(scope="module")
def flash_wgsl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tint") / "attention_flash.wgsl"
    path.write_text(kernel("attention/attention_flash", T="f32", D="32", QKV="vec4<f32>",
                           ROW_TILES=raw_shader("common/flash_rows")).source)
    return path


def test_the_spirv_of_a_kernel_and_robustness_clamps(flash_wgsl: Path) -> None:
    on = tint(flash_wgsl, "--constants", CONSTANTS)
    off = tint(flash_wgsl, "--constants", CONSTANTS, "--toggles", "disable_robustness")
    for run in (on, off):
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.startswith("/* Dumped SPIRV") and "Google Tint Compiler" in run.stdout
        assert "OpEntryPoint GLCompute" in run.stdout
    clamps_on, clamps_off = on.stdout.count(" UMin "), off.stdout.count(" UMin ")
    assert clamps_on > clamps_off, (clamps_on, clamps_off)


def test_a_rejected_shader_exits_1_with_tints_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.wgsl"
    bad.write_text("@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }\n")
    run = tint(bad)
    assert run.returncode == 1 and "bad.wgsl:1:" in run.stderr, run.stderr[-2000:]
    assert run.stdout == ""


def test_a_feature_the_adapter_lacks_is_named(flash_wgsl: Path) -> None:
    """--features asks the device for them (subgroup matrices on the GPU machine); SwiftShader
    has no subgroup matrices: exit 1 naming the feature, before any compile."""
    run = tint(flash_wgsl, "--constants", CONSTANTS, "--features",
               "subgroups,chromium-experimental-subgroup-matrix")
    assert run.returncode == 1 and run.stdout == ""
    assert "lacks chromium-experimental-subgroup-matrix" in run.stderr, run.stderr[-2000:]
