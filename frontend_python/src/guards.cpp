// _C._guard_signature: the part of ts.compile's guard key that a call of tensors needs,
// computed in C++ so a compiled call's guard check costs well under a microsecond.
#include "bindings.h"
#include "convert.h"

#include <tessera/tensor_impl.h>

#include <vector>

namespace py = pybind11;

namespace tessera::python {
namespace {

// bytes encoding, per positional tensor: dtype, device, transform keys (Autograd marks a tensor
// that requires grad), rank, sizes, strides, storage offset parity with other arguments (which
// earlier argument is the same tensor). None when an argument is not a tensor: the caller then
// builds the general key in Python.
PyObject* guard_signature(PyObject*, PyObject* const* argv, Py_ssize_t argc) {
  if (argc != 1 || !PyTuple_Check(argv[0])) {
    PyErr_SetString(PyExc_TypeError, "_guard_signature(args): args must be a tuple");
    return nullptr;
  }
  PyObject* args = argv[0];
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  std::vector<int64_t> words;
  words.reserve(size_t(n) * 12);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* o = PyTuple_GET_ITEM(args, i);
    if (!is_tensor(o)) Py_RETURN_NONE;
    int64_t same_as = i;
    for (Py_ssize_t j = 0; j < i; ++j)
      if (PyTuple_GET_ITEM(args, j) == o) {
        same_as = j;
        break;
      }
    const TensorImpl* t = tensor_of(o).impl();
    const Device d = t->device();
    words.push_back(int64_t(t->dtype()));
    words.push_back((int64_t(d.type()) << 32) | uint32_t(d.index()));
    words.push_back(int64_t(t->key_set().raw() >> TS_FIRST_TRANSFORM_KEY));
    words.push_back(same_as);
    words.push_back(t->dim());
    for (int64_t s : t->sizes()) words.push_back(s);
    for (int64_t s : t->strides()) words.push_back(s);
  }
  return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(words.data()), Py_ssize_t(words.size() * 8));
}

PyMethodDef guard_signature_def = {
    "_guard_signature", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&guard_signature)), METH_FASTCALL,
    "_guard_signature(args): bytes describing each tensor argument for ts.compile's guards, or None."};

}  // namespace

void bind_guards(py::module_& m) {
  m.add_object("_guard_signature", py::reinterpret_steal<py::object>(PyCFunction_New(&guard_signature_def, nullptr)));
}

}  // namespace tessera::python
