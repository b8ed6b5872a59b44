"""WordPieceTokenizer against the `tokenizers` package on all-MiniLM-L6-v2's tokenizer.json."""

import json
import random
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from webrlx.models.assets import minilm_dir
from webrlx.models.tokenizer import WordPieceTokenizer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MAX_LENGTH = 256

WORDS = [
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "WebGPU", "tokenizer",
    "unbelievably", "antidisestablishmentarianism", "Transformers", "GPU", "iPhone", "McDonald's",
    "naïve", "café", "Crème", "brûlée", "España", "mañana", "Über", "Müller", "Ångström", "Øresund",
    "façade", "Straße", "ΑΘΗΝΑ", "ΟΔΟΣ", "Σίσυφος", "İstanbul", "Москва", "Привет", "Ελληνικά",
    "東京", "北京大学", "中文字符", "日本語のテキスト", "한국어", "서울", "ﬁne",
    "ＦＵＬＬｗｉｄｔｈ",
    "مرحبا", "שלום", "हिन्दी", "ภาษาไทย", "😀", "👍🏽", "👨‍👩‍👧", "🥰", "❤️", "🤗", "∑", "√2", "≈",
    "3.14159", "1,000,000", "42", "2024-01-01", "$100", "€50", "£3", "50%", "x²", "½", "①",
    "e-mail", "state-of-the-art", "don't", "C++", "node.js", "user@example.com",
    "https://example.com/a?b=c&d=e", "#hashtag", "@mention", "snake_case", "camelCaseWord",
    "[SEP]", "[CLS]", "[MASK]", "[PAD]", "[UNK]", "[sep]", "[[SEP]]", "a[MASK]b", "##ing",
    "[unused1]",
]
SEPARATORS = [
    " ", " ", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2009", "\u2028", "\x0b", "\x0c",
    "\x85", "\x1c", "", "-", "...", "?!", "—", "–", "«", "»", "“", "”", "¿", "¡", "·", "•", "…",
]
ODDITIES = [
    "\x00", "\ufffd", "\u200b", "\u200d", "\ufeff", "\u00ad", "\x7f", "\x01", "\ue000", "\u0378",
    "\u0301", "\u0308", "\u20e3", "\ufe0f", "e\u0301", "A\u030a", "\U0001f3fb", "\U000f0000",
]


def _sentence(rng: random.Random) -> str:
    """Return one random sentence mixing words, separators and odd characters."""
    parts = []
    for _ in range(rng.randint(1, 24)):
        parts.append(rng.choice(WORDS))
        if rng.random() < 0.15:
            parts.append(rng.choice(ODDITIES))
        parts.append(rng.choice(SEPARATORS))
    text = "".join(parts)
    style = rng.random()
    if style < 0.15:
        text = text.upper()
    elif style < 0.25:
        text = text.title()
    return text


def _sentences() -> list[str]:
    rng = random.Random(1234)
    special = [
        "", " ", "\t\n\r", ".", "!!!???...", "Hello, world!", "HELLO WORLD", "ΣΑΣ ΟΔΟΣ",
        "a" * 100, "a" * 101, "é" * 101, "supercalifragilistic" * 6, "x" + "\u0301" * 120,
        "[SEP]", "[CLS] hi [SEP]", "text[SEP]more[MASK]", "\x00\x00\x00",
        "Hello " * 300, "word. " * 127, "ab " * 254, "ab " * 255,
        " ".join(_sentence(rng) for _ in range(40)),
        "中文" * 200, "😀" * 300, "Déjà vu — ça va? ¿Qué tal? Ünïcödé ÅÄÖ ñ",
    ]
    return special + [_sentence(rng) for _ in range(400)]


SENTENCES = _sentences()


@pytest.fixture(scope="module")
def tokenizer_path() -> Path:
    return minilm_dir() / "tokenizer.json"


@pytest.fixture(scope="module")
def ours(tokenizer_path: Path) -> WordPieceTokenizer:
    return WordPieceTokenizer.from_file(tokenizer_path)


@pytest.fixture(scope="module")
def reference(tokenizer_path: Path) -> Tokenizer:
    tok = Tokenizer.from_file(str(tokenizer_path))
    tok.enable_truncation(MAX_LENGTH)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    return tok


def _reference_batch(reference: Tokenizer, texts: list[str]) -> dict[str, np.ndarray]:
    encs = reference.encode_batch(texts)
    return {
        "input_ids": np.array([e.ids for e in encs], dtype=np.int32),
        "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int32),
        "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int32),
    }


def test_batch_matches_tokenizers(ours: WordPieceTokenizer, reference: Tokenizer) -> None:
    got = ours.encode_batch(SENTENCES, max_length=MAX_LENGTH)
    want = _reference_batch(reference, SENTENCES)
    assert got["input_ids"].shape == want["input_ids"].shape == (len(SENTENCES), MAX_LENGTH)
    for key in want:
        assert got[key].dtype == np.int32
        rows = np.flatnonzero((got[key] != want[key]).any(axis=1))
        assert rows.size == 0, f"{key} differ for {[SENTENCES[i] for i in rows[:3]]!r}"


def test_encode_matches_tokenizers(ours: WordPieceTokenizer, reference: Tokenizer) -> None:
    for text in SENTENCES:
        assert ours.encode(text) == reference.encode(text).ids, repr(text)


def test_pads_to_longest_in_batch(ours: WordPieceTokenizer, reference: Tokenizer) -> None:
    texts = ["a short one", "", "a somewhat longer sentence, with punctuation!"]
    got = ours.encode_batch(texts)
    want = _reference_batch(reference, texts)
    assert got["input_ids"].shape[1] < MAX_LENGTH
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])


def test_truncation_keeps_special_tokens(ours: WordPieceTokenizer) -> None:
    ids = ours.encode("word " * 1000, max_length=16)
    assert len(ids) == 16
    assert ids[0] == ours.vocab["[CLS]"] and ids[-1] == ours.vocab["[SEP]"]
    assert len(ours.encode("word " * 1000, max_length=None)) == 1002
    with pytest.raises(ValueError, match="special tokens"):
        ours.encode("x", max_length=1)


def test_rejects_a_bare_string(ours: WordPieceTokenizer) -> None:
    with pytest.raises(TypeError, match="list of str"):
        ours.encode_batch("not a list")


def test_rejects_other_models(tokenizer_path: Path) -> None:
    cfg = json.loads(tokenizer_path.read_text(encoding="utf-8"))
    cfg["model"]["type"] = "BPE"
    with pytest.raises(ValueError, match="WordPiece"):
        WordPieceTokenizer.from_json(cfg)


def test_reproduces_fixture_ids(ours: WordPieceTokenizer) -> None:
    sentences = json.loads((FIXTURES / "minilm_sentences.json").read_text(encoding="utf-8"))
    ref = np.load(FIXTURES / "minilm_reference.npz")
    got = ours.encode_batch(sentences, max_length=MAX_LENGTH)
    np.testing.assert_array_equal(got["input_ids"], ref["input_ids"])
    np.testing.assert_array_equal(got["attention_mask"], ref["attention_mask"])


@pytest.mark.parametrize("name, text, msg", [
    ("tokenizer.json", '{"model": {"type": "WordPiece",', r"tokenizer.json: not valid JSON "
                                                           r"\(Expecting .* at line 1, column"),
    ("tokenizer.json", '{"model": {"type": "BPE"}}', r"tokenizer.json: not a WordPiece"),
    ("config.json", "{\n  \"hidden_size\": 384,\n  oops\n}", r"config.json: not valid JSON "
                                                           r"\(.* at line 3, column 3\)"),
    ("config.json", "[1, 2]", r"config.json: must hold a JSON object, got list"),
    ("config.json", '{"hidden_size": "384"}', r"config.json: bert: hidden_size must be a "
                                              r"positive int, got '384'"),
    ("config.json", '{"num_attention_heads": 5}', r"config.json: bert: hidden_size 384 is not "
                                                  r"a multiple of num_attention_heads 5"),
    ("config.json", b'{"a": "\xff"}', r"config.json: not UTF-8 text"),
])
def test_malformed_model_files_name_the_file(tmp_path: Path, name: str, text, msg: str) -> None:
    from webrlx.models import minilm
    from webrlx.models.assets import ModelFileError
    for f in ("config.json", "model.safetensors", "tokenizer.json"):
        (tmp_path / f).symlink_to(minilm_dir() / f)
    (tmp_path / name).unlink()
    (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ModelFileError, match=msg) as info:
        minilm.load(tmp_path, device="reference")
    assert str(tmp_path / name) in str(info.value)
    assert minilm.load(device="reference").encode(["still works"]).shape == (1, 384)


# Code point ranges of scripts in the Unicode tables of both Python and tokenizers' Rust crates
# (nothing added after Unicode 9 inside them), for random text outside WORDS.
SCRIPT_RANGES = [
    (0x80, 0x24F), (0x250, 0x2AF), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
    (0x5D0, 0x5EA), (0x620, 0x64A), (0x905, 0x939), (0xE01, 0xE3A), (0x1E00, 0x1EFF),
    (0x2000, 0x2064), (0x20A0, 0x20BE), (0x2190, 0x21FF), (0x3000, 0x303F), (0x3041, 0x3096),
    (0x30A1, 0x30FA), (0x4E00, 0x9FCC), (0xAC00, 0xD7A3), (0xFF01, 0xFF5E), (0x1F600, 0x1F64F),
]


def _random_text(rng: random.Random, vocab_words: list[str]) -> str:
    """One text of a random kind: vocabulary words (cased, punctuated), any ASCII characters
    (controls included), characters of many scripts, or a mix with added tokens."""
    kind = rng.randrange(5)
    if kind == 0:
        words = [rng.choice(vocab_words) for _ in range(rng.randint(0, 60))]
        words = [w.upper() if rng.random() < 0.1 else w.title() if rng.random() < 0.2 else w
                 for w in words]
        return "".join(w + rng.choice(["", " ", " ", " ", ", ", ". ", "-", "'"]) for w in words)
    if kind == 1:
        return "".join(chr(rng.randrange(128)) for _ in range(rng.randint(0, 300)))
    if kind == 2:
        out = []
        for _ in range(rng.randint(0, 120)):
            lo, hi = rng.choice(SCRIPT_RANGES)
            out.append(chr(rng.randint(lo, hi)) if rng.random() < 0.7 else rng.choice(" .,ea"))
        return "".join(out)
    if kind == 3:
        return " ".join(_sentence(rng) for _ in range(rng.randint(1, 3)))
    return rng.choice(["[CLS]", "[SEP] ", "x[MASK]y", ""]).join(
        rng.choice(vocab_words + WORDS) for _ in range(rng.randint(1, 20)))


def _variant(tokenizer_path: Path, **normalizer: bool) -> tuple[WordPieceTokenizer, Tokenizer]:
    """Ours and tokenizers' from the same tokenizer.json with other BertNormalizer settings."""
    cfg = json.loads(tokenizer_path.read_text(encoding="utf-8"))
    cfg["normalizer"].update(normalizer)
    cfg["truncation"] = cfg["padding"] = None
    ref = Tokenizer.from_str(json.dumps(cfg))
    ref.enable_truncation(MAX_LENGTH)
    ref.enable_padding(pad_id=0, pad_token="[PAD]")
    return WordPieceTokenizer.from_json(cfg), ref


@pytest.mark.parametrize("normalizer", [
    {}, {"lowercase": False, "strip_accents": False}, {"clean_text": False},
    {"handle_chinese_chars": False, "strip_accents": True},
], ids=["minilm", "cased", "unclean", "no-cjk"])
def test_fast_paths_match_tokenizers(tokenizer_path: Path, normalizer: dict[str, bool]) -> None:
    """2,000 random texts of every kind twice (cold, then from the chunk and word caches):
    the same ids and masks as tokenizers, truncated to 256 and padded batch by batch."""
    ours, ref = _variant(tokenizer_path, **normalizer)
    rng = random.Random(99)
    vocab_words = [w.removeprefix("##") for w in ours.vocab if not w.startswith("[")]
    texts = [_random_text(rng, vocab_words) for _ in range(2000)]
    texts += ["", " ", "\x0b", "word " * 400, "é" * 300, "東" * 300, SENTENCES[-1] * 3]
    for _ in range(2):
        for s in range(0, len(texts), 500):
            batch = texts[s:s + 500]
            got = ours.encode_batch(batch, max_length=MAX_LENGTH)
            want = _reference_batch(ref, batch)
            for key in ("input_ids", "attention_mask"):
                rows = np.flatnonzero((got[key] != want[key]).any(axis=1))
                assert rows.size == 0, f"{key} differ for {[batch[i] for i in rows[:3]]!r}"


def test_kept_whitespace_is_whitespace_less_dropped_controls() -> None:
    """The chunk split of clean text: Rust's whitespace less what clean_text drops."""
    from webrlx.models import tokenizer as t
    for cp in range(0x3001):
        c = chr(cp)
        kept = bool(t._WHITESPACE_RE.fullmatch(c)) and t._clean_char(c, True, False) == " "
        assert bool(t._KEPT_WHITESPACE_RE.fullmatch(c)) == kept, hex(cp)
