// libtessera_nccl.so: the "nccl" process-group backend (ABI 1.7) for CUDA tensors. Collectives
// are queued on the caller's current CUDA stream (the host's native_stream), so they order with
// the kernels around them; a work handle is an event recorded after them. The communicator is
// non-blocking: every wait polls NCCL's asynchronous error and ends at its timeout, aborting the
// communicator, instead of hanging on a peer that never came.
#include <tessera/sdk/collective_names.h>
#include <tessera/sdk/plugin.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tessera::nccl_backend {
namespace {

using Clock = std::chrono::steady_clock;

struct Failure : std::runtime_error {
  ts_status status;
  Failure(ts_status s, const std::string& m) : std::runtime_error(m), status(s) {}
};
[[noreturn]] void fail(ts_status s, const std::string& m) { throw Failure(s, m); }

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(TS_ERROR, sdk::cat("nccl: ", what, ": ", cudaGetErrorString(e)));
}

struct Group {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 0, device = 0;
  int32_t cuda_type = -1;  // the host's device type id of "cuda"
  std::chrono::milliseconds timeout{600000};
  float* barrier_scratch = nullptr;
  bool aborted = false;

  // Waits for a non-blocking call to finish enqueueing (or the communicator to fail).
  void settle(ncclResult_t r, const char* what, Clock::time_point deadline) {
    while (r == ncclInProgress) {
      if (Clock::now() > deadline) {
        abort();
        fail(TS_ERROR, sdk::cat("nccl ", what, " (rank ", rank, " of ", size, ") timed out after ", timeout.count(),
                                " ms: a peer did not take part; the communicator was aborted"));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      ncclCommGetAsyncError(comm, &r);
    }
    if (r != ncclSuccess)
      fail(TS_ERROR, sdk::cat("nccl ", what, " (rank ", rank, " of ", size, "): ", ncclGetErrorString(r),
                              " (", ncclGetLastError(comm), ")"));
  }
  void abort() {
    if (comm && !aborted) ncclCommAbort(comm);
    aborted = true;
  }
};

struct Work {
  Group* group;
  cudaEvent_t done = nullptr;
  std::string what;
  std::chrono::milliseconds timeout;
};

void report(const std::string& m) { sdk::host().set_error(nullptr, m.c_str()); }

template <class F>
ts_status guarded(F&& f) noexcept {
  try {
    f();
    return TS_OK;
  } catch (const Failure& e) {
    report(e.what());
    return e.status;
  } catch (const std::exception& e) {
    report(sdk::cat("nccl: ", e.what()));
    return TS_ERROR;
  }
}

// The device this rank's communicator uses: LOCAL_RANK (set by launchers) modulo the devices.
int pick_device(int rank) {
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count < 1) fail(TS_ERROR, "nccl: no CUDA device is visible");
  const char* local = std::getenv("LOCAL_RANK");
  int hint = local && *local ? std::atoi(local) : rank;
  return hint % count;
}

ts_status create(void*, const ts_store* store, int32_t rank, int32_t size, int64_t timeout_ms, ts_process_group* out) {
  return guarded([&] {
    if (!store || !out || size < 1 || rank < 0 || rank >= size)
      fail(TS_ERROR_VALUE, sdk::cat("nccl: cannot create a group with rank ", rank, " and size ", size));
    auto g = std::make_unique<Group>();
    g->rank = rank;
    g->size = size;
    g->timeout = std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 600000);
    g->device = pick_device(rank);
    g->cuda_type = sdk::host().device_type_id("cuda");
    check_cuda(cudaSetDevice(g->device), "cudaSetDevice");
    // Rank 0 makes the communicator's id; the others read it from the store.
    ncclUniqueId id;
    if (rank == 0) {
      if (ncclGetUniqueId(&id) != ncclSuccess) fail(TS_ERROR, "nccl: ncclGetUniqueId failed");
      if (store->set(store->data, "nccl/unique_id", &id, sizeof id) != TS_OK) fail(TS_ERROR, "nccl: store set failed");
    } else {
      auto sink = [](void* dst, const void* value, size_t n) {
        if (n == sizeof(ncclUniqueId)) std::memcpy(dst, value, n);
      };
      if (store->get(store->data, "nccl/unique_id", timeout_ms, sink, &id) != TS_OK)
        throw Failure(TS_ERROR, sdk::cat("nccl: rank ", rank, " never got rank 0's communicator id (is rank 0 alive?)"));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const auto deadline = Clock::now() + g->timeout;
    g->settle(ncclCommInitRankConfig(&g->comm, size, id, rank, &config), "init", deadline);
    check_cuda(cudaMalloc(&g->barrier_scratch, sizeof(float)), "cudaMalloc");
    *out = reinterpret_cast<ts_process_group>(g.release());
  });
}

void destroy(void*, ts_process_group handle) {
  auto* g = reinterpret_cast<Group*>(handle);
  if (!g) return;
  g->abort();  // ends whatever is still queued; a clean finalize could wait on a dead peer
  if (g->barrier_scratch) cudaFree(g->barrier_scratch);
  if (g->comm) ncclCommDestroy(g->comm);
  delete g;
}

struct Buffer {
  void* data = nullptr;
  size_t numel = 0;
  int32_t dtype = 0;
  size_t itemsize = 0;
  size_t bytes() const { return numel * itemsize; }
};

Buffer buffer_of(const Group& g, ts_tensor t, const char* what) {
  sdk::TensorRef ref = sdk::TensorRef::borrow(t);
  if (ref.device().type != g.cuda_type || ref.device().index != g.device)
    fail(TS_ERROR_VALUE, sdk::cat("nccl ", what, ": this rank's communicator is on cuda:", g.device,
                                  ", got a tensor on another device (move it there, or set LOCAL_RANK)"));
  if (!ref.is_contiguous()) fail(TS_ERROR_VALUE, sdk::cat("nccl ", what, ": the tensor must be contiguous"));
  return {ref.data(), size_t(ref.numel()), ref.dtype(), size_t(ref.itemsize())};
}

// NCCL's element type for a reduction, with complex tensors as pairs of their real type.
ncclDataType_t reduce_type(Buffer& b, int32_t op, const char* what) {
  switch (b.dtype) {
    case TS_BOOL: case TS_UINT8: return ncclUint8;
    case TS_INT8: return ncclInt8;
    case TS_INT32: return ncclInt32;
    case TS_INT64: return ncclInt64;
    case TS_FLOAT16: return ncclFloat16;
    case TS_BFLOAT16: return ncclBfloat16;
    case TS_FLOAT32: return ncclFloat32;
    case TS_FLOAT64: return ncclFloat64;
    case TS_COMPLEX64: case TS_COMPLEX128:
      if (op != TS_REDUCE_SUM) fail(TS_ERROR_VALUE, sdk::cat("nccl ", what, ": complex tensors reduce with SUM only"));
      b.numel *= 2;
      return b.dtype == TS_COMPLEX64 ? ncclFloat32 : ncclFloat64;
  }
  fail(TS_ERROR_TYPE, sdk::cat("nccl ", what, ": NCCL cannot reduce dtype code ", b.dtype, " (int16 included)"));
}

ncclRedOp_t reduce_op(int32_t op, int32_t dtype) {
  if (dtype == TS_BOOL) return op == TS_REDUCE_SUM || op == TS_REDUCE_MAX ? ncclMax : ncclMin;  // any / all
  switch (op) {
    case TS_REDUCE_SUM: return ncclSum;
    case TS_REDUCE_PRODUCT: return ncclProd;
    case TS_REDUCE_MIN: return ncclMin;
    case TS_REDUCE_MAX: return ncclMax;
  }
  fail(TS_ERROR_VALUE, sdk::cat("nccl: unknown reduce op ", op));
}

ts_status start(void*, ts_process_group handle, const ts_collective* c, ts_work* out) {
  return guarded([&] {
    auto* g = reinterpret_cast<Group*>(handle);
    if (!g || !c || !out) fail(TS_ERROR_VALUE, "nccl: null group, collective or work pointer");
    if (g->aborted) fail(TS_ERROR, "nccl: the communicator was aborted after an earlier failure or timeout");
    const char* what = sdk::collective_name(c->kind);
    auto input = [&](int64_t i) {
      if (c->n_inputs <= i) fail(TS_ERROR_VALUE, sdk::cat("nccl ", what, " needs an input tensor"));
      return buffer_of(*g, c->inputs[i], what);
    };
    auto output = [&](int64_t i) {
      if (c->n_outputs <= i) fail(TS_ERROR_VALUE, sdk::cat("nccl ", what, " needs an output tensor"));
      return buffer_of(*g, c->outputs[i], what);
    };
    auto check_peer = [&](int peer) {
      if (peer < 0 || peer >= g->size || (peer == g->rank && (c->kind == TS_COLLECTIVE_SEND || c->kind == TS_COLLECTIVE_RECV)))
        fail(TS_ERROR_VALUE, sdk::cat("nccl ", what, ": rank ", peer, " is not a peer in a group of size ", g->size));
    };
    check_cuda(cudaSetDevice(g->device), "cudaSetDevice");
    ts_device dev{g->cuda_type, g->device};
    auto stream = static_cast<cudaStream_t>(sdk::host().native_stream(dev, sdk::host().current_stream(dev)));
    auto work = std::make_unique<Work>();
    work->group = g;
    work->what = what;
    work->timeout = std::chrono::milliseconds(c->timeout_ms > 0 ? c->timeout_ms : g->timeout.count());
    const auto deadline = Clock::now() + work->timeout;
    auto run = [&](ncclResult_t r) { g->settle(r, what, deadline); };
    switch (c->kind) {
      case TS_COLLECTIVE_ALL_REDUCE: {
        Buffer b = input(0);
        auto type = reduce_type(b, c->reduce_op, what);
        run(ncclAllReduce(b.data, b.data, b.numel, type, reduce_op(c->reduce_op, b.dtype), g->comm, stream));
        break;
      }
      case TS_COLLECTIVE_REDUCE: {
        check_peer(c->root);
        Buffer b = input(0);
        auto type = reduce_type(b, c->reduce_op, what);
        run(ncclReduce(b.data, b.data, b.numel, type, reduce_op(c->reduce_op, b.dtype), c->root, g->comm, stream));
        break;
      }
      case TS_COLLECTIVE_BROADCAST: {
        check_peer(c->root);
        Buffer b = input(0);
        run(ncclBroadcast(b.data, b.data, b.bytes(), ncclUint8, c->root, g->comm, stream));
        break;
      }
      case TS_COLLECTIVE_ALL_GATHER: {
        Buffer in = input(0), o = output(0);
        if (o.bytes() != in.bytes() * size_t(g->size))
          fail(TS_ERROR_VALUE, sdk::cat("nccl all_gather: the output holds ", o.bytes(), " bytes, expected ",
                                        in.bytes() * size_t(g->size)));
        run(ncclAllGather(in.data, o.data, in.bytes(), ncclUint8, g->comm, stream));
        break;
      }
      case TS_COLLECTIVE_REDUCE_SCATTER: {
        Buffer in = input(0), o = output(0);
        if (in.bytes() != o.bytes() * size_t(g->size))
          fail(TS_ERROR_VALUE, sdk::cat("nccl reduce_scatter: the input holds ", in.bytes(), " bytes, expected ",
                                        o.bytes() * size_t(g->size)));
        auto type = reduce_type(o, c->reduce_op, what);
        run(ncclReduceScatter(in.data, o.data, o.numel, type, reduce_op(c->reduce_op, o.dtype), g->comm, stream));
        break;
      }
      case TS_COLLECTIVE_GATHER:
      case TS_COLLECTIVE_SCATTER:
      case TS_COLLECTIVE_ALL_TO_ALL: {
        // Point-to-point pairs in one NCCL group: rank r's block goes to / comes from rank r.
        const bool gather = c->kind == TS_COLLECTIVE_GATHER, scatter = c->kind == TS_COLLECTIVE_SCATTER;
        if (gather || scatter) check_peer(c->root);
        const bool root = (gather || scatter) && g->rank == c->root;
        Buffer in = (scatter && !root) ? Buffer{} : input(0);
        Buffer o = (gather && !root) ? Buffer{} : output(0);
        std::vector<size_t> send(size_t(g->size), 0), recv(size_t(g->size), 0);
        for (int r = 0; r < g->size; ++r) {
          if (c->kind == TS_COLLECTIVE_ALL_TO_ALL) {
            send[r] = (c->input_splits ? size_t(c->input_splits[r]) : in.numel / size_t(g->size)) * in.itemsize;
            recv[r] = (c->output_splits ? size_t(c->output_splits[r]) : o.numel / size_t(g->size)) * o.itemsize;
          } else if (gather) {
            send[r] = r == c->root ? in.bytes() : 0;
            recv[r] = root ? in.bytes() : 0;
          } else {
            send[r] = root ? o.bytes() : 0;
            recv[r] = r == c->root ? o.bytes() : 0;
          }
        }
        run(ncclGroupStart());
        size_t send_at = 0, recv_at = 0;
        for (int r = 0; r < g->size; ++r) {
          auto* src = static_cast<char*>(in.data) + (gather ? 0 : send_at);
          auto* dst = static_cast<char*>(o.data) + recv_at;
          if (r == g->rank) {
            if (send[r] && recv[r]) check_cuda(cudaMemcpyAsync(dst, src, recv[r], cudaMemcpyDeviceToDevice, stream), "copy");
          } else {
            if (send[r]) run(ncclSend(src, send[r], ncclUint8, r, g->comm, stream));
            if (recv[r]) run(ncclRecv(dst, recv[r], ncclUint8, r, g->comm, stream));
          }
          send_at += send[r];
          recv_at += recv[r];
        }
        run(ncclGroupEnd());
        break;
      }
      case TS_COLLECTIVE_BARRIER:
        run(ncclAllReduce(g->barrier_scratch, g->barrier_scratch, 1, ncclFloat32, ncclSum, g->comm, stream));
        break;
      case TS_COLLECTIVE_SEND: {
        check_peer(c->root);
        Buffer b = input(0);
        run(ncclSend(b.data, b.bytes(), ncclUint8, c->root, g->comm, stream));
        break;
      }
      case TS_COLLECTIVE_RECV: {
        if (c->root < 0) fail(TS_ERROR_NOT_IMPLEMENTED, "nccl recv: receiving from any rank is not supported");
        check_peer(c->root);
        Buffer b = output(0);
        run(ncclRecv(b.data, b.bytes(), ncclUint8, c->root, g->comm, stream));
        break;
      }
      default:
        fail(TS_ERROR_VALUE, sdk::cat("nccl: unknown collective kind ", c->kind));
    }
    check_cuda(cudaEventCreateWithFlags(&work->done, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(work->done, stream), "cudaEventRecord");
    *out = reinterpret_cast<ts_work>(work.release());
  });
}

ts_status work_wait(void*, ts_work handle, int64_t timeout_ms) {
  return guarded([&] {
    auto* w = reinterpret_cast<Work*>(handle);
    if (!w) fail(TS_ERROR_VALUE, "nccl: null work");
    const auto limit = timeout_ms >= 0 ? std::chrono::milliseconds(timeout_ms) : w->timeout;
    const auto deadline = Clock::now() + limit;
    for (;;) {
      cudaError_t e = cudaEventQuery(w->done);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) check_cuda(e, "cudaEventQuery");
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(w->group->comm, &async);
      if (async != ncclSuccess && async != ncclInProgress)
        fail(TS_ERROR, sdk::cat("nccl ", w->what, " (rank ", w->group->rank, " of ", w->group->size, "): ",
                                ncclGetErrorString(async)));
      if (Clock::now() > deadline) {
        w->group->abort();
        fail(TS_ERROR, sdk::cat("nccl ", w->what, " (rank ", w->group->rank, " of ", w->group->size, ") timed out after ",
                                limit.count(), " ms: a peer did not take part; the communicator was aborted"));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
}

int32_t work_is_completed(void*, ts_work handle) {
  auto* w = reinterpret_cast<Work*>(handle);
  return w && cudaEventQuery(w->done) != cudaErrorNotReady ? 1 : 0;
}

void work_release(void*, ts_work handle) {
  auto* w = reinterpret_cast<Work*>(handle);
  if (!w) return;
  if (w->done) cudaEventDestroy(w->done);
  delete w;
}

void register_nccl(sdk::Registrar& reg) {
  ts_process_group_backend desc{};
  desc.struct_size = sizeof desc;
  desc.name = "nccl";
  desc.device_types = "cuda";
  desc.create = create;
  desc.destroy = destroy;
  desc.start = start;
  desc.work_wait = work_wait;
  desc.work_is_completed = work_is_completed;
  desc.work_release = work_release;
  reg.process_group_backend(desc);
}

}  // namespace
}  // namespace tessera::nccl_backend

// Needs host ABI 1.7 (process-group backends, native streams).
TESSERA_PLUGIN("nccl", "0.1.0", 7, tessera::nccl_backend::register_nccl)
