"""BPETokenizer against transformers' tokenizer built from the same SmolLM2 GGUF.

The reference is `AutoTokenizer.from_pretrained(dir, gguf_file=name)` (transformers reads the
tokenizer from the GGUF; in transformers 5 its GGUF reader needs torch). Our tokenizer gets the
metadata read by the `gguf` package. Nothing here compares against numbers this code produced.
"""

import os
import random
import time
import unicodedata
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
from gguf import GGUFReader  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from webrlx.models.assets import smollm2_gguf  # noqa: E402
from webrlx.models.bpe import (  # noqa: E402
    PRE_SPLITS,
    BPETokenizer,
    ClassSplit,
    bytes_to_unicode,
    pre_tokenize,
)

BYTE_CHARS = bytes_to_unicode()


def gguf_metadata(path: Path) -> dict:
    """The tokenizer.* key -> value pairs of a GGUF file, as plain Python values."""
    reader = GGUFReader(str(path))
    return {k: f.contents() for k, f in reader.fields.items() if k.startswith("tokenizer.")}


@pytest.fixture(scope="module")
def metadata() -> dict:
    return gguf_metadata(smollm2_gguf())


@pytest.fixture(scope="module")
def ours(metadata) -> BPETokenizer:
    return BPETokenizer.from_gguf_metadata(metadata)


@pytest.fixture(scope="module")
def hf():
    path = smollm2_gguf()
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


# -- texts ---------------------------------------------------------------------------------------

PYTHON = '''import numpy as np


class Point:
    """A point."""

    def __init__(self, x: float, y: float) -> None:
        self.x, self.y = x, y  # two floats

    def norm(self):
\treturn (self.x ** 2 + self.y ** 2) ** 0.5


if __name__ == "__main__":
    print(Point(3, 4).norm())   \n'''
JAVASCRIPT = """function fib(n) {
\tif (n < 2) { return n; }
\treturn fib(n - 1) + fib(n - 2);
}
const xs = [1, 2, 3].map((x) => x * 2);\r\n
console.log(`fib(10) = ${fib(10)}`);  // 55
\t\t  \t
"""
HAND_PICKED = [
    "", " ", "  ", "\n", "\t", "a", "A", "0", "'", "''", "<", "|",
    "Hello world", " Hello world", "Hello  world", "Hello world ", "Hello world   ",
    "\n\n\nthree newlines", "trailing spaces   \n  next", "tabs\t\tand spaces \t mixed\t",
    "windows\r\nline\r\nendings\r\n", "\r\n\r\n", " \n \n", "a\u00a0b\u2003c\u3000d\u2028e",
    "1234567", "3.14", "3.14159265358979", "1,000,000", "-42", "+1e-10", "0x1F", "2024-01-31",
    "31/12/1999", "12:30:45", "$1,234.56", "50%", "v1.2.3", "192.168.0.1", "١٢٣ ٤٥٦", "２０２４年",
    "don't", "I'll", "we've", "they're", "she'd", "I'm", "it's", "IT'S", "DON'T", "’s",
    "rock 'n' roll",
    "café naïve résumé", "Crème brûlée", "Straße", "İstanbul", "Ελληνικά", "Привет, мир!",
    "東京は日本の首都です。", "中文字符，标点。", "한국어 텍스트", "مرحبا بالعالم", "שלום עולם",
    "हिन्दी भाषा", "ภาษาไทย", "e\u0301 a\u0308 n\u0303", "Z\u0351\u0302a\u0300l\u0301g\u0308o",
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇯🇵", "1️⃣", "❤️", "🧑🏾‍💻 codes", "✋🏻✋🏼✋🏽✋🏾✋🏿",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>user\nHi<|im_end|>",
    "a<|im_end|>b", "<|im_start|><|im_start|>", "<|im_start", "im_start|>", "<|IM_START|>",
    "< |im_start| >", "<<|im_end|>>", "text <file_sep> more <jupyter_code>x", "<repo_name>a/b",
    "<|endoftext|><|endoftext|>", "x" * 200, "=" * 80, "-" * 33, "   " * 40, "\t" * 17,
    "a\x00b\x1cc\x1fd\x7fe", "\ufeffBOM", "zero\u200bwidth\u200djoiner", "\x85NEL",
    "https://example.com/path?q=1&r=two#frag", "user@example.com", "C:\\Users\\me\\file.txt",
    "snake_case_name camelCaseName PascalCase SCREAMING_CASE", "x²+y²=z² ½ ¼ ① Ⅻ",
    "∑_{i=1}^{n} i = n(n+1)/2", "¡Hola! ¿Qué tal?", "«quotes» “curly” ‘single’", "…—–",
    PYTHON, JAVASCRIPT, "SELECT * FROM t WHERE id = 1;\n", "<div class=\"a\">&nbsp;</div>",
    '{"key": [1, 2.5, null], "nested": {"a": true}}',
]

WORDS = [
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "WebGPU", "tokenizer",
    "unbelievably", "antidisestablishmentarianism", "Transformers", "GPU", "iPhone", "McDonald's",
    "naïve", "café", "Über", "Ångström", "façade", "Straße", "Σίσυφος", "Москва", "東京",
    "北京大学", "日本語のテキスト", "한국어", "مرحبا", "שלום", "हिन्दी", "ภาษาไทย",
    "ｆｕｌｌｗｉｄｔｈ", "ﬁne",
    "😀", "👍🏽", "👨‍👩‍👧", "🥰", "❤️", "🤗", "🇩🇪", "∑", "√2", "≈", "3.14159", "1,000,000", "42",
    "2024-01-01", "$100", "€50", "£3", "50%", "x²", "½", "007", "1234567890", "e-mail",
    "state-of-the-art", "don't", "it's", "C++", "node.js", "user@example.com", "def", "return",
    "self.x", "print()", "x=1;", "{}", "[]", "()", "=>", "!=", "==", "**", "//", "#", "@",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start", "<filename>", "e\u0301", "'s",
    "'ll", "'RE",
]
SEPARATORS = [
    " ", " ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\t ", "", "", "-", ".",
    ", ", "...", "?!", "—", "\u00a0", "\u3000", "\u2009", "\x0b", "\x0c", "\x85", "\x1c", "’",
    "'", '"', "/", "_",
]


def _random_text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 30)):
        parts.append(rng.choice(WORDS))
        parts.append(rng.choice(SEPARATORS))
    text = "".join(parts)
    style = rng.random()
    if style < 0.1:
        text = text.upper()
    elif style < 0.2:
        text = "    " + text.replace("\n", "\n\t")
    elif style < 0.25:
        text = text + " " * rng.randint(1, 5)
    return text


def _random_texts(count: int = 240, seed: int = 20240531) -> list[str]:
    rng = random.Random(seed)
    return [_random_text(rng) for _ in range(count)]


LONG_PROMPT = " ".join(_random_texts(40, seed=7)) + "\n\n" + PYTHON + JAVASCRIPT
TEXTS = HAND_PICKED + _random_texts() + [LONG_PROMPT]

CONVERSATIONS = [
    [{"role": "user", "content": "Hi!"}],
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "What is 2 + 2?"}],
    [{"role": "user", "content": "Write a haiku about GPUs."},
     {"role": "assistant",
      "content": "Silicon rivers\nthousands of threads in lockstep\nwarm fans hum at night"},
     {"role": "user", "content": "Now in français, s'il te plaît 🙏"}],
    [{"role": "user", "content": "Explain this code:\n```python\n" + PYTHON + "```"}],
    [{"role": "user", "content": "  leading and trailing spaces  \n\n"},
     {"role": "assistant", "content": "\t\ttabbed\r\nreply"},
     {"role": "user", "content": "日本語で答えて。数字: 1234567, 3.14"}],
    [{"role": "user", "content": "Say <|im_end|> literally"}],
]


# -- checks --------------------------------------------------------------------------------------

def _check(ours: BPETokenizer, hf, text: str) -> list[int]:
    """Assert ours matches transformers on encode, decode and streaming; return the ids."""
    expected = hf(text)["input_ids"]
    ids = ours.encode(text)
    assert ids == expected, f"{text!r}"
    assert ours.decode(ids) == hf.decode(expected) == text
    assert ours.decode(ids, skip_special=True) == hf.decode(expected, skip_special_tokens=True)
    pieces = list(ours.stream().decode_iter(ids))
    assert "".join(pieces) == text
    for piece in pieces:
        assert "\ufffd" not in piece, f"{text!r}: {pieces!r}"
        assert not any(0xD800 <= ord(c) < 0xE000 for c in piece), f"{text!r}: {pieces!r}"
    return ids


def test_enough_texts():
    assert len(TEXTS) + len(CONVERSATIONS) >= 300


@pytest.mark.parametrize("index", range(len(TEXTS)))
def test_matches_transformers(ours, hf, index):
    _check(ours, hf, TEXTS[index])


def test_long_prompt(ours, hf):
    assert len(_check(ours, hf, LONG_PROMPT)) > 300


@pytest.mark.parametrize("index", range(len(CONVERSATIONS)))
def test_chat_template(ours, hf, index):
    text = hf.apply_chat_template(CONVERSATIONS[index], tokenize=False, add_generation_prompt=True)
    assert text.count("<|im_start|>") >= 2
    ids = _check(ours, hf, text)
    assert hf.convert_tokens_to_ids("<|im_start|>") in ids


def test_special_tokens_from_metadata(ours, hf, metadata):
    ggml = "tokenizer.ggml."
    assert ours.bos_id == metadata[ggml + "bos_token_id"] == hf.bos_token_id
    assert ours.eos_id == metadata[ggml + "eos_token_id"] == hf.eos_token_id
    assert ours.add_bos == bool(metadata.get(ggml + "add_bos_token", False))
    assert ours.vocab_size == len(metadata[ggml + "tokens"]) == len(hf.get_vocab())
    added = hf.backend_tokenizer.get_added_tokens_decoder()
    assert ours.special_ids == {i for i, t in added.items() if t.special}
    assert ours.added == {t.content: i for i, t in added.items()}
    text = "Hi<|im_end|>"
    assert ours.encode(text, add_bos=True) == [hf.bos_token_id] + hf(text)["input_ids"]
    assert ours.encode(text, add_bos=True, add_eos=True)[-1] == hf.eos_token_id
    assert ours.encode(text, add_bos=False) == hf(text, add_special_tokens=False)["input_ids"]


def test_add_bos_follows_metadata(metadata):
    changed = dict(metadata)
    changed["tokenizer.ggml.add_bos_token"] = True
    tok = BPETokenizer.from_gguf_metadata(changed)
    bos = metadata["tokenizer.ggml.bos_token_id"]
    assert tok.encode("hello")[0] == bos
    assert tok.encode("hello", add_bos=False)[0] != bos


def test_refuses_other_tokenizers(metadata):
    with pytest.raises(ValueError):
        BPETokenizer.from_gguf_metadata(dict(metadata, **{"tokenizer.ggml.model": "llama"}))
    # a pre-tokenizer whose regex webrlx lacks (llama3's is a PRE_SPLITS row now)
    with pytest.raises(NotImplementedError, match="gpt-4o"):
        BPETokenizer.from_gguf_metadata(dict(metadata, **{"tokenizer.ggml.pre": "gpt-4o"}))


def test_decode_arbitrary_ids(ours, hf):
    """Random id sequences, incl. lone bytes of UTF-8 characters, specials, unknown ids."""
    vocab = hf.get_vocab()
    single_bytes = [vocab[c] for c in BYTE_CHARS.values() if c in vocab]
    special = sorted(hf.backend_tokenizer.get_added_tokens_decoder())
    rng = random.Random(5)
    for _ in range(200):
        ids = []
        for _ in range(rng.randint(0, 12)):
            pick = rng.random()
            if pick < 0.5:
                ids.append(rng.choice(single_bytes))
            elif pick < 0.7:
                ids.append(rng.choice(special))
            elif pick < 0.95:
                ids.append(rng.randrange(len(vocab)))
            else:
                ids.append(len(vocab) + rng.randrange(100))
        for skip in (False, True):
            text = hf.decode(ids, skip_special_tokens=skip)
            assert ours.decode(ids, skip_special=skip) == text, ids
            stream = ours.stream(skip_special=skip)
            assert "".join(stream.feed(i) for i in ids) + stream.flush() == text, ids


def test_stream_holds_split_characters(ours, hf):
    """A character spread over several byte tokens comes out whole, once complete."""
    split = [c for c in "😀🥰🤗🙏𝔘𓀀€日" if len(hf(c)["input_ids"]) > 1]
    assert split, "expected characters that the vocabulary spells with several tokens"
    for char in split:
        ids = hf(char)["input_ids"]
        stream = ours.stream()
        outputs = [stream.feed(i) for i in ids]
        assert outputs[:-1] == [""] * (len(ids) - 1) and outputs[-1] == char
        assert stream.flush() == ""
    # an incomplete character at the end becomes U+FFFD on flush, as decode does
    ids = hf(split[0])["input_ids"][:-1]
    stream = ours.stream()
    assert "".join(stream.feed(i) for i in ids) == ""
    assert stream.flush() == hf.decode(ids) == "\ufffd"


def test_character_classes_match_tokenizers(hf):
    """Every code point this Python's Unicode assigns splits as tokenizers' regex splits it.

    In "x{c}1{c}," a letter, a number, whitespace and anything else each split differently.
    Private-use planes 15 and 16 are left out (their 131,068 characters are all alike).
    """
    spell = str.maketrans({chr(b): c for b, c in BYTE_CHARS.items()})
    pre = hf.backend_tokenizer.pre_tokenizer
    chars = [chr(cp) for cp in range(0xF0000)
             if unicodedata.category(chr(cp)) not in ("Cn", "Cs")]
    assert len(chars) > 140_000
    for start in range(0, len(chars), 256):  # tokenizers is slow on long strings
        text = "".join(f"x{c}1{c}," for c in chars[start:start + 256])
        expected = [piece for piece, _ in pre.pre_tokenize_str(text)]
        got = [p.encode("utf-8").decode("latin-1").translate(spell) for p in pre_tokenize(text)]
        assert got == expected, f"chunk at {chars[start]!r}"


def test_long_words(ours, hf):
    """Words long enough to take the heap merge path."""
    rng = random.Random(11)
    letters = "abcdefghijklmnopqrstuvwxyzéü"
    texts = ["".join(rng.choice(letters) for _ in range(rng.randint(40, 400))) for _ in range(20)]
    texts += ["ab" * 300, "aaa" * 100, "!?" * 150, "日本" * 60, " " * 500 + "x"]
    for text in texts:
        _check(ours, hf, text)


def test_encode_speed(metadata):
    tok = BPETokenizer.from_gguf_metadata(metadata)  # empty word cache
    text = (" ".join(_random_texts(60, seed=3)) + PYTHON)[:2000]
    start = time.perf_counter()
    tok.encode(text)
    assert time.perf_counter() - start < 0.1


@pytest.mark.parametrize("pre", ["llama-bpe", "qwen2"])
def test_class_split_matches_the_regex_package(pre):
    """Without `regex` (Pyodide) a PRE_SPLITS regex runs as ClassSplit: the same pieces as the
    `regex` package's findall on random text of every assigned character class mixed with the
    apostrophe contractions, digits and kinds of whitespace the patterns treat apart."""
    regex = pytest.importorskip("regex")
    pattern = PRE_SPLITS[pre]
    ours, ref = ClassSplit(pattern), regex.compile(pattern)
    chars = [chr(cp) for cp in range(0x30000)
             if unicodedata.category(chr(cp)) not in ("Cn", "Cs", "Co")]
    common = [*" \t\n\r'sStTrevmlLdD0123456789aZ.,!-_", "\r\n", "\u00a0", "\u3000", "\x1c",
              "\x85", "\u0661", "\u00bd", "\u017f", "\u212a"]
    rng = random.Random(7)
    for _ in range(4000):
        text = "".join(rng.choice(common) if rng.random() < 0.6 else rng.choice(chars)
                       for _ in range(rng.randint(1, 40)))
        assert ours.findall(text) == ref.findall(text), repr(text)
