"""SmolLM2's chat template renders through jinja2 inside the page's Pyodide (webrlx's wheel pulls
jinja2 from the local Pyodide's lock), exactly as transformers renders it natively."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = [{"role": "system", "content": "Réponds brièvement. 日本語も可。"},
            {"role": "user", "content": "Ça va? 😀"},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "line one\nline two"}]


def test_smollm2_chat_template_renders_in_pyodide(browser_python: Any) -> None:
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    source = (ROOT / "tests/fixtures/chat_templates/smollm2.jinja").read_text(encoding="utf-8")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizers.Tokenizer(
        tokenizers.models.WordLevel({"<unk>": 0}, unk_token="<unk>")))
    expected = tok.apply_chat_template(MESSAGES, chat_template=source, tokenize=False,
                                       add_generation_prompt=True)
    code = f"""
import json, jinja2
from webrlx.models.chat_template import ChatTemplateError, render_chat
try:
    render_chat("{{{{ '{{0}}'.format(1) }}}}", [{{"role": "user", "content": "x"}}], model="m")
    refused = ""
except ChatTemplateError as e:
    refused = str(e)
json.dumps([jinja2.__version__, render_chat({source!r}, json.loads({json.dumps(MESSAGES)!r}),
            model="smollm2"), refused])
"""
    version, text, refused = json.loads(browser_python("main").run(code))
    assert version == "3.1.3"                      # Pyodide 0.27.7's own jinja2
    assert text == expected
    # jinja2 3.1.3 cannot sandbox str.format: the template gets none
    assert refused.startswith("chat template of 'm' raised: SecurityError"), refused
