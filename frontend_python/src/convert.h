#pragma once
// Python <-> C++ conversions shared by the files of tessera._C.
//
// _C.Tensor is a heap type written against the CPython API (not a pybind11 class): the object
// embeds the tessera::Tensor, so wrapping a result is one allocation and unwrapping an argument
// is a type check. Methods are added to it with pybind11 (def_method) or, from Python, by
// setattr on the class. It supports subclasses, weak references and a per-object __dict__.
//
// Every translation unit of _C that converts a tessera::Tensor with pybind11 must include this
// header: it specialises pybind11's type_caster<tessera::Tensor>.
#include <pybind11/pybind11.h>

#include <tessera/device.h>
#include <tessera/scalar_type.h>
#include <tessera/tensor.h>

#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace tessera::python {

// The instance layout of _C.Tensor.
struct TensorObject {
  PyObject_HEAD
  tessera::Tensor tensor;
  PyObject* dict;         // __dict__ (created on first attribute set)
  PyObject* weakreflist;  // __weakref__
};

// _C.Tensor (set once by bind_tensor, never freed).
inline PyTypeObject* g_tensor_type = nullptr;
inline PyTypeObject* tensor_type() { return g_tensor_type; }

inline bool is_tensor(PyObject* o) {
  PyTypeObject* t = tensor_type();
  return Py_TYPE(o) == t || PyType_IsSubtype(Py_TYPE(o), t);
}
inline bool is_tensor(pybind11::handle h) { return is_tensor(h.ptr()); }
// The tensor of an object known to be a _C.Tensor (no check).
inline const tessera::Tensor& tensor_of(PyObject* o) { return reinterpret_cast<TensorObject*>(o)->tensor; }

// The tensor held by `h`; raises TypeError when `h` is not a _C.Tensor.
const tessera::Tensor& unwrap_tensor(pybind11::handle h);
// A new _C.Tensor object holding `t` (None for an undefined tensor).
pybind11::object wrap(tessera::Tensor t);
// Same, as an instance of `type` (a subclass of _C.Tensor); a new reference, nullptr with a
// Python error set on failure.
PyObject* wrap_as(PyTypeObject* type, tessera::Tensor t);

// dtype objects: _C.dtype singletons. to_scalar_type accepts a _C.dtype, a dtype name
// ("float32", "long", ...) or the Python types bool / int / float; raises TypeError otherwise.
tessera::ScalarType to_scalar_type(pybind11::handle h);
// Like to_scalar_type without raising: false when `h` is not a dtype.
bool try_scalar_type(PyObject* o, tessera::ScalarType* out);
pybind11::object dtype_object(tessera::ScalarType t);
// Borrowed pointer to the singleton (never freed).
PyObject* dtype_ptr(tessera::ScalarType t);

// device objects: a C++ Device plus whether an index was given ("cuda" vs "cuda:0").
// to_device accepts a _C.device or a string; raises TypeError / ValueError otherwise.
tessera::Device to_device(pybind11::handle h);
bool try_device(PyObject* o, tessera::Device* out);  // false (no error set) when not a device/str
pybind11::object device_object(tessera::Device d, bool has_index);
// The device object of a tensor: no index for "cpu" (as PyTorch), an index otherwise.
pybind11::object tensor_device_object(tessera::Device d);

// The default floating dtype (get_default_dtype / set_default_dtype).
tessera::ScalarType default_dtype();

// Sets the Python error matching the exception being handled (call inside a catch block):
// tessera::TypeError -> TypeError, ValueError -> ValueError, IndexError -> IndexError,
// NotImplementedError -> NotImplementedError, OutOfMemoryError -> MemoryError,
// PluginError -> _C.PluginError, others -> RuntimeError; pybind11::error_already_set is restored.
void set_error_from_current_exception();
PyObject* plugin_error_type();  // _C.PluginError

// Adds a pybind11 function as a method of a class that is not a pybind11 class (e.g. _C.Tensor):
// `self` arrives as the first argument; declare it pybind11::handle or const tessera::Tensor&.
template <class Func, class... Extra>
void def_method(pybind11::handle cls, const char* name, Func&& f, const Extra&... extra) {
  pybind11::cpp_function cf(std::forward<Func>(f), pybind11::name(name), pybind11::is_method(cls),
                            pybind11::sibling(pybind11::getattr(cls, name, pybind11::none())), extra...);
  pybind11::setattr(cls, name, cf);
}
// Adds a read-only property computed by `f(self)`.
template <class Func>
void def_property(pybind11::handle cls, const char* name, Func&& f, const char* doc = "") {
  pybind11::cpp_function getter(std::forward<Func>(f), pybind11::is_method(cls));
  pybind11::object prop = pybind11::module_::import("builtins").attr("property")(getter, pybind11::none(),
                                                                                 pybind11::none(), doc);
  pybind11::setattr(cls, name, prop);
}

// Plugins' warnings given while this thread ran an operator without the GIL wait here, and
// become Python warnings when the GIL is back (plugins.cpp).
struct DeferredWarnings {
  bool collecting = false;  // this thread released the GIL through a GilRelease
  std::vector<std::pair<std::string, bool>> pending;  // (text, at_load)
};
DeferredWarnings& deferred_warnings();  // this thread's
void issue_deferred_warnings();         // with the GIL held

// Releases the GIL for the lifetime of the guard (cheaper than pybind11's: no internals lookup).
class GilRelease {
 public:
  GilRelease() : deferred_(deferred_warnings()), outer_(deferred_.collecting), state_(PyEval_SaveThread()) {
    deferred_.collecting = true;
  }
  ~GilRelease() {
    PyEval_RestoreThread(state_);
    deferred_.collecting = outer_;
    if (!deferred_.pending.empty()) issue_deferred_warnings();
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  DeferredWarnings& deferred_;
  bool outer_;
  PyThreadState* state_;
};

}  // namespace tessera::python

namespace pybind11::detail {
// tessera::Tensor <-> _C.Tensor for pybind11-bound functions.
template <>
struct type_caster<tessera::Tensor> {
  PYBIND11_TYPE_CASTER(tessera::Tensor, const_name("Tensor"));
  bool load(handle src, bool) {
    if (!src || !tessera::python::is_tensor(src.ptr())) return false;
    value = tessera::python::tensor_of(src.ptr());
    return true;
  }
  static handle cast(const tessera::Tensor& src, return_value_policy, handle) {
    return tessera::python::wrap(src).release();
  }
};
}  // namespace pybind11::detail
