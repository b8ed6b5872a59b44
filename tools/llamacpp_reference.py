"""llama.cpp's outputs on small GGUF fixtures: the second reference of issue 31 (beside
transformers), for tests/backend/test_llm_llamacpp.py.

    python tools/llamacpp_reference.py make [--out tests/fixtures/llamacpp]
    python tools/llamacpp_reference.py run --llamacpp LIB.so [--dir tests/fixtures/llamacpp] \
        [--out DIR]

`make` (here; needs torch, transformers, gguf) writes one small random-weight fixture per
family from tools/make_llm_fixtures.py in Q8_0, the llama one in Q4_K too, and llama, mistral
and qwen2 in F32 (where llama.cpp's CPU backend computes in f32 throughout), into the
committed folder: the bytes llama.cpp ran are the bytes the test loads, whatever transformers
release CI installs later.
`run` (on the GPU machine, where llama-cpp-cffi 0.4.42's Vulkan module loads; its CPU module
does not load on this Debian: bench/device_llamacpp_ref.sh) loads each fixture with llama.cpp
through its C API and records, per prompt: llama.cpp's token ids (llama_tokenize with its
special tokens), and from those ids the last logits and 32 greedy tokens, on llama.cpp's CPU
backend (n_gpu_layers 0: f32 activations, except that it quantizes them to 8 bits for the dot
products with quantized weights, as ggml's CPU backend does) and on its Vulkan backend, both
with an f32 KV cache (llama.cpp's default is f16). Writes
reference.json (ids, tokens, the file's sha256) and reference_logits.npz into --out.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "llamacpp"
FIXTURES = [(f, "Q8_0") for f in ("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3",
                                  "phi3")] + [("llama", "Q4_K")] + \
    [(f, "F32") for f in ("llama", "mistral", "qwen2")]
PROMPTS = ["The quick brown fox jumps over the lazy dog",
           "Hello, world! 123 4567 is a number.",
           "  two leading spaces,\nnewlines\n\nand tabs\tstay",
           "Once upon a time, there was a little robot named Bolt who"]
STEPS = 32


def make(out: Path) -> None:
    """Write the fixtures (FIXTURES) into `out`."""
    sys.path.insert(0, str(ROOT / "tools"))
    import make_llm_fixtures as mk
    out.mkdir(parents=True, exist_ok=True)
    for family, qtype in FIXTURES:
        path = out / f"{family}-{qtype.lower()}.gguf"
        mk.write_gguf(family, *mk.make_model(family, wide=mk.is_wide(qtype)), qtype, path)
        print(f"{path.name}: {path.stat().st_size} bytes", file=sys.stderr)


class LlamaCpp:
    """One model in llama.cpp: tokenize, and decode greedily reading the last logits."""

    def __init__(self, mod: Any, path: Path, gpu_layers: int) -> None:
        self.lib, self.ffi = lib, ffi = mod.lib, mod.ffi
        mp = lib.llama_model_default_params()
        mp.n_gpu_layers = gpu_layers
        self.model = lib.llama_model_load_from_file(str(path).encode(), mp)
        if self.model == ffi.NULL:
            raise RuntimeError(f"llama.cpp could not load {path}")
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.n_vocab = lib.llama_vocab_n_tokens(self.vocab)
        cp = lib.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch = 256, 128, 128
        cp.type_k = cp.type_v = 0                   # GGML_TYPE_F32: an f32 KV cache, not f16
        self.ctx = lib.llama_init_from_model(self.model, cp)
        self.batch = lib.llama_batch_init(128, 0, 1)

    def tokenize(self, text: str) -> list[int]:
        raw = text.encode()
        buf = self.ffi.new("llama_token[]", 256)
        n = self.lib.llama_tokenize(self.vocab, raw, len(raw), buf, 256, True, False)
        if n < 0:
            raise RuntimeError(f"llama_tokenize failed on {text!r}")
        return [int(buf[i]) for i in range(n)]

    def _decode(self, tokens: list[int], start: int) -> np.ndarray:
        b = self.batch
        for i, t in enumerate(tokens):
            b.token[i], b.pos[i], b.n_seq_id[i] = t, start + i, 1
            b.seq_id[i][0] = 0
            b.logits[i] = i == len(tokens) - 1
        b.n_tokens = len(tokens)
        if self.lib.llama_decode(self.ctx, b) != 0:
            raise RuntimeError("llama_decode failed")
        ptr = self.lib.llama_get_logits_ith(self.ctx, -1)
        return np.frombuffer(self.ffi.buffer(ptr, 4 * self.n_vocab), np.float32).copy()

    def greedy(self, ids: list[int], steps: int) -> tuple[np.ndarray, list[int]]:
        """(last logits of the prompt, `steps` greedy tokens), from an empty cache."""
        self.lib.llama_kv_self_clear(self.ctx)
        logits = self._decode(ids, 0)
        out, tok = [], int(np.argmax(logits))
        for i in range(steps):
            out.append(tok)
            if i + 1 < steps:
                tok = int(np.argmax(self._decode([tok], len(ids) + i)))
        return logits, out

    def close(self) -> None:
        self.lib.llama_batch_free(self.batch)
        self.lib.llama_free(self.ctx)
        self.lib.llama_model_free(self.model)


def run_one(so_path: str, path: Path, out: Path) -> None:
    """llama.cpp's ids, last logits and greedy tokens of one fixture: `out`.json and .npz."""
    sys.path.insert(0, str(ROOT / "bench"))
    from peer_llamacpp import load_module
    mod = load_module(so_path)

    @mod.ffi.def_extern()
    def llama_cpp_cffi_ggml_log_callback(level: int, text: Any, user_data: Any) -> None:
        """llama.cpp's warnings and errors (ggml levels 3, 4) to stderr, the rest silenced."""
        if level in (3, 4):
            sys.stderr.write(mod.ffi.string(text).decode(errors="replace"))
    mod.lib.llama_log_set(mod.lib.llama_cpp_cffi_ggml_log_callback, mod.ffi.NULL)
    mod.lib.llama_backend_init()
    runs = {name: LlamaCpp(mod, path, layers) for name, layers in (("cpu", 0), ("vulkan", 99))}
    prompts, logits = [], {}
    for k, prompt in enumerate(PROMPTS):
        rec: dict[str, Any] = {"ids": runs["cpu"].tokenize(prompt)}
        for name, lc in runs.items():
            logits[f"{path.name}/{k}/{name}"], rec[f"tokens_{name}"] = \
                lc.greedy(rec["ids"], STEPS)
        prompts.append(rec)
    for lc in runs.values():
        lc.close()
    out.with_suffix(".json").write_text(json.dumps(prompts))
    np.savez(out.with_suffix(".npz"), **logits)


def run(so_path: str, src: Path, out: Path) -> None:
    """llama.cpp's outputs on every fixture in `src`, each in its own process (an old
    llama.cpp aborts on some architectures), merged into `out`; a fixture it cannot run is
    recorded with the error it printed."""
    files: dict[str, Any] = {}
    logits: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for family, qtype in FIXTURES:
            path = src / f"{family}-{qtype.lower()}.gguf"
            part = Path(tmp) / path.stem
            entry: dict[str, Any] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
            proc = subprocess.run([sys.executable, __file__, "run-one", "--llamacpp", so_path,
                                   "--file", str(path), "--out", str(part)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and
                         "make_cpu_buft_list" not in ln and not ln.startswith("  ")]
                entry["error"] = " | ".join(lines[-4:])
            else:
                entry["prompts"] = json.loads(part.with_suffix(".json").read_text())
                logits.update(np.load(part.with_suffix(".npz")))
                same = sum(p["tokens_cpu"] == p["tokens_vulkan"] for p in entry["prompts"])
                entry["cpu_equals_vulkan"] = f"{same}/{len(PROMPTS)} prompts"
            print(f"{path.name}: {entry.get('error') or entry['cpu_equals_vulkan']}",
                  file=sys.stderr)
            files[path.name] = entry
    out.mkdir(parents=True, exist_ok=True)
    (out / "reference.json").write_text(json.dumps(
        {"made_by": "python tools/llamacpp_reference.py run (bash bench/device_llamacpp_ref.sh)",
         "llama_cpp": "llama-cpp-cffi 0.4.42 _llama_cpp_vulkan_1_x", "prompts": PROMPTS,
         "steps": STEPS, "files": files}, indent=1) + "\n")
    np.savez_compressed(out / "reference_logits.npz", **logits)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make")
    mk.add_argument("--out", type=Path, default=OUT)
    rn = sub.add_parser("run")
    rn.add_argument("--llamacpp", required=True, help="llama-cpp-cffi's Vulkan module (.so)")
    rn.add_argument("--dir", type=Path, default=OUT)
    rn.add_argument("--out", type=Path, default=OUT)
    one = sub.add_parser("run-one")
    one.add_argument("--llamacpp", required=True)
    one.add_argument("--file", type=Path, required=True)
    one.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.out)
    elif a.cmd == "run":
        run(a.llamacpp, a.dir, a.out)
    else:
        run_one(a.llamacpp, a.file, a.out)


if __name__ == "__main__":
    main()
