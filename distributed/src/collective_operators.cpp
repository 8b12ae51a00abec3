// The collectives as dispatcher operators (c10d::all_reduce_ and friends), so that what sees
// operators sees them: the tracer records them into ts.compile's graphs (a replay communicates
// again), the profiler shows them as operator events, autograd's fallback notes them. Each takes
// the group as the integer ProcessGroup::operator_handle() gives; its kernel, registered here at
// the backend keys of the devices the group's backend takes, starts the collective on that group
// and waits for it. tessera.distributed calls them for its synchronous tensor collectives.
#include <tessera/distributed/errors.h>
#include <tessera/distributed/process_group.h>

#include <tessera/device_registry.h>
#include <tessera/dispatcher.h>
#include <tessera/process_group_backend.h>
#include <tessera/runtime.h>

#include <fmt/format.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>

namespace tessera::distributed {
namespace {

struct GroupRegistry {
  std::shared_mutex mutex;
  std::map<int64_t, ProcessGroup*> groups;
  std::atomic<int64_t> next{1};
};
GroupRegistry& registry() {
  static GroupRegistry* r = new GroupRegistry;  // groups may outlive static teardown
  return *r;
}

// What each operator's arguments mean: tensors in schema order, then the integers.
struct CollectiveOperator {
  const char* schema;
  ts_collective_kind kind;
  bool has_input;      // (output, input) rather than one tensor written in place
  bool has_reduce_op;
  bool has_root;
  bool has_splits;
};

constexpr CollectiveOperator kOperators[] = {
    {"c10d::all_reduce_(Tensor(a!) tensor, int reduce_op, int group) -> Tensor(a!)", TS_COLLECTIVE_ALL_REDUCE,
     false, true, false, false},
    {"c10d::broadcast_(Tensor(a!) tensor, int root, int group) -> Tensor(a!)", TS_COLLECTIVE_BROADCAST, false, false,
     true, false},
    {"c10d::reduce_(Tensor(a!) tensor, int reduce_op, int root, int group) -> Tensor(a!)", TS_COLLECTIVE_REDUCE, false,
     true, true, false},
    {"c10d::all_gather_into_tensor_(Tensor(a!) output, Tensor input, int group) -> Tensor(a!)",
     TS_COLLECTIVE_ALL_GATHER, true, false, false, false},
    {"c10d::reduce_scatter_tensor_(Tensor(a!) output, Tensor input, int reduce_op, int group) -> Tensor(a!)",
     TS_COLLECTIVE_REDUCE_SCATTER, true, true, false, false},
    {"c10d::all_to_all_single_(Tensor(a!) output, Tensor input, int[] output_split_sizes, int[] input_split_sizes, "
     "int group) -> Tensor(a!)",
     TS_COLLECTIVE_ALL_TO_ALL, true, false, false, true},
    {"c10d::barrier(int group) -> ()", TS_COLLECTIVE_BARRIER, false, false, false, false},
};

Tensor borrowed(ts_tensor t) {
  from_handle(t)->retain();
  return Tensor::adopt(t);
}

std::vector<int64_t> ints(const ts_value& v) {
  return v.tag == TS_VALUE_INT_LIST ? std::vector<int64_t>(v.u.ints.data, v.u.ints.data + v.u.ints.size)
                                    : std::vector<int64_t>();
}

ts_status collective_kernel(void* data, ts_call call, ts_keyset, ts_stack* stack) noexcept {
  const auto& spec = *static_cast<const CollectiveOperator*>(data);
  try {
    int at = 0;
    Collective c;
    c.kind = spec.kind;
    Tensor written;
    if (spec.kind != TS_COLLECTIVE_BARRIER) {
      written = borrowed(stack->values[at++].u.tensor);
      if (spec.has_input) {
        c.outputs = {written};
        c.inputs = {borrowed(stack->values[at++].u.tensor)};
      } else {
        c.inputs = {written};
      }
    }
    if (spec.has_splits) {
      c.output_splits = ints(stack->values[at++]);
      c.input_splits = ints(stack->values[at++]);
    }
    if (spec.has_reduce_op) c.op = ReduceOp(stack->values[at++].u.i);
    if (spec.has_root) c.root = int(stack->values[at++].u.i);
    const int64_t handle = stack->values[at].u.i;
    std::shared_lock lock(registry().mutex);
    auto it = registry().groups.find(handle);
    if (it == registry().groups.end())
      throw ValueError(fmt::format("no process group has the handle {} (it was destroyed, or the number is not one "
                                   "ProcessGroup::operator_handle() gave)", handle));
    ProcessGroup& group = *it->second;
    lock.unlock();
    group.start(c)->wait();
    if (written.defined()) {
      stack->values[0].tag = TS_VALUE_TENSOR;
      stack->values[0].u.tensor = written.release_handle();
      stack->size = 1;
    } else {
      stack->size = 0;
    }
    return TS_OK;
  } catch (const ValueError& e) {
    host_api()->set_error(call, e.what());
    return TS_ERROR_VALUE;
  } catch (const std::exception& e) {
    host_api()->set_error(call, e.what());
    return TS_ERROR;
  }
}

// Defines the operators once, and registers their kernels at the backend key of each device type
// a backend takes (once per key).
void register_operators_for(const std::vector<std::string>& device_types) {
  static std::mutex mutex;
  static std::set<int32_t> registered;
  std::lock_guard lock(mutex);
  init();
  Dispatcher& dispatcher = Dispatcher::instance();
  for (const CollectiveOperator& spec : kOperators) {
    std::string_view schema(spec.schema);
    std::string name(schema.substr(0, schema.find('(')));
    if (dispatcher.find(name)) continue;
    dispatcher.def(schema, "distributed");
    // Autograd does not see them, as in torch (whose c10d operators have no autograd kernel): a
    // gradient flows past a collective as if it had not run. The differentiable collectives are
    // tessera.distributed.nn.functional's.
    for (DispatchKey key : {DispatchKey::AutogradCPU, DispatchKey::AutogradCUDA, DispatchKey::AutogradHIP,
                            DispatchKey::AutogradOther})
      dispatcher.register_fallthrough(name, int32_t(key), "distributed");
  }
  for (const std::string& type : device_types) {
    const int32_t key = DeviceRegistry::instance().backend_key(type);
    if (!registered.insert(key).second) continue;
    for (const CollectiveOperator& spec : kOperators) {
      std::string_view schema(spec.schema);
      dispatcher.register_kernel(schema.substr(0, schema.find('(')), key,
                                 KernelEntry{collective_kernel, const_cast<CollectiveOperator*>(&spec), "distributed",
                                             false});
    }
  }
}

}  // namespace

void register_collective_operators(ProcessGroup& group, const std::vector<std::string>& device_types) {
  register_operators_for(device_types);
  std::unique_lock lock(registry().mutex);
  group.operator_handle_ = registry().next++;
  registry().groups.emplace(group.operator_handle_, &group);
}

void unregister_collective_operators(ProcessGroup& group) {
  std::unique_lock lock(registry().mutex);
  registry().groups.erase(group.operator_handle_);
}

}  // namespace tessera::distributed
