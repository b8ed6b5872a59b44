"""SmolLM2-135M-Instruct generation speed: webrlx beside transformers (torch eager, the GGUF
dequantized; f32 and f16 on CUDA where present) and llama.cpp (llama-cpp-cffi's C API), in the
same run on the same GGUF. Prints JSON: prefill of 128 tokens (ms), time to first token, and
greedy decode tokens/s over --new tokens after an 11-token prompt (EOS ignored), with ratios.

    python bench/smollm2.py [--new 256] [--llamacpp PATH_TO_SO] [--peers transformers,llamacpp]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from webrlx.cli.bench_llm import PREFILL_TEXT, PROMPT  # noqa: E402  (bench --only llm's)
from webrlx.models import smollm2  # noqa: E402
from webrlx.models.assets import smollm2_gguf  # noqa: E402


def bench_webrlx(path: Path, prompt: list[int], prefill: list[int], new: int,
                 device: Any) -> dict[str, Any]:
    t = time.perf_counter()
    lm = smollm2.load(path, device=device, capacity=max(512, len(prompt) + new + 16))
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    lm.generate_ids(prefill, 2)                          # compiles both plans
    lm.generate_ids(prompt, 2)
    compile_s = time.perf_counter() - t
    times = []
    for _ in range(5):                                   # prefill + first token, read back
        t = time.perf_counter()
        lm.generate_ids(prefill, 1)
        times.append(time.perf_counter() - t)
    ids = lm.generate_ids(prompt, new, ignore_eos=True)
    st = lm.stats
    prof = lm.executable.profile({"ids": np.array([[ids[-1]]], np.int32),
                                  "pos": np.array([len(prompt) + 40], np.int32),
                                  "last": np.zeros(1, np.int32),
                                  "fparams": np.array([0, 1, 1, 0], np.float32),
                                  "iparams": np.zeros(2, np.int32)}, repeats=3)
    return {"adapter": lm.device.info.name, "load_s": load_s, "compile_s": compile_s,
            "prefill_ms": 1e3 * min(times), "prefill_tokens": len(prefill),
            "ttft_ms": 1e3 * st.first_token_s, "decode_tok_s": st.tokens_per_s,
            "readbacks": st.readbacks, "decode_step_gpu_ms": prof.total_ms,
            "decode_step_top_kernels_ms": dict(list(prof.by_kernel().items())[:6]),
            "profile_source": prof.source, "tokens": ids}


def bench_transformers(path: Path, prompt: list[int], prefill: list[int], new: int,
                       dtype_name: str) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = getattr(torch, dtype_name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                 dtype=dtype).to(dev).eval()

    def sync() -> None:
        if dev == "cuda":
            torch.cuda.synchronize()
    with torch.no_grad():
        times = []
        for _ in range(6):
            t = time.perf_counter()
            int(model(torch.tensor([prefill], device=dev)).logits[0, -1].argmax())
            sync()
            times.append(time.perf_counter() - t)
        t0 = time.perf_counter()
        res = model(torch.tensor([prompt], device=dev), use_cache=True)
        tok = int(res.logits[0, -1].argmax())
        first = time.perf_counter() - t0
        past, tokens = res.past_key_values, [tok]
        for _ in range(new - 1):
            res = model(torch.tensor([[tok]], device=dev), past_key_values=past, use_cache=True)
            past, tok = res.past_key_values, int(res.logits[0, -1].argmax())
            tokens.append(tok)
        total = time.perf_counter() - t0
    return {"device": dev, "dtype": dtype_name, "prefill_ms": 1e3 * min(times[1:]),
            "ttft_ms": 1e3 * first, "decode_tok_s": (new - 1) / (total - first),
            "tokens": tokens}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=None)
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--device", default=None)
    p.add_argument("--peers", default="transformers,llamacpp")
    p.add_argument("--llamacpp", default=os.environ.get("LLAMACPP_SO"),
                   help="path of llama-cpp-cffi's _llama_cpp_vulkan_1_x...so (or cpu/cuda)")
    a = p.parse_args()
    path = smollm2_gguf(a.model)
    lm_tok = smollm2.load(path, device="reference", capacity=16).tokenizer
    prompt = lm_tok.encode(PROMPT)
    prefill = (lm_tok.encode(PREFILL_TEXT * 20))[:128]
    out: dict[str, Any] = {"model": path.name, "prompt_tokens": len(prompt),
                           "new_tokens": a.new, "method": __doc__.split("\n\n")[0]}
    out["webrlx"] = bench_webrlx(path, prompt, prefill, a.new, a.device)
    peers = [s for s in a.peers.split(",") if s]
    if "transformers" in peers:
        for dt in ("float32", "float16"):
            try:
                out[f"transformers_{dt}"] = bench_transformers(path, prompt, prefill, a.new, dt)
            except Exception as e:  # noqa: BLE001 - a missing peer is reported, not fatal
                out[f"transformers_{dt}"] = {"error": f"{type(e).__name__}: {e}"}
    if "llamacpp" in peers and a.llamacpp:
        from peer_llamacpp import bench_llamacpp
        try:
            out["llamacpp"] = bench_llamacpp(a.llamacpp, str(path), prompt, prefill, a.new)
        except Exception as e:  # noqa: BLE001
            out["llamacpp"] = {"error": f"{type(e).__name__}: {e}"}
    w = out["webrlx"]
    ratios = {}
    for name in ("llamacpp", "transformers_float32", "transformers_float16"):
        peer = out.get(name, {})
        if "decode_tok_s" in peer:
            ratios[f"decode_vs_{name}"] = w["decode_tok_s"] / peer["decode_tok_s"]
            ratios[f"prefill_speedup_vs_{name}"] = peer["prefill_ms"] / w["prefill_ms"]
            n = min(len(peer["tokens"]), len(w["tokens"]))
            same = next((i for i in range(n) if peer["tokens"][i] != w["tokens"][i]), n)
            ratios[f"greedy_tokens_equal_to_{name}"] = same
    out["ratios"] = ratios
    for v in out.values():
        if isinstance(v, dict):
            v.pop("tokens", None)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
