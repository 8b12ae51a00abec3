#include "device_workers.h"

#include "engine.h"

#include <atomic>

namespace tessera::autograd {
namespace {
std::atomic<uint64_t> total_run{0};
// Hosts before ABI 1.3 have no streams to pass on.
bool host_has_streams() { return TS_STRUCT_HAS(&sdk::host(), ts_host_api, set_current_stream); }
}  // namespace

DeviceWorkers::~DeviceWorkers() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  for (auto& [type, w] : workers_) w->wake.notify_all();
  for (auto& [type, w] : workers_) w->thread.join();
}

uint64_t DeviceWorkers::nodes_run() { return total_run.load(std::memory_order_relaxed); }

void DeviceWorkers::submit(int32_t device_type, Node* node, GradList grads) {
  if (workers_.empty()) {  // the first device node: what the workers run with is the caller's now
    call_ = sdk::current_call();
    sdk::host().tls_keys(&included_, &excluded_);
  }
  std::unique_ptr<Worker>& w = workers_[device_type];
  bool start = !w;
  if (start) w = std::make_unique<Worker>();
  ts_device device = node->input_meta[0].device;  // worker_device_type chose the worker by it
  ts_stream stream = host_has_streams() ? sdk::host().current_stream(device) : nullptr;
  {
    std::lock_guard lock(mutex_);
    w->tasks.push_back(Task{node, std::move(grads), device, stream});
  }
  ++in_flight_;
  if (start) w->thread = std::thread([this, worker = w.get()] { run(*worker); });
  else w->wake.notify_one();
}

void DeviceWorkers::run(Worker& worker) {
  sdk::current_call() = call_;  // errors and allocations are reported on the backward call
  sdk::host().set_tls_keys(included_, excluded_);
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      worker.wake.wait(lock, [&] { return closing_ || !worker.tasks.empty(); });
      if (closing_) return;
      task = std::move(worker.tasks.front());
      worker.tasks.pop_front();
    }
    Result r{task.node, {}, nullptr};
    try {
      if (host_has_streams() && task.stream != sdk::host().current_stream(task.device))
        sdk::check_host(sdk::host().set_current_stream(call_, task.device, task.stream));
      r.outputs = apply_node(task.node, std::move(task.grads));
    } catch (...) {
      r.error = std::current_exception();
    }
    total_run.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard lock(mutex_);
      results_.push_back(std::move(r));
    }
    finished_.notify_one();
  }
}

DeviceWorkers::Result DeviceWorkers::take(std::unique_lock<std::mutex>& lock) {
  Result r = std::move(results_.front());
  results_.pop_front();
  --in_flight_;
  if (r.error) {
    // Nothing may still run on the graph when the error unwinds the backward call.
    finished_.wait(lock, [&] { return results_.size() == in_flight_; });
    results_.clear();
    in_flight_ = 0;
    std::rethrow_exception(r.error);
  }
  return r;
}

std::optional<DeviceWorkers::Result> DeviceWorkers::poll() {
  if (in_flight_ == 0) return std::nullopt;
  std::unique_lock lock(mutex_);
  if (results_.empty()) return std::nullopt;
  return take(lock);
}

DeviceWorkers::Result DeviceWorkers::wait() {
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [&] { return !results_.empty(); });
  return take(lock);
}

}  // namespace tessera::autograd
