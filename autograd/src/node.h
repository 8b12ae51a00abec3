#pragma once
// The backward graph: a Node per recorded operator, edges to the nodes of its inputs, and the
// tensors it saved for its backward formula.
#include "meta.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace tessera::autograd {

struct Edge {
  std::shared_ptr<Node> fn;  // null: this input does not need a gradient
  uint32_t input_nr = 0;     // which input of fn receives the gradient
  bool valid() const { return fn != nullptr; }
};

// Shape, dtype and device a gradient flowing into one input of a node must have.
struct InputMeta {
  std::vector<int64_t> shape;
  int32_t dtype = TS_FLOAT32;
  ts_device device{0, 0};
};

using GradList = std::vector<TensorRef>;

struct Node : std::enable_shared_from_this<Node> {
  Node();
  virtual ~Node();
  // Gradients of this node's outputs in, gradients of its inputs out (one per next edge).
  virtual GradList apply(GradList&& grads) = 0;
  virtual const char* name() const = 0;
  // The forward operator (for messages); empty for nodes not made by an operator.
  virtual const char* op_name() const { return ""; }
  // Drops saved tensors after a backward without retain_graph.
  virtual void release_saved() {}
  // True for a node whose one gradient goes into a region of zeros of its input's shape (slice,
  // narrow): apply() then returns a fresh tensor, and add_into_region can add `grad` into that
  // region of `into` in place instead, when the engine owns a buffer for the input already (the
  // pieces of a split then cost one region add each, not a zeros tensor and a full-size add).
  virtual bool region_gradient() const { return false; }
  virtual void add_into_region(const TensorRef& /*grad*/, TensorRef& /*into*/) {}
  bool should_compute(size_t i) const { return i < next_edges.size() && next_edges[i].valid(); }

  std::vector<Edge> next_edges;
  std::vector<InputMeta> input_meta;  // one per output of the forward operator
  uint64_t sequence_nr;               // later nodes run first among the ready ones
  // Frontend hooks (callback ids) on this node's inputs (= the forward outputs), by input number.
  std::vector<std::pair<uint32_t, int64_t>> pre_hooks;
  // Non-leaf tensors with retain_grad(): input number -> where the tensor keeps its .grad (weak:
  // the tensor may die before backward runs).
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorRef>>> retained;
  bool released = false;
};

// A leaf's gradient sink: accumulates into the leaf's .grad.
struct AccumulateGrad final : Node {
  explicit AccumulateGrad(TensorRef leaf);
  GradList apply(GradList&& grads) override;
  const char* name() const override { return "AccumulateGrad"; }
  TensorRef variable;
};

// A node for an operator without a derivative formula: backward through it is an error.
struct NotImplementedBackward final : Node {
  explicit NotImplementedBackward(std::string op) : op_(std::move(op)) {}
  GradList apply(GradList&&) override;
  const char* name() const override { return "NotImplemented"; }
  const char* op_name() const override { return op_.c_str(); }
  std::string op_;
};

// A tensor saved for backward. Inputs are held as they are (their history stays, so a
// create_graph backward differentiates through them); outputs are held as an alias without
// autograd state (holding the output itself would be a cycle) and get this node as grad_fn
// again when unpacked. The version at save time catches in-place changes made afterwards.
// What saved_tensors_hooks packed in place of a saved tensor: the key its hook pair's callback
// gave; released (callback mode 2) when the last copy goes.
struct PackedTensor;

class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const TensorRef& t, bool is_output);
  TensorRef unpack(Node* owner, const char* what) const;
  void reset() {
    data_ = TensorRef();
    packed_.reset();
    released_ = true;
  }
  bool defined() const { return defined_; }

 private:
  TensorRef data_;
  std::shared_ptr<PackedTensor> packed_;  // saved through a pack hook instead of data_
  uint64_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool is_output_ = false, defined_ = false, released_ = false;
};

// The edge a gradient for `t` flows along: its grad_fn, its leaf accumulator, or none.
Edge gradient_edge(ts_tensor t);
// Makes `node` the grad_fn of output `t` (output number `nr`), recording its input metadata.
void set_history(const TensorRef& t, const std::shared_ptr<Node>& node, uint32_t nr);
InputMeta input_meta_of(const TensorRef& t);

// A fresh view of `t` (same storage and geometry) with no autograd state: detach().
TensorRef alias_of(const TensorRef& t);

bool is_differentiable_dtype(int32_t dtype);

}  // namespace tessera::autograd
