#pragma once
// A process group: `size` processes (ranks) that run collectives together through one backend
// plugin (Gloo for CPU tensors, NCCL for CUDA tensors, a vendor's), met through a shared store.
// This is the C++ side of torch.distributed's ProcessGroup; the Python frontend adds lists,
// non-contiguous tensors and AVG on top.
#include <tessera/abi.h>
#include <tessera/distributed/store.h>
#include <tessera/tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace tessera {
struct ProcessGroupBackendEntry;
}

namespace tessera::distributed {

enum class ReduceOp { Sum = TS_REDUCE_SUM, Product = TS_REDUCE_PRODUCT, Min = TS_REDUCE_MIN, Max = TS_REDUCE_MAX };

// A started collective. The tensors stay alive until the Work is gone.
class Work {
 public:
  ~Work();
  // Blocks until the collective finished (timeout < 0: its own timeout). Raises DistBackendError
  // with the backend's message when it failed or timed out.
  void wait(Milliseconds timeout = Milliseconds(-1));
  bool is_completed();
  // The group rank a finished receive from any rank got its data from; -1 otherwise.
  int source_rank();
  const std::string& name() const { return name_; }

 private:
  friend class ProcessGroup;
  Work() = default;
  const ProcessGroupBackendEntry* backend_ = nullptr;
  ts_work handle_ = nullptr;
  std::vector<Tensor> tensors_;
  std::vector<ts_tensor> inputs_, outputs_;
  std::vector<int64_t> input_splits_, output_splits_;
  std::string name_;
  std::string group_text_;
};

struct Collective {
  ts_collective_kind kind = TS_COLLECTIVE_ALL_REDUCE;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;   // root rank, or the peer of send/recv (-1: recv from any)
  int tag = 0;
  std::vector<int64_t> input_splits, output_splits;  // all-to-all, in elements
  Milliseconds timeout{-1};  // < 0: the group's
};

class ProcessGroup;
// Defines the c10d operators and registers their kernels for `device_types` (once), and gives
// `group` its operator handle; the destructor's counterpart takes it back.
void register_collective_operators(ProcessGroup& group, const std::vector<std::string>& device_types);
void unregister_collective_operators(ProcessGroup& group);

class ProcessGroup {
 public:
  // Meets the other ranks through `store` (keys under the backend's prefix; give each group its
  // own PrefixStore). Raises DistBackendError naming the ranks that never came.
  ProcessGroup(const std::string& backend, std::shared_ptr<Store> store, int rank, int size, Milliseconds timeout);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // Checks the tensors (contiguous, on a device the backend takes) and starts the collective.
  std::shared_ptr<Work> start(const Collective& c);
  // Ends the group: running collectives fail, later ones are refused.
  void shutdown();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& backend_name() const;
  Milliseconds timeout() const { return timeout_; }
  void set_timeout(Milliseconds t) { timeout_ = t; }
  // The integer that names this group to the collective operators (c10d::all_reduce_(tensor,
  // reduce_op, group) and friends; collective_operators.cpp), valid while the group lives.
  int64_t operator_handle() const { return operator_handle_; }

 private:
  friend void register_collective_operators(ProcessGroup&, const std::vector<std::string>&);
  friend void unregister_collective_operators(ProcessGroup&);
  int64_t operator_handle_ = 0;
  const ProcessGroupBackendEntry* backend_;
  ts_process_group handle_ = nullptr;
  std::shared_ptr<Store> store_;
  int rank_;
  int size_;
  Milliseconds timeout_;
};

}  // namespace tessera::distributed
