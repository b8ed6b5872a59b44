"""The pure parts of the browser backend, natively: it must import without Pyodide."""
from __future__ import annotations

from webrlx.backends import js_webgpu
from webrlx.backends.base import WANTED_FEATURES, WANTED_LIMITS


def test_imports_outside_pyodide() -> None:
    assert not js_webgpu.IN_PYODIDE


def test_limit_names_convert_both_ways() -> None:
    assert js_webgpu.dashed("maxStorageBufferBindingSize") == "max-storage-buffer-binding-size"
    assert js_webgpu.dashed("maxComputeWorkgroupSizeX") == "max-compute-workgroup-size-x"
    for name in WANTED_LIMITS:
        assert js_webgpu.dashed(js_webgpu.camel(name)) == name
    assert js_webgpu.camel("min-storage-buffer-offset-alignment") == \
        "minStorageBufferOffsetAlignment"


def test_device_request_asks_only_for_what_the_adapter_has() -> None:
    limits = {"max-buffer-size": 1 << 30, "max-compute-invocations-per-workgroup": 256,
              "max-texture-dimension-2d": 8192}
    request = js_webgpu.device_request(limits, {"subgroups", "timestamp-query", "bgra8unorm"})
    assert request["requiredFeatures"] == ["subgroups", "timestamp-query"]
    assert set(request["requiredFeatures"]) < set(WANTED_FEATURES)
    dawn = js_webgpu.device_request(limits, {"shader-f16", "chromium-experimental-subgroup-matrix"})
    assert dawn["requiredFeatures"] == ["shader-f16", "chromium-experimental-subgroup-matrix"]
    assert request["requiredLimits"] == {"maxBufferSize": 1 << 30,
                                         "maxComputeInvocationsPerWorkgroup": 256}


def test_adapter_name_falls_back_to_vendor_and_architecture() -> None:
    assert js_webgpu.adapter_name({"description": "NVIDIA H100", "vendor": "nvidia"}) == \
        "NVIDIA H100"
    assert js_webgpu.adapter_name({"description": "", "vendor": "google",
                                   "architecture": "swiftshader"}) == "google swiftshader"
    assert js_webgpu.adapter_name({}) == "unknown adapter"
