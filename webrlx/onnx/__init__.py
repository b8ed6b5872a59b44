"""webrlx.onnx: run .onnx files with webrlx natively and in Pyodide. `InferenceSession` has
onnxruntime's surface; `import_model` gives the webrlx Graph to extend, fuse or train."""
from .context import OnnxImportError
from .importer import import_model
from .reader import load
from .session import InferenceSession, NodeArg
from .tensors import OnnxDtypeError
from .wire import OnnxFormatError

__all__ = ["InferenceSession", "NodeArg", "import_model", "load", "OnnxImportError",
           "OnnxFormatError", "OnnxDtypeError"]
