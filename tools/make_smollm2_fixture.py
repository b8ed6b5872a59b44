"""Make tests/fixtures/smollm2_reference.{json,npz}: SmolLM2-135M-Instruct run by transformers
(torch, CPU, float32) from the same GGUF webrlx reads (transformers dequantizes it to f32).

For each prompt: the prompt's token ids, the last-position logits, and 32 greedy tokens
(argmax each step, EOS included and not stopped at). Regenerate with

    pip install torch==2.13.0 transformers gguf
    HF_HUB_OFFLINE=1 python tools/make_smollm2_fixture.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from webrlx.models.assets import smollm2_gguf  # noqa: E402

GREEDY = 32
LONG = ("The history of computing is a story of layers. " * 6 +
        "Punched cards fed tabulators; relays became vacuum tubes, tubes became transistors, "
        "and transistors became integrated circuits with billions of parts. Memory went from "
        "mercury delay lines to magnetic cores to DRAM, and storage from tape to disks to "
        "flash. Networks grew from a few universities to the whole planet. " * 3 +
        "Engineers built assemblers on top of machine code, compilers on top of assemblers, "
        "operating systems on top of compilers, and browsers on top of operating systems. "
        "Each layer hid the one below it, and each made new things possible: spreadsheets, "
        "the web, video calls, and now language models running inside a browser tab. "
        "Summarize this history in one sentence, then name three layers of your own: ")
PROMPTS = {
    "code": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n",
    "numbers": "Count by sevens: 7, 14, 21, 28, 35,",
    "unicode": "Traduis en français : « Where is the café? » 🙂 Ça va très bien, merci ! ",
    "chat": None,                     # the chat template's rendering of a user turn
    "long": LONG,
    "english": "The quick brown fox jumps over the lazy dog. The dog",
}
CHAT = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


def write_reference(path: Path, prompts: dict[str, str | None], stem: str,
                    chat: list[dict[str, str]] | None = None,
                    logit_cases: int | None = None) -> None:
    """Run the GGUF at path in transformers (f32) on each prompt and write
    tests/fixtures/<stem>.{json,npz}: ids and GREEDY greedy tokens a prompt, the last logits
    of the first logit_cases (None: all). A prompt of None is chat's rendering by the file's
    template."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                 dtype=torch.float32).eval()
    out = {"model": path.name, "greedy_steps": GREEDY, "cases": []}
    logits_all = []
    for name, text in prompts.items():
        if text is None:
            text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        ids = tok(text)["input_ids"]
        tokens = []
        with torch.no_grad():
            res = model(torch.tensor([ids]), use_cache=True)
            if logit_cases is None or len(logits_all) < logit_cases:
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
    (fixtures / f"{stem}.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    np.savez_compressed(fixtures / f"{stem}.npz", logits=np.stack(logits_all))


def main() -> None:
    write_reference(smollm2_gguf(), PROMPTS, "smollm2_reference", chat=CHAT)


if __name__ == "__main__":
    main()
