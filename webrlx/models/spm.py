"""SentencePiece-style BPE (GGUF `tokenizer.ggml.model` "llama": Llama 2, Mistral, Gemma) in
pure Python, as transformers builds it from the file (`AutoTokenizer.from_pretrained(dir,
gguf_file=name)`):

1. Added tokens (control: special; user-defined: not) are cut out of the text first, whole.
2. Spaces become "▁". Llama/Mistral (Metaspace, prepend "first") also prepend "▁" to a stretch
   of text that starts the input, unless it starts with one; Gemma prepends nothing.
3. BPE over the characters of each stretch with the merges transformers derives from the
   vocabulary (`generate_merges`: every split of a token into two tokens, best score first;
   Gemma ranks by position in the file, its scores do not follow the merge order); characters
   outside the vocabulary fall back to their UTF-8 bytes (<0xXX> tokens).
4. BOS is added unless `tokenizer.ggml.add_bos_token` is false.

Decoding maps "▁" to a space and <0xXX> tokens to bytes; Llama's decoder drops one leading
space.
"""
from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

_CONTROL, _USER_DEFINED, _BYTE = 3, 4, 6    # llama.cpp token types
_SPACE = "\u2581"
_BYTE_RE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def _merges(tokens: list[str], scores: dict[str, float]) -> dict[tuple[str, str], int]:
    """transformers' generate_merges(vocab, scores): pair -> rank (0 = merged first)."""
    vocab = {t: i for i, t in enumerate(tokens)}
    found: list[tuple[str, str, float]] = []
    for merged, score in scores.items():
        local = [(merged[:i], merged[i:], score) for i in range(1, len(merged))
                 if merged[:i] in vocab and merged[i:] in vocab]
        found.extend(sorted(local, key=lambda x: (vocab[x[0]], vocab[x[1]])))
    found.sort(key=lambda v: (v[2], len(v[0]), len(v[1])), reverse=True)
    ranks: dict[tuple[str, str], int] = {}
    for rank, (left, right, _) in enumerate(found):
        ranks.setdefault((left, right), rank)
    return ranks


class SPMTokenizer:
    """SentencePiece BPE with byte fallback; build it with `from_gguf_metadata`."""

    def __init__(self, tokens: list[str], scores: list[float] | None,
                 token_types: list[int] | None, *, gemma: bool = False,
                 bos_id: int | None = None, eos_id: int | None = None,
                 unk_id: int | None = None, add_bos: bool = True) -> None:
        """Build from the GGUF vocabulary (gemma: Gemma's spelling, merge order and spaces)."""
        if gemma:     # a token of spaces is stored as spaces, looked up as "▁"s
            tokens = [_SPACE * len(t) if " " in t and not t.strip() else t for t in tokens]
        self.tokens = list(tokens)
        self.gemma = gemma
        self.bos_id, self.eos_id, self.unk_id = bos_id, eos_id, unk_id
        self.add_bos = add_bos and bos_id is not None
        self.vocab = {t: i for i, t in enumerate(self.tokens)}
        if gemma or scores is None:
            ranked = {t: -float(i) for i, t in enumerate(self.tokens)}
        else:
            ranked = dict(zip(self.tokens, (float(s) for s in scores), strict=True))
        self._ranks = _merges(self.tokens, ranked)
        types = list(token_types or [1] * len(self.tokens))
        self.added: dict[str, int] = {}
        self.special_ids: set[int] = set()
        for i, (t, kind) in enumerate(zip(self.tokens, types, strict=True)):
            if kind == _CONTROL:
                self.added.setdefault(t, i)
                self.special_ids.add(i)
        for i, (t, kind) in enumerate(zip(self.tokens, types, strict=True)):
            if kind == _USER_DEFINED:
                self.added.setdefault(t, i)
        self._added_re = (re.compile("|".join(
            re.escape(t) for t in sorted(self.added, key=len, reverse=True)))
            if self.added else None)
        self._byte_ids = [self.vocab.get(f"<0x{b:02X}>") for b in range(256)]
        self._bytes: dict[int, bytes] = {}
        for i, t in enumerate(self.tokens):
            m = _BYTE_RE.match(t) if types[i] == _BYTE or t.startswith("<0x") else None
            self._bytes[i] = (bytes([int(m.group(1), 16)]) if m else
                              t.replace(_SPACE, " ").encode("utf-8"))

    @classmethod
    def from_gguf_metadata(cls, md: Mapping[str, Any]) -> SPMTokenizer:
        """Build the tokenizer from a GGUF key -> value dict (tokenizer.ggml.* keys)."""
        if md.get("tokenizer.ggml.model") != "llama":
            raise ValueError(f"SPMTokenizer: tokenizer.ggml.model is "
                             f"{md.get('tokenizer.ggml.model')!r}, expected 'llama'")

        def tid(key: str) -> int | None:
            v = md.get(f"tokenizer.ggml.{key}")
            return None if v is None else int(v)
        return cls(list(md["tokenizer.ggml.tokens"]), md.get("tokenizer.ggml.scores"),
                   md.get("tokenizer.ggml.token_type"),
                   gemma=str(md.get("general.architecture", "")).startswith("gemma"),
                   bos_id=tid("bos_token_id"), eos_id=tid("eos_token_id"),
                   unk_id=tid("unknown_token_id"),
                   add_bos=bool(md.get("tokenizer.ggml.add_bos_token", True)))

    @property
    def vocab_size(self) -> int:
        """Number of token ids."""
        return len(self.tokens)

    def _bpe(self, text: str, out: list[int]) -> None:
        syms = list(text)
        ranks = self._ranks
        while len(syms) > 1:
            best, at = None, -1
            for i in range(len(syms) - 1):
                r = ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            syms[at:at + 2] = [syms[at] + syms[at + 1]]
        for s in syms:
            tid = self.vocab.get(s)
            if tid is not None:
                out.append(tid)
                continue
            for b in s.encode("utf-8"):             # byte fallback
                bid = self._byte_ids[b]
                if bid is None:
                    bid = self.unk_id if self.unk_id is not None else 0
                out.append(bid)

    def _encode_plain(self, text: str, first: bool, out: list[int]) -> None:
        text = text.replace(" ", _SPACE)
        if first and not self.gemma and not text.startswith(_SPACE):   # Metaspace "first"
            text = _SPACE + text
        self._bpe(text, out)

    def encode(self, text: str, add_bos: bool | None = None) -> list[int]:
        """Token ids of text; added tokens in it become their ids; BOS per the metadata."""
        out: list[int] = []
        if self.add_bos if add_bos is None else add_bos:
            out.append(int(self.bos_id))            # type: ignore[arg-type]
        start = 0
        if self._added_re is not None:
            for m in self._added_re.finditer(text):
                if m.start() > start:
                    self._encode_plain(text[start:m.start()], start == 0, out)
                out.append(self.added[m.group()])
                start = m.end()
        if start < len(text):
            self._encode_plain(text[start:], start == 0, out)
        return out

    def _pieces(self, ids: Iterable[int], skip_special: bool) -> Iterator[bytes]:
        for i in ids:
            i = int(i)
            if skip_special and i in self.special_ids:
                continue
            piece = self._bytes.get(i)
            if piece is not None:
                yield piece

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        """Text of token ids (invalid UTF-8 becomes U+FFFD)."""
        text = b"".join(self._pieces(ids, skip_special)).decode("utf-8", errors="replace")
        return text[1:] if not self.gemma and text.startswith(" ") else text

    def stream(self, skip_special: bool = False) -> SPMStreamDecoder:
        """A decoder that turns ids fed one by one into text (as decode() would)."""
        return SPMStreamDecoder(self, skip_special)


class SPMStreamDecoder:
    """Incremental decode(): `feed` ids, get complete characters; `flush` at the end."""

    def __init__(self, tokenizer: SPMTokenizer, skip_special: bool = False) -> None:
        self.tokenizer, self.skip_special = tokenizer, skip_special
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._strip = not tokenizer.gemma          # Llama's decoder drops one leading space

    def _text(self, text: str) -> str:
        if self._strip and text:
            self._strip = False
            return text[1:] if text.startswith(" ") else text
        return text

    def feed(self, token_id: int) -> str:
        """Text completed by this id ("" while a character is incomplete)."""
        data = b"".join(self.tokenizer._pieces((token_id,), self.skip_special))
        return self._text(self._decoder.decode(data))

    def flush(self) -> str:
        """Text of bytes still held; then reset."""
        out = self._decoder.decode(b"", final=True)
        self._decoder.reset()
        return self._text(out)
