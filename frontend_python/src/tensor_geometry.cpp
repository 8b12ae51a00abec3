// In-place changes of a tensor's geometry and storage, for the Tensor methods that change a
// tensor's metadata rather than its values: set_, resize_, as_strided_, transpose_, t_,
// squeeze_, unsqueeze_ (tessera/_tensor_geometry_methods.py builds them on these), and _rebind for
// the same changes on a tensor with autograd history. Every geometry
// is checked against the storage first, so a bad one raises instead of reading past the memory.
#include "bindings.h"
#include "convert.h"

#include <pybind11/stl.h>

#include <tessera/error.h>
#include <tessera/storage.h>
#include <tessera/tensor.h>
#include <tessera/tensor_impl.h>

#include <string>
#include <vector>

namespace py = pybind11;

namespace tessera::python {
namespace {

int64_t storage_elements(const TensorImpl& t) { return int64_t(t.storage()->nbytes()) / itemsize(t.dtype()); }

// The geometry must address only elements of a storage of `elements` elements.
void check_fits(const char* op, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                int64_t offset, int64_t elements) {
  if (sizes.size() != strides.size())
    raise<RuntimeError>("{}: expected as many strides as sizes, got {} sizes and {} strides", op, sizes.size(),
                        strides.size());
  if (offset < 0) raise<RuntimeError>("{}: expected a non-negative storage offset, got {}", op, offset);
  int64_t last = offset;
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0) raise<RuntimeError>("{}: expected non-negative sizes, got {} at dimension {}", op, sizes[d], d);
    if (strides[d] < 0)
      raise<RuntimeError>("{}: expected non-negative strides, got {} at dimension {}", op, strides[d], d);
    if (sizes[d] == 0) empty = true;
    else last += (sizes[d] - 1) * strides[d];
  }
  if (!empty && last >= elements)
    raise<RuntimeError>("{}: setting a geometry that needs a storage of {} elements (sizes {}, strides {}, offset {}) "
                        "on a storage of {} elements is out of bounds",
                        op, last + 1, py::str(py::cast(sizes)).cast<std::string>(),
                        py::str(py::cast(strides)).cast<std::string>(), offset, elements);
}

}  // namespace

void bind_tensor_geometry(py::module_& m) {
  m.def(
      "_set_geometry",
      [](py::handle h, std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset, const char* op) {
        TensorImpl* t = unwrap_tensor(h).impl();
        check_fits(op, sizes, strides, offset, storage_elements(*t));
        t->set_geometry(sizes, strides, offset);
      },
      py::arg("tensor"), py::arg("sizes"), py::arg("strides"), py::arg("storage_offset"), py::arg("op"),
      "Gives the tensor new sizes, strides and storage offset over the same storage (checked to fit).");
  m.def(
      "_set_storage",
      [](py::handle h, py::handle source) {
        TensorImpl* t = unwrap_tensor(h).impl();
        const TensorImpl* s = unwrap_tensor(source).impl();
        if (s->dtype() != t->dtype())
          raise<RuntimeError>("set_: expected a source of dtype {}, got {}", name(t->dtype()),
                              name(s->dtype()));
        if (s->device() != t->device())
          raise<RuntimeError>("set_: expected a source on {}, got one on {}", t->device().str(), s->device().str());
        t->set_storage(s->storage());
        t->set_geometry(s->sizes(), s->strides(), s->storage_offset());
      },
      py::arg("tensor"), py::arg("source"),
      "The tensor shares source's storage and takes its geometry (Tensor.set_(source)).");
  m.def(
      "_rebind",
      [](py::handle h, py::handle other) {
        const Tensor& t = unwrap_tensor(other);  // checks both are tensors before changing anything
        unwrap_tensor(h);
        reinterpret_cast<TensorObject*>(h.ptr())->tensor = t;
      },
      py::arg("tensor"), py::arg("other"),
      "This Python tensor object holds other's tensor from now on (an in-place view change of a tensor with "
      "autograd history becomes the out-of-place view, history included).");
  m.def(
      "_storage_elements", [](py::handle h) { return storage_elements(*unwrap_tensor(h).impl()); },
      py::arg("tensor"), "How many elements of the tensor's dtype its storage holds.");
  m.def(
      "_storage_as_tensor",
      [](py::handle h) {
        const TensorImpl* t = unwrap_tensor(h).impl();
        const int64_t n = storage_elements(*t);
        return wrap(Tensor(IntrusivePtr<TensorImpl>::adopt(
            new TensorImpl(t->storage(), t->dtype(), std::vector<int64_t>{n}, std::vector<int64_t>{1}, 0))));
      },
      py::arg("tensor"), "A 1-D tensor over the whole of the tensor's storage, from its first element.");
}

}  // namespace tessera::python
