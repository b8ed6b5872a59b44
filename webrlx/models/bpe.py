"""Byte-level BPE tokenizer (GPT-2 style) built from GGUF metadata, in pure Python.

Reproduces what `transformers` builds from a GGUF whose `tokenizer.ggml.model` is "gpt2"
(`AutoTokenizer.from_pretrained(dir, gguf_file=name)`), e.g. SmolLM2 with pre-tokenizer "smollm":

1. Added tokens are cut out of the text first, whole, leftmost-longest: the tokens the file
   marks control (token_type 3, special) and user-defined (4, not special), plus the tokens that
   bos/eos/unknown/padding ids name (special).
2. No normalizer. Every other stretch of text is pre-tokenized by the `tokenizers` ByteLevel
   pre-tokenizer (add_prefix_space=False, use_regex=True), i.e. split by the GPT-2 regex
   ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``
   (transformers adds no individual-digits split for "smollm"; SmolLM2's merges never join
   digits, so they come out one per token either way), then each piece's UTF-8 bytes are
   spelled with GPT-2's bytes-to-unicode alphabet.
3. BPE with merge ranks (lowest rank first, leftmost on ties, as `tokenizers` does it).
4. BOS/EOS are added when `tokenizer.ggml.add_bos_token` / `add_eos_token` say so (default no).

Decoding follows `tokenizers`: model tokens are mapped back to bytes and decoded with
errors="replace" in runs; an added token breaks a run and is written verbatim, unless it is
special and `skip_special` is set, in which case it is dropped without breaking the run.

Python's `re` has no \\p{L}; each character is mapped to a class representative ("a" letter,
"0" number, "\\t" non-ASCII whitespace, "!" anything else; ASCII stays as is) and an ASCII regex
runs on that string, whose match spans are the spans in the text. Classes come from
`unicodedata`; the Oniguruma tables inside `tokenizers` are newer (Unicode 16), so characters
unassigned in this Python's Unicode version but assigned later may split differently.
Pre-tokenizer names that `transformers` splits with another regex (llama-bpe, qwen2, ...; the
PRE_SPLITS table) run that regex with the `regex` package where it is installed (natively);
without it (Pyodide, whose offline build here lacks its wheel) the same class-string trick
runs the regex with \\p{L}, \\p{N}, \\s and \\S rewritten to ASCII classes (`ClassSplit`).
The rest are refused. GPT-2's split needs only the standard library.

Why not a library: `tokenizers` (what transformers runs) has no Pyodide build; tiktoken (which
Pyodide ships) ranks merged byte strings, not merge pairs, and knows neither added tokens nor
GGUF's pre-tokenizers, so its output could differ from transformers'.
"""

from __future__ import annotations

import codecs
import heapq
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

# `tokenizer.ggml.pre` values that transformers pre-tokenizes with a regex other than GPT-2's
# (transformers' GGUF_PRE_TOKENIZER_SPLITS), run with the `regex` package (\p{L}), or without it
# (Pyodide) with ClassSplit.
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_SPLITS = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                     "midm-2.0", "lfm2", "jina-v5-nano", "dbrx", "smaug-bpe"), _LLAMA3_SPLIT),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"), _QWEN2_SPLIT),
}
_OTHER_SPLIT_PRE = frozenset(("tekken", "qwen35", "gpt-4o", "llama4", "kanana2", "talkie",
                              "minimax-m2"))
_CONTROL, _USER_DEFINED = 3, 4  # llama.cpp token types
# Oniguruma's \s: the Unicode White_Space property (Python's str.isspace adds \x1c-\x1f).
_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
    + "".join(map(chr, range(0x2000, 0x200B)))
)
_ASCII_SPACE = "\\t\\n\\x0b\\x0c\\r "
# The GPT-2 regex over the class string (see the module docstring); ASCII classes only.
_SPLIT_RE = re.compile(
    rf"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^{_ASCII_SPACE}A-Za-z0-9]+"
    rf"|[{_ASCII_SPACE}]+(?![^{_ASCII_SPACE}])|[{_ASCII_SPACE}]+"
)
_WORD_CACHE_SIZE = 1 << 16
_LONG_WORD = 48  # symbols from which merging uses a heap instead of rescanning
_NO_RANK = 1 << 62


class _CharClasses(dict[int, str]):
    """str.translate table: code point -> class representative, filled in on first sight."""

    def __missing__(self, cp: int) -> str:
        c = chr(cp)
        if cp < 128:
            rep = c
        elif c in _WHITESPACE:
            rep = "\t"
        else:
            major = unicodedata.category(c)[0]
            rep = "a" if major == "L" else "0" if major == "N" else "!"
        self[cp] = rep
        return rep


class _FoldedClasses(_CharClasses):
    """_CharClasses for ClassSplit's case-insensitive contractions: a letter whose case
    mapping is one ASCII letter (U+017F long s, U+212A Kelvin) stands for that letter."""

    def __missing__(self, cp: int) -> str:
        rep = super().__missing__(cp)
        c = chr(cp)
        if rep == "a":
            rep = next((v for v in (c.lower(), c.upper()) if len(v) == 1 and v.isascii()), rep)
            self[cp] = rep
        return rep


_CHAR_CLASSES = _CharClasses()
_FOLDED_CLASSES = _FoldedClasses()


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map of the 256 byte values onto printable characters."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


_BYTE_CHARS = bytes_to_unicode()
_CHAR_BYTES = {c: b for b, c in _BYTE_CHARS.items()}


def pre_tokenize(text: str) -> list[str]:
    """Split text (without added tokens) with the GPT-2 byte-level regex; returns the pieces."""
    classes = text if text.isascii() else text.translate(_CHAR_CLASSES)
    return [text[m.start():m.end()] for m in _SPLIT_RE.finditer(classes)]


# What ClassSplit writes for a \p / \s escape of a PRE_SPLITS regex: (inside [...], outside).
_CLASS_ESCAPES = {r"\p{L}": ("A-Za-z", "[A-Za-z]"), r"\p{N}": ("0-9", "[0-9]"),
                  r"\s": (_ASCII_SPACE, f"[{_ASCII_SPACE}]"), r"\S": (None, f"[^{_ASCII_SPACE}]")}


class ClassSplit:
    """A PRE_SPLITS regex run with `re` over the class string (see the module docstring)."""

    def __init__(self, split: str) -> None:
        out: list[str] = []
        i, in_class = 0, False
        while i < len(split):
            esc = next((e for e in _CLASS_ESCAPES if split.startswith(e, i)), None)
            if esc is not None:
                inside, outside = _CLASS_ESCAPES[esc]
                if in_class and inside is None:
                    raise ValueError(f"ClassSplit: {esc} inside [...] in {split!r}")
                out.append(outside if not in_class else inside or "")
                i += len(esc)
                continue
            if split[i] == "\\":              # any other escape, as written
                out.append(split[i:i + 2])
                i += 2
                continue
            if split[i] == "[" and not in_class:
                in_class = True
            elif split[i] == "]" and in_class:
                in_class = False
            out.append(split[i])
            i += 1
        self.pattern = re.compile("".join(out))

    def findall(self, text: str) -> list[str]:
        classes = text if text.isascii() else text.translate(_FOLDED_CLASSES)
        return [text[m.start():m.end()] for m in self.pattern.finditer(classes)]


def _meta(metadata: Mapping[str, Any], key: str, default: Any = None) -> Any:
    return metadata.get(f"tokenizer.ggml.{key}", default)


class BPETokenizer:
    """Byte-level BPE tokenizer; build it with `from_gguf_metadata`."""

    def __init__(
        self,
        tokens: list[str],
        merges: list[str],
        token_types: list[int] | None = None,
        *,
        bos_id: int | None = None,
        eos_id: int | None = None,
        unk_id: int | None = None,
        pad_id: int | None = None,
        add_bos: bool = False,
        add_eos: bool = False,
        split: str | None = None,
    ) -> None:
        """Build the tokenizer from the GGUF vocabulary.

        Args:
            tokens: tokenizer.ggml.tokens, the token of each id.
            merges: tokenizer.ggml.merges, "left right" strings, best first.
            token_types: tokenizer.ggml.token_type (3 control, 4 user-defined, ...).
            bos_id, eos_id, unk_id, pad_id: the ids the metadata names, if any.
            add_bos, add_eos: whether `encode` adds BOS / EOS by default.
            split: the pre-tokenizer regex (\\p classes, for the `regex` package, else
                ClassSplit); None: GPT-2's.
        """
        self._split: Any = None
        if split is not None:
            try:
                import regex
                self._split = regex.compile(split)
            except ImportError:         # Pyodide without its `regex` package
                self._split = ClassSplit(split)
        self.tokens = list(tokens)
        self.bos_id, self.eos_id, self.unk_id, self.pad_id = bos_id, eos_id, unk_id, pad_id
        self.add_bos = bool(add_bos) and bos_id is not None
        self.add_eos = bool(add_eos) and eos_id is not None
        # The model vocabulary, as transformers spells it: a token with a character outside the
        # byte alphabet is respelled from its UTF-8 bytes; on a clash the later id wins.
        alphabet = set(_CHAR_BYTES)
        self.vocab: dict[str, int] = {}
        for index, token in enumerate(self.tokens):
            if not set(token) <= alphabet:
                token = "".join(_BYTE_CHARS[b] for b in token.encode("utf-8"))
            self.vocab[token] = index
        self._id_to_token = {index: token for token, index in self.vocab.items()}
        self._stride = max(len(self.tokens), max(self.vocab.values(), default=0) + 1)
        self._merges: dict[int, tuple[int, int]] = {}  # left * stride + right -> (rank, new id)
        for rank, merge in enumerate(merges):
            left, sep, right = merge.partition(" ")
            a, b, new = (self.vocab.get(t) for t in (left, right, left + right))
            if not sep or a is None or b is None or new is None:
                raise ValueError(f"BPETokenizer: merge {rank} {merge!r} is not two vocabulary "
                                 "tokens whose concatenation is in the vocabulary")
            self._merges[a * self._stride + b] = (rank, new)
        # Added tokens, in the order transformers adds them: control (special), user-defined
        # (not special), then the special tokens the metadata names.
        self.added: dict[str, int] = {}
        self.special_ids: set[int] = set()
        types = list(token_types or ())

        def add(token: str, special: bool) -> None:
            if token not in self.added and token in self.vocab:
                self.added[token] = self.vocab[token]
                if special:
                    self.special_ids.add(self.vocab[token])

        for token, kind in zip(self.tokens, types):
            if int(kind) == _CONTROL and set(token) <= alphabet:
                add(token, True)
        for token, kind in zip(self.tokens, types):
            if int(kind) == _USER_DEFINED:
                add(token, False)
        for special in (bos_id, eos_id, unk_id, pad_id):
            if special is not None and 0 <= special < len(self.tokens):
                add(self.tokens[special], True)
        self._added_by_id = {index: token for token, index in self.added.items()}
        self._added_re = (
            re.compile("|".join(re.escape(t) for t in sorted(self.added, key=len, reverse=True)))
            if self.added else None
        )
        self._byte_ids = [self.vocab.get(_BYTE_CHARS[b]) for b in range(256)]
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_gguf_metadata(cls, metadata: Mapping[str, Any]) -> BPETokenizer:
        """Build the tokenizer from a GGUF key -> value dict (tokenizer.ggml.* keys)."""
        model = _meta(metadata, "model")
        if model != "gpt2":
            raise ValueError(f"BPETokenizer: tokenizer.ggml.model is {model!r}, expected 'gpt2' "
                             "(byte-level BPE)")
        pre = _meta(metadata, "pre")
        if pre in _OTHER_SPLIT_PRE:
            raise NotImplementedError(f"BPETokenizer: pre-tokenizer {pre!r} splits text with "
                                      f"a regex webrlx lacks; it has GPT-2's and "
                                      f"{', '.join(sorted(PRE_SPLITS))}")
        tokens, merges = _meta(metadata, "tokens"), _meta(metadata, "merges")
        if tokens is None or merges is None:
            raise ValueError("BPETokenizer: the metadata needs tokenizer.ggml.tokens and "
                             "tokenizer.ggml.merges")

        def token_id(key: str) -> int | None:
            value = _meta(metadata, key)
            return None if value is None else int(value)

        def text(value: str | bytes) -> str:
            return value.decode("utf-8") if isinstance(value, bytes) else str(value)

        types = _meta(metadata, "token_type")
        return cls(
            [text(t) for t in tokens], [text(m) for m in merges],
            None if types is None else [int(t) for t in types],
            bos_id=token_id("bos_token_id"), eos_id=token_id("eos_token_id"),
            unk_id=token_id("unknown_token_id"), pad_id=token_id("padding_token_id"),
            add_bos=bool(_meta(metadata, "add_bos_token", False)),
            add_eos=bool(_meta(metadata, "add_eos_token", False)),
            split=PRE_SPLITS.get(pre),
        )

    @property
    def vocab_size(self) -> int:
        """Number of token ids (tokenizer.ggml.tokens)."""
        return len(self.tokens)

    def token_to_id(self, token: str) -> int | None:
        """Id of an added token or a vocabulary token (byte-alphabet spelling), else None."""
        found = self.added.get(token)
        return self.vocab.get(token) if found is None else found

    def id_to_token(self, token_id: int) -> str | None:
        """The token of an id (added tokens verbatim, others in the byte alphabet)."""
        found = self._added_by_id.get(token_id)
        return self._id_to_token.get(token_id) if found is None else found

    # -- encoding -------------------------------------------------------------------------------

    def _merge(self, ids: list[int]) -> list[int]:
        """Apply merges: the lowest-rank adjacent pair first, the leftmost on ties."""
        merges, stride = self._merges, self._stride
        if len(ids) >= _LONG_WORD:
            return self._merge_heap(ids)
        while len(ids) > 1:
            best_rank, best, new = _NO_RANK, -1, 0
            left = ids[0]
            for i in range(1, len(ids)):
                right = ids[i]
                found = merges.get(left * stride + right)
                if found is not None and found[0] < best_rank:
                    best_rank, new = found
                    best = i - 1
                left = right
            if best < 0:
                break
            ids[best:best + 2] = [new]
        return ids

    def _merge_heap(self, ids: list[int]) -> list[int]:
        """`_merge` for long words: tokenizers' priority queue over a linked list of symbols."""
        merges, stride = self._merges, self._stride
        n = len(ids)
        symbols = list(ids)
        after = [*range(1, n), -1]
        before = list(range(-1, n - 1))
        alive = [True] * n
        queue = []
        for i in range(n - 1):
            found = merges.get(symbols[i] * stride + symbols[i + 1])
            if found is not None:
                queue.append((found[0], i, found[1]))
        heapq.heapify(queue)
        while queue:
            _, pos, new = heapq.heappop(queue)
            right = after[pos]
            if not alive[pos] or right < 0:
                continue
            found = merges.get(symbols[pos] * stride + symbols[right])
            if found is None or found[1] != new:  # stale entry
                continue
            symbols[pos] = new
            alive[right] = False
            nxt = after[pos] = after[right]
            if nxt >= 0:
                before[nxt] = pos
                found = merges.get(new * stride + symbols[nxt])
                if found is not None:
                    heapq.heappush(queue, (found[0], pos, found[1]))
            prev = before[pos]
            if prev >= 0:
                found = merges.get(symbols[prev] * stride + new)
                if found is not None:
                    heapq.heappush(queue, (found[0], prev, found[1]))
        return [s for s, keep in zip(symbols, alive) if keep]

    def _encode_piece(self, piece: str) -> list[int]:
        """Ids of one pre-tokenized piece (cached)."""
        ids = self._cache.get(piece)
        if ids is None:
            byte_ids = self._byte_ids
            ids = self._merge([i for i in map(byte_ids.__getitem__, piece.encode("utf-8"))
                               if i is not None])
            if len(self._cache) >= _WORD_CACHE_SIZE:
                self._cache.clear()
            self._cache[piece] = ids
        return ids

    def _encode_plain(self, text: str, out: list[int]) -> None:
        pieces = pre_tokenize(text) if self._split is None else self._split.findall(text)
        for piece in pieces:
            out.extend(self._encode_piece(piece))

    def encode(self, text: str, add_bos: bool | None = None, add_eos: bool | None = None
               ) -> list[int]:
        """Token ids of text; added tokens in the text (e.g. <|im_start|>) become their ids.

        Args:
            text: the text.
            add_bos: prepend BOS; None follows the GGUF metadata.
            add_eos: append EOS; None follows the GGUF metadata.
        """
        out: list[int] = []
        if self.add_bos if add_bos is None else add_bos:
            if self.bos_id is None:
                raise ValueError("BPETokenizer.encode: add_bos but the metadata names no BOS")
            out.append(self.bos_id)
        start = 0
        if self._added_re is not None:
            added = self.added
            for m in self._added_re.finditer(text):
                if m.start() > start:
                    self._encode_plain(text[start:m.start()], out)
                out.append(added[m.group()])
                start = m.end()
        if start < len(text):
            self._encode_plain(text[start:], out)
        if self.add_eos if add_eos is None else add_eos:
            if self.eos_id is None:
                raise ValueError("BPETokenizer.encode: add_eos but the metadata names no EOS")
            out.append(self.eos_id)
        return out

    # -- decoding -------------------------------------------------------------------------------

    def _token_bytes(self, token: str) -> bytes:
        """The bytes a model token stands for (ByteLevel decoder)."""
        try:
            return bytes(_CHAR_BYTES[c] for c in token)
        except KeyError:
            return token.encode("utf-8")

    def _pieces(self, ids: Iterable[int], skip_special: bool) -> Iterator[bytes | str]:
        """Per id: the bytes of a model token, the text of an added token; skips the rest."""
        added, special, model = self._added_by_id, self.special_ids, self._id_to_token
        for token_id in ids:
            token_id = int(token_id)
            text = added.get(token_id)
            if text is not None:
                if not (skip_special and token_id in special):
                    yield text
            else:
                token = model.get(token_id)
                if token is not None:
                    yield self._token_bytes(token)

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        """Text of token ids; invalid UTF-8 becomes U+FFFD. skip_special drops special tokens."""
        out: list[str] = []
        run = bytearray()
        for piece in self._pieces(ids, skip_special):
            if isinstance(piece, bytes):
                run += piece
            else:
                out.append(run.decode("utf-8", errors="replace"))
                out.append(piece)
                run.clear()
        out.append(run.decode("utf-8", errors="replace"))
        return "".join(out)

    def stream(self, skip_special: bool = False) -> StreamDecoder:
        """A StreamDecoder that turns ids fed one by one into text."""
        return StreamDecoder(self, skip_special)


class StreamDecoder:
    """Incremental decoding: `feed` ids one at a time, get only complete characters back.

    Bytes of a character split over several tokens are held until the character is complete.
    The concatenation of every `feed` result and the final `flush` equals `decode(ids)`.
    """

    def __init__(self, tokenizer: BPETokenizer, skip_special: bool = False) -> None:
        self.tokenizer = tokenizer
        self.skip_special = skip_special
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token_id: int) -> str:
        """Text completed by this id ("" while a character is still incomplete)."""
        out = ""
        for piece in self.tokenizer._pieces((token_id,), self.skip_special):
            if isinstance(piece, bytes):
                out += self._decoder.decode(piece)
            else:  # an added token ends the byte run, as in decode
                out += self._decoder.decode(b"", final=True) + piece
                self._decoder.reset()
        return out

    def flush(self) -> str:
        """Text of bytes still held (an incomplete character becomes U+FFFD); then reset."""
        out = self._decoder.decode(b"", final=True)
        self._decoder.reset()
        return out

    def decode_iter(self, ids: Iterable[int]) -> Iterator[str]:
        """Feed ids and yield each non-empty piece of text, flushing at the end."""
        for token_id in ids:
            text = self.feed(token_id)
            if text:
                yield text
        text = self.flush()
        if text:
            yield text
