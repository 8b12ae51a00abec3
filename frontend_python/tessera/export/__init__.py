"""ts.export: a whole program captured once as one graph, with its signature and weights
(torch.export's names), saved to one archive and run from Python or from C++ without Python
(the export runtime, export/runtime).

    ep = ts.export.export(model, (x,), dynamic_shapes={"x": {0: ts.export.Dim("batch", max=64)}})
    ts.export.save(ep, "model.tspt")
    ep2 = ts.export.load("model.tspt"); y = ep2.module()(x)
"""
from tessera.export._aot import aot_compile
from tessera.export._archive import ARCHIVE_FORMAT_VERSION, ArchiveError, load, save
from tessera.export._dynamic import ConstraintViolationError, Dim, dims
from tessera.export._export import ExportError, export
from tessera.export._program import ExportedProgram
from tessera.export._signature import (ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec,
                                       TensorArgument)

__all__ = ["export", "save", "load", "aot_compile", "Dim", "dims", "ExportedProgram", "ExportGraphSignature",
           "InputKind", "InputSpec", "OutputKind", "OutputSpec", "TensorArgument", "ExportError", "ArchiveError",
           "ConstraintViolationError", "ARCHIVE_FORMAT_VERSION"]
