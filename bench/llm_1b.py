"""Issue 31's 1B-class point: a Llama-3.2-1B-shaped model (hidden 2048, 16 layers, 32/8 heads,
FFN 8192, vocab 128256, llama3 rope, tied embeddings) with seeded random weights, written
straight to a GGUF F16 by our converter (tools/make_llm_fixtures.write_file: config values
only, no download), quantized to Q4_K_M by llama.cpp's quantizer, then in one run on that file:
webrlx's greedy decode tok/s (--new tokens after an 11-token prompt, EOS ignored) and a
--prefill-token prefill (best of 3) beside llama.cpp Vulkan; the Engine's aggregate decode
tok/s at 1 and 8 sequences; GPU bytes of the weights vs the file's tensor bytes (the
LanguageModel's, and with the batched Engine's beside); peak host
RSS while loading (a child process: VmHWM after the weights are on the device) vs the file
size. Prints JSON.

    python bench/llm_1b.py --llamacpp PATH_TO_VULKAN_SO [--work DIR] [--int8]
(--int8: `llm.load(path, int8=True)`, the opt-in int8 paths: compiler/int8_prefill.py for the
prefill, compiler/int8_decode.py for the batched steps; one sequence's decode is unchanged)
    python bench/llm_1b.py --shape tiny --type F16    # no llama.cpp, no GPU: a check
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

SHAPES = {   # Llama-3.2-1B's config.json values (tiny: the same layout, small)
    "1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, head_dim=64, intermediate_size=8192, vocab_size=128256),
    "tiny": dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=64, intermediate_size=512, vocab_size=1024),
    "small": dict(hidden_size=1024, num_hidden_layers=4, num_attention_heads=16,
                  num_key_value_heads=4, head_dim=64, intermediate_size=4096, vocab_size=32768),
    # SmolLM2-135M's layout (prefill timing without carrying the real file to a GPU machine)
    "smollm2": dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, head_dim=64, intermediate_size=1536,
                    vocab_size=49152),
}
OWN_TYPES = ("F16", "Q8_0", "Q4_0", "Q5_0", "Q5_1")     # what the gguf package writes itself
ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


def config(shape: str) -> SimpleNamespace:
    """The transformers-style config values the converter reads."""
    return SimpleNamespace(**SHAPES[shape], max_position_embeddings=131072, rms_norm_eps=1e-5,
                           tie_word_embeddings=True, rope_parameters=ROPE)


def byte_vocab(n: int) -> dict[str, Any]:
    """tokenizer.* metadata of n tokens: GPT-2's 256 byte characters, one merge, Llama 3's
    begin/end of text (control tokens), then filler tokens (normal: a tokenizer splits text
    on control tokens; llama.cpp needs as many tokens as the embedding has rows)."""
    from webrlx.models.bpe import bytes_to_unicode
    chars = list(bytes_to_unicode().values())
    filler = [f"<filler_{i}>" for i in range(n - 256 - 1 - 2)]
    tokens = chars + ["\u0120t", "<|begin_of_text|>", "<|end_of_text|>"] + filler
    return {"model": "gpt2", "pre": "llama-bpe", "tokens": tokens, "merges": ["\u0120 t"],
            "types": [1] * 257 + [3, 3] + [1] * len(filler), "bos": 257, "eos": 258,
            "unk": 258, "add_bos": False, "template": None}


def llama3_rope_freqs(cfg: SimpleNamespace) -> np.ndarray:
    """llama.cpp's rope_freqs for llama3 scaling (its converter's formula): the divisor of each
    rope frequency."""
    r = cfg.rope_parameters
    d = cfg.head_dim
    freqs = r["rope_theta"] ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    old = r["original_max_position_embeddings"]
    low, high = old / r["low_freq_factor"], old / r["high_freq_factor"]
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < high:
            out.append(1.0)
        elif wavelen > low:
            out.append(r["factor"])
        else:
            smooth = (old / wavelen - r["low_freq_factor"]) / (r["high_freq_factor"] -
                                                                r["low_freq_factor"])
            out.append(1 / ((1 - smooth) / r["factor"] + smooth))
    return np.array(out, np.float32)


def random_tensors(cfg: SimpleNamespace, seed: int = 0) -> Iterator[tuple[str, np.ndarray]]:
    """(GGUF name, float32 array) of the model, one at a time: weights uniform with the
    variance of 1 / fan-in, norms near 1."""
    rng = np.random.default_rng(seed)
    h, f, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd

    def weight(n: int, k: int) -> np.ndarray:
        w = rng.random((n, k), dtype=np.float32)
        w -= np.float32(0.5)
        w *= np.float32(math.sqrt(12 / k))
        return w

    def norm(n: int) -> np.ndarray:
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    yield "token_embd.weight", weight(cfg.vocab_size, h)
    yield "rope_freqs.weight", llama3_rope_freqs(cfg)
    for i in range(cfg.num_hidden_layers):
        b = f"blk.{i}."
        yield b + "attn_norm.weight", norm(h)
        yield b + "attn_q.weight", weight(q, h)
        yield b + "attn_k.weight", weight(kv, h)
        yield b + "attn_v.weight", weight(kv, h)
        yield b + "attn_output.weight", weight(h, q)
        yield b + "ffn_norm.weight", norm(h)
        yield b + "ffn_gate.weight", weight(f, h)
        yield b + "ffn_up.weight", weight(f, h)
        yield b + "ffn_down.weight", weight(h, f)
    yield "output_norm.weight", norm(h)


def make_file(shape: str, qtype: str, path: Path) -> float:
    """Write the random model as GGUF (weights in qtype, of OWN_TYPES) with our converter;
    returns the seconds it took."""
    from tools.make_llm_fixtures import write_file
    t = time.perf_counter()
    cfg = config(shape)
    write_file("llama", f"webrlx-llama-{shape}-random", cfg, byte_vocab(cfg.vocab_size),
               random_tensors(cfg), qtype, path)
    return time.perf_counter() - t


def rss_child(path: str) -> dict[str, Any]:
    """In this (child) process: load the model, its weights onto the device, and read the
    peak RSS (VmHWM) against the RSS before loading (device acquired, modules imported)."""
    import webrlx as wr
    from webrlx.models import gguf, llm

    def status(key: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        raise KeyError(key)
    trace: list[tuple[int, str]] = []           # RSS (MB) after each tensor's upload
    release = gguf.GGUFFile.release

    def traced(self: gguf.GGUFFile, name: str) -> None:
        release(self, name)
        trace.append((status("VmRSS") >> 20, name))
    gguf.GGUFFile.release = traced              # type: ignore[method-assign]
    dev = wr.device()
    dev.info                                    # noqa: B018 - the adapter is opened
    before = status("VmRSS")
    t = time.perf_counter()
    lm = llm.load(path, device=dev, max_context=64)
    eng = lm.executable.engine                  # the weights are uploaded here
    load_s = time.perf_counter() - t
    return {"rss_before_load": before, "peak_rss": status("VmHWM"), "rss_after_load":
            status("VmRSS"), "load_s": load_s, "params": len(eng.param_bufs),
            "rss_mb_max_after_a_tensor": max(trace, default=None),
            "rss_mb_after_each_tensor": [mb for mb, _ in trace]}


def measure_rss(path: Path) -> dict[str, Any]:
    """Peak host RSS while loading `path` (in a fresh process) against its size."""
    out = subprocess.run([sys.executable, __file__, "--rss-child", str(path)], check=True,
                         capture_output=True, text=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    size = path.stat().st_size
    res["file_bytes"] = size
    res["peak_rss_over_file"] = res["peak_rss"] / size
    res["peak_rss_growth_over_file"] = (res["peak_rss"] - res["rss_before_load"]) / size
    return res


def prefill_s(lm: Any, ids: list[int]) -> float:
    """Best of 3 prefill times of ids (to the first token read back), after a compiling run
    and WARM_S of prefills."""
    from webrlx.cli.clocks import hold_clocks
    lm.generate_ids(ids, 1)
    hold_clocks(lambda: lm.generate_ids(ids, 1), lambda: None)
    times = []
    for _ in range(3):
        lm.generate_ids(ids, 1)
        times.append(lm.stats.first_token_s)
    return min(times)


def webrlx_run(path: Path, prompt: list[int], prefill: list[int], new: int,
               sizes: list[int], batch_new: int, int8: bool = False) -> dict[str, Any]:
    """webrlx's decode, prefill, weight bytes and batched decode on one file."""
    import webrlx as wr
    from webrlx.cli.bench_llm import measure_sizes
    from webrlx.cli.clocks import hold_clocks
    from webrlx.models import llm
    from webrlx.models.engine import Engine
    dev = wr.device()
    context = max(len(prefill), len(prompt) + new) + 16
    t = time.perf_counter()
    lm = llm.load(path, device=dev, max_context=context, int8=int8 or None)
    res: dict[str, Any] = {"adapter": str(dev.info.name), "load_s": time.perf_counter() - t}
    lm.generate_ids(prompt, 2)                  # compiles (and tunes) the decode plans
    hold_clocks(lambda: lm.generate_ids(prompt, 16, ignore_eos=True), lambda: None)
    ids = lm.generate_ids(prompt, new, ignore_eos=True)
    res["decode_tok_s"] = lm.stats.tokens_per_s
    res["ttft_ms"] = 1e3 * lm.stats.first_token_s
    res["tokens"] = ids
    res["prefill_ms"] = 1e3 * prefill_s(lm, prefill)
    infos = lm.tensor_infos
    tensor_bytes = sum(i.nbytes for i in infos.values())
    gpu = sum(int(b.size) for b in lm.executable.engine.param_bufs.values())
    res["weights"] = {"gpu_bytes": gpu, "tensor_bytes": tensor_bytes,
                      "ratio": gpu / tensor_bytes,
                      "tensor_types": dict(Counter(i.type for i in infos.values()))}
    eng = Engine(lm, max_sequences=max(sizes), max_context=context)
    bufs = {id(b): int(b.size) for e in (lm.executable.engine, eng.executable.engine)
            for b in e.param_bufs.values()}
    res["weights"]["gpu_bytes_with_engine"] = sum(bufs.values())    # one copy if shared
    rows = measure_sizes(eng, sizes, batch_new)     # interleaved, median of 3
    for r in rows:
        r["ratio_vs_first"] = round(r["tok_per_s"] / rows[0]["tok_per_s"], 2)
        r["ratio_vs_generate"] = round(r["tok_per_s"] / res["decode_tok_s"], 2)
    res["batched"] = {"new_tokens": batch_new, "kv_bytes": eng.kv_bytes, "rows": rows}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llamacpp", default=os.environ.get("LLAMACPP_SO"),
                    help="llama-cpp-cffi's Vulkan module (.so): quantizer and peer")
    ap.add_argument("--work", default="/tmp/llm_1b", help="where the GGUF files go")
    ap.add_argument("--shape", default="1b", choices=list(SHAPES),
                    help="tiny / small: the same layout, small (checks without a GPU)")
    ap.add_argument("--type", default="Q4_K_M",
                    help=f"llama.cpp's quant type from F16; {', '.join(OWN_TYPES)} without it")
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--sizes", default="1,8", help="live sequences for batched decode")
    ap.add_argument("--batch-new", type=int, default=64, help="new tokens per sequence")
    ap.add_argument("--make-only", action="store_true",
                    help="write (and quantize) the GGUF file, print its name and size, stop")
    ap.add_argument("--int8", action="store_true",
                    help="the opt-in int8 prefill and batched decode: llm.load(int8=True)")
    ap.add_argument("--rss-child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rss_child:
        print(json.dumps(rss_child(a.rss_child)))
        return
    shape = a.shape
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"model": f"llama-{shape} random", "config": SHAPES[shape],
                           "new_tokens": a.new, "int8": a.int8,
                           "method": __doc__.split("\n\n")[0]}
    path = work / f"llama-{shape}.{a.type}.gguf"
    if a.llamacpp and a.type not in OWN_TYPES:
        from smollm2_kquants import quantize
        f16 = work / f"llama-{shape}.F16.gguf"
        if not f16.exists():
            out["make_f16_s"] = make_file(shape, "F16", f16)
        if not path.exists():
            out["quantize_s"] = quantize(a.llamacpp, f16, path, a.type)
    elif a.type in OWN_TYPES:
        if not path.exists():
            out["make_s"] = make_file(shape, a.type, path)
    else:
        raise SystemExit(f"--type {a.type} needs llama.cpp's quantizer: pass --llamacpp, or "
                         f"one of {OWN_TYPES}")
    out["file"] = {"name": path.name, "bytes": path.stat().st_size}
    if a.make_only:
        print(json.dumps(out, indent=1))
        return
    rng = np.random.default_rng(1)
    prompt = [int(t) for t in rng.integers(0, 256, 11)]     # byte tokens, as a text's
    prefill = [int(t) for t in rng.integers(0, 256, a.prefill)]
    out["host_memory"] = measure_rss(path)
    sizes = [int(v) for v in a.sizes.split(",")]
    ours = webrlx_run(path, prompt, prefill, a.new, sizes, a.batch_new, a.int8)
    out["webrlx"] = {k: v for k, v in ours.items() if k != "tokens"}
    if a.llamacpp:
        from peer_llamacpp import bench_llamacpp
        peer = bench_llamacpp(a.llamacpp, str(path), prompt, prefill, a.new)
        out["llamacpp"] = {k: v for k, v in peer.items() if k != "tokens"}
        out["decode_vs_llamacpp"] = ours["decode_tok_s"] / peer["decode_tok_s"]
        out["prefill_llamacpp_over_webrlx"] = peer["prefill_ms"] / ours["prefill_ms"]
        n = min(len(ours["tokens"]), len(peer["tokens"]))
        out["greedy_tokens_equal_to_llamacpp"] = next(
            (i for i in range(n) if ours["tokens"][i] != peer["tokens"][i]), n)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
