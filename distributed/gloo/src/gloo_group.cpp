#include "gloo_group.h"

#include "reduce_functions.h"

#include <tessera/sdk/collective_names.h>
#include <tessera/sdk/plugin.h>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <vector>

namespace tessera::gloo_backend {


void Work::finish(std::string failure) {
  {
    std::lock_guard lock(mutex);
    if (finished) return;
    finished = true;
    error = std::move(failure);
  }
  finished_cv.notify_all();
}

ts_status Work::wait(std::chrono::milliseconds limit, std::string* message) {
  std::unique_lock lock(mutex);
  if (!finished_cv.wait_for(lock, limit, [&] { return finished; })) {
    *message = sdk::cat(what, " timed out after ", limit.count(), " ms: a peer did not take part in time");
    return TS_ERROR;
  }
  if (error.empty()) return TS_OK;
  *message = error;
  return TS_ERROR;
}

bool Work::is_finished() {
  std::lock_guard lock(mutex);
  return finished;
}

namespace {

Buffer buffer_of(ts_tensor t) {
  sdk::TensorRef ref = sdk::TensorRef::borrow(t);
  if (!ref.is_contiguous()) throw std::invalid_argument("the host passed a non-contiguous tensor");
  Buffer b;
  b.data = ref.data();
  b.numel = ref.numel();
  b.dtype = ref.dtype();
  b.itemsize = ref.itemsize();
  return b;
}

// Gloo sees complex tensors as pairs of their real dtype; only SUM keeps its meaning there.
Buffer as_reducible(Buffer b, int32_t op) {
  if (b.dtype == TS_COMPLEX64 || b.dtype == TS_COMPLEX128) {
    if (op != TS_REDUCE_SUM) throw std::invalid_argument("Gloo reduces complex tensors with SUM (and AVG) only");
    b.dtype = b.dtype == TS_COMPLEX64 ? TS_FLOAT32 : TS_FLOAT64;
    b.numel *= 2;
    b.itemsize /= 2;
  }
  return b;
}

// Runs `fn` with T a type of `itemsize` bytes, so Gloo counts elements of the right width.
template <class Fn>
void with_element_type(int64_t itemsize, Fn&& fn) {
  switch (itemsize) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
  }
  throw std::invalid_argument(sdk::cat("element size ", itemsize, " is not supported"));
}

}  // namespace

struct Group::State {
  int rank = 0;
  int size = 0;
  std::mutex mutex;
  std::condition_variable queued_cv;
  struct Job {
    std::shared_ptr<Work> work;
    std::function<void(uint32_t tag)> run;
    uint32_t tag = 0;
    std::vector<ByteRange> ranges;  // the tensors' bytes it reads or writes
    bool exclusive = false;         // a barrier: runs alone, after every collective started before it
  };
  std::deque<Job> collectives;
  std::deque<std::shared_ptr<Work>> posted;  // send/recv awaiting completion
  bool stopping = false;
  uint32_t collective_count = 0;  // under the mutex
  std::map<uint32_t, std::vector<ByteRange>> running;  // by tag
  bool exclusive_running = false;

  // Every rank starts the same collectives in the same order, so a counter taken when one is
  // started tells them apart (and matches them across ranks however the workers interleave); the
  // top bit keeps them clear of the user's send/recv tags.
  uint32_t next_collective_tag() { return 0x80000000u | (collective_count++ & 0x7fffffffu); }
  // The queue's front may start: no barrier is running, a barrier only when nothing is, and no
  // running collective touches its tensors' bytes (async work on one tensor stays in order).
  bool front_can_start() const {
    const Job& j = collectives.front();
    if (exclusive_running || (j.exclusive && !running.empty())) return false;
    for (const auto& [tag, ranges] : running)
      for (const ByteRange& a : ranges)
        for (const ByteRange& b : j.ranges)
          if (a.begin < b.end && b.begin < a.end) return false;
    return true;
  }
  std::string failure(const Work& w, const char* why) const {
    return sdk::cat(w.what, " failed in Gloo (rank ", rank, " of ", size, "): ", why);
  }
};

namespace {

// kWorkers of these take collectives in start order, so one bucket's all-reduce can run while the
// next is exchanged (as torch's ProcessGroupGloo runs two); front_can_start keeps what must be
// ordered in order.
void run_collectives(std::shared_ptr<Group::State> s) {
  for (;;) {
    Group::State::Job job;
    {
      std::unique_lock lock(s->mutex);
      s->queued_cv.wait(lock, [&] { return s->stopping || (!s->collectives.empty() && s->front_can_start()); });
      if (s->stopping) return;
      job = std::move(s->collectives.front());
      s->collectives.pop_front();
      s->running.emplace(job.tag, job.ranges);
      s->exclusive_running = job.exclusive;
    }
    try {
      job.run(job.tag);
      job.work->finish({});
    } catch (const std::exception& e) {
      job.work->finish(s->failure(*job.work, e.what()));
    }
    {
      std::lock_guard lock(s->mutex);
      s->running.erase(job.tag);
      if (job.exclusive) s->exclusive_running = false;
    }
    s->queued_cv.notify_all();
  }
}

void wait_for_posted(std::shared_ptr<Group::State> s) {
  for (;;) {
    std::shared_ptr<Work> work;
    {
      std::unique_lock lock(s->mutex);
      s->queued_cv.wait(lock, [&] { return s->stopping || !s->posted.empty(); });
      if (s->posted.empty()) return;
      work = s->posted.front();
      s->posted.pop_front();
    }
    try {
      if (work->what == "send") {
        work->buffer->waitSend(work->timeout);
      } else {
        int source = -1;
        work->buffer->waitRecv(&source, work->timeout);
        work->source_rank = source;
      }
      work->finish({});
    } catch (const std::exception& e) {
      work->finish(s->failure(*work, e.what()));
    }
  }
}

}  // namespace

Group::Group(std::shared_ptr<::gloo::Context> context, int rank, int size)
    : context_(std::move(context)), rank_(rank), size_(size), state_(std::make_shared<State>()) {
  state_->rank = rank;
  state_->size = size;
  for (int i = 0; i < kWorkers; ++i) workers_.emplace_back(run_collectives, state_);
  waiter_ = std::thread(wait_for_posted, state_);
}

Group::~Group() {
  shut_down();
  // A thread still blocked in Gloo (a peer that died mid-collective) ends with Gloo's own
  // timeout, holding the state; the process must not wait for it here.
  for (std::thread& w : workers_)
    if (w.joinable()) w.detach();
  if (waiter_.joinable()) waiter_.detach();
}

void Group::shut_down() {
  std::deque<State::Job> dropped;
  std::deque<std::shared_ptr<Work>> posted;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopping) return;
    state_->stopping = true;
    dropped.swap(state_->collectives);
    posted.swap(state_->posted);
  }
  state_->queued_cv.notify_all();
  for (auto& job : dropped) job.work->finish(sdk::cat(job.work->what, " was abandoned: the process group was destroyed"));
  for (auto& w : posted) {
    w->buffer->abortWaitSend();
    w->buffer->abortWaitRecv();
    w->finish(sdk::cat(w->what, " was abandoned: the process group was destroyed"));
  }
}

void Group::enqueue(std::shared_ptr<Work> work, std::vector<ByteRange> ranges, bool exclusive,
                    std::function<void(uint32_t tag)> run) {
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopping) throw std::runtime_error("the process group was destroyed");
    const uint32_t tag = state_->next_collective_tag();
    state_->collectives.push_back({std::move(work), std::move(run), tag, std::move(ranges), exclusive});
  }
  state_->queued_cv.notify_all();
}

std::shared_ptr<Work> Group::start(const ts_collective& c) {
  auto work = std::make_shared<Work>();
  work->what = sdk::collective_name(c.kind);
  work->timeout = std::chrono::milliseconds(c.timeout_ms > 0 ? c.timeout_ms : 600000);
  const auto timeout = work->timeout;
  auto input = [&](int64_t i) {
    if (c.n_inputs <= i) throw std::invalid_argument(sdk::cat(work->what, " needs an input tensor"));
    return buffer_of(c.inputs[i]);
  };
  auto output = [&](int64_t i) {
    if (c.n_outputs <= i) throw std::invalid_argument(sdk::cat(work->what, " needs an output tensor"));
    return buffer_of(c.outputs[i]);
  };
  auto check_root = [&] {
    if (c.root < 0 || c.root >= size_)
      throw std::invalid_argument(sdk::cat(work->what, ": rank ", c.root, " is not in the group of size ", size_));
  };
  auto context = context_;
  const int rank = rank_, size = size_;
  std::vector<ByteRange> ranges;
  for (int64_t i = 0; i < c.n_inputs + c.n_outputs; ++i) {
    ts_tensor t = i < c.n_inputs ? c.inputs[i] : c.outputs[i - c.n_inputs];
    if (!t) continue;
    const Buffer b = buffer_of(t);
    const auto begin = reinterpret_cast<uintptr_t>(b.data);
    ranges.push_back({begin, begin + uintptr_t(b.bytes())});
  }

  switch (c.kind) {
    case TS_COLLECTIVE_ALL_REDUCE:
    case TS_COLLECTIVE_REDUCE: {
      Buffer b = as_reducible(input(0), c.reduce_op);
      auto fn = reduce_function(b.dtype, c.reduce_op);
      const bool all = c.kind == TS_COLLECTIVE_ALL_REDUCE;
      if (!all) check_root();
      const int root = c.root;
      enqueue(work, ranges, false, [=](uint32_t tag) {
        if (b.numel == 0) return;
        with_element_type(b.itemsize, [&](auto t) {
          using T = decltype(t);
          if (all) {
            ::gloo::AllreduceOptions opts(context);
            opts.setOutput(static_cast<T*>(b.data), size_t(b.numel));
            opts.setReduceFunction(fn);
            opts.setTag(tag);
            opts.setTimeout(timeout);
            // Gloo's bcube (recursive halving and doubling) takes fewer, larger steps than its ring:
            // ahead below about 32 MB of traffic (size x bytes), behind above it (benchmarks/distributed.py).
            if (b.bytes() * size <= (int64_t(32) << 20)) opts.setAlgorithm(::gloo::AllreduceOptions::Algorithm::BCUBE);
            ::gloo::allreduce(opts);
          } else {
            // Gloo uses every rank's buffer as scratch; only the root's tensor may change.
            std::vector<uint8_t> scratch;
            void* target = b.data;
            if (rank != root) {
              scratch.assign(static_cast<uint8_t*>(b.data), static_cast<uint8_t*>(b.data) + b.bytes());
              target = scratch.data();
            }
            ::gloo::ReduceOptions opts(context);
            opts.setOutput(static_cast<T*>(target), size_t(b.numel));
            opts.setRoot(root);
            opts.setReduceFunction(fn);
            opts.setTag(tag);
            opts.setTimeout(timeout);
            ::gloo::reduce(opts);
          }
        });
      });
      break;
    }
    case TS_COLLECTIVE_BROADCAST: {
      check_root();
      Buffer b = input(0);
      const int root = c.root;
      enqueue(work, ranges, false, [=](uint32_t tag) {
        if (b.bytes() == 0) return;
        ::gloo::BroadcastOptions opts(context);
        opts.setOutput(static_cast<uint8_t*>(b.data), size_t(b.bytes()));
        opts.setRoot(root);
        opts.setTag(tag);
        opts.setTimeout(timeout);
        ::gloo::broadcast(opts);
      });
      break;
    }
    case TS_COLLECTIVE_ALL_GATHER:
    case TS_COLLECTIVE_GATHER: {
      Buffer in = input(0);
      const bool all = c.kind == TS_COLLECTIVE_ALL_GATHER;
      if (!all) check_root();
      const bool receives = all || rank == c.root;
      Buffer out = receives ? output(0) : Buffer{};
      if (receives && out.bytes() != in.bytes() * size)
        throw std::invalid_argument(sdk::cat(work->what, ": the output holds ", out.bytes(), " bytes, expected ",
                                             in.bytes() * size, " (", size, " ranks x ", in.bytes(), ")"));
      const int root = c.root;
      enqueue(work, ranges, false, [=](uint32_t tag) {
        if (in.bytes() == 0) return;
        if (all) {
          ::gloo::AllgatherOptions opts(context);
          opts.setInput(static_cast<uint8_t*>(in.data), size_t(in.bytes()));
          opts.setOutput(static_cast<uint8_t*>(out.data), size_t(out.bytes()));
          opts.setTag(tag);
          opts.setTimeout(timeout);
          ::gloo::allgather(opts);
        } else {
          ::gloo::GatherOptions opts(context);
          opts.setInput(static_cast<uint8_t*>(in.data), size_t(in.bytes()));
          if (receives) opts.setOutput(static_cast<uint8_t*>(out.data), size_t(out.bytes()));
          opts.setRoot(root);
          opts.setTag(tag);
          opts.setTimeout(timeout);
          ::gloo::gather(opts);
        }
      });
      break;
    }
    case TS_COLLECTIVE_SCATTER: {
      check_root();
      Buffer out = output(0);
      const bool sends = rank == c.root;
      Buffer in = sends ? input(0) : Buffer{};
      if (sends && in.bytes() != out.bytes() * size)
        throw std::invalid_argument(sdk::cat("scatter: the input holds ", in.bytes(), " bytes, expected ",
                                             out.bytes() * size, " (", size, " ranks x ", out.bytes(), ")"));
      const int root = c.root;
      enqueue(work, ranges, false, [=](uint32_t tag) {
        if (out.bytes() == 0) return;
        ::gloo::ScatterOptions opts(context);
        if (sends) {
          std::vector<uint8_t*> blocks;
          for (int r = 0; r < size; ++r) blocks.push_back(static_cast<uint8_t*>(in.data) + r * out.bytes());
          opts.setInputs(blocks, size_t(out.bytes()));
        }
        opts.setOutput(static_cast<uint8_t*>(out.data), size_t(out.bytes()));
        opts.setRoot(root);
        opts.setTag(tag);
        opts.setTimeout(timeout);
        ::gloo::scatter(opts);
      });
      break;
    }
    case TS_COLLECTIVE_REDUCE_SCATTER: {
      // All-reduce a copy of the whole input, keep this rank's block: what torch's Gloo does too.
      Buffer in = as_reducible(input(0), c.reduce_op);
      Buffer out = as_reducible(output(0), c.reduce_op);
      if (in.bytes() != out.bytes() * size)
        throw std::invalid_argument(sdk::cat("reduce_scatter: the input holds ", in.bytes(), " bytes, expected ",
                                             out.bytes() * size, " (", size, " ranks x ", out.bytes(), ")"));
      auto fn = reduce_function(in.dtype, c.reduce_op);
      enqueue(work, ranges, false, [=](uint32_t tag) {
        if (in.bytes() == 0) return;
        std::vector<uint8_t> whole(static_cast<uint8_t*>(in.data), static_cast<uint8_t*>(in.data) + in.bytes());
        with_element_type(in.itemsize, [&](auto t) {
          using T = decltype(t);
          ::gloo::AllreduceOptions opts(context);
          opts.setOutput(reinterpret_cast<T*>(whole.data()), size_t(in.numel));
          opts.setReduceFunction(fn);
          opts.setTag(tag);
          opts.setTimeout(timeout);
          ::gloo::allreduce(opts);
        });
        std::memcpy(out.data, whole.data() + rank * out.bytes(), size_t(out.bytes()));
      });
      break;
    }
    case TS_COLLECTIVE_ALL_TO_ALL: {
      Buffer in = input(0), out = output(0);
      if (in.itemsize != out.itemsize) throw std::invalid_argument("all_to_all: input and output dtypes differ");
      auto splits = [&](const int64_t* given, const Buffer& b, const char* which) {
        std::vector<int64_t> bytes(static_cast<size_t>(size), 0);
        int64_t total = 0;
        for (int r = 0; r < size; ++r) {
          int64_t n = given ? given[r] : b.numel / size;
          if (n < 0) throw std::invalid_argument(sdk::cat("all_to_all: ", which, " split ", r, " is negative"));
          bytes[r] = n * b.itemsize;
          total += n;
        }
        if (!given && b.numel % size)
          throw std::invalid_argument(sdk::cat("all_to_all: the ", which, " of ", b.numel,
                                               " elements does not split evenly over ", size, " ranks"));
        if (total != b.numel)
          throw std::invalid_argument(sdk::cat("all_to_all: the ", which, " splits add up to ", total,
                                               " elements, the tensor holds ", b.numel));
        return bytes;
      };
      auto in_bytes = splits(c.input_splits, in, "input");
      auto out_bytes = splits(c.output_splits, out, "output");
      enqueue(work, ranges, false, [=](uint32_t tag) {
        ::gloo::AlltoallvOptions opts(context);
        opts.setInput(static_cast<uint8_t*>(in.data), in_bytes);
        opts.setOutput(static_cast<uint8_t*>(out.data), out_bytes);
        opts.setTag(tag);
        opts.setTimeout(timeout);
        ::gloo::alltoallv(opts);
      });
      break;
    }
    case TS_COLLECTIVE_BARRIER:
      enqueue(work, ranges, true, [=](uint32_t tag) {
        ::gloo::BarrierOptions opts(context);
        opts.setTag(tag);
        opts.setTimeout(timeout);
        ::gloo::barrier(opts);
      });
      break;
    case TS_COLLECTIVE_SEND:
    case TS_COLLECTIVE_RECV: {
      const bool send = c.kind == TS_COLLECTIVE_SEND;
      if (send || c.root != -1) check_root();
      if (c.root == rank) throw std::invalid_argument(sdk::cat(work->what, ": rank ", rank, " cannot ", work->what, " to itself"));
      if (c.tag < 0) throw std::invalid_argument(sdk::cat(work->what, ": the tag must be >= 0, got ", c.tag));
      Buffer b = send ? input(0) : output(0);
      work->buffer = context->createUnboundBuffer(b.data, size_t(b.bytes()));
      if (send) {
        work->buffer->send(c.root, uint64_t(c.tag));
      } else if (c.root >= 0) {
        work->buffer->recv(c.root, uint64_t(c.tag));
      } else {
        std::vector<int> everyone;
        for (int r = 0; r < size; ++r)
          if (r != rank) everyone.push_back(r);
        work->buffer->recv(everyone, uint64_t(c.tag));
      }
      {
        std::lock_guard lock(state_->mutex);
        if (state_->stopping) throw std::runtime_error("the process group was destroyed");
        state_->posted.push_back(work);
      }
      state_->queued_cv.notify_all();
      break;
    }
    default:
      throw std::invalid_argument(sdk::cat("unknown collective kind ", c.kind));
  }
  return work;
}

}  // namespace tessera::gloo_backend
