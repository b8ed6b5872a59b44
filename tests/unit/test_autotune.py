"""The autotuner picks the fastest variant, remembers it per adapter, and keeps the default
when the device cannot time."""
from __future__ import annotations

import json

import numpy as np
import pytest

from webrlx.compiler.program import Buf, KernelCall, Variant
from webrlx.runtime import autotune


def _call() -> KernelCall:
    b = Buf(16, "temp")
    return KernelCall("k128", "src128", [b], b, [1], (1, 1, 1), {},
                      variants=[Variant("k64", "src64", (2, 2, 1))], tune_key="matmul 8x8x8x1")


def test_fastest_variant_is_chosen_and_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(autotune, "CACHE_FILE", tmp_path / "tune.json")
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", True)
    timed = []

    def fake_time(v: Variant) -> float:
        timed.append(v.name)
        return {"k128": 2.0, "k64": 1.0}[v.name]
    assert autotune.choose("gpu A", _call(), fake_time).name == "k64"
    assert sorted(timed) == ["k128", "k64"]
    assert autotune.choose("gpu A", _call(), fake_time).name == "k64"   # cached: no timing
    assert len(timed) == 2
    assert json.loads((tmp_path / "tune.json").read_text()) == {
        "gpu A": {"matmul 8x8x8x1 [k128 k64]": "k64"}}


def test_a_new_variant_is_timed_again(tmp_path, monkeypatch):
    monkeypatch.setattr(autotune, "CACHE_FILE", tmp_path / "tune.json")
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", True)
    times = {"k128": 2.0, "k64": 1.0, "k32": 0.5}.__getitem__
    assert autotune.choose("gpu A", _call(), lambda v: times(v.name)).name == "k64"
    call = _call()
    call.variants.append(Variant("k32", "src32", (4, 4, 1)))      # a release adds a variant
    assert autotune.choose("gpu A", call, lambda v: times(v.name)).name == "k32"


def test_default_stands_without_timing(monkeypatch, tmp_path):
    monkeypatch.setattr(autotune, "CACHE_FILE", tmp_path / "tune.json")
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", True)
    assert autotune.choose("gpu B", _call(), lambda v: None).name == "k128"
    assert not (tmp_path / "tune.json").exists()


def test_without_timing_the_shipped_family_table_then_the_default(tmp_path, monkeypatch):
    """Timing off (the browser's default): an adapter's own table, else the shipped table of
    its family (SwiftShader, llvmpipe), else the compiler's default; nothing is timed."""
    monkeypatch.setattr(autotune, "CACHE_FILE", tmp_path / "tune.json")
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", True)
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    key = autotune.key_of(_call())
    monkeypatch.setattr(autotune, "_shipped", {"swiftshader": {key: "k64"}})

    def no_timing(v: Variant) -> float:
        raise AssertionError("timed with timing off")
    assert autotune.known("Google SwiftShader Device", _call()).name == "k64"
    assert autotune.choose("Google SwiftShader Device", _call(), no_timing).name == "k64"
    assert autotune.choose("some GPU", _call(), no_timing).name == "k128"
    autotune._memory["Google SwiftShader Device"] = {key: "k128"}      # its own table first
    assert autotune.choose("Google SwiftShader Device", _call(), no_timing).name == "k128"


def test_a_shipped_pick_stands_when_a_release_adds_variants(tmp_path, monkeypatch):
    """Timing off: a call offering more variants than when the shipped table was made keeps
    the pick of the largest variant set it still offers whole (never a new variant, never a
    pick no longer offered), until the table is made again."""
    monkeypatch.setattr(autotune, "CACHE_FILE", tmp_path / "tune.json")
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", True)
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    old = autotune.key_of(_call())                                  # [k128 k64]
    call = _call()
    call.variants += [Variant("k32", "src32", (4, 4, 1)), Variant("k16", "s16", (8, 8, 1))]
    older = "matmul 8x8x8x1 [k128]"                                 # a smaller set
    gone = "matmul 8x8x8x1 [k128 k64 k8]"                           # k8 no longer offered
    other = "matmul 9x9x9x1 [k128 k16 k32 k64]"                     # another call's
    tables = {"swiftshader": {older: "k128", old: "k64", gone: "k128", other: "k16"}}
    monkeypatch.setattr(autotune, "_shipped", tables)
    assert autotune.known("Google SwiftShader Device", call).name == "k64"
    del tables["swiftshader"][old]
    assert autotune.known("Google SwiftShader Device", call).name == "k128"
    tables["swiftshader"][autotune.key_of(call)] = "k32"            # made again: exact key
    assert autotune.known("Google SwiftShader Device", call).name == "k32"


def test_timing_on_leaves_unknown_calls_to_choose(tmp_path, monkeypatch):
    monkeypatch.setattr(autotune, "CACHE_FILE", tmp_path / "tune.json")
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", True)
    monkeypatch.setattr(autotune, "TIME_VARIANTS", True)
    assert autotune.known("gpu C", _call()) is None                    # would be timed
    assert [v.name for v in autotune.options(_call())] == ["k128", "k64"]
    autotune.enable(False)
    assert autotune.TIME_VARIANTS is False
    assert autotune.known("gpu C", _call()).name == "k128"


def test_the_shipped_table_parses_and_names_known_families():
    data = json.loads(autotune.SHIPPED_FILE.read_text())
    assert set(data) <= set(autotune.FAMILIES) and data, data.keys()
    assert autotune.family("SwiftShader Device (Subzero)") == "swiftshader"
    # NVIDIA's table was tuned under Dawn; Dawn names the adapter by its driver, Chrome by
    # vendor / architecture when the description is hidden (js_webgpu.adapter_name)
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA: 580.159.04 580.159.4.0", "nvidia hopper"):
        assert autotune.family(name) == "nvidia", name
    assert autotune.family("AMD Radeon RX 7900") is None


def test_quantized_timestamps_are_told_from_a_gpu_clock():
    """A browser's rounded timestamps (Dawn: 65.5 us steps; whole microseconds; all zero)
    make the tuner and profile() time on the host instead (Backend.time_dispatch)."""
    from webrlx.backends.base import quantized
    step = 65536
    assert quantized(np.array([5, 7, 7, 9], np.uint64) * step)
    assert quantized(np.array([100_000, 200_000, 300_000], np.uint64))
    assert quantized(np.zeros(4, np.uint64))
    clock = np.array([1_234_567_891, 1_234_577_923, 1_234_580_011, 1_234_612_355], np.uint64)
    assert not quantized(clock) and not quantized(clock // 32 * 32)


def test_a_new_driver_is_timed_again(tmp_path, monkeypatch):
    """Tables are keyed by DeviceInfo.tune_name (adapter name and driver): picks timed under
    one driver are not reused under another; the shipped tables' families still match."""
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(autotune, "CACHE_FILE", tmp_path / "tune.json")
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", True)
    old = DeviceInfo(name="gpu A", backend="wgpu (Vulkan)", driver="550.1").tune_name
    new = DeviceInfo(name="gpu A", backend="wgpu (Vulkan)", driver="580.2").tune_name
    assert (old, new) == ("gpu A | 550.1", "gpu A | 580.2")
    assert DeviceInfo(name="gpu A", backend="navigator.gpu").tune_name == "gpu A"
    timed = []

    def fake_time(v: Variant) -> float:
        timed.append(v.name)
        return {"k128": 2.0, "k64": 1.0}[v.name]
    autotune.choose(old, _call(), fake_time)
    autotune.choose(new, _call(), fake_time)
    assert len(timed) == 4                       # timed under each driver
    lava = DeviceInfo(name="llvmpipe (LLVM 15.0.6, 256 bits)", backend="wgpu (Vulkan)",
                      driver="Mesa 22.3.6 (LLVM 15.0.6)")
    assert autotune.family(lava.tune_name) == "llvmpipe"


def test_added_picks_are_this_adapters_table(tmp_path, monkeypatch):
    """add_picks (a tune run's table, tried before it ships) is used as the adapter's own."""
    monkeypatch.setattr(autotune, "CACHE_FILE", tmp_path / "tune.json")
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", False)
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    call = _call()
    assert autotune.known("gpu A", call).name == "k128"            # the default
    autotune.add_picks("gpu A", {autotune.key_of(call): "k64"})
    assert autotune.known("gpu A", call).name == "k64"
    assert autotune.known("gpu B", call).name == "k128"


def test_read_run_takes_a_whole_file_or_a_runs_last_line(tmp_path):
    """A tune run's JSON as saved (indented) or as its stdout (logs, then one JSON line);
    anything else is refused with the file's name."""
    run = {"adapter": "gpu A", "table": {"k": "v"}}
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps(run, indent=1))
    stdout = tmp_path / "stdout.json"
    stdout.write_text("warning: a log line\n" + json.dumps(run) + "\n")
    assert autotune.read_run(whole) == autotune.read_run(stdout) == run
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"adapter": "gpu A"}))
    with pytest.raises(ValueError, match="bad.json"):
        autotune.read_run(bad)
