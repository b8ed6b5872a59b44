"""A small ResNet-style CNN (conv + batch norm + ReLU stem, max pool, three residual blocks, one
strided with a 1x1 projection, global average pool, linear head) exported with torch.onnx,
random weights, dynamic batch. Run: `python -m tests.onnx.models.cnn` -> build/onnx/cnn.onnx."""
from __future__ import annotations

from pathlib import Path

OUT = Path(__file__).resolve().parents[3] / "build" / "onnx" / "cnn.onnx"


def export(out: Path = OUT) -> Path:
    """Write the export (opset 17) and return its path."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout)) if stride != 1 or cin != cout \
                else nn.Identity()

        def forward(self, x):  # noqa: ANN001, ANN201
            y = torch.relu(self.b1(self.c1(x)))
            return torch.relu(self.b2(self.c2(y)) + self.proj(x))

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 5, 2, 2, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.MaxPool2d(3, 2, 1), Block(16, 16, 1), Block(16, 32, 2),
                          Block(32, 32, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(32, 10))
    for m in model.modules():           # non-trivial running statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    model.eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(model, (torch.randn(2, 3, 64, 64),), str(out),
                          input_names=["pixels"], output_names=["logits"],
                          dynamic_axes={"pixels": {0: "batch"}, "logits": {0: "batch"}},
                          opset_version=17, dynamo=False)
    return out


if __name__ == "__main__":
    print(export())
