// _C._save_safetensors / _C._load_safetensors: the C++ half of ts.save / ts.load
// (tessera/_serialization.py flattens nested containers into names + metadata).
#include "bindings.h"
#include "convert.h"

#include <tessera/checksum.h>
#include <tessera/safetensors.h>

#include <pybind11/stl.h>

#include <string>
#include <utility>

namespace py = pybind11;

namespace tessera::python {

namespace {

// FileError -> OSError(errno, message, filename): Python picks FileNotFoundError, PermissionError...
template <class F>
auto with_os_errors(F&& f) {
  try {
    return f();
  } catch (const FileError& e) {
    py::object args = py::make_tuple(e.error_code(), std::string(e.what()), e.path());
    PyErr_SetObject(PyExc_OSError, args.ptr());
    throw py::error_already_set();
  }
}

}  // namespace

void bind_serialization(py::module_& m) {
  m.def(
      "_save_safetensors",
      [](const std::string& path, const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
        with_os_errors([&] {
          GilRelease unlocked;
          save_safetensors(path, tensors, metadata);
          return 0;
        });
      },
      py::arg("path"), py::arg("tensors"), py::arg("metadata") = SafetensorsMetadata{},
      "Writes [(name, tensor), ...] and a str->str metadata dict to `path` in the safetensors format, atomically "
      "(a temporary file, fsync, rename). ValueError for bad names, OSError when the file cannot be written.");
  m.def(
      "_load_safetensors",
      [](const std::string& path) {
        SafetensorsContents contents = with_os_errors([&] {
          GilRelease unlocked;
          return load_safetensors_contents(path);
        });
        return py::make_tuple(py::cast(contents.tensors), py::cast(contents.metadata));
      },
      py::arg("path"),
      "Reads a safetensors file: ([(name, cpu tensor), ...] in header order, metadata dict). ValueError naming the "
      "file, the tensor and the problem for a malformed file; OSError when it cannot be read.");
  m.def(
      "_parse_safetensors",
      [](py::bytes data) {
        std::string_view bytes = data;
        SafetensorsContents contents = parse_safetensors_contents(
            std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()), "<bytes>");
        return py::make_tuple(py::cast(contents.tensors), py::cast(contents.metadata));
      },
      py::arg("data"), "Like _load_safetensors, from the bytes of a whole file.");
  m.def(
      "_part_checksum",
      [](py::bytes data) {
        std::string_view bytes = data;
        GilRelease unlocked;
        return part_checksum(bytes.data(), bytes.size());
      },
      py::arg("data"), "The checksum an export archive keeps of a part: 'xxh3-128:<32 hex digits>'.");
}

}  // namespace tessera::python
