"""A pure-Python renderer of the Jinja2 subset that Hugging Face chat templates use.

The stages, one module each: `values` (errors, Undefined, the loop and namespace objects, and the
filters, tests and globals templates may call), `lexer` (source text to tokens), `parser` (tokens
to tuple ASTs) and `evaluator` (ASTs to output text). The public entry is
webrlx.models.chat_template (Template, render_chat).
"""
