// tessera._C: the C++ half of the Python package. Importing it does not load any plugin:
// plugins load on first use of their device.
#include "bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "Tessera's C++ extension: tensors, operator calls through the dispatcher, plugins";
  tessera::python::bind_types(m);
  tessera::python::bind_tensor(m);
  tessera::python::bind_ops(m);
  tessera::python::bind_plugins(m);
  tessera::python::bind_interop(m);
  tessera::python::bind_serialization(m);
  tessera::python::bind_guards(m);
  tessera::python::bind_callbacks(m);
  tessera::python::bind_streams(m);
  tessera::python::bind_distributed(m);
  tessera::python::bind_shared_memory(m);
  tessera::python::bind_tensor_geometry(m);
}
