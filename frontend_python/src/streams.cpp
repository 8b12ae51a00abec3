// tessera.Stream, tessera.Event and the tensor functions that go with them (record_stream,
// pin_memory, non-blocking device moves): the Python face of core/include/tessera/stream.h.
#include "bindings.h"
#include "convert.h"

#include <tessera/runtime.h>
#include <tessera/stream.h>

#include <fmt/format.h>

#include <optional>
#include <vector>

namespace py = pybind11;

namespace tessera::python {

namespace {
// A Stream plus the streams it replaced as current, so `with stream:` nests.
struct PyStream {
  Stream stream;
  std::vector<Stream> replaced;
};

struct PyEvent {
  Event event;
  std::optional<Device> device;  // where record() without a stream records
};

Device stream_device(py::handle device, const char* who) {
  if (device.is_none())
    throw py::value_error(fmt::format("{}: pass a device, e.g. 'cuda' or a plugin's device name", who));
  return to_device(device);
}

std::string stream_repr(const Stream& s) {
  return fmt::format("<tessera.Stream device={} stream_id={:#x} priority={}>", s.device().str(),
                     reinterpret_cast<uintptr_t>(s.handle()), s.priority());
}

PyStream wrap_stream(Stream s) { return PyStream{std::move(s), {}}; }
}  // namespace

void bind_streams(py::module_& m) {
  py::class_<PyStream>(m, "Stream",
                       "An ordered queue of work on one device. Work launched while a stream is current "
                       "(`with stream:` or tessera.set_stream) is queued on it.")
      .def(py::init([](py::handle device, int32_t priority) {
             return wrap_stream(Stream::create(stream_device(device, "Stream"), priority));
           }),
           py::arg("device") = py::none(), py::arg("priority") = 0,
           "A new stream on `device` (lower priority numbers are more urgent; 0 is normal).")
      .def_property_readonly("device", [](const PyStream& s) { return device_object(s.stream.device(), true); })
      .def_property_readonly("priority", [](const PyStream& s) { return s.stream.priority(); })
      .def_property_readonly("stream_id", [](const PyStream& s) { return reinterpret_cast<uintptr_t>(s.stream.handle()); })
      .def("synchronize", [](const PyStream& s) {
             py::gil_scoped_release release;
             s.stream.synchronize();
           }, "Waits until the work queued on this stream so far has finished.")
      .def("query", [](const PyStream& s) { return s.stream.query(); },
           "True when all work queued on this stream has finished.")
      .def("wait_event", [](const PyStream& s, const PyEvent& e) { s.stream.wait(e.event); }, py::arg("event"),
           "Work queued on this stream from now on starts after `event` completes.")
      .def("wait_stream", [](const PyStream& s, const PyStream& other) { s.stream.wait(other.stream); },
           py::arg("stream"), "Work queued on this stream from now on starts after what `stream` has queued so far.")
      .def("record_event", [](const PyStream& s, py::object event) -> py::object {
             if (!event.is_none()) {
               event.cast<PyEvent&>().event.record(s.stream);
               return event;
             }
             PyEvent e{Event(false), s.stream.device()};
             e.event.record(s.stream);
             return py::cast(std::move(e));
           }, py::arg("event") = py::none(), "Records `event` (a new one if None) on this stream and returns it.")
      .def("__enter__", [](PyStream& s) -> PyStream& {
             s.replaced.push_back(Stream::set_current(s.stream));
             return s;
           }, py::return_value_policy::reference)
      .def("__exit__", [](PyStream& s, py::args) {
             if (s.replaced.empty()) return;
             Stream::set_current(s.replaced.back());
             s.replaced.pop_back();
           })
      .def("__eq__", [](const PyStream& a, py::handle b) {
             return py::isinstance<PyStream>(b) && a.stream == b.cast<const PyStream&>().stream;
           })
      .def("__hash__", [](const PyStream& s) {
             return py::hash(py::make_tuple(s.stream.device().type(), s.stream.device().index(),
                                            reinterpret_cast<uintptr_t>(s.stream.handle())));
           })
      .def("__repr__", [](const PyStream& s) { return stream_repr(s.stream); });

  py::class_<PyEvent>(m, "Event",
                      "A marker in a stream's work: wait for it, query it, or time the work between two.")
      .def(py::init([](py::handle device, bool enable_timing, bool blocking, bool interprocess) {
             (void)blocking;  // waits here always block the calling thread until the event completes
             if (interprocess) throw py::value_error("Event: interprocess events are not supported");
             PyEvent e{Event(enable_timing), std::nullopt};
             if (!device.is_none()) e.device = to_device(device);
             return e;
           }),
           py::arg("device") = py::none(), py::kw_only(), py::arg("enable_timing") = false,
           py::arg("blocking") = false, py::arg("interprocess") = false)
      .def("record", [](PyEvent& e, py::object stream) {
             if (!stream.is_none()) {
               e.event.record(stream.cast<const PyStream&>().stream);
               return;
             }
             std::optional<Device> device = e.event.recorded() ? std::optional(e.event.device()) : e.device;
             if (!device)
               throw py::value_error("Event.record: pass a stream, or create the event with a device, so that the "
                                     "current stream of that device can be used");
             e.event.record(Stream::current(*device));
           }, py::arg("stream") = py::none(),
           "Marks the work queued so far on `stream` (default: the current stream of the event's device).")
      .def("query", [](const PyEvent& e) { return e.event.query(); },
           "True when the marked work has finished (and for an event never recorded).")
      .def("synchronize", [](const PyEvent& e) {
             py::gil_scoped_release release;
             e.event.synchronize();
           }, "Waits until the marked work has finished.")
      .def("elapsed_time", [](const PyEvent& e, const PyEvent& end) { return e.event.elapsed_time(end.event); },
           py::arg("end_event"), "Milliseconds from this event to `end_event` (both timed, recorded and completed).")
      .def("wait", [](const PyEvent& e, py::object stream) {
             if (!stream.is_none()) return stream.cast<const PyStream&>().stream.wait(e.event);
             if (!e.event.recorded()) return;
             Stream::current(e.event.device()).wait(e.event);
           }, py::arg("stream") = py::none(),
           "Work queued on `stream` (default: the current stream of the event's device) from now on starts after "
           "this event completes.")
      .def_property_readonly("device", [](const PyEvent& e) -> py::object {
             if (e.event.recorded()) return device_object(e.event.device(), true);
             return e.device ? device_object(*e.device, true) : py::none();
           })
      .def_property_readonly("enable_timing", [](const PyEvent& e) { return e.event.enable_timing(); })
      .def("__repr__", [](const PyEvent& e) {
             std::string where = e.event.recorded() ? e.event.device().str() : "not recorded";
             return fmt::format("<tessera.Event {} enable_timing={}>", where, e.event.enable_timing());
           });

  m.def("current_stream", [](py::handle device) { return wrap_stream(Stream::current(stream_device(device, "current_stream"))); },
        py::arg("device") = py::none(), "The calling thread's current stream of `device`.");
  m.def("default_stream", [](py::handle device) { return wrap_stream(Stream(stream_device(device, "default_stream"))); },
        py::arg("device") = py::none(), "The default stream of `device`.");
  m.def("set_stream", [](const PyStream& s) { Stream::set_current(s.stream); }, py::arg("stream"),
        "Makes `stream` the calling thread's current stream of its device.");
  m.def("synchronize", [](py::handle device) {
          Device d = stream_device(device, "synchronize");
          py::gil_scoped_release release;
          synchronize(d);
        }, py::arg("device") = py::none(), "Waits until all work queued on every stream of `device` has finished.");

  m.def("_to_device", [](py::handle t, py::handle device, bool non_blocking) {
    const tessera::Tensor& src = unwrap_tensor(t);
    tessera::Device d = to_device(device);
    py::gil_scoped_release release;
    return ::tessera::to_device(src, d, non_blocking);
  }, py::arg("tensor"), py::arg("device"), py::arg("non_blocking") = false,
        "A contiguous copy on another device through the two device plugins' copy functions.");
  m.def("_record_stream", [](const tessera::Tensor& t, const PyStream& s) { record_stream(t, s.stream); });
  m.def("_pin_memory", [](const tessera::Tensor& t, const std::string& device) { return pin_memory(t, device); });
  m.def("_is_pinned", [](const tessera::Tensor& t) { return is_pinned(t); });
}

}  // namespace tessera::python
