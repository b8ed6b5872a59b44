"""Tokenization throughput, one JSON line: webrlx's pure-Python WordPieceTokenizer against the
Rust `tokenizers` library on the same tokenizer.json (all-MiniLM-L6-v2's), the same sentences,
truncation to 256 tokens and padding to the longest of each batch, both returning int32
input_ids and attention_mask arrays (checked equal), in sentences a CPU second.

Corpora: "ray_scale" (bench/ray_scale.py's synthetic sentences, what the embed bench feeds its
actors), "zipf" and "uniform" (vocabulary words drawn by Zipf's law, like real text, or
uniformly, a word cache's worst case; cased, with punctuation, and 5% accented, Greek, CJK or
emoji words). Each side tokenizes the corpus in batches of --batch rows (a Ray Data batch),
once to warm up, then --repeats times interleaved with the other sides; the best pass counts.
--src DIR adds another webrlx checkout (a `git archive` of an older commit) to measure
before/after in one run. Last, each checkout's Ray Embedder's CPU side (its GPU runs stubbed)
on the Ray bench's sentences.

    git archive 4a5c61e webrlx | tar -x -C /tmp/before      # before issue 33's tokenizer work
    RAYON_NUM_THREADS=1 python bench/tokenize_bench.py --src /tmp/before
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("WEBRLX_SRC", str(ROOT)))   # the webrlx measured
sys.path.insert(0, str(ROOT / "bench"))

MAX_LENGTH = 256
VARIED_EXTRA = ["naïve", "Crème", "brûlée", "Ελληνικά", "東京", "北京大学", "mañana", "Über",
                "Straße", "Москва", "😀", "—", "“quoted”", "e-mail", "don't", "3.14", "C++"]


def varied(n: int, vocab: dict[str, int], zipf: bool) -> list[str]:
    """n sentences of 5-40 vocabulary words (cased, with punctuation and non-ASCII), drawn
    uniformly (few repeats: a cache's worst case) or by Zipf's law over the vocabulary's
    order (BERT's lists words roughly by frequency from "the" on: like real text)."""
    rng = random.Random(0)
    words = [w.removeprefix("##") for w, _ in sorted(vocab.items(), key=lambda kv: kv[1])
             if not w.startswith("[") and vocab[w] >= vocab.get("the", 0)]
    weights = [1 / (r + 1) for r in range(len(words))] if zipf else None
    out = []
    for _ in range(n):
        parts = []
        for w in rng.choices(words, weights, k=rng.randint(5, 40)):
            w = rng.choice(VARIED_EXTRA) if rng.random() < 0.05 else w
            w = w.capitalize() if rng.random() < 0.2 else w
            parts.append(w + (rng.choice(",.;:!?") if rng.random() < 0.1 else ""))
        out.append(" ".join(parts))
    return out


def load_webrlx(src: Path, tokenizer_json: Path) -> Any:
    """webrlx's WordPieceTokenizer from the checkout `src` (its module file alone)."""
    path = src / "webrlx" / "models" / "tokenizer.py"
    spec = importlib.util.spec_from_file_location(f"tokenizer_{abs(hash(str(src)))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WordPieceTokenizer.from_json(tokenizer_json.read_text(encoding="utf-8"))


def webrlx_side(tok: Any) -> Callable[[list[str]], dict[str, np.ndarray]]:
    return lambda texts: tok.encode_batch(texts, max_length=MAX_LENGTH)


def hf_side(tokenizer_json: Path) -> Callable[[list[str]], dict[str, np.ndarray]]:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    tok.enable_truncation(MAX_LENGTH)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")

    def encode(texts: list[str]) -> dict[str, np.ndarray]:
        encs = tok.encode_batch_fast(texts)
        return {"input_ids": np.array([e.ids for e in encs], np.int32),
                "attention_mask": np.array([e.attention_mask for e in encs], np.int32)}
    return encode


def measure(sides: dict[str, Callable[[list[str]], dict[str, np.ndarray]]],
            texts: list[str], batch: int, repeats: int) -> dict[str, float]:
    """Best sentences a CPU second of each side over `repeats` interleaved passes (after a
    warm one): the process's CPU time, which a busy shared box disturbs far less than the
    wall clock does (tokenizers' worker threads are counted: run it with RAYON_NUM_THREADS=1
    for one core's rate)."""
    chunks = [texts[s:s + batch] for s in range(0, len(texts), batch)]
    best = {name: 0.0 for name in sides}
    outs: dict[str, list[dict[str, np.ndarray]]] = {}
    for rep in range(repeats + 1):
        for name, fn in sides.items():
            t = time.process_time()
            outs[name] = [fn(c) for c in chunks]
            rate = len(texts) / (time.process_time() - t)
            if rep:
                best[name] = max(best[name], rate)
    first = next(iter(outs.values()))
    for name, out in outs.items():     # every side gives the same arrays
        for a, b in zip(first, out):
            for key in ("input_ids", "attention_mask"):
                assert np.array_equal(a[key], b[key]), f"{name}: {key} differ"
    return {name: round(v, 1) for name, v in best.items()}


def actor_host(n: int, batch: int, encode_batch: int, repeats: int) -> float:
    """Sentences a CPU second of webrlx.distributed.Embedder's CPU side (tokenizing, length checks,
    padding, sorting, gathering) on the Ray bench's sentences: its encoder's runs stubbed
    (zeros, no device), batches as Ray Data hands them. Runs in the webrlx of WEBRLX_SRC."""
    import webrlx.distributed as wd  # before ray_scale, which puts this checkout first
    from webrlx.models import minilm
    assert Path(wd.__file__).is_relative_to(os.environ.get("WEBRLX_SRC", ROOT)), wd.__file__
    from ray_scale import sentences

    class Stub:
        def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
            return [np.zeros((len(feeds["input_ids"]), 384), np.float32)]

    embedder = wd.Embedder.__new__(wd.Embedder)
    embedder.encoder = minilm.load(device="reference")
    embedder.encoder.executable = Stub()   # type: ignore[assignment]
    embedder.text_column, embedder.batch_size, embedder.strict = "text", encode_batch, True
    texts = np.array(sentences(0, n), dtype=object)
    batches = [{"id": np.arange(s, s + batch), "text": texts[s:s + batch]}
               for s in range(0, n, batch)]
    best = 0.0
    for rep in range(repeats + 1):
        t = time.process_time()
        for b in batches:
            embedder(b)
        if rep:
            best = max(best, n / (time.process_time() - t))
    return round(best, 1)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sentences", type=int, default=20_000)
    p.add_argument("--batch", type=int, default=2048, help="rows per encode_batch call")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--src", type=Path, action="append", default=[],
                   help="another webrlx checkout to measure beside this one")
    p.add_argument("--actor-host", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.actor_host:     # one checkout's Embedder, in a process of its own (see below)
        print(actor_host(args.sentences, args.batch, 128, args.repeats))
        return
    from ray_scale import sentences

    from webrlx.models.assets import minilm_dir
    tokenizer_json = minilm_dir() / "tokenizer.json"
    srcs = {"webrlx": ROOT, **{f"webrlx@{s}": s for s in args.src}}
    toks = {name: load_webrlx(src, tokenizer_json) for name, src in srcs.items()}
    vocab = next(iter(toks.values())).vocab
    rows: dict[str, Any] = {}
    for corpus, texts in (("ray_scale", sentences(0, args.sentences)),
                          ("zipf", varied(args.sentences, vocab, zipf=True)),
                          ("uniform", varied(args.sentences, vocab, zipf=False))):
        sides = {name: webrlx_side(tok) for name, tok in toks.items()}
        sides["tokenizers"] = hf_side(tokenizer_json)
        rates = measure(sides, texts, args.batch, args.repeats)
        rows[corpus] = {"sentences_per_cpu_s": rates,
                        "webrlx_over_tokenizers": round(rates["webrlx"] / rates["tokenizers"], 2)}
    actor = {}
    for name, src in srcs.items():      # Embedder's CPU side, each checkout in its process
        env = dict(os.environ, WEBRLX_SRC=str(src))
        out = subprocess.run([sys.executable, __file__, "--actor-host",
                              "--sentences", str(args.sentences), "--batch", str(args.batch),
                              "--repeats", str(args.repeats)],
                             env=env, capture_output=True, text=True, check=True)
        actor[name] = float(out.stdout.split()[-1])
    rows["embedder_cpu_side_ray_scale"] = {"sentences_per_cpu_s": actor}
    import tokenizers
    print(json.dumps({"what": "tokenization sentences a CPU second (process time), best of "
                              "interleaved passes",
                      "sentences": args.sentences, "batch": args.batch,
                      "max_length": MAX_LENGTH, "repeats": args.repeats,
                      "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 1),
                      "tokenizers": tokenizers.__version__,
                      "rayon_threads": os.environ.get("RAYON_NUM_THREADS", "default"),
                      "corpora": rows}), flush=True)


if __name__ == "__main__":
    main()
