#pragma once
// The backward engine: runs the graph behind some roots, in dependency order.
#include "node.h"

namespace tessera::autograd {

struct BackwardOptions {
  bool keep_graph = false;    // retain_graph
  bool create_graph = false;  // record the backward itself (higher-order gradients)
  bool accumulate = true;     // into leaves' .grad (backward); false: capture only (autograd.grad)
  bool allow_unused = false;
};

// Runs backward from `roots` with their gradients `root_grads`. When `inputs` is not empty,
// returns the gradient that reaches each of them (undefined when none did); with `accumulate`
// only those inputs' .grad are updated (backward(inputs=...)).
std::vector<TensorRef> run_backward(const std::vector<TensorRef>& roots, std::vector<TensorRef> root_grads,
                                    const std::vector<TensorRef>& inputs, const BackwardOptions& options);

// Runs one node's formula (with anomaly mode's checks), on whichever thread calls it.
GradList apply_node(Node* n, GradList grads);

// Runs frontend hooks (callback ids) on a gradient in order; a hook returning None keeps it.
TensorRef run_hooks(const std::vector<int64_t>& ids, TensorRef grad);
// Runs a leaf's post-accumulate-grad hooks (callback ids) with the leaf, after its .grad changed.
void run_post_accumulate_hooks(const std::vector<int64_t>& ids, const TensorRef& leaf);
// Queues a frontend callback to run once the backward pass now running on this thread ends
// (torch's Variable._execution_engine.queue_callback). Throws outside a backward pass.
void queue_final_callback(int64_t id);

}  // namespace tessera::autograd
