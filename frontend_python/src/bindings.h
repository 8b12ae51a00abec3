#pragma once
// The pieces of tessera._C, each in its own file, each adding itself to the module.
#include <pybind11/pybind11.h>

namespace tessera {
class Tensor;
}

namespace tessera::python {

void bind_types(pybind11::module_& m);     // dtype, device, errors, default dtype, manual_seed (types.cpp)
void bind_tensor(pybind11::module_& m);    // Tensor class: metadata, item, tolist, tensor()    (tensor.cpp)
void bind_ops(pybind11::module_& m);       // call_op + schema-driven argument parsing         (ops.cpp)
void bind_plugins(pybind11::module_& m);   // plugins_load / plugins_list / plugins_describe    (plugins.cpp)
void bind_interop(pybind11::module_& m);   // numpy(), from_numpy, __dlpack__, from_dlpack     (interop.cpp)
void bind_callbacks(pybind11::module_& m);      // register_callback / release_callback     (callbacks.cpp)
void bind_streams(pybind11::module_& m);         // Stream, Event, pin_memory, _to_device     (streams.cpp)
void bind_serialization(pybind11::module_& m);  // _save_safetensors / _load_safetensors     (serialization.cpp)
void bind_guards(pybind11::module_& m);          // _guard_signature (ts.compile's fast guards)   (guards.cpp)
void bind_distributed(pybind11::module_& m);     // stores, process groups, work (distributed.cpp)
void bind_shared_memory(pybind11::module_& m);   // _share_memory, _open_shared_memory (shared_memory.cpp)
void bind_tensor_geometry(pybind11::module_& m);  // _set_geometry, _set_storage, _storage_as_tensor (tensor_geometry.cpp)

// Raises for a batched tensor (vmap); tells ts.compile's capture about a data-dependent read.
void note_data_read(const char* what, const Tensor& t);

}  // namespace tessera::python
