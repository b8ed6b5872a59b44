"""webrlx.onnx.backend: onnx.backend.base.Backend over InferenceSession, so that
onnx.backend.test.BackendTest runs ONNX's node tests against webrlx (needs the onnx package)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from .session import InferenceSession


class WebrlxRep(BackendRep):
    """A prepared model: run(inputs) -> outputs in graph order."""

    def __init__(self, session: InferenceSession) -> None:
        self.session = session

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run with a list of arrays (graph input order) or a name -> array dict."""
        if isinstance(inputs, dict):
            feeds = inputs
        else:
            arrays = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            feeds = {vi.name: a for vi, a in zip(self.session.get_inputs(), arrays)}
        return tuple(self.session.run(None, feeds))


class WebrlxBackend(Backend):
    """The onnx Backend of webrlx: device "CPU" maps to the default webrlx device."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> WebrlxRep:
        """Load a ModelProto into an InferenceSession."""
        super().prepare(model, device, **kwargs)
        return WebrlxRep(InferenceSession(model.SerializeToString()))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Prepare and run once."""
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Sequence[np.ndarray], device: str = "CPU",
                 outputs_info: Any = None, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run one node by wrapping it in a model whose inputs are the given arrays."""
        names = [n for n in node.input if n]
        vis = [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(
            np.asarray(a).dtype), np.shape(a)) for n, a in zip(names, inputs)]
        graph = onnx.helper.make_graph([node], "run_node", vis, [])
        model = onnx.helper.make_model(graph, opset_imports=[
            onnx.helper.make_opsetid(node.domain or "", kwargs.get("opset_version", 21))])
        typed = {vi.name: vi for vi in
                 onnx.shape_inference.infer_shapes(model).graph.value_info}
        model.graph.output.extend(typed[n] for n in node.output if n)   # types by inference
        return cls.run_model(model, inputs, device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """webrlx runs on its own device; onnx's "CPU" name is accepted for it."""
        return device in ("CPU", "GPU", "WebGPU")


prepare = WebrlxBackend.prepare
run_model = WebrlxBackend.run_model
run_node = WebrlxBackend.run_node
supports_device = WebrlxBackend.supports_device
