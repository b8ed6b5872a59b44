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


def _run_submit_js(first: int, n: int, repeat: int = 1) -> list:
    """_SUBMIT_JS (and _ENCODE_JS) run by Node over a recording fake device: what each
    submitted command buffer held, in order."""
    import json
    import shutil
    import subprocess
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not on PATH (the test setup installs Node 20)")
    script = f"""
const encode = {js_webgpu._ENCODE_JS};
const submit = {js_webgpu._SUBMIT_JS};
const submitted = [];
const device = {{createCommandEncoder() {{
    const cmds = [];
    return {{copyBufferToBuffer: (s, so, d, dof, n) => cmds.push("copy " + s),
             beginComputePass: () => ({{setPipeline: p => cmds.push("pipe " + p),
                                        setBindGroup: (i, g) => {{}},
                                        dispatchWorkgroups: x => cmds.push("d" + x),
                                        end: () => cmds.push("end")}}),
             finish: () => cmds}};
}}}};
const queue = {{submit: bufs => submitted.push(...bufs)}};
const n = {n};
const pipes = Array.from({{length: n}}, (_, i) => i < 3 ? "a" : "b");
const groups = Array.from({{length: n}}, (_, i) => i);
const grids = Array.from({{length: n}}, (_, i) => [i, 1, 1]).flat();
submit(device, queue, encode, pipes, groups, grids, {repeat}, 1, 0, {first},
       "before", 0, "x", 0, 4, "after", 0, "y", 0, 4);
console.log(JSON.stringify(submitted));
"""
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_pieced_submit_keeps_order_and_copies() -> None:
    """SUBMIT_FIRST: 7 dispatches in pieces of 2, 4 and 1, each its own submit; the `before`
    copy with the first piece, the other copies with the last, every pass binding its
    pipeline; 0 (or few dispatches) is one command buffer as before."""
    pieces = _run_submit_js(2, 7)
    assert pieces == [["copy before", "pipe a", "d0", "d1", "end"],
                      ["pipe a", "d2", "pipe b", "d3", "d4", "d5", "end"],
                      ["pipe b", "d6", "end", "copy after"]]
    whole = ["copy before", "pipe a", "d0", "d1", "d2", "pipe b", "d3", "d4", "d5", "d6", "end",
             "copy after"]
    assert _run_submit_js(0, 7) == [whole]
    assert _run_submit_js(8, 7) == [whole]
    assert _run_submit_js(2, 7, repeat=2) == [whole[:-1] + whole[1:]]


def test_queue_idle_follows_submits_and_completed_reads() -> None:
    """Only a submit that finds the GPU idle goes out in pieces: the first one, and the first
    after a read whose buffer was written by the latest submit; not one behind work still
    queued (a decode step), nor after a read of a copy made steps before (read-ahead)."""
    from webrlx.backends.base import Copy, QueueIdle
    q = QueueIdle()
    staging, ahead = object(), object()
    assert q.submit([Copy(None, 0, staging, 0, 4)])         # nothing before it
    q.read_done(q.read_issued(staging))                      # the run's output read back
    assert q.submit([Copy(None, 0, ahead, 0, 4)])            # the next run: idle
    assert not q.submit()                                    # the first may still run
    assert not q.submit()
    q.read_done(q.read_issued(ahead))                        # read two submits late
    assert not q.submit()                                    # shows only the first done
    q.read_done(q.read_issued(object()))                     # a buffer no copy wrote: all
    assert q.submit()
