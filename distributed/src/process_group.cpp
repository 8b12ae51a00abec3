#include <tessera/distributed/process_group.h>

#include <tessera/observer.h>
#include <tessera/process_group_backend.h>
#include <tessera/sdk/collective_names.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <mutex>

namespace tessera::distributed {


namespace {
// A profiler range around a collective's start and around its wait ("c10d::all_reduce"), as
// torch's profiler shows its c10d operators. One atomic load when nobody observes.
class CollectiveRange {
 public:
  explicit CollectiveRange(const std::string& name) : active_(observer() != nullptr) {
    if (active_) observe_range(0, name.c_str(), -1);
  }
  ~CollectiveRange() {
    if (active_) observe_range(1, "", -1);
  }

 private:
  bool active_;
};

// The message a backend (or the store it used) left with set_error(NULL, ...).
std::string backend_message(const std::string& fallback) {
  std::string said = take_backend_error();
  return said.empty() ? fallback : said;
}
}  // namespace

namespace {
// Works dropped while their collective still runs (an async_op handle never waited on, or still in
// flight at exit): the backend keeps reading and writing their tensors, so the handle and the
// tensors wait here until a later start() finds them finished. Never freed at exit: a thread of
// the backend may still be writing into them then.
struct ParkedWork {
  const ProcessGroupBackendEntry* backend;
  ts_work handle;
  std::vector<Tensor> tensors;
};
struct Parking {
  std::mutex mutex;
  std::vector<ParkedWork> works;
};
Parking& parking() {
  static Parking* p = new Parking;
  return *p;
}
void release_finished_parked_works() {
  std::vector<ParkedWork> finished;
  {
    auto& p = parking();
    std::lock_guard lock(p.mutex);
    std::vector<ParkedWork> running;
    for (auto& w : p.works) {
      const bool done = w.backend->desc.work_is_completed(w.backend->desc.backend_data, w.handle) != 0;
      (done ? finished : running).push_back(std::move(w));
    }
    p.works = std::move(running);
  }
  for (auto& w : finished) w.backend->desc.work_release(w.backend->desc.backend_data, w.handle);
}
}  // namespace

Work::~Work() {
  if (!handle_) return;
  if (!backend_->desc.work_is_completed(backend_->desc.backend_data, handle_)) {
    auto& p = parking();
    std::lock_guard lock(p.mutex);
    p.works.push_back({backend_, handle_, std::move(tensors_)});
    return;
  }
  backend_->desc.work_release(backend_->desc.backend_data, handle_);
}

void Work::wait(Milliseconds timeout) {
  CollectiveRange range("c10d::" + name_ + " (wait)");
  ts_status s = backend_->desc.work_wait(backend_->desc.backend_data, handle_, timeout.count());
  if (s != TS_OK)
    throw DistBackendError(fmt::format("{} on {}: {}", name_, group_text_, backend_message("the backend gave no message")));
}

bool Work::is_completed() { return backend_->desc.work_is_completed(backend_->desc.backend_data, handle_) != 0; }

int Work::source_rank() {
  const auto& d = backend_->desc;
  return d.work_source_rank ? d.work_source_rank(d.backend_data, handle_) : -1;
}

ProcessGroup::ProcessGroup(const std::string& backend, std::shared_ptr<Store> store, int rank, int size,
                           Milliseconds timeout)
    : backend_(&process_group_backend(backend)), store_(std::move(store)), rank_(rank), size_(size), timeout_(timeout) {
  if (!store_) throw ValueError("ProcessGroup: a store is needed to meet the other ranks, got None");
  if (size < 1 || rank < 0 || rank >= size)
    throw ValueError(fmt::format("ProcessGroup: rank {} is not in a world of size {} (expected 0 <= rank < size)", rank, size));
  ts_store view = store_->abi_view();
  take_backend_error();
  ts_status s = backend_->desc.create(backend_->desc.backend_data, &view, rank, size, timeout.count(), &handle_);
  if (s != TS_OK)
    throw DistBackendError(fmt::format("{}: could not create a process group (rank {} of {}): {}", backend, rank, size,
                                       backend_message("the backend gave no message")));
  register_collective_operators(*this, backend_->device_types);
}

ProcessGroup::~ProcessGroup() {
  unregister_collective_operators(*this);
  shutdown();
}

void ProcessGroup::shutdown() {
  if (handle_) backend_->desc.destroy(backend_->desc.backend_data, std::exchange(handle_, nullptr));
}

const std::string& ProcessGroup::backend_name() const { return backend_->name; }

std::shared_ptr<Work> ProcessGroup::start(const Collective& c) {
  release_finished_parked_works();
  const char* name = sdk::collective_name(c.kind);
  CollectiveRange range(std::string("c10d::") + name);
  if (!handle_) throw DistBackendError(fmt::format("{}: the process group was destroyed", name));
  std::shared_ptr<Work> work(new Work());
  work->backend_ = backend_;
  work->name_ = name;
  work->group_text_ = fmt::format("{} group (rank {} of {})", backend_->name, rank_, size_);
  auto take = [&](const std::vector<Tensor>& tensors, std::vector<ts_tensor>& handles, const char* role) {
    for (const Tensor& t : tensors) {
      if (!t.defined()) throw ValueError(fmt::format("{}: an undefined {} tensor", name, role));
      const std::string type = t.device().type_name();
      if (std::find(backend_->device_types.begin(), backend_->device_types.end(), type) == backend_->device_types.end())
        throw ValueError(fmt::format("{}: backend '{}' takes tensors on [{}], got a {} tensor on {}", name, backend_->name,
                                     fmt::join(backend_->device_types, ", "), role, t.device().str()));
      if (!t.is_contiguous())
        throw ValueError(fmt::format("{}: the {} tensor must be contiguous", name, role));
      work->tensors_.push_back(t);
      handles.push_back(t.handle());
    }
  };
  take(c.inputs, work->inputs_, "input");
  take(c.outputs, work->outputs_, "output");
  work->input_splits_ = c.input_splits;
  work->output_splits_ = c.output_splits;
  auto check_splits = [&](const std::vector<int64_t>& splits, const char* which) {
    if (!splits.empty() && int(splits.size()) != size_)
      throw ValueError(fmt::format("{}: {} has {} entries, expected one per rank ({})", name, which, splits.size(), size_));
  };
  check_splits(c.input_splits, "input_split_sizes");
  check_splits(c.output_splits, "output_split_sizes");

  if (c.kind == TS_COLLECTIVE_RECV && c.root == -1 && !backend_->desc.work_source_rank)
    throw ValueError(fmt::format("recv: backend '{}' cannot receive from any rank (src=None); name the sender",
                                 backend_->name));
  ts_collective args{};
  args.struct_size = sizeof args;
  args.kind = c.kind;
  args.reduce_op = int32_t(c.op);
  args.root = c.root;
  args.tag = c.tag;
  args.inputs = work->inputs_.data();
  args.n_inputs = int64_t(work->inputs_.size());
  args.outputs = work->outputs_.data();
  args.n_outputs = int64_t(work->outputs_.size());
  args.input_splits = work->input_splits_.empty() ? nullptr : work->input_splits_.data();
  args.output_splits = work->output_splits_.empty() ? nullptr : work->output_splits_.data();
  args.timeout_ms = (c.timeout.count() >= 0 ? c.timeout : timeout_).count();
  take_backend_error();
  ts_status s = backend_->desc.start(backend_->desc.backend_data, handle_, &args, &work->handle_);
  if (s != TS_OK) {
    std::string message = fmt::format("{}: {}", work->group_text_, backend_message("the backend refused it"));
    if (s == TS_ERROR_VALUE) throw ValueError(message);
    throw DistBackendError(message);
  }
  return work;
}

}  // namespace tessera::distributed
