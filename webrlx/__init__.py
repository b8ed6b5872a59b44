"""webrlx: build tensor graphs, compile them to WGSL compute kernels, run them through WebGPU
(natively on wgpu-py, in the browser under Pyodide) with one API."""
from . import nn, optim
from .autodiff import GradError, grad
from .backends.auto import device, device_async
from .backends.base import DeviceLostError, GPUError
from .compiler.memory import BindingLimitError
from .dtype import bool_, float16, float32, int32, uint32
from .optim import train_step
from .runtime.device_tensor import DeviceTensor, StaleTensorError
from .runtime.executable import Executable, InputError, compile
from .shape import ShapeError
from .tensor import Graph, Tensor, concat, where

__version__ = "0.1.0"
__all__ = ["Graph", "Tensor", "Executable", "compile", "device", "device_async", "concat",
           "where", "nn", "optim", "grad", "GradError", "train_step", "GPUError", "DeviceLostError",
           "BindingLimitError", "DeviceTensor", "StaleTensorError", "InputError", "ShapeError",
           "float32", "float16", "int32", "uint32", "bool_"]
