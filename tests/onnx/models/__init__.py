"""Export scripts of the real models tests/onnx/test_onnx_models.py runs against onnxruntime."""
