"""llama.cpp as the LLM peer, through the C API that PyPI `llama-cpp-cffi` 0.4.42 ships as cffi
modules (CPU, Vulkan, CUDA builds). The module is loaded by file with ExtensionFileLoader, so a
cp311 build also loads under another Python. Greedy decode reads the last logits each token,
as llama.cpp's own samplers do.

    from peer_llamacpp import bench_llamacpp
    bench_llamacpp("/path/_llama_cpp_vulkan_1_x.cpython-311-x86_64-linux-gnu.so", gguf, ...)

From the shell (bench/device_dawn.sh): the prefill of --prefill random byte ids and the decode
of --new tokens after an 11-id prompt (the ids bench/probes/llm_1b_profile_probe.py and
bench/llm_1b.py use), as one JSON line without the tokens:

    python bench/peer_llamacpp.py --so SO --model FILE.gguf [--prefill 512] [--new 16]
"""
from __future__ import annotations

import argparse
import functools
import importlib.machinery
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from webrlx.cli.clocks import hold_clocks  # noqa: E402


@functools.cache
def load_module(path: str) -> Any:
    """Import a llama-cpp-cffi extension module (`lib`, `ffi`) from its .so file, once."""
    name = path.rsplit("/", 1)[-1].split(".")[0]
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def bench_llamacpp(so_path: str, gguf_path: str, prompt: list[int], prefill: list[int],
                   new_tokens: int, gpu_layers: int = 99, warm_s: float = 1.0) -> dict[str, Any]:
    """Prefill time of `prefill` tokens, and greedy decode speed of new_tokens after prompt;
    each timing after warm_s seconds of prefills back to back (the GPU's clock up)."""
    mod = load_module(so_path)
    lib, ffi = mod.lib, mod.ffi

    @ffi.def_extern()
    def llama_cpp_cffi_ggml_log_callback(level: int, text: Any, user_data: Any) -> None:
        """Silence llama.cpp's log."""
    lib.llama_log_set(lib.llama_cpp_cffi_ggml_log_callback, ffi.NULL)
    lib.llama_backend_init()
    mp = lib.llama_model_default_params()
    mp.n_gpu_layers = gpu_layers
    model = lib.llama_model_load_from_file(gguf_path.encode(), mp)
    if model == ffi.NULL:
        raise RuntimeError(f"llama.cpp could not load {gguf_path}")
    vocab = lib.llama_model_get_vocab(model)
    n_vocab = lib.llama_vocab_n_tokens(vocab)
    cp = lib.llama_context_default_params()
    cp.n_ctx = max(1024, len(prompt) + new_tokens + 8, len(prefill) + 8)
    cp.n_batch = cp.n_ubatch = max(512, len(prefill))
    ctx = lib.llama_init_from_model(model, cp)
    batch = lib.llama_batch_init(cp.n_batch, 0, 1)

    def decode(tokens: list[int], start: int) -> None:
        batch.n_tokens = 0
        for i, t in enumerate(tokens):
            batch.token[i] = t
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = i == len(tokens) - 1
        batch.n_tokens = len(tokens)
        if lib.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")

    def last_logits() -> np.ndarray:
        ptr = lib.llama_get_logits_ith(ctx, -1)
        return np.frombuffer(ffi.buffer(ptr, 4 * n_vocab), np.float32)

    def clear() -> None:
        lib.llama_kv_self_clear(ctx)

    def prefill_once() -> float:
        clear()
        t = time.perf_counter()
        decode(prefill, 0)
        int(np.argmax(last_logits()))                  # waits for the logits
        return time.perf_counter() - t
    prefill_once()
    hold_clocks(prefill_once, lambda: None, warm_s)    # the GPU's clock up first
    prefill_s = min(prefill_once() for _ in range(5))
    hold_clocks(prefill_once, lambda: None, warm_s)
    clear()
    t0 = time.perf_counter()
    decode(prompt, 0)
    tok = int(np.argmax(last_logits()))
    first = time.perf_counter() - t0
    tokens = [tok]
    for i in range(new_tokens - 1):
        decode([tok], len(prompt) + i)
        tok = int(np.argmax(last_logits()))
        tokens.append(tok)
    total = time.perf_counter() - t0
    lib.llama_batch_free(batch)
    lib.llama_free(ctx)
    lib.llama_model_free(model)
    return {"prefill_ms": 1e3 * prefill_s, "prefill_tokens": len(prefill),
            "ttft_ms": 1e3 * first, "decode_tok_s": (new_tokens - 1) / (total - first),
            "tokens": tokens}


def main() -> None:
    ap = argparse.ArgumentParser(description="llama.cpp's prefill and greedy decode on a GGUF")
    ap.add_argument("--so", required=True, help="llama-cpp-cffi's module file (.so)")
    ap.add_argument("--model", required=True)
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--new", type=int, default=16)
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    prompt = [int(t) for t in rng.integers(0, 256, 11)]
    prefill = [int(t) for t in rng.integers(0, 256, a.prefill)]
    got = bench_llamacpp(a.so, a.model, prompt, prefill, a.new)
    print(json.dumps({k: v for k, v in got.items() if k != "tokens"}))


if __name__ == "__main__":
    main()
