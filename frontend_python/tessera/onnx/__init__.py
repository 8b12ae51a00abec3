"""ts.onnx: an exported program's graph as an ONNX model (torch.onnx.export's names)."""
