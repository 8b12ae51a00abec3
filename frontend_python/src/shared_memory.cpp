// Tensor storage in shared memory (Tensor.share_memory_, tessera.multiprocessing): a CPU storage
// moves into an anonymous memory file (memfd_create) mapped MAP_SHARED, so a fork()ed child
// writes the parent's memory, and another process maps the same file from a duplicate of its
// descriptor (multiprocessing passes descriptors between processes: PyTorch's "file_descriptor"
// strategy). The file has no name, so nothing leaks when a process dies: the memory lives while
// some process maps it or holds a descriptor to it.
#include "bindings.h"
#include "convert.h"

#include <pybind11/stl.h>

#include <tessera/error.h>
#include <tessera/storage.h>
#include <tessera/tensor.h>
#include <tessera/tensor_impl.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace py = pybind11;

namespace tessera::python {
namespace {

// The memory file behind each shared storage's data pointer (is_shared, and the descriptor that
// pickling duplicates). Each mapping owns its descriptor and closes it when released.
struct Segments {
  std::mutex mutex;
  std::map<const void*, int> fds;
};
Segments& segments() {
  static Segments* s = new Segments;  // never destroyed: storages may be freed during interpreter exit
  return *s;
}

int fd_of(const void* data) {
  std::lock_guard lock(segments().mutex);
  auto it = segments().fds.find(data);
  return it == segments().fds.end() ? -1 : it->second;
}

[[noreturn]] void fail_errno(const char* what, int err, int fd_to_close) {
  if (fd_to_close >= 0) close(fd_to_close);
  raise<RuntimeError>("shared memory: {} failed: {}", what, std::strerror(err));
}

// Maps the memory file `fd` (at least nbytes long) and registers it under the mapping; takes
// ownership of fd. The release unmaps and closes.
std::pair<void*, std::function<void()>> map_file(int fd, size_t nbytes) {
  const size_t length = nbytes ? nbytes : 1;  // mmap refuses zero bytes
  struct stat st {};
  if (fstat(fd, &st) != 0) fail_errno("reading the size of a shared memory file", errno, fd);
  if (size_t(st.st_size) < length) {
    close(fd);
    raise<RuntimeError>("shared memory: the file holds {} bytes, expected at least {}", int64_t(st.st_size), length);
  }
  void* data = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) fail_errno("mapping a shared memory file", errno, fd);
  {
    std::lock_guard lock(segments().mutex);
    segments().fds[data] = fd;
  }
  auto release = [data, length, fd] {
    {
      std::lock_guard lock(segments().mutex);
      segments().fds.erase(data);
    }
    munmap(data, length);
    close(fd);
  };
  return {data, release};
}

const Tensor& cpu_tensor(py::handle h, const char* what) {
  const Tensor& t = unwrap_tensor(h);
  if (!t.device().is_cpu()) raise<RuntimeError>("{}: expected a CPU tensor, got one on {}", what, t.device().str());
  return t;
}

// Moves t's storage (so every view of it) into a new memory file; a no-op when it is in one.
void share_storage(py::handle h) {
  const Tensor& t = cpu_tensor(h, "share_memory_");
  StorageImpl* storage = t.impl()->storage().get();
  if (fd_of(storage->data()) >= 0) return;
  const int fd = memfd_create("tessera-tensor", MFD_CLOEXEC);
  if (fd < 0) fail_errno("memfd_create", errno, -1);
  if (ftruncate(fd, off_t(storage->nbytes() ? storage->nbytes() : 1)) != 0)
    fail_errno("sizing a shared memory file", errno, fd);
  auto [data, release] = map_file(fd, storage->nbytes());
  storage->move_to(data, std::move(release));
}

// A tensor over the memory file `fd` (a descriptor this call takes over) with the given geometry.
py::object open_shared(int fd, size_t nbytes, py::handle dtype, std::vector<int64_t> sizes,
                       std::vector<int64_t> strides, int64_t storage_offset) {
  const ScalarType type = to_scalar_type(dtype);
  // The geometry must stay inside the file: a corrupt handle raises instead of reading past it.
  bool fits = sizes.size() == strides.size() && storage_offset >= 0;
  bool empty = false;
  int64_t last = storage_offset;
  for (size_t d = 0; fits && d < sizes.size(); ++d) {
    fits = sizes[d] >= 0 && strides[d] >= 0;
    if (sizes[d] == 0) empty = true;
    else last += (sizes[d] - 1) * strides[d];
  }
  if (!fits || (!empty && size_t((last + 1) * itemsize(type)) > nbytes)) {
    close(fd);
    raise<ValueError>("_open_shared_memory: a geometry of {} sizes, {} strides and offset {} does not fit a shared "
                      "storage of {} bytes",
                      sizes.size(), strides.size(), storage_offset, nbytes);
  }
  static const Device cpu("cpu");
  auto [data, release] = map_file(fd, nbytes);
  Storage storage(IntrusivePtr<StorageImpl>::adopt(new StorageImpl(cpu, data, nbytes, std::move(release))));
  return wrap(Tensor(IntrusivePtr<TensorImpl>::adopt(
      new TensorImpl(std::move(storage), type, sizes, strides, storage_offset))));
}

}  // namespace

void bind_shared_memory(py::module_& m) {
  m.def("_share_memory", &share_storage, py::arg("tensor"),
        "Moves a CPU tensor's storage into shared memory (a no-op when it is there already).");
  m.def(
      "_shared_memory_handle",
      [](py::handle h) -> py::object {
        const Tensor& t = cpu_tensor(h, "_shared_memory_handle");
        const StorageImpl* storage = t.impl()->storage().get();
        const int fd = fd_of(storage->data());
        if (fd < 0) return py::none();
        return py::make_tuple(fd, storage->nbytes());
      },
      py::arg("tensor"),
      "(descriptor, storage bytes) of a shared tensor's memory file, or None; the descriptor stays the storage's.");
  m.def("_open_shared_memory", &open_shared, py::arg("fd"), py::arg("nbytes"), py::arg("dtype"), py::arg("sizes"),
        py::arg("strides"), py::arg("storage_offset"),
        "A tensor over the memory file `fd` (which the tensor's storage takes over), with the given dtype and "
        "geometry.");
}

}  // namespace tessera::python
