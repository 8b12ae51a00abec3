#include "device_checks.h"

#include <tessera/device_registry.h>
#include <tessera/stream.h>

#include <functional>

namespace tessera::conformance {

namespace {
Tensor numbered(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double(i) * 0.5 - 7;
  return tensor_from_values(v, {n}, kFloat32);
}

// Runs one check: an exception or a false result is a failure with its message.
DeviceCheck run_check(std::string name, const std::function<std::string()>& body) {
  DeviceCheck c{std::move(name)};
  try {
    std::string problem = body();
    c.passed = problem.empty();
    c.detail = problem;
  } catch (const std::exception& e) {
    c.passed = false;
    c.detail = e.what();
  }
  return c;
}

std::string same_values(const Tensor& got, const Tensor& want, const char* what) {
  if (got.to_double_vector() != want.to_double_vector()) return fmt::format("{}: the values changed", what);
  return {};
}
}  // namespace

std::vector<DeviceCheck> check_device_functions(Device device) {
  const ts_device_desc& d = DeviceRegistry::instance().require(device.type()).desc;
  const Device cpu;
  const Tensor host = numbered(1000);
  std::vector<DeviceCheck> checks;
  checks.push_back(run_check("copies: host -> device -> host", [&] {
    return same_values(to_device(to_device(host, device), cpu), host, "round trip");
  }));
  if (!d.stream_create) {
    checks.push_back({"streams and events", true, "not offered: the device is synchronous"});
  } else {
    checks.push_back(run_check("streams: create, make current, synchronize, query", [&]() -> std::string {
      Stream s = Stream::create(device);
      Tensor back;
      {
        StreamGuard guard(s);
        if (!(Stream::current(device) == s)) return "the created stream is not current inside its guard";
        back = to_device(to_device(host, device), cpu);
      }
      if (!Stream::current(device).is_default()) return "the default stream is not current after the guard";
      s.synchronize();
      if (!s.query()) return "query() is false after synchronize()";
      return same_values(back, host, "copies on the stream");
    }));
    checks.push_back(run_check("events: record, synchronize, query, elapsed_time", [&]() -> std::string {
      Stream s = Stream::create(device);
      Event start(true), end(true);
      start.record(s);
      { StreamGuard guard(s); to_device(host, device); }
      end.record(s);
      end.synchronize();
      if (!end.query()) return "query() is false after synchronize()";
      double ms = start.elapsed_time(end);
      if (!(ms >= 0)) return fmt::format("elapsed_time gave {} ms", ms);
      return {};
    }));
    checks.push_back(run_check("events: a stream waits for another stream's event", [&]() -> std::string {
      Stream producer = Stream::create(device), consumer = Stream::create(device);
      Tensor on_device;
      { StreamGuard guard(producer); on_device = to_device(host, device); }
      Event ready;
      ready.record(producer);
      consumer.wait(ready);
      Tensor back;
      { StreamGuard guard(consumer); back = to_device(on_device, cpu); }
      consumer.synchronize();
      return same_values(back, host, "read on the consumer stream");
    }));
  }
  if (!d.record_stream) {
    checks.push_back({"record_stream", true, "not offered: the allocator is not stream-ordered"});
  } else {
    checks.push_back(run_check("record_stream", [&]() -> std::string {
      Stream s = Stream::create(device);
      Tensor t = to_device(host, device);
      record_stream(t, s);
      t = Tensor();  // freed while "in use" on s: must not be handed out before s is done
      Tensor again = to_device(host, device);
      s.synchronize();
      return same_values(to_device(again, cpu), host, "after a recorded free");
    }));
  }
  if (!d.host_allocate) {
    checks.push_back({"pinned memory and non-blocking copies", true, "not offered"});
  } else {
    checks.push_back(run_check("pinned memory and non-blocking copies", [&]() -> std::string {
      Tensor pinned = pin_memory(host, DeviceRegistry::instance().name_of(device.type()));
      if (!is_pinned(pinned)) return "pin_memory returned a tensor that is not pinned";
      Stream s = Stream::create(device);
      Tensor back;
      {
        StreamGuard guard(s);
        back = to_device(to_device(pinned, device, true), cpu, true);
      }
      s.synchronize();
      if (d.copy_to_host_async && !is_pinned(back)) return "a non-blocking copy to the host did not land in pinned memory";
      return same_values(back, host, "non-blocking round trip");
    }));
  }
  return checks;
}

}  // namespace tessera::conformance
