// _C.Tensor (a CPython heap type embedding tessera::Tensor), its metadata, item/tolist, and
// _C.tensor(data, dtype=None, device=None).
#include "bindings.h"
#include "convert.h"

#include <tessera/runtime.h>
#include <tessera/device_registry.h>
#include <tessera/error.h>
#include <tessera/ops.h>

#include <structmember.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace py = pybind11;

namespace tessera::python {

namespace {

// Runs `body` and converts a C++ exception into the matching Python error (returns nullptr).
template <class F>
PyObject* guarded(F&& body) {
  try {
    return body();
  } catch (...) {
    set_error_from_current_exception();
    return nullptr;
  }
}

TensorObject* as_obj(PyObject* o) { return reinterpret_cast<TensorObject*>(o); }
const Tensor& self_tensor(PyObject* o) {
  const Tensor& t = as_obj(o)->tensor;
  if (!t.defined()) throw RuntimeError("the tensor is undefined");
  return t;
}

// ---------------------------------------------------------------------------- reading elements

// Host-readable bytes of the part of the storage a tensor touches: element at (element) offset
// `off` from the tensor's first element lies at base + off * itemsize.
struct HostBytes {
  const char* base = nullptr;
  std::vector<char> staging;
};

HostBytes host_bytes(const Tensor& t) {
  HostBytes out;
  TensorImpl* impl = t.impl();
  const auto& entry = DeviceRegistry::instance().require(t.device().type());
  out.base = static_cast<const char*>(impl->data());
  if (entry.desc.host_accessible || impl->numel() == 0) return out;
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < impl->dim(); ++d) {
    int64_t extent = (impl->sizes()[d] - 1) * impl->strides()[d];
    (extent < 0 ? lo : hi) += extent;
  }
  int64_t isz = itemsize(impl->dtype());
  out.staging.resize(size_t((hi - lo + 1) * isz));
  if (!entry.desc.copy_to_host)
    raise<RuntimeError>("device '{}' (plugin '{}') cannot copy to the host", t.device().str(), entry.plugin);
  ts_status s = entry.desc.copy_to_host(entry.desc.device_data, t.device().index(), out.staging.data(),
                                        out.base + lo * isz, out.staging.size());
  if (s != TS_OK) raise<RuntimeError>("copy from {} to the host failed (plugin '{}')", t.device().str(), entry.plugin);
  out.base = out.staging.data() - lo * isz;
  return out;
}

// One value as a Python bool / int / float / complex (a template: the branches not taken for T
// are discarded).
template <class T>
PyObject* number_object(T v) {
  if constexpr (std::is_same_v<T, bool>) return PyBool_FromLong(v);
  else if constexpr (sdk::is_complex_v<T>) return PyComplex_FromDoubles(double(v.real()), double(v.imag()));
  else if constexpr (std::is_integral_v<T>) return PyLong_FromLongLong((long long)v);
  else return PyFloat_FromDouble(double(sdk::opmath_t<T>(v)));
}

PyObject* element_object(ScalarType dtype, const char* p) {
  PyObject* r = nullptr;
  TS_DISPATCH_ALL_AND_COMPLEX(int32_t(dtype), raise<TypeError>("invalid dtype code {}", int32_t(dtype)), {
    scalar_t v;
    std::memcpy(&v, p, sizeof v);
    r = number_object(v);
  });
  if (!r) throw py::error_already_set();
  return r;
}

PyObject* tolist_rec(const TensorImpl* t, const char* base, int64_t isz, int64_t d, int64_t offset) {
  if (d == t->dim()) return element_object(t->dtype(), base + offset * isz);
  int64_t n = t->sizes()[d], stride = t->strides()[d];
  PyObject* list = PyList_New(Py_ssize_t(n));
  if (!list) throw py::error_already_set();
  for (int64_t i = 0; i < n; ++i) {
    PyObject* item;
    try {
      item = tolist_rec(t, base, isz, d + 1, offset + i * stride);
    } catch (...) {
      Py_DECREF(list);
      throw;
    }
    PyList_SET_ITEM(list, Py_ssize_t(i), item);
  }
  return list;
}

// ts.compile's capture sets this hook: a read of tensor data into Python (item, tolist, numpy,
// printing) during capture is a data-dependent value that one graph cannot hold.
}  // namespace

PyObject* g_data_read_hook = nullptr;
thread_local bool t_watch_data_reads = false;  // a capture is open on this thread

void note_data_read(const char* what, const Tensor& t) {
  // A batched tensor's own geometry is one sample's view of its batch: its elements are not its value.
  if (t.impl()->key_set().has(DispatchKey::Batched)) [[unlikely]]
    raise<RuntimeError>("vmap: It looks like you're calling .{}() on a Tensor. We don't support vmap over calling "
                        ".{}() on a Tensor, please try to rewrite what you're doing with other operations. If error "
                        "is occurring somewhere inside PyTorch internals, please file a bug report.", what, what);
  if (!t_watch_data_reads || !g_data_read_hook) [[likely]] return;
  // The tensor goes with the name: a capture cuts its graph at the read and guards on the value.
  py::object tensor = wrap(t);
  PyObject* r = PyObject_CallFunction(g_data_read_hook, "sO", what, tensor.ptr());
  if (!r) throw py::error_already_set();
  Py_DECREF(r);
}

namespace {

PyObject* tensor_tolist(const Tensor& t) {
  note_data_read("tolist", t);
  HostBytes bytes = host_bytes(t);
  return tolist_rec(t.impl(), bytes.base, itemsize(t.dtype()), 0, 0);
}

PyObject* tensor_item(const Tensor& t) {
  if (t.numel() != 1)
    raise<ValueError>("a Tensor with {} elements cannot be converted to Scalar", t.numel());
  note_data_read("item", t);
  HostBytes bytes = host_bytes(t);
  return element_object(t.dtype(), bytes.base);
}

// ---------------------------------------------------------------------------- tensor(data)

enum Category : uint8_t { kNone = 0, kBoolCat = 1, kIntCat = 2, kFloatCat = 3, kComplexCat = 4 };

struct Element {
  bool is_float;
  int64_t i;
  double d;
  double imag = 0;  // a Python complex: d is its real part
};

int64_t double_to_int64(double d) {
  if (std::isnan(d)) return 0;
  if (d >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (d <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return int64_t(d);  // truncates toward zero, as PyTorch
}

template <class T>
void fill_typed(void* out, const std::vector<Element>& elements) {
  T* dst = static_cast<T*>(out);
  for (size_t k = 0; k < elements.size(); ++k) {
    const Element& e = elements[k];
    if constexpr (std::is_same_v<T, bool>) dst[k] = e.is_float ? (e.d != 0 || e.imag != 0) : e.i != 0;
    else if constexpr (sdk::is_complex_v<T>) {
      using R = typename T::value_type;
      dst[k] = T(R(e.is_float ? e.d : double(e.i)), R(e.imag));
    } else if constexpr (std::is_integral_v<T>) dst[k] = T(e.is_float ? double_to_int64(e.d) : e.i);
    else {
      using M = sdk::opmath_t<T>;
      dst[k] = T(e.is_float ? M(e.d) : M(e.i));
    }
  }
}

bool is_sequence(PyObject* o) { return PyList_Check(o) || PyTuple_Check(o); }

struct DataParser {
  SizeVector shape;
  std::vector<Element> elements;
  Category category = kNone;
  std::vector<Py_ssize_t> path;

  std::string where() const {
    if (path.empty()) return "the top level";
    std::string s = "index [";
    for (size_t k = 0; k < path.size(); ++k) {
      if (k) s += ", ";
      s += std::to_string(path[k]);
    }
    return s + "]";
  }

  void parse(PyObject* data) {
    // The shape is read along the first elements, then every branch is checked against it.
    PyObject* cur = data;
    while (is_sequence(cur)) {
      Py_ssize_t n = PySequence_Fast_GET_SIZE(cur);
      shape.push_back(int64_t(n));
      if (n == 0) break;
      cur = PySequence_Fast_GET_ITEM(cur, 0);
    }
    walk(data, 0);
  }

  void walk(PyObject* o, size_t depth) {
    if (depth < shape.size()) {
      if (!is_sequence(o))
        raise<ValueError>("tensor(): expected a sequence of length {} at {} (dim {}), got {}: the nested sequences "
                          "are ragged", shape[depth], where(), depth, Py_TYPE(o)->tp_name);
      Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
      if (int64_t(n) != shape[depth])
        raise<ValueError>("tensor(): expected a sequence of length {} at {} (dim {}), got length {}: the nested "
                          "sequences are ragged", shape[depth], where(), depth, n);
      for (Py_ssize_t k = 0; k < n; ++k) {
        path.push_back(k);
        walk(PySequence_Fast_GET_ITEM(o, k), depth + 1);
        path.pop_back();
      }
      return;
    }
    if (is_sequence(o))
      raise<ValueError>("tensor(): expected a number at {} (dim {}), got a sequence of length {}: the nested "
                        "sequences are ragged", where(), depth, PySequence_Fast_GET_SIZE(o));
    scalar(o);
  }

  void add(Category c, bool is_float, int64_t i, double d, double imag = 0) {
    if (c > category) category = c;
    elements.push_back(Element{is_float, i, d, imag});
  }

  void scalar(PyObject* o) {
    if (PyBool_Check(o)) return add(kBoolCat, false, o == Py_True, 0);
    if (PyLong_Check(o)) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (overflow) {
        PyErr_Format(PyExc_OverflowError, "tensor(): the integer at %s does not fit in int64", where().c_str());
        throw py::error_already_set();
      }
      if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
      return add(kIntCat, false, v, 0);
    }
    if (PyFloat_Check(o)) return add(kFloatCat, true, 0, PyFloat_AS_DOUBLE(o));
    if (is_tensor(o)) {
      const Tensor& t = tensor_of(o);
      if (t.numel() != 1)
        raise<ValueError>("tensor(): only one-element tensors can be elements, got a tensor with {} elements at {}",
                          t.numel(), where());
      py::object v = py::reinterpret_steal<py::object>(tensor_item(t));
      if (t.dtype() == kBool) return add(kBoolCat, false, v.ptr() == Py_True, 0);
      if (is_complex(t.dtype()))
        return add(kComplexCat, true, 0, PyComplex_RealAsDouble(v.ptr()), PyComplex_ImagAsDouble(v.ptr()));
      if (is_floating_point(t.dtype())) return add(kFloatCat, true, 0, PyFloat_AS_DOUBLE(v.ptr()));
      return add(kIntCat, false, PyLong_AsLongLong(v.ptr()), 0);
    }
    if (PyComplex_Check(o))
      return add(kComplexCat, true, 0, PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o));
    std::string_view tname = Py_TYPE(o)->tp_name;
    if (tname == "numpy.bool" || tname == "numpy.bool_") return add(kBoolCat, false, PyObject_IsTrue(o) == 1, 0);
    if (PyIndex_Check(o)) {  // NumPy integers and other int-likes
      py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(o));
      if (!i) throw py::error_already_set();
      return scalar(i.ptr());
    }
    if (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float) {  // NumPy floats, ...
      double d = PyFloat_AsDouble(o);
      if (d == -1.0 && PyErr_Occurred()) throw py::error_already_set();
      return add(kFloatCat, true, 0, d);
    }
    raise<TypeError>("tensor(): expected a number, a bool or a one-element tensor at {}, got {}", where(),
                     Py_TYPE(o)->tp_name);
  }
};

Tensor tensor_from_data(py::handle data, std::optional<ScalarType> dtype, std::optional<Device> device) {
  if (is_tensor(data)) {  // a copy, as torch.tensor(t)
    const Tensor& src = tensor_of(data.ptr());
    if (!dtype) dtype = src.dtype();
    if (!device) device = src.device();
    py::object values = py::reinterpret_steal<py::object>(tensor_tolist(src));
    return tensor_from_data(values, dtype, device);
  }
  DataParser p;
  p.parse(data.ptr());
  ScalarType type = dtype ? *dtype
                    : p.category == kBoolCat ? kBool
                    : p.category == kIntCat  ? kInt64
                    : p.category == kComplexCat ? ScalarType(sdk::complex_dtype(int32_t(default_dtype())))
                                             : default_dtype();
  Device dev = device.value_or(Device(Device::kCpuType, 0));
  std::vector<int64_t> shape(p.shape.begin(), p.shape.end());
  Tensor t = empty(shape, type, dev);
  if (p.elements.empty()) return t;
  const auto& entry = DeviceRegistry::instance().require(dev.type());
  bool direct = entry.desc.host_accessible;
  std::vector<char> staging;
  void* dst = t.impl()->data();
  if (!direct) {
    staging.resize(p.elements.size() * size_t(itemsize(type)));
    dst = staging.data();
  }
  if (p.category == kComplexCat && !is_complex(type))
    raise<TypeError>("tensor(): can't convert complex numbers to {}", name(type));
  TS_DISPATCH_ALL_AND_COMPLEX(int32_t(type), raise<TypeError>("tensor(): invalid dtype"),
                              fill_typed<scalar_t>(dst, p.elements));
  if (!direct) {
    if (!entry.desc.copy_from_host)
      raise<RuntimeError>("tensor(): device '{}' (plugin '{}') cannot copy from the host", dev.str(), entry.plugin);
    ts_status s = entry.desc.copy_from_host(entry.desc.device_data, dev.index(), t.impl()->data(), staging.data(),
                                            staging.size());
    if (s != TS_OK) raise<RuntimeError>("tensor(): copy from the host to {} failed (plugin '{}')", dev.str(), entry.plugin);
  }
  return t;
}

// ---------------------------------------------------------------------------- the type's slots

void tensor_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  TensorObject* o = as_obj(self);
  if (o->weakreflist) PyObject_ClearWeakRefs(self);
  Py_CLEAR(o->dict);
  o->tensor.~Tensor();
  tp->tp_free(self);
  Py_DECREF(tp);
}

int tensor_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(as_obj(self)->dict);
  return 0;
}

int tensor_clear(PyObject* self) {
  Py_CLEAR(as_obj(self)->dict);
  return 0;
}

// Sizes when every positional argument is an int (not a bool): Tensor(2, 3).
std::optional<std::vector<int64_t>> legacy_sizes(PyObject* args, PyObject* kwargs) {
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n == 0 || (kwargs && PyDict_Size(kwargs) > 0)) return std::nullopt;
  std::vector<int64_t> sizes;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    if (!PyLong_Check(a) || PyBool_Check(a)) return std::nullopt;
    sizes.push_back(PyLong_AsLongLong(a));
    if (sizes.back() < 0)
      raise<RuntimeError>("Tensor: sizes must be non-negative, got a size of {} in dim {}", sizes.back(), i);
  }
  return sizes;
}

// Tensor(): an empty float tensor; Tensor(t): a new object sharing t's data; Tensor(data):
// a tensor of the default dtype from nested sequences; Tensor(2, 3): an uninitialised one of
// those sizes (torch.Tensor's legacy constructor).
PyObject* tensor_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  return guarded([&]() -> PyObject* {
    if (auto sizes = legacy_sizes(args, kwargs))
      return wrap_as(type, empty(*sizes, default_dtype(), Device(Device::kCpuType, 0)));
    static const char* names[] = {"data", nullptr};
    PyObject* data = nullptr;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Tensor", const_cast<char**>(names), &data)) return nullptr;
    Tensor t;
    if (!data) t = empty({0}, default_dtype(), Device(Device::kCpuType, 0));
    else if (is_tensor(data)) t = tensor_of(data);
    else t = tensor_from_data(data, default_dtype(), std::nullopt);
    return wrap_as(type, std::move(t));
  });
}

PyObject* tensor_repr(PyObject* self) {
  return guarded([&]() -> PyObject* { return PyUnicode_FromString(as_obj(self)->tensor.str().c_str()); });
}

// -- properties
PyObject* get_shape(PyObject* self, void*) {
  return guarded([&]() -> PyObject* {
    auto sizes = self_tensor(self).sizes();
    PyObject* tuple = PyTuple_New(Py_ssize_t(sizes.size()));
    if (!tuple) return nullptr;
    for (size_t i = 0; i < sizes.size(); ++i) PyTuple_SET_ITEM(tuple, Py_ssize_t(i), PyLong_FromLongLong(sizes[i]));
    return tuple;
  });
}
PyObject* get_dtype(PyObject* self, void*) {
  return guarded([&]() -> PyObject* {
    PyObject* d = dtype_ptr(self_tensor(self).dtype());
    Py_INCREF(d);
    return d;
  });
}
PyObject* get_device(PyObject* self, void*) {
  return guarded([&]() -> PyObject* { return tensor_device_object(self_tensor(self).device()).release().ptr(); });
}
PyObject* get_ndim(PyObject* self, void*) {
  return guarded([&]() -> PyObject* { return PyLong_FromLongLong(self_tensor(self).dim()); });
}
PyObject* get_version(PyObject* self, void*) {
  return guarded([&]() -> PyObject* { return PyLong_FromUnsignedLongLong(self_tensor(self).version()); });
}
PyObject* get_is_cuda(PyObject* self, void*) {
  return guarded([&]() -> PyObject* {
    return PyBool_FromLong(self_tensor(self).device().type() == DeviceRegistry::instance().type_id("cuda"));
  });
}
PyObject* get_is_cpu(PyObject* self, void*) {
  return guarded([&]() -> PyObject* { return PyBool_FromLong(self_tensor(self).device().is_cpu()); });
}

PyObject* get_is_batched(PyObject* self, void*) {
  return guarded([&]() -> PyObject* {
    return PyBool_FromLong(self_tensor(self).impl()->key_set().has(DispatchKey::Batched));
  });
}

PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, nullptr, "The sizes, as a tuple of ints.", nullptr},
    {"dtype", get_dtype, nullptr, "The element type (tessera.dtype).", nullptr},
    {"device", get_device, nullptr, "The device (tessera.device).", nullptr},
    {"ndim", get_ndim, nullptr, "The number of dimensions.", nullptr},
    {"_version", get_version, nullptr, "The version counter of the storage (bumped by every in-place write).",
     nullptr},
    {"is_cuda", get_is_cuda, nullptr, "True for a tensor on a 'cuda' device.", nullptr},
    {"is_cpu", get_is_cpu, nullptr, "True for a tensor on the CPU.", nullptr},
    {"_is_batched", get_is_batched, nullptr, "True for a tensor batched by vmap (inside the vmapped function).",
     nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

// -- methods
PyObject* m_dim(PyObject* self, PyObject*) {
  return guarded([&]() -> PyObject* { return PyLong_FromLongLong(self_tensor(self).dim()); });
}
PyObject* m_numel(PyObject* self, PyObject*) {
  return guarded([&]() -> PyObject* { return PyLong_FromLongLong(self_tensor(self).numel()); });
}
PyObject* m_is_contiguous(PyObject* self, PyObject*) {
  return guarded([&]() -> PyObject* { return PyBool_FromLong(self_tensor(self).is_contiguous()); });
}
PyObject* m_storage_offset(PyObject* self, PyObject*) {
  return guarded([&]() -> PyObject* { return PyLong_FromLongLong(self_tensor(self).storage_offset()); });
}
PyObject* m_element_size(PyObject* self, PyObject*) {
  return guarded([&]() -> PyObject* { return PyLong_FromLongLong(itemsize(self_tensor(self).dtype())); });
}
PyObject* m_data_ptr(PyObject* self, PyObject*) {
  // The address of element 0 in the device's memory (not dereferenced here).
  return guarded([&]() -> PyObject* { return PyLong_FromVoidPtr(self_tensor(self).impl()->data()); });
}
PyObject* m_item(PyObject* self, PyObject*) {
  return guarded([&]() -> PyObject* { return tensor_item(self_tensor(self)); });
}
PyObject* m_tolist(PyObject* self, PyObject*) {
  return guarded([&]() -> PyObject* { return tensor_tolist(self_tensor(self)); });
}
PyObject* m_same_storage(PyObject* self, PyObject* other) {
  return guarded([&]() -> PyObject* {
    const Tensor& a = self_tensor(self);
    const Tensor& b = unwrap_tensor(other);
    return PyBool_FromLong(a.impl()->storage().get() == b.impl()->storage().get());
  });
}

// size(dim=None) / stride(dim=None): a tuple, or the entry of one dim (negative dims count from the end).
template <bool Size>
PyObject* m_size_or_stride(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return guarded([&]() -> PyObject* {
    const char* fname = Size ? "size" : "stride";
    PyObject* dim = nullptr;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs + nkw > 1) {
      PyErr_Format(PyExc_TypeError, "%s() takes at most 1 argument (%zd given)", fname, nargs + nkw);
      return nullptr;
    }
    if (nargs == 1) dim = args[0];
    if (nkw == 1) {
      if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "dim") != 0) {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname,
                     PyTuple_GET_ITEM(kwnames, 0));
        return nullptr;
      }
      dim = args[0];
    }
    const Tensor& t = self_tensor(self);
    if (!dim || dim == Py_None) {
      auto v = Size ? t.sizes() : t.strides();
      PyObject* tuple = PyTuple_New(Py_ssize_t(v.size()));
      if (!tuple) return nullptr;
      for (size_t i = 0; i < v.size(); ++i) PyTuple_SET_ITEM(tuple, Py_ssize_t(i), PyLong_FromLongLong(v[i]));
      return tuple;
    }
    if (PyBool_Check(dim) || !PyIndex_Check(dim)) {
      PyErr_Format(PyExc_TypeError, "%s(): argument 'dim' must be int, not %s", fname, Py_TYPE(dim)->tp_name);
      return nullptr;
    }
    long long d = PyLong_AsLongLong(dim);
    if (d == -1 && PyErr_Occurred()) return nullptr;
    return PyLong_FromLongLong(Size ? t.size(d) : t.stride(d));
  });
}

PyMethodDef tensor_methods[] = {
    {"dim", m_dim, METH_NOARGS, "The number of dimensions."},
    {"ndimension", m_dim, METH_NOARGS, "Alias of dim()."},
    {"numel", m_numel, METH_NOARGS, "The number of elements."},
    {"nelement", m_numel, METH_NOARGS, "Alias of numel()."},
    {"is_contiguous", m_is_contiguous, METH_NOARGS, "True when the elements are dense in row-major order."},
    {"storage_offset", m_storage_offset, METH_NOARGS, "The offset of element 0 in the storage, in elements."},
    {"element_size", m_element_size, METH_NOARGS, "The size of one element in bytes."},
    {"data_ptr", m_data_ptr, METH_NOARGS, "The address of element 0 (in the device's memory)."},
    {"item", m_item, METH_NOARGS, "The value of a one-element tensor as a Python bool, int or float."},
    {"tolist", m_tolist, METH_NOARGS, "The elements as nested lists of Python numbers (a number for 0-dim)."},
    {"_same_storage", m_same_storage, METH_O, "True when both tensors view the same storage."},
    {"size", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_size_or_stride<true>)),
     METH_FASTCALL | METH_KEYWORDS, "size(dim=None): the sizes as a tuple, or the size of one dim."},
    {"stride", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_size_or_stride<false>)),
     METH_FASTCALL | METH_KEYWORDS, "stride(dim=None): the strides (in elements) as a tuple, or one dim's."},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef tensor_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(TensorObject, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(TensorObject, weakreflist), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

}  // namespace

// ---------------------------------------------------------------------------- convert.h API

const Tensor& unwrap_tensor(py::handle h) {
  if (!h || !is_tensor(h.ptr()))
    throw py::type_error(std::string("expected a Tensor, got ") + (h ? Py_TYPE(h.ptr())->tp_name : "nothing"));
  return tensor_of(h.ptr());
}

PyObject* wrap_as(PyTypeObject* type, Tensor t) {
  PyObject* obj = type->tp_alloc(type, 0);  // zeroed, GC-tracked, holds a reference to `type`
  if (!obj) return nullptr;
  new (&as_obj(obj)->tensor) Tensor(std::move(t));
  return obj;
}

py::object wrap(Tensor t) {
  if (!t.defined()) return py::none();
  PyObject* obj = wrap_as(g_tensor_type, std::move(t));
  if (!obj) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(obj);
}

// ---------------------------------------------------------------------------- bindings

void bind_tensor(py::module_& m) {
  static PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(tensor_dealloc)},
      {Py_tp_traverse, reinterpret_cast<void*>(tensor_traverse)},
      {Py_tp_clear, reinterpret_cast<void*>(tensor_clear)},
      {Py_tp_new, reinterpret_cast<void*>(tensor_new)},
      {Py_tp_repr, reinterpret_cast<void*>(tensor_repr)},
      {Py_tp_getset, tensor_getset},
      {Py_tp_methods, tensor_methods},
      {Py_tp_members, tensor_members},
      {Py_tp_doc, const_cast<char*>("A tensor: a view (sizes, strides, offset, dtype) of a storage on a device.")},
      {0, nullptr},
  };
  static PyType_Spec spec = {"tessera._C.Tensor", int(sizeof(TensorObject)), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, slots};
  PyObject* type = PyType_FromSpec(&spec);
  if (!type) throw py::error_already_set();
  g_tensor_type = reinterpret_cast<PyTypeObject*>(type);  // one reference kept for the process
  m.add_object("Tensor", py::handle(type));

  py::handle cls(type);
  py::cpp_function make_subclass(
      [](py::handle cls, py::handle data) -> py::object {
        if (!PyType_Check(cls.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()), g_tensor_type))
          throw py::type_error("_make_subclass: cls must be a subclass of Tensor");
        const Tensor& t = unwrap_tensor(data);
        PyObject* obj = wrap_as(reinterpret_cast<PyTypeObject*>(cls.ptr()), t);
        if (!obj) throw py::error_already_set();
        return py::reinterpret_steal<py::object>(obj);
      },
      py::name("_make_subclass"), py::arg("cls"), py::arg("data"),
      "A new object of class `cls` (a Tensor subclass) sharing data's tensor.");
  py::setattr(cls, "_make_subclass", py::staticmethod(make_subclass));

  m.def(
      "_set_data_read_hook",
      [](py::handle hook) {
        Py_XDECREF(g_data_read_hook);
        g_data_read_hook = hook.is_none() ? nullptr : hook.inc_ref().ptr();
      },
      py::arg("hook"), "Calls hook(what, tensor) on every read of tensor data into Python on a thread that watches "
                       "(_set_data_read_watch); None: no hook.");
  m.def(
      "_set_data_read_watch", [](bool on) { t_watch_data_reads = on; }, py::arg("on"),
      "Whether this thread's reads of tensor data into Python go to the data-read hook.");
  m.def(
      "tensor",
      [](py::handle data, py::handle dtype, py::handle device) {
        std::optional<ScalarType> t;
        std::optional<Device> d;
        if (!dtype.is_none()) t = to_scalar_type(dtype);
        if (!device.is_none()) d = to_device(device);
        return wrap(tensor_from_data(data, t, d));
      },
      py::arg("data"), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      "A new tensor from a number, nested lists/tuples of numbers/bools/one-element tensors, or a tensor (copied). "
      "Without dtype: bool if all bools, int64 if all integers, else the default dtype.");
}

}  // namespace tessera::python
