"""ts.onnx: an exported program's graph as an ONNX model (torch.onnx.export's names).

    ts.onnx.export(model, (x,), "model.onnx", input_names=["x"], output_names=["y"],
                   dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})

The graph comes from ts.export.export; each operator has a translation in _ops.py, and one
without raises UnsupportedOperatorError. Needs the `onnx` package."""
from tessera.onnx import errors
from tessera.onnx._export import ONNXProgram, export
from tessera.onnx.errors import OnnxExporterError, UnsupportedOperatorError

__all__ = ["export", "ONNXProgram", "errors", "OnnxExporterError", "UnsupportedOperatorError"]
