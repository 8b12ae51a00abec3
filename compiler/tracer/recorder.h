#pragma once
// One capture in progress on one thread: the graph being built, the value id each traced
// tensor holds (in the tensor's Tracer extension slot), and the tensors lifted as constants.
#include <tessera/sdk/graph_ir.h>
#include <tessera/sdk/plugin.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tessera::tracer {

class Recorder {
 public:
  // `snapshot` copies a tensor without being recorded (a tensor the program filled from Python
  // data becomes a constant holding that data as it was).
  using Snapshot = std::function<sdk::TensorRef(ts_tensor)>;
  Recorder(uint64_t trace_id, Snapshot snapshot) : trace_id_(trace_id), snapshot_(std::move(snapshot)) {}

  // The next graph input.
  void add_input(ts_tensor t);
  // Records one operator call: `arguments` is the stack before the call (with the tensors'
  // version counters then), `stack` after it.
  void record(const char* op_name, const std::vector<ts_value>& arguments, const std::vector<uint64_t>& versions,
              const ts_stack* stack, bool grad_enabled);
  // Before a call: an argument whose sizes or strides changed since its value was recorded was
  // resized outside the dispatcher (an out= composite resizes through the host); record that as
  // a tracer::resize_ node so a replay resizes too.
  void record_resizes(const std::vector<ts_value>& arguments);
  // Finishes the graph with its outputs (and the inputs written in place) and serialises it.
  std::string finish(const std::vector<ts_tensor>& outputs);

  // The lifted constants, in the order of graph.constants.
  const std::vector<sdk::TensorRef>& constants() const { return constants_; }
  const std::vector<std::string>& data_dependent_reads() const { return reads_; }
  size_t node_count() const { return graph_.nodes.size(); }
  void note_data_dependent_read(std::string op) { reads_.push_back(std::move(op)); }

 private:
  // The value id a tensor holds in this trace, lifting it as a constant when it has none.
  int64_t value_of(ts_tensor t);
  int64_t new_value(ts_tensor t, sdk::graph::ValueKind kind);
  sdk::graph::Arg encode(const ts_value& v);
  // A read of a value an uninitialised factory (empty) made and no operator wrote: its contents
  // came from the host (ts.tensor([...]), a composite's scalar_tensor), so it becomes a constant
  // holding them, and the factory's node goes.
  void lift_host_written(sdk::graph::Node& node, const std::vector<ts_value>& arguments);
  int64_t lift(int64_t id, ts_tensor t, bool written_here);

 public:
  // Before a call: copies the arguments a lift may need, as they are before the call writes them.
  void snapshot_unwritten(const std::vector<ts_value>& arguments);

 private:
  std::map<int64_t, sdk::TensorRef> pending_snapshots_;

  // The latest value of each storage geometry (data, offset, sizes, strides, dtype): a tensor
  // the capture never saw that has one is an alias made outside the dispatcher (autograd's
  // saved tensors are such aliases of the outputs they save) and stands for that value.
  static std::string geometry_key(ts_tensor t);
  std::map<std::string, int64_t> by_geometry_;

  uint64_t trace_id_;
  sdk::graph::Graph graph_;
  std::vector<ts_tensor> input_tensors_;  // borrowed: the caller keeps its inputs alive
  std::vector<sdk::TensorRef> constants_;
  std::vector<std::string> reads_;
  Snapshot snapshot_;
  std::set<int64_t> unwritten_;  // outputs of empty* no operator has written yet
};

}  // namespace tessera::tracer
