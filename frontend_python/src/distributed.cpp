// tessera._C's distributed part: stores, process groups and work handles over
// libtessera-distributed; tessera/distributed/ builds torch.distributed's API on them.
#include "bindings.h"
#include "convert.h"

#include <tessera/distributed/process_group.h>
#include <tessera/distributed/tcp_store.h>
#include <tessera/process_group_backend.h>

#include <pybind11/chrono.h>
#include <pybind11/stl.h>

namespace tessera::python {

namespace py = pybind11;
using namespace tessera::distributed;

namespace {

PyObject* g_dist_error = nullptr;
PyObject* g_store_error = nullptr;
PyObject* g_backend_error = nullptr;
PyObject* g_network_error = nullptr;

Bytes to_bytes(py::handle value) {
  if (py::isinstance<py::bytes>(value) || py::isinstance<py::bytearray>(value) || py::isinstance<py::memoryview>(value)) {
    std::string s = py::bytes(py::reinterpret_borrow<py::object>(value));
    return Bytes(s.begin(), s.end());
  }
  if (py::isinstance<py::str>(value)) {
    std::string s = value.cast<std::string>();
    return Bytes(s.begin(), s.end());
  }
  throw py::type_error("Store: a value must be str or bytes, got " + std::string(Py_TYPE(value.ptr())->tp_name));
}
py::bytes to_python(const Bytes& b) { return py::bytes(reinterpret_cast<const char*>(b.data()), b.size()); }

}  // namespace

void bind_distributed(py::module_& m) {
  g_dist_error = PyErr_NewExceptionWithDoc("tessera._C.DistError", "A distributed failure (a RuntimeError).",
                                           PyExc_RuntimeError, nullptr);
  g_store_error = PyErr_NewExceptionWithDoc("tessera._C.DistStoreError", "A store failed or timed out.", g_dist_error, nullptr);
  g_backend_error = PyErr_NewExceptionWithDoc("tessera._C.DistBackendError", "A collective failed or timed out.",
                                              g_dist_error, nullptr);
  g_network_error = PyErr_NewExceptionWithDoc("tessera._C.DistNetworkError", "A peer or store could not be reached.",
                                              g_dist_error, nullptr);
  m.add_object("DistError", py::handle(g_dist_error));
  m.add_object("DistStoreError", py::handle(g_store_error));
  m.add_object("DistBackendError", py::handle(g_backend_error));
  m.add_object("DistNetworkError", py::handle(g_network_error));
  // Registered after the general translator, so tried before it.
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const DistStoreError& e) {
      PyErr_SetString(g_store_error, e.what());
    } catch (const DistBackendError& e) {
      PyErr_SetString(g_backend_error, e.what());
    } catch (const DistNetworkError& e) {
      PyErr_SetString(g_network_error, e.what());
    } catch (const DistError& e) {
      PyErr_SetString(g_dist_error, e.what());
    }
  });

  py::class_<Store, std::shared_ptr<Store>> store(m, "Store", "A key-value store that every rank reaches.");
  store
      .def("set", [](Store& s, const std::string& key, py::handle value) {
        Bytes v = to_bytes(value);
        GilRelease nogil;
        s.set(key, v);
      }, py::arg("key"), py::arg("value"))
      .def("get", [](Store& s, const std::string& key) {
        Bytes v;
        {
          GilRelease nogil;
          v = s.get(key);
        }
        return to_python(v);
      }, py::arg("key"))
      .def("add", [](Store& s, const std::string& key, int64_t amount) {
        GilRelease nogil;
        return s.add(key, amount);
      }, py::arg("key"), py::arg("amount"))
      .def("compare_set", [](Store& s, const std::string& key, py::handle expected, py::handle desired) {
        Bytes e = to_bytes(expected), d = to_bytes(desired), now;
        {
          GilRelease nogil;
          now = s.compare_set(key, e, d);
        }
        return to_python(now);
      }, py::arg("key"), py::arg("expected_value"), py::arg("desired_value"))
      .def("check", [](Store& s, const std::vector<std::string>& keys) {
        GilRelease nogil;
        return s.check(keys);
      }, py::arg("keys"))
      .def("wait", [](Store& s, const std::vector<std::string>& keys, std::optional<Milliseconds> timeout) {
        GilRelease nogil;
        s.wait(keys, timeout.value_or(s.timeout()));
      }, py::arg("keys"), py::arg("timeout") = py::none())
      .def("delete_key", [](Store& s, const std::string& key) {
        GilRelease nogil;
        return s.delete_key(key);
      }, py::arg("key"))
      .def("num_keys", [](Store& s) {
        GilRelease nogil;
        return s.num_keys();
      })
      .def("set_timeout", [](Store& s, Milliseconds t) { s.set_timeout(t); }, py::arg("timeout"))
      .def_property_readonly("timeout", [](Store& s) { return s.timeout(); });

  m.def("_hash_store", [] { return make_hash_store(); });
  m.def("_prefix_store", [](const std::string& prefix, std::shared_ptr<Store> s) { return make_prefix_store(prefix, s); });
  m.def("_file_store", [](const std::string& path, int64_t world_size) {
    GilRelease nogil;
    return make_file_store(path, world_size);
  });
  py::class_<TCPStore, Store, std::shared_ptr<TCPStore>>(m, "_TCPStore")
      .def(py::init([](const std::string& host, int port, int64_t world_size, bool is_master, Milliseconds timeout,
                       bool wait_for_workers) {
        TCPStoreOptions o;
        o.port = port;
        o.is_master = is_master;
        o.world_size = world_size;
        o.wait_for_workers = wait_for_workers;
        o.timeout = timeout;
        GilRelease nogil;
        return std::make_shared<TCPStore>(host, o);
      }))
      .def_property_readonly("host", &TCPStore::host)
      .def_property_readonly("port", &TCPStore::port);

  py::class_<Work, std::shared_ptr<Work>>(m, "_Work")
      .def("wait", [](Work& w, int64_t timeout_ms) {
        GilRelease nogil;
        w.wait(Milliseconds(timeout_ms));
      }, py::arg("timeout_ms") = -1)
      .def("is_completed", [](Work& w) { return w.is_completed(); })
      .def("source_rank", &Work::source_rank)
      .def_property_readonly("name", &Work::name);

  py::class_<ProcessGroup, std::shared_ptr<ProcessGroup>>(m, "_ProcessGroup")
      .def(py::init([](const std::string& backend, std::shared_ptr<Store> store, int rank, int size, Milliseconds timeout) {
        GilRelease nogil;
        return std::make_shared<ProcessGroup>(backend, store, rank, size, timeout);
      }))
      .def("start", [](ProcessGroup& g, int kind, std::vector<Tensor> inputs, std::vector<Tensor> outputs, int op,
                       int root, int tag, std::vector<int64_t> input_splits, std::vector<int64_t> output_splits,
                       int64_t timeout_ms) {
        Collective c;
        c.kind = ts_collective_kind(kind);
        c.inputs = std::move(inputs);
        c.outputs = std::move(outputs);
        c.op = ReduceOp(op);
        c.root = root;
        c.tag = tag;
        c.input_splits = std::move(input_splits);
        c.output_splits = std::move(output_splits);
        c.timeout = Milliseconds(timeout_ms);
        GilRelease nogil;
        return g.start(c);
      })
      .def("shutdown", [](ProcessGroup& g) {
        GilRelease nogil;
        g.shutdown();
      })
      .def("operator_handle", &ProcessGroup::operator_handle)
      .def("rank", &ProcessGroup::rank)
      .def("size", &ProcessGroup::size)
      .def("name", &ProcessGroup::backend_name)
      .def_property("timeout", &ProcessGroup::timeout, &ProcessGroup::set_timeout);

  m.def("_process_group_backends", [] { return process_group_backend_names(); });
  m.def("_process_group_backend_devices", [](const std::string& name) {
    GilRelease nogil;
    return tessera::process_group_backend(name).device_types;
  });
}

}  // namespace tessera::python
