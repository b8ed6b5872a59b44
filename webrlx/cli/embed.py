"""`python -m webrlx embed INPUT OUTPUT`: MiniLM embeddings of a file's text column with Ray Data
(a local Ray, or a cluster with --address); readers and writers by extension (Parquet, JSONL,
CSV); Ray's progress bar."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

FORMATS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}


def _format(path: str, what: str) -> str:
    suffix = Path(path.rstrip("/")).suffix.lower()
    if suffix not in FORMATS:
        raise SystemExit(f"python -m webrlx embed: {what} {path!r} must end in "
                         f"{', '.join(FORMATS)} (the format is read from the extension)")
    return FORMATS[suffix]


def read(ray: Any, path: str) -> Any:
    """A Ray Dataset of the file (or directory of files) at path."""
    return getattr(ray.data, f"read_{_format(path, 'INPUT')}")(path)


def write(ds: Any, path: str) -> None:
    """Write ds as path's format (Ray writes a directory of files)."""
    getattr(ds, f"write_{_format(path, 'OUTPUT')}")(path)


def main_embed(argv: list[str]) -> int:
    """CLI: read INPUT, embed its text column on N actors, write OUTPUT."""
    p = argparse.ArgumentParser(prog="python -m webrlx embed", description=__doc__)
    p.add_argument("input", help="a .parquet, .jsonl or .csv file or directory")
    p.add_argument("output", help="a .parquet, .jsonl or .csv directory to write")
    p.add_argument("--address", default=None,
                   help="a Ray cluster (ray://HOST:10001 or auto); default: a local Ray")
    p.add_argument("--gpus", type=float, default=0, help="GPUs per actor (1 on a GPU cluster)")
    p.add_argument("--concurrency", type=int, default=1, help="actors (one model each)")
    p.add_argument("--batch-size", type=int, default=256, help="rows per actor task")
    p.add_argument("--text-column", default="text")
    p.add_argument("--model", default="minilm", help="minilm or a MiniLM directory")
    p.add_argument("--strict", action="store_true",
                   help="fail on the first bad row (default: an 'error' column, go on)")
    args = p.parse_args(argv)
    _format(args.input, "INPUT")
    _format(args.output, "OUTPUT")
    if args.address is None and "://" not in args.input and not os.path.exists(args.input):
        # checked before Ray starts
        from . import InputError
        raise InputError(f"INPUT {args.input}: no such file or directory")
    from .. import distributed
    ray = distributed._ray()
    ray.init(address=args.address)
    ray.data.DataContext.get_current().enable_progress_bars = True
    try:
        ds = distributed.embed(read(ray, args.input), args.model, text_column=args.text_column,
                               batch_size=args.batch_size, concurrency=args.concurrency,
                               num_gpus=args.gpus, num_cpus=0.5 if not args.gpus else 1,
                               strict=args.strict)
        write(ds, args.output)
    finally:
        ray.shutdown()
    print(f"webrlx embed: wrote {args.output}", file=sys.stderr)
    return 0
