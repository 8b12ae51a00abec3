// _C.dtype, _C.device, the error mapping, the default dtype, manual_seed, threads.
#include <memory>
#include "bindings.h"
#include "convert.h"

#include <tessera/device_registry.h>
#include <tessera/error.h>
#include <tessera/generator.h>
#include <tessera/runtime.h>

#include <pybind11/stl.h>

#include <array>
#include <atomic>
#include <new>
#include <string>
#include <unordered_map>

namespace py = pybind11;

namespace tessera::python {

namespace {

// ---------------------------------------------------------------------------- dtype
struct PyDType {
  ScalarType type;
};

std::array<PyObject*, TS_NUM_DTYPES> g_dtypes{};  // the singletons, never freed
PyObject* g_plugin_error = nullptr;

bool is_signed(ScalarType t) { return t != kBool && t != kUInt8; }

// ---------------------------------------------------------------------------- device
struct PyDevice {
  Device device;
  bool has_index = false;
  std::string type_name;
};

PyObject* g_device_class = nullptr;  // set once in bind_types, never released

PyDevice make_device(std::string_view spec) {
  Device d(spec);  // parses, lazily loads the device's plugin, ValueError when unknown
  return PyDevice{d, spec.find(':') != std::string_view::npos, d.type_name()};
}

PyDevice parse_device(py::handle spec, py::handle index) {
  PyDevice out;
  if (py::isinstance<PyDevice>(spec)) {
    if (!index.is_none()) throw py::type_error("device(): an index cannot be given with a device object");
    return spec.cast<PyDevice>();
  }
  if (!py::isinstance<py::str>(spec))
    throw py::type_error("device(): expected a device type string such as 'cpu' or 'cuda:1', or a device, got " +
                         std::string(Py_TYPE(spec.ptr())->tp_name));
  std::string s = spec.cast<std::string>();
  out = make_device(s);
  if (!index.is_none()) {
    if (out.has_index)
      throw py::value_error("device(): type (string) must not include an index because index was passed "
                            "explicitly: " + s);
    if (!PyLong_Check(index.ptr()) || PyBool_Check(index.ptr()))
      throw py::type_error("device(): expected an int index, got " + std::string(Py_TYPE(index.ptr())->tp_name));
    long long i = index.cast<long long>();
    if (i < 0 || i > INT32_MAX) throw py::value_error("device(): expected a non-negative index, got " + std::to_string(i));
    out.device = Device(out.device.type(), int32_t(i));
    out.has_index = true;
  }
  return out;
}

std::string device_str(const PyDevice& d) {
  return d.has_index ? d.type_name + ":" + std::to_string(d.device.index()) : d.type_name;
}

int64_t device_key(const PyDevice& d) {
  return (int64_t(d.device.type()) << 32) | (d.has_index ? int64_t(uint32_t(d.device.index())) : 0xffffffffLL);
}

}  // namespace

// ---------------------------------------------------------------------------- convert.h API

PyObject* dtype_ptr(ScalarType t) { return g_dtypes[size_t(t)]; }
py::object dtype_object(ScalarType t) { return py::reinterpret_borrow<py::object>(g_dtypes[size_t(t)]); }

bool try_scalar_type(PyObject* o, ScalarType* out) {
  for (size_t i = 0; i < g_dtypes.size(); ++i)
    if (g_dtypes[i] == o) {
      *out = ScalarType(int32_t(i));
      return true;
    }
  if (o == reinterpret_cast<PyObject*>(&PyFloat_Type)) { *out = kFloat64; return true; }
  if (o == reinterpret_cast<PyObject*>(&PyLong_Type)) { *out = kInt64; return true; }
  if (o == reinterpret_cast<PyObject*>(&PyBool_Type)) { *out = kBool; return true; }
  if (PyUnicode_Check(o)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(o, &n);
    if (!s) { PyErr_Clear(); return false; }
    try {
      *out = scalar_type_from_name(std::string_view(s, size_t(n)));
      return true;
    } catch (const Error&) {
      return false;
    }
  }
  return false;
}

ScalarType to_scalar_type(py::handle h) {
  ScalarType t;
  if (h && try_scalar_type(h.ptr(), &t)) return t;
  throw py::type_error(std::string("expected a dtype (tessera.float32, ...), got ") +
                       (h ? Py_TYPE(h.ptr())->tp_name : "nothing"));
}

bool try_device(PyObject* o, Device* out) {
  static PyObject* cache = PyDict_New();  // device string -> device object; leaked on purpose
  if (PyUnicode_Check(o)) {
    PyObject* hit = PyDict_GetItemWithError(cache, o);
    if (!hit) {
      if (PyErr_Occurred()) return false;
      py::object obj = py::handle(g_device_class)(py::handle(o));  // raises ValueError for an unknown device
      if (PyDict_SetItem(cache, o, obj.ptr()) < 0) throw py::error_already_set();
      hit = obj.ptr();
    }
    *out = py::handle(hit).cast<const PyDevice&>().device;
    return true;
  }
  if (py::isinstance<PyDevice>(py::handle(o))) {
    *out = py::handle(o).cast<const PyDevice&>().device;
    return true;
  }
  return false;
}

Device to_device(py::handle h) {
  Device d;
  if (h && try_device(h.ptr(), &d)) return d;
  throw py::type_error(std::string("expected a device (tessera.device or a string such as 'cpu'), got ") +
                       (h ? Py_TYPE(h.ptr())->tp_name : "nothing"));
}

py::object device_object(Device d, bool has_index) {
  PyDevice pd{d, has_index, d.type_name()};
  return py::cast(std::move(pd));
}

py::object tensor_device_object(Device d) {
  // Cached per (type, index): tensors ask for their device often.
  static auto* cache = new std::unordered_map<int64_t, PyObject*>;
  int64_t key = (int64_t(d.type()) << 32) | int64_t(uint32_t(d.index()));
  auto it = cache->find(key);
  if (it == cache->end()) it = cache->emplace(key, device_object(d, !d.is_cpu()).release().ptr()).first;
  return py::reinterpret_borrow<py::object>(it->second);
}

ScalarType default_dtype() { return tessera::get_default_dtype(); }

PyObject* plugin_error_type() { return g_plugin_error; }

void set_error_from_current_exception() {
  try {
    throw;
  } catch (const Error& e) {
    PyObject* type = PyExc_RuntimeError;
    switch (e.kind()) {
      case Error::Kind::Type: type = PyExc_TypeError; break;
      case Error::Kind::Value: type = PyExc_ValueError; break;
      case Error::Kind::Index: type = PyExc_IndexError; break;
      case Error::Kind::NotImplemented: type = PyExc_NotImplementedError; break;
      case Error::Kind::OutOfMemory: type = PyExc_MemoryError; break;
      case Error::Kind::Plugin: type = g_plugin_error ? g_plugin_error : PyExc_RuntimeError; break;
      case Error::Kind::Runtime:
      case Error::Kind::Schema: type = PyExc_RuntimeError; break;
    }
    PyErr_SetString(type, e.what());
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
  }
}

// ---------------------------------------------------------------------------- bindings

void bind_types(py::module_& m) {
  init();  // defines the built-in operators; loads no plugin

  g_plugin_error = PyErr_NewExceptionWithDoc("tessera._C.PluginError",
                                             "A plugin was refused or failed (a subclass of RuntimeError).",
                                             PyExc_RuntimeError, nullptr);
  m.add_object("PluginError", py::handle(g_plugin_error));
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const Error&) {
      set_error_from_current_exception();
    }
  });

  // dtype
  py::class_<PyDType> dtype(m, "dtype", "A tensor element type (tessera.float32, ...). Singletons: compare with ==.");
  dtype.def_property_readonly("name", [](const PyDType& d) { return std::string(name(d.type)); })
      .def_property_readonly("itemsize", [](const PyDType& d) { return itemsize(d.type); })
      .def_property_readonly("is_floating_point", [](const PyDType& d) { return is_floating_point(d.type); })
      .def_property_readonly("is_signed", [](const PyDType& d) { return is_signed(d.type); })
      .def_property_readonly("is_complex", [](const PyDType& d) { return is_complex(d.type); })
      .def("__repr__", [](const PyDType& d) { return "tessera." + std::string(name(d.type)); })
      .def("__str__", [](const PyDType& d) { return "tessera." + std::string(name(d.type)); })
      .def("__eq__", [](const PyDType& a, py::handle b) {
        ScalarType t;
        return PyObject_TypeCheck(b.ptr(), Py_TYPE(g_dtypes[0])) && try_scalar_type(b.ptr(), &t) && t == a.type;
      })
      .def("__hash__", [](const PyDType& d) { return py::hash(py::str("tessera." + std::string(name(d.type)))); })
      .def("__reduce__", [](const PyDType& d) {
        return py::make_tuple(py::module_::import("tessera._C").attr("_dtype_from_name"),
                              py::make_tuple(std::string(name(d.type))));
      })
      .def("__copy__", [](py::handle self) { return py::reinterpret_borrow<py::object>(self); })
      .def("__deepcopy__", [](py::handle self, py::handle) { return py::reinterpret_borrow<py::object>(self); });
  py::dict dtypes;
  for (int32_t i = 0; i < TS_NUM_DTYPES; ++i) {
    py::object o = py::cast(PyDType{ScalarType(i)});
    g_dtypes[size_t(i)] = o.release().ptr();  // immortal for the life of the process
    dtypes[py::str(std::string(name(ScalarType(i))))] = py::handle(g_dtypes[size_t(i)]);
  }
  m.attr("dtypes") = dtypes;
  m.def("_dtype_from_name", [](const std::string& n) { return dtype_object(scalar_type_from_name(n)); },
        "The dtype of a name or alias ('float32', 'float', 'long', ...); ValueError when unknown.");

  // device
  py::class_<PyDevice> device(m, "device", "A device: a type ('cpu', 'cuda', a plugin's device) and an optional index.");
  device.def(py::init(&parse_device), py::arg("type"), py::arg("index") = py::none(),
             "device('cpu'), device('cuda:1'), device('cuda', 1), device(other). Unknown types raise ValueError "
             "(after trying to load the plugin libtessera_<type>.so).")
      .def_property_readonly("type", [](const PyDevice& d) { return d.type_name; })
      .def_property_readonly("index", [](const PyDevice& d) -> py::object {
        return d.has_index ? py::object(py::int_(d.device.index())) : py::object(py::none());
      })
      .def("__str__", &device_str)
      .def("__repr__", [](const PyDevice& d) {
        return d.has_index ? "device(type='" + d.type_name + "', index=" + std::to_string(d.device.index()) + ")"
                           : "device(type='" + d.type_name + "')";
      })
      .def("__eq__", [](const PyDevice& a, py::handle b) {
        return py::isinstance<PyDevice>(b) && device_key(a) == device_key(b.cast<const PyDevice&>());
      })
      .def("__hash__", [](const PyDevice& d) { return py::hash(py::int_(device_key(d))); })
      .def("__reduce__", [](py::handle self) {
        return py::make_tuple(py::type::of(self), py::make_tuple(py::str(self)));
      });
  g_device_class = device.inc_ref().ptr();

  // default dtype, seeds, threads
  m.def("get_default_dtype", [] { return dtype_object(default_dtype()); },
        "The dtype of floating tensors created without an explicit dtype (float32 at start).");
  m.def("set_default_dtype", [](py::handle d) {
    tessera::set_default_dtype(to_scalar_type(d));  // TypeError for a non-floating dtype
  }, py::arg("dtype"));
  m.def("manual_seed", [](py::int_ seed) {
    // Negative seeds wrap as in PyTorch (seed mod 2**64).
    unsigned long long s = PyLong_AsUnsignedLongLongMask(seed.ptr());
    if (PyErr_Occurred()) throw py::error_already_set();
    manual_seed(uint64_t(s));
  }, py::arg("seed"), "Reseeds the default generator of every device type.");
  // torch.Generator: a seed stream; `with g:` makes it the source of this thread's kernel seeds.
  struct PyGenerator {
    Generator g;
    std::vector<std::shared_ptr<GeneratorGuard>> guards;  // one per nested `with`
  };
  py::class_<PyGenerator>(m, "Generator")
      .def(py::init([](py::object device) {
             Device d = device.is_none() ? Device(0, 0) : Device(py::str(device).cast<std::string>());
             return PyGenerator{Generator(d), {}};
           }), py::arg("device") = py::none())
      .def_property_readonly("_device_str", [](const PyGenerator& p) { return p.g.device().str(); })
      .def("manual_seed", [](py::object self, py::int_ seed) {
        unsigned long long s = PyLong_AsUnsignedLongLongMask(seed.ptr());
        if (PyErr_Occurred()) throw py::error_already_set();
        self.cast<PyGenerator&>().g.manual_seed(uint64_t(s));
        return self;
      }, py::arg("seed"))
      .def("seed", [](PyGenerator& p) { return p.g.seed(); })
      .def("initial_seed", [](const PyGenerator& p) { return p.g.initial_seed(); })
      .def("_state_bytes", [](const PyGenerator& p) { return py::bytes(p.g.state()); })
      .def("_set_state_bytes", [](PyGenerator& p, py::bytes b) { p.g.set_state(std::string(b)); })
      .def("__enter__", [](py::object self) {
        auto& p = self.cast<PyGenerator&>();
        p.guards.push_back(std::make_shared<GeneratorGuard>(p.g));
        return self;
      })
      .def("__exit__", [](PyGenerator& p, py::args) {
        if (!p.guards.empty()) p.guards.pop_back();
      });
  m.def("_default_generator", [](py::object device) {
    Device d = device.is_none() ? Device(0, 0) : Device(py::str(device).cast<std::string>());
    return PyGenerator{default_generator(d), {}};
  }, py::arg("device") = py::none());
  m.def("set_num_threads", [](int n) { set_num_threads(n); }, py::arg("n"));
  m.def("get_num_threads", [] { return get_num_threads(); });
}

}  // namespace tessera::python
