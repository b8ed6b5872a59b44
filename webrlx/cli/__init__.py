"""The command-line tools, kept apart from the runtime's layers (dtype, shape, graph, ops,
tensor, nn, compiler/, runtime/, backends/, models/): nothing here is imported by `import webrlx`.

serve       `python -m webrlx serve`: web/ pages, the local Pyodide and the wheel on 127.0.0.1
lite        `python -m webrlx lite`: build and serve the JupyterLite site for notebooks/
bench       `python -m webrlx bench`: benchmarks printed as JSON
web_assets  `python -m webrlx.cli.web_assets`: build the offline Pyodide and wheels under build/
dawn        `python -m webrlx dawn`: python, pytest or bench in Pyodide over Dawn in Node
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator


class InputError(ValueError):
    """What the user gave a command is wrong (the message names the argument): `python -m
    webrlx` prints it in one line and exits with status 2 (input_error)."""


def input_error(e: BaseException) -> bool:
    """Whether e is about what the user gave a command, not a fault of webrlx: a file that is
    missing or unreadable, not of its format, or of a model or ONNX op webrlx does not run.
    The command then prints one line and exits with status 2 (WEBRLX_TRACEBACK=1 shows the
    traceback too); anything else keeps its traceback."""
    if isinstance(e, (FileNotFoundError, IsADirectoryError, NotADirectoryError,
                      PermissionError)):
        return True
    names = {"InputError", "GGUFError", "UnsupportedModelError", "ModelFileError",
             "OnnxFormatError", "OnnxImportError", "OnnxDtypeError", "ChatTemplateError"}
    return any(c.__name__ in names and c.__module__.startswith("webrlx.")
               for c in type(e).__mro__)


@contextlib.contextmanager
def naming(argument: str) -> Iterator[None]:
    """Raise an input error (input_error) of the block again as an InputError that starts with
    `argument` (e.g. "--model FILE"), so that the one line names what the user gave."""
    try:
        yield
    except Exception as e:
        if input_error(e):
            raise InputError(f"{argument}: {e}") from e
        raise
