// Python callables as host callbacks (tessera/callbacks.h): tensor hooks and the backward of
// custom autograd functions, which the autograd plugin calls by id through the C ABI.
// Convention: the stack's values are the positional arguments (Tensor, Tensor?[] as a list,
// None); the callable's result becomes the returns: a tuple or list gives one value each,
// anything else one value (None or a Tensor).
#include "bindings.h"
#include "convert.h"

#include <tessera/callbacks.h>
#include <tessera/error.h>
#include <tessera/runtime.h>

namespace py = pybind11;

namespace tessera::python {
namespace {

Tensor borrowed(ts_tensor t) {
  host_api()->tensor_retain(t);
  return Tensor::adopt(t);
}

py::object to_python(const ts_value& v) {
  switch (v.tag) {
    case TS_VALUE_TENSOR: return v.u.tensor ? wrap(borrowed(v.u.tensor)) : py::none();
    case TS_VALUE_TENSOR_LIST: {
      py::list out;
      for (int64_t i = 0; i < v.u.tensors.size; ++i)
        out.append(v.u.tensors.data[i] ? wrap(borrowed(v.u.tensors.data[i])) : py::none());
      return out;
    }
    case TS_VALUE_INT: return py::int_(v.u.i);
    case TS_VALUE_DOUBLE: return py::float_(v.u.d);
    case TS_VALUE_BOOL: return py::bool_(v.u.b != 0);
    default: return py::none();
  }
}

ts_value to_value(py::handle h) {
  ts_value v{TS_VALUE_NONE, 0, {}};
  if (h.is_none()) return v;
  if (py::isinstance<py::int_>(h) && !py::isinstance<py::bool_>(h)) {  // saved_tensors_hooks' keys
    v.tag = TS_VALUE_INT;
    v.u.i = h.cast<int64_t>();
    return v;
  }
  if (!is_tensor(h)) raise<TypeError>("a hook or backward returned {}; expected a Tensor or None", py::str(py::type::of(h)).cast<std::string>());
  Tensor t = tensor_of(h.ptr());
  v.tag = TS_VALUE_TENSOR;
  v.u.tensor = t.release_handle();  // a new reference for the receiver
  return v;
}

// Holds the Python callable; drops it with the GIL held.
struct PyCallable {
  PyObject* fn;
  explicit PyCallable(py::object f) : fn(f.release().ptr()) {}
  PyCallable(const PyCallable&) = delete;
  ~PyCallable() {
    if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing to release into
    py::gil_scoped_acquire gil;
    Py_DECREF(fn);
  }
};

void call_python(const std::shared_ptr<PyCallable>& callable, ts_stack* stack) {
  if (!Py_IsInitialized()) {  // a saved tensor released after the interpreter ended: nothing to tell
    stack->size = 0;
    return;
  }
  py::gil_scoped_acquire gil;
  try {
    py::tuple args(stack->size);
    for (int32_t i = 0; i < stack->size; ++i) args[size_t(i)] = to_python(stack->values[i]);
    py::object result = py::reinterpret_borrow<py::object>(callable->fn)(*args);
    std::vector<py::object> outs;
    if (py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result)) {
      for (py::handle h : result) outs.push_back(py::reinterpret_borrow<py::object>(h));
    } else {
      outs.push_back(result);
    }
    if (int64_t(outs.size()) > stack->capacity)
      raise<ValueError>("a backward returned {} values; at most {} are expected", outs.size(), stack->capacity);
    std::vector<ts_value> values;
    for (py::handle h : outs) values.push_back(to_value(h));  // may raise before anything is written
    for (size_t i = 0; i < values.size(); ++i) stack->values[i] = values[i];
    stack->size = int32_t(values.size());
  } catch (py::error_already_set& e) {
    raise<RuntimeError>("{}", e.what());
  }
}

}  // namespace

void bind_callbacks(py::module_& m) {
  m.def(
      "register_callback",
      [](py::object fn) {
        if (!PyCallable_Check(fn.ptr())) raise<TypeError>("register_callback: expected a callable");
        auto callable = std::make_shared<PyCallable>(std::move(fn));
        return register_callback([callable](ts_stack* stack) { call_python(callable, stack); });
      },
      py::arg("fn"),
      "Registers a Python callable that plugins may call by id (hooks, custom backward). Passing the id to an "
      "autograd operator hands it over; otherwise release it with release_callback.");
  m.def("release_callback", &release_callback, py::arg("id"));
  m.def("live_callbacks", &live_callbacks, "Number of callbacks alive (for leak checks).");
}

}  // namespace tessera::python
