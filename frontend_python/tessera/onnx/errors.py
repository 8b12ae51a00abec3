"""The errors ts.onnx raises (torch.onnx.errors' names)."""


class OnnxExporterError(RuntimeError):
    """A program that cannot be written as an ONNX model."""


class UnsupportedOperatorError(OnnxExporterError):
    """An operator of the graph with no ONNX translation at the requested opset (or with
    arguments the translation cannot express): exporting stops rather than write a model that
    computes something else."""

    def __init__(self, name, version, reason=None):
        self.name = name
        self.version = version
        self.reason = reason
        detail = f": {reason}" if reason else ""
        super().__init__(f"Exporting the operator '{name}' to ONNX opset version {version} is not supported{detail}")
