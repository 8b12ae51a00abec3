#pragma once
// The device workers of one backward call: a thread per device type other than the CPU, started
// when the first node of that type is ready. A worker runs node formulas with the calling thread's
// call context, thread keys (grad mode) and current stream of the node's device (so backward
// work queues behind the forward work the caller queued there), and hands each result, or the
// error, back to the calling thread, which keeps every piece of the engine's bookkeeping to itself.
#include "node.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace tessera::autograd {

inline constexpr int32_t kCpuDeviceType = 0;

class DeviceWorkers {
 public:
  struct Result {
    Node* node = nullptr;
    GradList outputs;
    std::exception_ptr error;
  };

  DeviceWorkers() = default;  // nothing starts (or is captured) before the first submit
  ~DeviceWorkers();  // stops the workers (a node being run finishes first) and joins them
  DeviceWorkers(const DeviceWorkers&) = delete;
  DeviceWorkers& operator=(const DeviceWorkers&) = delete;

  void submit(int32_t device_type, Node* node, GradList grads);
  size_t in_flight() const { return in_flight_; }
  // A finished node if one is back (poll) or once one is (wait). A worker's error is rethrown
  // here, after every other node in flight came back.
  std::optional<Result> poll();
  Result wait();

  // Nodes run on device workers since the plugin loaded (a figure for tests and benchmarks).
  static uint64_t nodes_run();

 private:
  struct Task {
    Node* node;
    GradList grads;
    ts_device device;  // the node's, and the calling thread's current stream of it at submit
    ts_stream stream;
  };
  struct Worker {
    std::thread thread;
    std::deque<Task> tasks;
    std::condition_variable wake;
  };
  void run(Worker& worker);
  Result take(std::unique_lock<std::mutex>& lock);

  ts_call call_ = nullptr;  // the calling thread's call and thread keys, at the first submit
  ts_keyset included_ = 0, excluded_ = 0;
  std::mutex mutex_;
  std::condition_variable finished_;
  bool closing_ = false;
  std::map<int32_t, std::unique_ptr<Worker>> workers_;
  std::deque<Result> results_;
  size_t in_flight_ = 0;  // the calling thread's count: submitted and not yet taken back
};

}  // namespace tessera::autograd
