// tessera._C interop: NumPy (Tensor.numpy, Tensor.__array__, from_numpy) and DLPack
// (Tensor.__dlpack__, Tensor.__dlpack_device__, from_dlpack). Everything shares memory:
//   - numpy() returns an array over the tensor's memory whose base object holds the tensor's
//     Storage, so the memory outlives the tensor if the array does;
//   - from_numpy() wraps the array's buffer in a Storage whose release callback drops the
//     reference it holds on the array;
//   - __dlpack__() hands out a DLManagedTensor[Versioned] that holds a reference to the tensor;
//     from_dlpack() takes over a producer's managed tensor and calls its deleter when the
//     last tensor over it dies.
// Only CPU memory crosses; other devices are refused with a message naming them.
#include "bindings.h"
#include "convert.h"
#include "dlpack.h"

#include <tessera/tessera.h>

#include <pybind11/numpy.h>

#include <cstring>
#include <string>
#include <vector>

namespace py = pybind11;

namespace tessera::python {
namespace {

using namespace dlpack;

// ---- helpers

// The CPU device; the first use loads the CPU plugin.
Device cpu_device() {
  static const Device cpu("cpu");
  return cpu;
}

bool interpreter_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

// A Storage release callback that drops a reference to a Python object, from any thread.
// At interpreter exit the reference is leaked (Python objects may not be touched any more).
std::function<void()> python_release(PyObject* owned) {
  return [owned] {
    if (!interpreter_alive()) return;
    PyGILState_STATE state = PyGILState_Ensure();
    Py_DECREF(owned);
    PyGILState_Release(state);
  };
}

Tensor make_tensor(Storage storage, ScalarType dtype, IntArrayRef sizes, IntArrayRef strides) {
  return Tensor(IntrusivePtr<TensorImpl>::adopt(new TensorImpl(std::move(storage), dtype, sizes, strides, 0)));
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

// Bytes from element 0 to one past the last element (strides non-negative), 0 when empty.
size_t extent_bytes(IntArrayRef sizes, IntArrayRef strides, int64_t itemsize) {
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    last += (sizes[d] - 1) * strides[d];
  }
  return size_t((last + 1) * itemsize);
}

void warn(PyObject* category, const std::string& message) {
  if (PyErr_WarnEx(category, message.c_str(), 1) < 0) throw py::error_already_set();
}

std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")); }

// ---- NumPy

const char* const kNumpySupported =
    "complex128, complex64, float64, float32, float16, int64, int32, int16, int8, uint8, and bool";

ScalarType dtype_from_numpy(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  auto unsupported = [&]() -> ScalarType {
    raise<TypeError>("can't convert np.ndarray of type numpy.{}. The only supported types are: {}.",
                     std::string(py::str(dt)), kNumpySupported);
  };
  switch (kind) {
    case 'b': return size == 1 ? kBool : unsupported();
    case 'u': return size == 1 ? kUInt8 : unsupported();
    case 'i':
      switch (size) {
        case 1: return kInt8;
        case 2: return kInt16;
        case 4: return kInt32;
        case 8: return kInt64;
        default: return unsupported();
      }
    case 'f':
      switch (size) {
        case 2: return kFloat16;
        case 4: return kFloat32;
        case 8: return kFloat64;
        default: return unsupported();
      }
    case 'c':
      switch (size) {
        case 8: return kComplex64;
        case 16: return kComplex128;
        default: return unsupported();
      }
    default: return unsupported();
  }
}

py::dtype numpy_dtype(ScalarType dtype) {
  if (dtype == kBFloat16)
    raise<TypeError>("can't convert a tensor of dtype bfloat16 to numpy: NumPy has no bfloat16 type; convert it "
                     "first, e.g. with t.to(tessera.float32)");
  return py::dtype(std::string(name(dtype)));  // tessera's dtype names are NumPy's
}

void require_cpu(const Tensor& t, const char* what) {
  if (!t.device().is_cpu())
    raise<TypeError>("can't convert {} device type tensor to {}. Use Tensor.cpu() to copy the tensor to host memory "
                     "first.", t.device().str(), what);
}

// An array over the tensor's memory; its base object keeps the tensor's storage alive.
py::array tensor_to_numpy(const Tensor& t) {
  require_cpu(t, "numpy");
  note_data_read("numpy", t);
  py::dtype dt = numpy_dtype(t.dtype());
  const int64_t itemsize = tessera::itemsize(t.dtype());
  std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end()), strides;
  for (int64_t s : t.strides()) strides.push_back(py::ssize_t(s * itemsize));
  auto* holder = new Storage(t.impl()->storage());
  py::capsule base(holder, [](void* p) { delete static_cast<Storage*>(p); });
  void* data = t.impl()->data();
  if (!data) {  // an empty allocation: NumPy still wants a pointer, and reads nothing through it
    static int64_t dummy = 0;
    data = &dummy;
  }
  return py::array(dt, std::move(shape), std::move(strides), data, base);
}

Tensor tensor_from_numpy(py::handle obj) {
  if (!py::isinstance<py::array>(obj)) raise<TypeError>("expected np.ndarray (got {})", type_name(obj));
  auto arr = py::reinterpret_borrow<py::array>(obj);
  py::dtype dt = arr.dtype();
  const ScalarType dtype = dtype_from_numpy(dt);
  if (!dt.attr("isnative").cast<bool>())
    raise<ValueError>("given numpy array has byte order different from the native byte order. Conversion between "
                      "byte orders is currently not supported.");
  const int64_t itemsize = tessera::itemsize(dtype), ndim = arr.ndim();
  std::vector<int64_t> sizes(static_cast<size_t>(ndim)), strides(static_cast<size_t>(ndim));
  for (int64_t d = 0; d < ndim; ++d) {
    sizes[size_t(d)] = arr.shape(py::ssize_t(d));
    const int64_t bytes = arr.strides(py::ssize_t(d));
    if (bytes % itemsize != 0)
      raise<ValueError>("given numpy array strides not a multiple of the element byte size ({} bytes; strides {} "
                        "bytes at dim {}). Copy the numpy array to reallocate the memory.", itemsize, bytes, d);
    if (bytes < 0 && sizes[size_t(d)] > 1)
      raise<ValueError>("At least one stride in the given numpy array is negative (dim {}), and tensors with negative "
                        "strides are not currently supported. (You can probably work around this by making a copy "
                        "of your array with array.copy().)", d);
    strides[size_t(d)] = sizes[size_t(d)] > 1 ? bytes / itemsize : 1;
  }
  void* data = const_cast<void*>(arr.data());
  if (reinterpret_cast<uintptr_t>(data) % uintptr_t(itemsize) != 0)
    raise<ValueError>("given numpy array is not aligned to its element size ({} bytes). Copy the numpy array to "
                      "reallocate the memory.", itemsize);
  if (!arr.writeable())
    warn(PyExc_UserWarning,
         "The given NumPy array is not writable, and Tessera does not support non-writable tensors. The tensor "
         "shares the array's memory: writing to it is undefined behaviour. Copy the array (or make it writable) "
         "first to avoid this warning.");
  const Device cpu = cpu_device();
  const size_t nbytes = extent_bytes(sizes, strides, itemsize);
  PyObject* owned = arr.inc_ref().ptr();
  Storage storage;
  try {
    storage = Storage(IntrusivePtr<StorageImpl>::adopt(new StorageImpl(cpu, data, nbytes, python_release(owned))));
  } catch (...) {
    Py_DECREF(owned);
    throw;
  }
  return make_tensor(std::move(storage), dtype, sizes, strides);
}

// Tensor.__array__(dtype=None, copy=None): NumPy 2's protocol.
py::array tensor_array(const Tensor& t, py::handle dtype, py::handle copy) {
  const bool never_copy = !copy.is_none() && !copy.cast<bool>();
  const bool always_copy = !copy.is_none() && copy.cast<bool>();
  Tensor source = t;
  if (t.dtype() == kBFloat16) {  // NumPy has no bfloat16: float32 holds every value exactly
    if (never_copy)
      raise<ValueError>("Unable to avoid copy while creating an array as requested: a bfloat16 tensor is converted "
                        "to float32.");
    require_cpu(t, "numpy");
    GilRelease release;
    source = tessera::to(t, kFloat32);
  }
  py::array arr = tensor_to_numpy(source);
  if (!dtype.is_none()) {
    py::dtype want = py::dtype::from_args(py::reinterpret_borrow<py::object>(dtype));
    if (!want.equal(arr.dtype())) {
      if (never_copy)
        raise<ValueError>("Unable to avoid copy while creating an array as requested: the tensor is {}, the dtype "
                          "asked for is {}.", name(t.dtype()), std::string(py::str(want)));
      return arr.attr("astype")(want);  // a new array
    }
  }
  if (always_copy && source.impl() == t.impl()) return arr.attr("copy")();
  return arr;
}

// ---- DLPack

DLDataType dl_dtype(ScalarType dtype) {
  const uint8_t bits = uint8_t(tessera::itemsize(dtype) * 8);
  switch (dtype) {
    case kBool: return {kDLBool, 8, 1};
    case kUInt8: return {kDLUInt, 8, 1};
    case kInt8: case kInt16: case kInt32: case kInt64: return {kDLInt, bits, 1};
    case kFloat16: case kFloat32: case kFloat64: return {kDLFloat, bits, 1};
    case kBFloat16: return {kDLBfloat, 16, 1};
    case kComplex64: case kComplex128: return {kDLComplex, bits, 1};
  }
  raise<TypeError>("__dlpack__: unsupported dtype {}", name(dtype));
}

ScalarType dtype_from_dl(DLDataType t) {
  auto unsupported = [&]() -> ScalarType {
    raise<TypeError>("from_dlpack: unsupported DLPack dtype (code {}, bits {}, lanes {}); Tessera supports bool, "
                     "uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64 and complex128", int(t.code),
                     int(t.bits), int(t.lanes));
  };
  if (t.lanes != 1) return unsupported();
  switch (t.code) {
    case kDLBool: return t.bits == 8 ? kBool : unsupported();
    case kDLUInt: return t.bits == 8 ? kUInt8 : unsupported();
    case kDLInt:
      switch (t.bits) {
        case 8: return kInt8;
        case 16: return kInt16;
        case 32: return kInt32;
        case 64: return kInt64;
        default: return unsupported();
      }
    case kDLFloat:
      switch (t.bits) {
        case 16: return kFloat16;
        case 32: return kFloat32;
        case 64: return kFloat64;
        default: return unsupported();
      }
    case kDLBfloat: return t.bits == 16 ? kBFloat16 : unsupported();
    case kDLComplex: return t.bits == 64 ? kComplex64 : t.bits == 128 ? kComplex128 : unsupported();
    default: return unsupported();
  }
}

std::string dl_device_name(int32_t type) {
  switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLVPI: return "kDLVPI";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLExtDev: return "kDLExtDev";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    case kDLOneAPI: return "kDLOneAPI";
    case kDLWebGPU: return "kDLWebGPU";
    case kDLHexagon: return "kDLHexagon";
    case kDLMAIA: return "kDLMAIA";
    default: return "unknown";
  }
}

// The DLPack device of a tensor: CPU, or the DLPack type a device plugin's name stands for.
std::pair<int32_t, int32_t> dl_device_of(const Tensor& t) {
  const Device d = t.device();
  if (d.is_cpu()) return {kDLCPU, 0};
  const std::string type = d.type_name();
  if (type == "cuda") return {kDLCUDA, d.index()};
  if (type == "rocm" || type == "hip") return {kDLROCM, d.index()};
  return {kDLExtDev, d.index()};
}

// What a producer's managed tensor points at: the tensor (a reference) and its geometry.
template <class Managed>
struct Export {
  Managed managed{};  // first: manager_ctx points at this struct
  Tensor tensor;
  std::vector<int64_t> shape, strides;

  static void deleter(Managed* self) { delete static_cast<Export*>(self->manager_ctx); }

  explicit Export(Tensor t) : tensor(std::move(t)) {
    shape.assign(tensor.sizes().begin(), tensor.sizes().end());
    strides.assign(tensor.strides().begin(), tensor.strides().end());
    managed.manager_ctx = this;
    managed.deleter = &Export::deleter;
    DLTensor& dl = managed.dl_tensor;
    dl.data = tensor.impl()->data();  // element 0, as NumPy and PyTorch export (byte_offset 0)
    dl.device = {kDLCPU, 0};
    dl.ndim = int32_t(shape.size());
    dl.dtype = dl_dtype(tensor.dtype());
    dl.shape = shape.data();
    dl.strides = strides.data();
    dl.byte_offset = 0;
  }
};

// Capsule destructor: frees the managed tensor unless a consumer took it (renamed the capsule).
template <class Managed>
void capsule_destructor(PyObject* capsule) {
  constexpr bool versioned = std::is_same_v<Managed, DLManagedTensorVersioned>;
  const char* name = versioned ? "dltensor_versioned" : "dltensor";
  if (!PyCapsule_IsValid(capsule, name)) return;  // "used_dltensor[_versioned]": the consumer owns it
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (managed && managed->deleter) managed->deleter(managed);
  else PyErr_WriteUnraisable(capsule);
  PyErr_Restore(type, value, traceback);
}

template <class Managed>
py::capsule make_capsule(Tensor t, bool copied) {
  constexpr bool versioned = std::is_same_v<Managed, DLManagedTensorVersioned>;
  auto* e = new Export<Managed>(std::move(t));
  if constexpr (versioned) {
    e->managed.version = {kMajorVersion, kMinorVersion};
    e->managed.flags = copied ? DLPACK_FLAG_BITMASK_IS_COPIED : 0;
  }
  PyObject* capsule = PyCapsule_New(&e->managed, versioned ? "dltensor_versioned" : "dltensor",
                                    &capsule_destructor<Managed>);
  if (!capsule) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

py::sequence sequence_arg(py::handle h, const char* what) {
  if (!PySequence_Check(h.ptr()))
    raise<TypeError>("__dlpack__: {} must be a tuple, got {}", what, type_name(h));
  return py::reinterpret_borrow<py::sequence>(h);
}

py::object tensor_dlpack(const Tensor& t, py::handle stream, py::handle max_version, py::handle dl_device,
                         py::handle copy) {
  const auto [dev_type, dev_index] = dl_device_of(t);
  if (dev_type != kDLCPU)
    throw py::buffer_error(fmt::format("__dlpack__: tensors on device '{}' cannot be exported yet; only CPU tensors "
                                       "can (copy it with .cpu() first)", t.device().str()));
  if (!stream.is_none() && !(py::isinstance<py::int_>(stream) && stream.cast<int64_t>() == -1))
    raise<ValueError>("__dlpack__: stream must be None for a CPU tensor, got {}", std::string(py::repr(stream)));
  if (!dl_device.is_none()) {
    auto dev = sequence_arg(dl_device, "dl_device");
    if (dev.size() != 2 || dev[0].cast<int32_t>() != kDLCPU)
      throw py::buffer_error(fmt::format("__dlpack__: can't export a CPU tensor to DLPack device {}",
                                         std::string(py::repr(dl_device))));
  }
  bool versioned = false;
  if (!max_version.is_none()) {
    auto v = sequence_arg(max_version, "max_version");
    if (v.size() < 1) raise<ValueError>("__dlpack__: max_version must be a (major, minor) tuple");
    versioned = v[0].cast<int64_t>() >= 1;
  }
  const bool copied = !copy.is_none() && copy.cast<bool>();
  Tensor exported = t;
  if (copied) {
    GilRelease release;
    exported = tessera::clone(t);
  }
  if (versioned) return make_capsule<DLManagedTensorVersioned>(std::move(exported), copied);
  return make_capsule<DLManagedTensor>(std::move(exported), copied);
}

// A capsule Tessera itself exported: a new tensor over the exported tensor's storage (so that
// both share one Storage, version counter included), then the export is released.
template <class Managed>
Tensor take_own_export(py::handle capsule, Managed* managed, const char* used_name) {
  const TensorImpl* src = static_cast<Export<Managed>*>(managed->manager_ctx)->tensor.impl();
  Tensor alias(IntrusivePtr<TensorImpl>::adopt(
      new TensorImpl(src->storage(), src->dtype(), src->sizes(), src->strides(), src->storage_offset())));
  if (PyCapsule_SetName(capsule.ptr(), used_name) != 0) throw py::error_already_set();
  managed->deleter(managed);
  return alias;
}

// Takes over the managed tensor of a "dltensor" / "dltensor_versioned" capsule. Everything is
// checked before the capsule is renamed "used_...": a refused capsule stays the producer's.
Tensor tensor_from_capsule(py::handle capsule) {
  const char* cap_name = PyCapsule_GetName(capsule.ptr());
  if (!cap_name && PyErr_Occurred()) throw py::error_already_set();
  const std::string name_str = cap_name ? cap_name : "";
  const bool versioned = name_str == "dltensor_versioned";
  if (!versioned && name_str != "dltensor") {
    if (name_str == "used_dltensor" || name_str == "used_dltensor_versioned")
      raise<ValueError>("from_dlpack: this DLPack capsule was already consumed (a capsule can be used only once)");
    raise<TypeError>("from_dlpack: expected a DLPack capsule named 'dltensor' or 'dltensor_versioned', got '{}'",
                     name_str);
  }
  void* ptr = PyCapsule_GetPointer(capsule.ptr(), cap_name);
  if (!ptr) throw py::error_already_set();
  DLTensor* dl = nullptr;
  uint64_t flags = 0;
  if (versioned) {
    auto* m = static_cast<DLManagedTensorVersioned*>(ptr);
    if (m->version.major != kMajorVersion)
      throw py::buffer_error(fmt::format("from_dlpack: unsupported DLPack version {}.{} (Tessera reads {}.x)",
                                         m->version.major, m->version.minor, kMajorVersion));
    if (m->deleter == &Export<DLManagedTensorVersioned>::deleter)
      return take_own_export(capsule, m, "used_dltensor_versioned");
    dl = &m->dl_tensor;
    flags = m->flags;
  } else {
    auto* m = static_cast<DLManagedTensor*>(ptr);
    if (m->deleter == &Export<DLManagedTensor>::deleter) return take_own_export(capsule, m, "used_dltensor");
    dl = &m->dl_tensor;
  }
  if (dl->device.device_type != kDLCPU)
    throw py::buffer_error(fmt::format("from_dlpack: only CPU (kDLCPU) memory can be imported, got DLPack device "
                                       "{} ({}) index {}", dl_device_name(dl->device.device_type),
                                       int(dl->device.device_type), dl->device.device_id));
  const ScalarType dtype = dtype_from_dl(dl->dtype);
  const int64_t itemsize = tessera::itemsize(dtype);
  if (dl->ndim < 0) raise<ValueError>("from_dlpack: negative ndim {}", dl->ndim);
  if (dl->ndim > 0 && !dl->shape) raise<ValueError>("from_dlpack: shape is NULL for ndim {}", dl->ndim);
  std::vector<int64_t> sizes(dl->shape, dl->shape + dl->ndim);
  const std::vector<int64_t> dense = row_major_strides(sizes);
  std::vector<int64_t> strides = dl->strides ? std::vector<int64_t>(dl->strides, dl->strides + dl->ndim) : dense;
  for (int32_t d = 0; d < dl->ndim; ++d) {
    if (sizes[size_t(d)] < 0) raise<ValueError>("from_dlpack: negative size {} at dim {}", sizes[size_t(d)], d);
    if (sizes[size_t(d)] <= 1) strides[size_t(d)] = dense[size_t(d)];  // the stride of such a dim is never used
    else if (strides[size_t(d)] < 0)
      raise<ValueError>("from_dlpack: negative strides are not supported (stride {} at dim {}); copy the array "
                        "first", strides[size_t(d)], d);
  }
  char* data = static_cast<char*>(dl->data) + dl->byte_offset;
  if (reinterpret_cast<uintptr_t>(data) % uintptr_t(itemsize) != 0)
    raise<ValueError>("from_dlpack: the data pointer is not aligned to the element size ({} bytes)", itemsize);
  if (flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    warn(PyExc_UserWarning,
         "from_dlpack: the producer marked this tensor read-only, and Tessera does not support read-only tensors. "
         "The tensor shares the producer's memory: writing to it is undefined behaviour.");
  const Device cpu = cpu_device();
  const size_t nbytes = extent_bytes(sizes, strides, itemsize);
  std::function<void()> release;
  if (versioned) {
    auto* m = static_cast<DLManagedTensorVersioned*>(ptr);
    release = [m] { if (m->deleter) m->deleter(m); };
  } else {
    auto* m = static_cast<DLManagedTensor*>(ptr);
    release = [m] { if (m->deleter) m->deleter(m); };
  }
  Storage storage(IntrusivePtr<StorageImpl>::adopt(new StorageImpl(cpu, data, nbytes, std::move(release))));
  // From here on the storage owns the managed tensor.
  if (PyCapsule_SetName(capsule.ptr(), versioned ? "used_dltensor_versioned" : "used_dltensor") != 0)
    throw py::error_already_set();
  return make_tensor(std::move(storage), dtype, sizes, strides);
}

Tensor tensor_from_dlpack(py::handle obj) {
  if (PyCapsule_CheckExact(obj.ptr())) return tensor_from_capsule(obj);
  if (!py::hasattr(obj, "__dlpack__"))
    raise<TypeError>("from_dlpack: expected an object with __dlpack__ (a NumPy array, a tensor of another "
                     "library) or a DLPack capsule, got {}", type_name(obj));
  if (py::hasattr(obj, "__dlpack_device__")) {
    py::object dev_obj = obj.attr("__dlpack_device__")();
    if (!PySequence_Check(dev_obj.ptr()) || PySequence_Size(dev_obj.ptr()) != 2)
      raise<TypeError>("from_dlpack: {}.__dlpack_device__() must return a (device_type, device_id) tuple, got {}",
                       type_name(obj), std::string(py::repr(dev_obj)));
    auto dev = py::reinterpret_borrow<py::sequence>(dev_obj);
    const int32_t type = dev[0].cast<int32_t>();
    if (type != kDLCPU)
      throw py::buffer_error(fmt::format("from_dlpack: only CPU (kDLCPU) memory can be imported, got a {} on "
                                         "DLPack device {} ({}) index {}", type_name(obj), dl_device_name(type),
                                         type, std::string(py::str(dev[1]))));
  }
  py::object capsule;
  try {
    capsule = obj.attr("__dlpack__")(py::arg("max_version") = py::make_tuple(kMajorVersion, kMinorVersion));
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;  // a producer that predates DLPack 1.0: the legacy capsule
    capsule = obj.attr("__dlpack__")();
  }
  if (!PyCapsule_CheckExact(capsule.ptr()))
    raise<TypeError>("from_dlpack: {}.__dlpack__() returned {}, not a DLPack capsule", type_name(obj),
                     type_name(capsule));
  return tensor_from_capsule(capsule);
}

}  // namespace

void bind_interop(py::module_& m) {
  // _C.Tensor is a CPython heap type (tensor.cpp): methods are added to it with def_method.
  py::handle cls(reinterpret_cast<PyObject*>(tensor_type()));
  auto method = [&](const char* name, auto&& fn, const char* doc, auto... extra) {
    def_method(cls, name, std::forward<decltype(fn)>(fn), extra..., doc);
  };
  method("numpy", [](const Tensor& self) { return tensor_to_numpy(self); },
         "A NumPy array sharing this tensor's memory (CPU tensors only; writes show on both sides).");
  method("__array__",
         [](const Tensor& self, py::handle dtype, py::handle copy) { return tensor_array(self, dtype, copy); },
         "NumPy's array protocol: a view of the tensor's memory, converted or copied when asked.",
         py::arg("dtype") = py::none(), py::arg("copy") = py::none());
  method("__dlpack__",
         [](const Tensor& self, py::handle stream, py::handle max_version, py::handle dl_device, py::handle copy) {
           return tensor_dlpack(self, stream, max_version, dl_device, copy);
         },
         "A DLPack capsule over this tensor: 'dltensor_versioned' (DLPack 1.0) when max_version >= (1, 0), "
         "else the legacy 'dltensor'.",
         py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
         py::arg("dl_device") = py::none(), py::arg("copy") = py::none());
  method("__dlpack_device__",
         [](const Tensor& self) {
           auto [type, index] = dl_device_of(self);
           return py::make_tuple(type, index);
         },
         "The (DLPack device type, index) of this tensor: (1, 0) for the CPU.");

  m.def("from_numpy", &tensor_from_numpy, py::arg("ndarray"),
        "A tensor sharing the memory of a NumPy array (which it keeps alive).");
  m.def("from_dlpack", &tensor_from_dlpack, py::arg("ext_tensor"),
        "A tensor sharing the memory of a DLPack capsule or of an object with __dlpack__ (zero-copy, CPU only).");
}

}  // namespace tessera::python
