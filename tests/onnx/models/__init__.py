"""Export scripts of the real models tests/onnx/test_models.py runs against onnxruntime."""
