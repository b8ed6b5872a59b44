"""webrlx.models.chat_template against transformers' own apply_chat_template.

Every chat template the project meets (tests/fixtures/chat_templates/, SOURCE.md says where each
came from) renders twelve conversations (system/user/assistant turns, tool calls and tool
results, unicode, empty content, reasoning, content parts; two without a system turn) with and
without the generation prompt, on our side and through transformers'
`apply_chat_template(..., tokenize=False)` on a tokenizer whose `chat_template` is that text.
Where transformers raises, ours raises a ChatTemplateError that names the model and carries the
template's own message.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from webrlx.models import chat_template
from webrlx.models.chat_template import ChatTemplateError, Template, render_chat

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates"
# family -> the special tokens its tokenizer has (transformers passes them to the template)
SPECIAL_TOKENS: dict[str, dict[str, str]] = {
    "smollm2": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "llama3.1": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama3.2": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "qwen2.5": {"eos_token": "<|im_end|>"},
    "qwen3": {"eos_token": "<|im_end|>"},
    "gemma2": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "gemma3": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "phi3": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "mistral": {"bos_token": "<s>", "eos_token": "</s>"},
    "mistral-nemo": {"bos_token": "<s>", "eos_token": "</s>"},
}

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current temperature in a city, in °C.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Zürich"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
TIME_TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "The local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def _call(name: str, arguments: Any, call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


SYSTEM = {"role": "system", "content": "You are a concise assistant."}
# name -> (messages, tools)
CONVERSATIONS: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = {
    "basic": ([SYSTEM, {"role": "user", "content": "What is 2 + 2?"},
               {"role": "assistant", "content": "4."},
               {"role": "user", "content": "And 3 + 3?"}], None),
    "multi_turn": ([SYSTEM, *[m for i in range(3) for m in (
        {"role": "user", "content": f"Question {i}: name a prime above {10 * i}."},
        {"role": "assistant", "content": f"{[11, 13, 23][i]} is one."})],
        {"role": "user", "content": "Thanks, that is all."}], None),
    "unicode": ([{"role": "system", "content": "Réponds en français. 日本語も可。"},
                 {"role": "user", "content": "Ça va? 😀 naïve — Zürich, Ελλάδα, «quotes» \"x\""},
                 {"role": "assistant", "content": "Très bien ! 👍 \u00a0non-breaking\u2028sep"},
                 {"role": "user", "content": "Et toi? 🤖"}], None),
    "empty_content": ([{"role": "system", "content": ""}, {"role": "user", "content": ""},
                       {"role": "assistant", "content": ""},
                       {"role": "user", "content": "Hello?"}], None),
    "whitespace": ([{"role": "system", "content": "  padded system  \n"},
                    {"role": "user", "content": "\n\n  leading and trailing  \n"},
                    {"role": "assistant", "content": " spaced reply \t"},
                    {"role": "user", "content": "line one\nline two\n\n"}], None),
    "tool_call": ([SYSTEM, {"role": "user", "content": "How warm is it in Paris?"},
                   {"role": "assistant", "content": "",
                    "tool_calls": [_call("get_weather", {"city": "Paris"}, "abc123XYZ")]},
                   {"role": "tool", "content": "22", "tool_call_id": "abc123XYZ"},
                   {"role": "assistant", "content": "It is 22 °C in Paris."},
                   {"role": "user", "content": "And in Zürich?"}], [WEATHER_TOOL]),
    "parallel_tool_calls": ([SYSTEM, {"role": "user", "content": "Weather and time in Oslo?"},
                             {"role": "assistant", "content": None, "tool_calls": [
                                 _call("get_weather", {"city": "Oslo", "unit": "celsius"},
                                       "call_1"),
                                 _call("get_time", {"city": "Oslo"}, "call_2")]},
                             {"role": "tool", "content": "-3", "tool_call_id": "call_1"},
                             {"role": "tool", "content": "14:05", "tool_call_id": "call_2"},
                             {"role": "assistant", "content": "-3 °C at 14:05."},
                             {"role": "user", "content": "Thanks."}], [WEATHER_TOOL, TIME_TOOL]),
    "tools_offered": ([SYSTEM, {"role": "user", "content": "Hi there"},
                       {"role": "assistant", "content": "Hello! Ask me about the weather."},
                       {"role": "user", "content": "Is it raining in Lima?"}], [WEATHER_TOOL]),
    "reasoning": ([SYSTEM, {"role": "user", "content": "Is 91 prime?"},
                   {"role": "assistant", "content": "No: 91 = 7 × 13.",
                    "reasoning_content": "Try small primes: 91 / 7 = 13."},
                   {"role": "user", "content": "Is 97?"}], None),
    "content_parts": ([{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                       {"role": "user", "content": [
        {"type": "text", "text": "Describe this"}, {"type": "text", "text": " briefly."}]},
        {"role": "assistant", "content": "A short description."},
        {"role": "user", "content": "More, please."}], None),
    # templates that refuse a system turn (Gemma 2, Mistral 7B) render these two
    "no_system": ([{"role": "user", "content": "Hi! 👋"},
                   {"role": "assistant", "content": "Hello — how can I help?"},
                   {"role": "user", "content": "Tell me a joke."},
                   {"role": "assistant", "content": "Why did the GPU blush? It saw the shader."},
                   {"role": "user", "content": "Another one."}], None),
    "single_user": ([{"role": "user", "content": "Summarise: the cat sat on the mat."}], None),
}


def _source(family: str) -> str:
    return (TEMPLATES_DIR / f"{family}.jinja").read_text(encoding="utf-8")


@functools.cache
def _hf_tokenizer(family: str) -> Any:
    """A transformers tokenizer with the family's special tokens and chat template."""
    vocab = {"<unk>": 0, **{t: i + 1 for i, t in enumerate(SPECIAL_TOKENS[family].values())}}
    model = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=model,
                                               **SPECIAL_TOKENS[family])
    tok.chat_template = _source(family)
    return tok


def _reference(family: str, messages: list[dict[str, Any]], tools: Any,
               add_generation_prompt: bool) -> str | Exception:
    """transformers' rendering, or the exception it raised."""
    try:
        return _hf_tokenizer(family).apply_chat_template(
            messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt)
    except Exception as err:                                 # compared below
        return err


def _ours(family: str, messages: list[dict[str, Any]], tools: Any,
          add_generation_prompt: bool) -> str:
    return render_chat(_source(family), messages, add_generation_prompt, model=family,
                       tools=tools, **SPECIAL_TOKENS[family])


def test_fixtures_cover_every_family() -> None:
    assert sorted(p.stem for p in TEMPLATES_DIR.glob("*.jinja")) == sorted(SPECIAL_TOKENS)


@pytest.mark.parametrize("add_generation_prompt", [True, False], ids=["gen", "nogen"])
@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
@pytest.mark.parametrize("family", sorted(SPECIAL_TOKENS))
def test_renders_as_transformers(family: str, conversation: str,
                                 add_generation_prompt: bool) -> None:
    messages, tools = CONVERSATIONS[conversation]
    expected = _reference(family, messages, tools, add_generation_prompt)
    if isinstance(expected, Exception):
        with pytest.raises(ChatTemplateError) as raised:
            _ours(family, messages, tools, add_generation_prompt)
        assert f"chat template of {family!r} raised: " in str(raised.value)
        assert str(expected) in str(raised.value), (expected, raised.value)
    else:
        assert _ours(family, messages, tools, add_generation_prompt) == expected


# templates that refuse some conversations: (family, conversation) -> the template's message
EXPECTED_ERRORS = {
    ("gemma2", "basic"): "System role not supported",
    ("mistral", "basic"): "Conversation roles must alternate user/assistant/user/assistant/...",
    ("llama3.1", "parallel_tool_calls"): "This model only supports single tool-calls at once!",
    ("mistral-nemo", "parallel_tool_calls"): "Tool call IDs should be alphanumeric strings with "
                                             "length 9!",
}


@pytest.mark.parametrize("case", sorted(EXPECTED_ERRORS))
def test_a_refusing_template_names_the_model(case: tuple[str, str]) -> None:
    family, conversation = case
    messages, tools = CONVERSATIONS[conversation]
    assert isinstance(_reference(family, messages, tools, True), Exception)
    with pytest.raises(ChatTemplateError) as raised:
        _ours(family, messages, tools, True)
    assert str(raised.value) == f"chat template of {family!r} raised: {EXPECTED_ERRORS[case]}"


def test_every_template_renders_some_conversations() -> None:
    for family in SPECIAL_TOKENS:
        rendered = [c for c, (messages, tools) in CONVERSATIONS.items()
                    if isinstance(_reference(family, messages, tools, True), str)]
        assert len(rendered) >= 2, (family, rendered)


def test_smollm2_gguf_carries_the_fixture_template() -> None:
    gguf = pytest.importorskip("gguf")
    from webrlx.models.assets import smollm2_gguf
    try:
        path = smollm2_gguf()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    field = gguf.GGUFReader(path).fields["tokenizer.chat_template"]
    assert bytes(field.parts[field.data[0]]).decode("utf-8") == _source("smollm2")


# Environment details: each small template against transformers, on the same tokenizer.
SNIPPETS = {
    "tojson": "{{ messages[0] | tojson }}|{{ messages[0] | tojson(indent=2) }}|"
              "{{ messages[0] | tojson(separators=(',', ':'), sort_keys=true) }}",
    "generation_tag": "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
                      "{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}"
                      "{% endfor %}",
    "loopcontrols": "{% for m in messages %}{% if loop.index0 == 1 %}{% continue %}{% endif %}"
                    "{% if loop.index0 == 3 %}{% break %}{% endif %}[{{ m.role }}]{% endfor %}",
    "trim_and_lstrip": "{% for m in messages %}\n    {% if m.content %}\n{{ m.content }}\n"
                       "    {% endif %}\n{% endfor %}",
    "namespace_and_dict": "{% set ns = namespace(n=0) %}{% for m in messages %}"
                          "{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }} "
                          "{{ dict(a=1, b=2) | tojson }} {{ dict.fromkeys(['x'], 0) | tojson }}",
    "reasoning_alias": "{% for m in messages %}{{ m.reasoning_content }}/{{ m.thinking }}/"
                       "{{ m.content }};{% endfor %}",
    "undefined": "{{ messages[0].content.nope }}|{{ messages[0].content.nope.deeper }}",
    "namespace_underscore": "{% set ns = namespace(_x=1) %}",
    "unsafe_attribute": "{{ messages.__class__ }}",
    "mutation": "{% set _ = messages.append(1) %}",
    "str_format": "{{ '{0}-{1}'.format(1, messages[1].content) }}"
                  "{% set f = '<{}>'.format %}{{ f(2) }}{{ ('[{}]' | attr('format'))(3) }}",
}


@pytest.mark.parametrize("snippet", sorted(SNIPPETS))
def test_environment_matches_transformers(snippet: str) -> None:
    messages = [{"role": "system", "content": "Zürich 😀", "tool_calls": None},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "a", "thinking": "hmm"},
                {"role": "user", "content": "v"}]
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizers.Tokenizer(tokenizers.models.WordLevel(
            {"<unk>": 0}, unk_token="<unk>")))
    try:
        expected: str | Exception = tok.apply_chat_template(
            messages, chat_template=SNIPPETS[snippet], tokenize=False)
    except Exception as err:                                 # compared below
        expected = err
    if isinstance(expected, Exception):
        with pytest.raises(ChatTemplateError, match="chat template of 'snippet' raised"):
            render_chat(SNIPPETS[snippet], messages, False, model="snippet")
    else:
        assert render_chat(SNIPPETS[snippet], messages, False, model="snippet") == expected


@pytest.mark.parametrize("source", ["{{ '{0}'.format(1) }}",
                                    "{% set f = '{0}'.format %}{{ f(1) }}",
                                    "{{ ('{0}' | attr('format'))(1) }}",
                                    "{{ '{0}'['format'](1) }}"])
def test_str_format_is_off_where_jinja2_cannot_sandbox_it(
        source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    messages = [{"role": "user", "content": "x"}]
    assert render_chat(source, messages, model="m") == "1"      # jinja2 >= 3.1.6 wraps it
    monkeypatch.setattr(chat_template, "STR_FORMAT_UNSAFE", True)    # as in Pyodide's 3.1.3
    with pytest.raises(ChatTemplateError, match="chat template of 'm' raised"):
        render_chat(source, messages, model="m")


def test_syntax_error_names_the_model_and_line() -> None:
    with pytest.raises(ChatTemplateError, match=r"chat template of 'broken' does not parse: "
                                                r".*\(line 2\)"):
        render_chat("ok\n{% if %}", [{"role": "user", "content": "x"}], model="broken")


def test_template_compiles_once_and_renders_many() -> None:
    template = Template(_source("smollm2"), "smollm2")
    for messages, _ in CONVERSATIONS.values():
        if all(isinstance(m.get("content"), str) for m in messages):
            expected = _reference("smollm2", messages, None, True)
            assert template.render(messages=messages, add_generation_prompt=True) == expected


@pytest.mark.parametrize(("messages", "message"), [
    ("hi", "messages must be a list of dicts, got str"),
    ([], "messages is empty"),
    (["hi"], r"messages\[0\] must be a dict with 'role' and 'content', got str"),
    ([{"content": "x"}], r"messages\[0\]\['role'\] must be a str, got missing"),
])
def test_bad_messages_say_what_is_wrong(messages: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render_chat(_source("smollm2"), messages)
