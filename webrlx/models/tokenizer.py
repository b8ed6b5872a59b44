"""BERT WordPiece tokenizer read from a Hugging Face tokenizer.json, in pure Python.

Reproduces the `tokenizers` pipeline of BERT-style models (all-MiniLM-L6-v2): added-token split,
BertNormalizer, BertPreTokenizer, WordPiece, [CLS] $A [SEP] template, truncation and padding.
It needs no Rust extension, so it runs inside Pyodide (`tokenizers`, the library transformers
runs, has no Pyodide build). Speed comes from C loops and caches: ASCII text is cleaned and
lowercased by one bytes.translate, other text through cached str.translate tables; texts are
cut at whitespace and each chunk's ids cached (repeated words cost a dict lookup), words'
WordPiece ids too (bench/tokenize_bench.py measures it against `tokenizers`).
Character classes come from Python's unicodedata; tokenizers' Rust crates pin older Unicode
tables, so characters added in Unicode 10 or later (rare scripts, a few punctuation and format
marks) may tokenize differently.
"""

from __future__ import annotations

import json
import os
import re
import string
import unicodedata
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any

import numpy as np

# Rust's char::is_whitespace (the Unicode White_Space property); Python's str.isspace differs.
_WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_WHITESPACE_RE = re.compile(f"[{_WHITESPACE}]+")
# The whitespace that clean_text keeps (as a space): the above less the controls it drops.
_KEPT_WHITESPACE_RE = re.compile(
    "[\t\n\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
_ASCII_PUNCTUATION = frozenset(string.punctuation)
# A word or one punctuation character of a whitespace-free chunk of cleaned ASCII text:
# BertPreTokenizer's split done by the re module instead of a loop over characters.
_ASCII_PUNCT_CLASS = "!-/:-@\\[-`{-~"
_ASCII_WORDS_RE = re.compile(f"[^{_ASCII_PUNCT_CLASS}]+|[{_ASCII_PUNCT_CLASS}]")
# BertNormalizer's CJK ideograph blocks (code point ranges, inclusive).
_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)
# clean_text drops these categories (Cc, Cf, Co), except the whitespace controls \t \n \r.
_DROPPED_CATEGORIES = frozenset(("Cc", "Cf", "Co"))
# Entries of the word cache (cleared when full) and of the chunk cache (full: no new entries,
# so text of many rare words costs what it would cost without one), and of each _CharMap.
_WORD_CACHE_SIZE = 1 << 16
_CHAR_MAP_SIZE = 1 << 16


def _ascii_clean_table() -> dict[int, str | None]:
    """Build the str.translate table that applies clean_text to ASCII text."""
    table: dict[int, str | None] = {}
    for cp in range(128):
        c = chr(cp)
        if c in "\t\n\r":
            table[cp] = " "
        elif unicodedata.category(c) == "Cc":
            table[cp] = None
    return table


_ASCII_CLEAN = _ascii_clean_table()
# The same as bytes.translate's table (whitespace controls -> space; lowercased or not) and
# its deleted bytes: what the ASCII fast path of tokenize_ids applies in one C call.
_ASCII_DROPPED = bytes(cp for cp, r in _ASCII_CLEAN.items() if r is None)
_ASCII_SPACED = bytes(32 if _ASCII_CLEAN.get(cp) == " " else cp for cp in range(256))
_ASCII_SPACED_LOWER = _ASCII_SPACED.translate(
    bytes.maketrans(string.ascii_uppercase.encode(), string.ascii_lowercase.encode()))


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def _clean_char(c: str, clean_text: bool, handle_chinese_chars: bool) -> str:
    """Return what clean_text and handle_chinese_chars turn one character into."""
    if clean_text:
        if c in "\t\n\r":
            return " "
        if c in "\x00\ufffd" or unicodedata.category(c) in _DROPPED_CATEGORIES:
            return ""
        if _WHITESPACE_RE.match(c):
            return " "
    if handle_chinese_chars and _is_cjk(ord(c)):
        return f" {c} "
    return c


def _is_punctuation(c: str) -> bool:
    return c in _ASCII_PUNCTUATION or unicodedata.category(c)[0] == "P"


class _CharMap(dict[int, "int | str | None"]):
    """A str.translate table that computes a character's entry the first time it is seen
    (rule(c): its replacement, "" to drop it) and keeps it (up to _CHAR_MAP_SIZE characters):
    C-speed lookups after that."""

    def __init__(self, rule: Callable[[str], str]) -> None:
        super().__init__()
        self.rule = rule

    def __missing__(self, cp: int) -> int | str | None:
        c = chr(cp)
        r = self.rule(c)
        value: int | str | None = cp if r == c else r or None
        if len(self) < _CHAR_MAP_SIZE:
            self[cp] = value
        return value


def _split_rule(c: str) -> str:
    """BertPreTokenizer as a translation: punctuation isolated by spaces, whitespace a space."""
    if _is_punctuation(c):
        return f" {c} "
    return " " if _WHITESPACE_RE.match(c) else c


# Shared by every tokenizer (they depend on the character alone).
_DROP_NONSPACING = _CharMap(lambda c: "" if unicodedata.category(c) == "Mn" else c)
_SPLIT = _CharMap(_split_rule)


class WordPieceTokenizer:
    """BERT tokenizer: normalize, split on whitespace and punctuation, then WordPiece."""

    def __init__(
        self,
        vocab: dict[str, int],
        *,
        unk_token: str = "[UNK]",
        continuing_subword_prefix: str = "##",
        max_input_chars_per_word: int = 100,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        clean_text: bool = True,
        handle_chinese_chars: bool = True,
        prefix_ids: tuple[int, ...] = (),
        suffix_ids: tuple[int, ...] = (),
        pad_id: int = 0,
        added_tokens: dict[str, int] | None = None,
    ) -> None:
        """Build a tokenizer from a vocabulary and the BertNormalizer / template settings."""
        if unk_token not in vocab:
            raise ValueError(f"WordPieceTokenizer: unk_token {unk_token!r} is not in the vocab")
        self.vocab = vocab
        self.unk_id = vocab[unk_token]
        self.prefix = continuing_subword_prefix
        self.max_input_chars_per_word = max_input_chars_per_word
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.clean_text = clean_text
        self.handle_chinese_chars = handle_chinese_chars
        self.prefix_ids = tuple(prefix_ids)
        self.suffix_ids = tuple(suffix_ids)
        self.pad_id = pad_id
        self.added_tokens = dict(added_tokens or {})
        # Longest first, so the alternation finds the leftmost-longest match like tokenizers.
        alternatives = sorted(self.added_tokens, key=len, reverse=True)
        self._added_re = (
            re.compile("(" + "|".join(map(re.escape, alternatives)) + ")") if alternatives else None
        )
        self._clean_map = _CharMap(
            lambda c: _clean_char(c, clean_text, handle_chinese_chars))
        self._word_cache: dict[str, tuple[int, ...]] = {}
        self._chunk_cache: dict[bytes | str, tuple[int, ...]] = {}
        self._chunks_re = _KEPT_WHITESPACE_RE if clean_text else _WHITESPACE_RE
        self._ascii_table = (
            (_ASCII_SPACED_LOWER if lowercase else _ASCII_SPACED) if clean_text else None
        )

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> WordPieceTokenizer:
        """Read a tokenizer.json file (a malformed one raises ModelFileError naming it)."""
        from .assets import ModelFileError, read_json
        try:
            return cls.from_json(read_json(path))
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            if isinstance(e, ModelFileError):
                raise
            raise ModelFileError(f"{path}: not a WordPiece tokenizer.json ({e!r})") from None

    @classmethod
    def from_json(cls, config: str | dict[str, Any]) -> WordPieceTokenizer:
        """Build from the text or the parsed dict of a tokenizer.json.

        Its own "truncation" and "padding" sections are ignored: encode_batch truncates to its
        max_length argument and pads to the longest text of the batch, like sentence-transformers.
        """
        cfg = json.loads(config) if isinstance(config, str) else config
        model = cfg.get("model") or {}
        if model.get("type") != "WordPiece":
            raise ValueError(
                f"tokenizer.json: model.type must be 'WordPiece', got {model.get('type')!r}"
            )
        normalizer = cfg.get("normalizer") or {}
        if normalizer.get("type") != "BertNormalizer":
            raise ValueError(
                "tokenizer.json: normalizer.type must be 'BertNormalizer', "
                f"got {normalizer.get('type')!r}"
            )
        pre = cfg.get("pre_tokenizer") or {}
        if pre.get("type") != "BertPreTokenizer":
            raise ValueError(
                "tokenizer.json: pre_tokenizer.type must be 'BertPreTokenizer', "
                f"got {pre.get('type')!r}"
            )
        added = {}
        for tok in cfg.get("added_tokens", []):
            if tok.get("normalized") or tok.get("lstrip") or tok.get("rstrip") or tok.get(
                "single_word"
            ):
                raise ValueError(
                    f"tokenizer.json: added token {tok['content']!r} uses normalized/lstrip/"
                    "rstrip/single_word, which WordPieceTokenizer does not support"
                )
            added[tok["content"]] = tok["id"]
        prefix_ids, suffix_ids = _template_ids(cfg.get("post_processor"))
        pad_token = (cfg.get("padding") or {}).get("pad_token", "[PAD]")
        return cls(
            model["vocab"],
            unk_token=model.get("unk_token", "[UNK]"),
            continuing_subword_prefix=model.get("continuing_subword_prefix", "##"),
            max_input_chars_per_word=model.get("max_input_chars_per_word", 100),
            lowercase=normalizer.get("lowercase", True),
            strip_accents=normalizer.get("strip_accents"),
            clean_text=normalizer.get("clean_text", True),
            handle_chinese_chars=normalizer.get("handle_chinese_chars", True),
            prefix_ids=prefix_ids,
            suffix_ids=suffix_ids,
            pad_id=model["vocab"][pad_token],
            added_tokens=added,
        )

    def normalize(self, text: str) -> str:
        """Apply BertNormalizer: clean_text, CJK spacing, strip_accents, lowercase."""
        if text.isascii():
            if self.clean_text:
                text = text.translate(_ASCII_CLEAN)
        else:
            text = text.translate(self._clean_map)
            if self.strip_accents:
                text = unicodedata.normalize("NFD", text).translate(_DROP_NONSPACING)
        if self.lowercase:
            # Lowercase char by char: str.lower() maps a final capital sigma to 'ς', Rust doesn't.
            text = text.lower() if "\u03a3" not in text else "".join(c.lower() for c in text)
        return text

    def pre_tokenize(self, text: str) -> list[str]:
        """Split normalized text on whitespace, and isolate every punctuation character."""
        return list(filter(None, text.translate(_SPLIT).split(" ")))

    def word_ids(self, word: str) -> tuple[int, ...]:
        """Split one word into WordPiece ids, greedy longest match first; [UNK] if impossible."""
        ids = self._word_cache.get(word)
        if ids is not None:
            return ids
        ids = self._wordpiece(word)
        if len(self._word_cache) >= _WORD_CACHE_SIZE:
            self._word_cache.clear()
        self._word_cache[word] = ids
        return ids

    def _wordpiece(self, word: str) -> tuple[int, ...]:
        if len(word) > self.max_input_chars_per_word:
            return (self.unk_id,)
        vocab, ids, start = self.vocab, [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in vocab:
                    ids.append(vocab[piece])
                    start = end
                    break
            else:
                return (self.unk_id,)
        return tuple(ids)

    def _chunk_ids(self, chunk: bytes | str) -> tuple[int, ...]:
        """The ids of one chunk of text between whitespace: cleaned, lowercased ASCII bytes
        (words: the ASCII split), or raw text (normalize and pre_tokenize)."""
        if isinstance(chunk, bytes):
            words = _ASCII_WORDS_RE.findall(chunk.decode("ascii"))
        else:
            words = self.pre_tokenize(self.normalize(chunk))
        ids = tuple(chain.from_iterable(map(self.word_ids, words)))
        if len(self._chunk_cache) < _WORD_CACHE_SIZE:
            self._chunk_cache[chunk] = ids
        return ids

    def _piece_ids(self, piece: str) -> list[int]:
        """The ids of one text with no added token in it, chunk by chunk from a cache.

        Chunks are cut at whitespace before normalizing: BertNormalizer works character by
        character (clean_text, CJK spacing, lowercase) or within a combining sequence, which
        whitespace ends (strip_accents), so a text's words are its chunks' words in order.
        ASCII text is cleaned and lowercased first, in one bytes.translate.
        """
        chunks: Sequence[bytes | str]
        if self._ascii_table is not None and piece.isascii():
            chunks = piece.encode("ascii").translate(self._ascii_table, _ASCII_DROPPED).split()
        else:
            chunks = self._chunks_re.split(piece)
        found = list(map(self._chunk_cache.get, chunks))
        if None in found:
            found = [ids if ids is not None else self._chunk_ids(c)
                     for ids, c in zip(found, chunks)]
        return list(chain.from_iterable(found))   # type: ignore[arg-type]

    def tokenize_ids(self, text: str) -> list[int]:
        """Return the ids of one text without special tokens and without truncation."""
        if self._added_re is None or self._added_re.search(text) is None:
            return self._piece_ids(text)
        ids: list[int] = []
        for i, piece in enumerate(self._added_re.split(text)):
            if i % 2:
                ids.append(self.added_tokens[piece])
            else:
                ids.extend(self._piece_ids(piece))
        return ids

    def encode(self, text: str, max_length: int | None = 256) -> list[int]:
        """Return the ids of one text with [CLS]/[SEP], truncated to max_length tokens."""
        ids = self.tokenize_ids(text)
        if max_length is not None:
            room = max_length - len(self.prefix_ids) - len(self.suffix_ids)
            if room < 0:
                raise ValueError(
                    f"encode(): max_length={max_length} leaves no room for the "
                    f"{len(self.prefix_ids) + len(self.suffix_ids)} special tokens"
                )
            ids = ids[:room]
        return [*self.prefix_ids, *ids, *self.suffix_ids]

    def encode_batch(self, texts: list[str], max_length: int | None = 256) -> dict[str, np.ndarray]:
        """Tokenize texts and pad them to the longest one.

        Args:
            texts: the sentences (a list of str, not one str).
            max_length: truncate each text to this many tokens, [CLS] and [SEP] included.

        Returns:
            "input_ids", "attention_mask" and "token_type_ids": int32 arrays (batch, seq).
        """
        if isinstance(texts, str):
            raise TypeError("encode_batch(): texts must be a list of str, got one str; wrap it")
        rows = [self.encode(t, max_length) for t in texts]
        seq = max((len(r) for r in rows), default=0)
        input_ids = np.full((len(rows), seq), self.pad_id, dtype=np.int32)
        attention_mask = np.zeros((len(rows), seq), dtype=np.int32)
        for i, r in enumerate(rows):
            input_ids[i, : len(r)] = r
            attention_mask[i, : len(r)] = 1
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": np.zeros((len(rows), seq), dtype=np.int32),
        }


def _template_ids(post: dict[str, Any] | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Return the special-token ids a TemplateProcessing puts before and after sequence $A."""
    if post is None:
        return (), ()
    if post.get("type") != "TemplateProcessing":
        raise ValueError(
            f"tokenizer.json: post_processor.type must be 'TemplateProcessing', "
            f"got {post.get('type')!r}"
        )
    before: list[int] = []
    after: list[int] = []
    seen_a = False
    for item in post["single"]:
        if "Sequence" in item:
            seen_a = True
        else:
            name = item["SpecialToken"]["id"]
            (after if seen_a else before).extend(post["special_tokens"][name]["ids"])
    return tuple(before), tuple(after)
