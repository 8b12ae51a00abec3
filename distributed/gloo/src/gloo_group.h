#pragma once
// One process group on Gloo's TCP transport: the ranks' full mesh of connections, and a worker
// thread that runs the group's collectives in the order they were started (every rank starts them
// in the same order, which is what lets Gloo match them up).
#include <tessera/abi.h>

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera::gloo_backend {

// What `work_wait` and `work_is_completed` look at: set once by whoever ran the collective.
struct Work {
  std::mutex mutex;
  std::condition_variable finished_cv;
  bool finished = false;
  std::string error;  // empty: completed
  std::string what;   // "all_reduce", for messages
  std::chrono::milliseconds timeout{0};
  std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;  // send/recv: the posted buffer
  std::atomic<int> source_rank{-1};  // a finished recv: the rank its data came from

  void finish(std::string failure);
  // TS_OK when finished without error; otherwise the message is in *message.
  ts_status wait(std::chrono::milliseconds timeout, std::string* message);
  bool is_finished();
};

// The bytes [begin, end) a collective reads or writes.
struct ByteRange {
  uintptr_t begin, end;
};

// A byte range of a contiguous tensor, with its element type.
struct Buffer {
  void* data = nullptr;
  int64_t numel = 0;
  int32_t dtype = 0;
  int64_t itemsize = 0;
  int64_t bytes() const { return numel * itemsize; }
};

class Group {
 public:
  Group(std::shared_ptr<::gloo::Context> context, int rank, int size);
  ~Group();

  // Checks the arguments (throws std::invalid_argument with the message) and queues the work.
  std::shared_ptr<Work> start(const ts_collective& c);
  // Fails queued work and lets the running one end on its own (its peers time out or close).
  void shut_down();

  // What the group's threads share; it outlives the Group while a thread is still blocked in Gloo.
  struct State;

 private:
  // Queues `run`, which gets the collective's tag (taken now, in start order).
  void enqueue(std::shared_ptr<Work> work, std::vector<ByteRange> ranges, bool exclusive,
               std::function<void(uint32_t tag)> run);
  static constexpr int kWorkers = 2;

  std::shared_ptr<::gloo::Context> context_;
  int rank_;
  int size_;
  std::shared_ptr<State> state_;
  std::vector<std::thread> workers_;  // run collectives, taken in start order
  std::thread waiter_;  // waits for posted send/recv buffers in the order they were posted
};

}  // namespace tessera::gloo_backend
