#pragma once
// A compiled graph: its schedule, the loaded fused kernels, and the operators of the nodes
// that stay dispatcher calls, resolved once. run() takes the graph's inputs followed by its
// constants and returns its outputs.
#include "cuda_runtime.h"
#include "fusion_plan.h"
#include "kernel_cache.h"

#include <tessera/sdk/plugin.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera::inductor {

class CompiledGraph {
 public:
  // `prebuilt`: a library built ahead of time for this graph, loaded instead of compiling.
  // `runtime_sizes`: kernels read sizes at run time (CodegenOptions::runtime_sizes).
  explicit CompiledGraph(sdk::graph::Graph graph, const std::string& prebuilt = "", bool runtime_sizes = false);
  std::vector<sdk::TensorRef> run(ts_call call, const std::vector<sdk::TensorRef>& arguments);
  // One paragraph for tests and explain(): kernels, dispatcher calls, the library.
  std::string describe() const;
  // The fused kernels' library ("" when nothing fused).
  const std::string& library_path() const { return library_.path; }
  // The device type the kernels are generated for: 0 for the CPU (C++), else a CUDA device
  // type (CUDA C through NVRTC) when the graph's values live there.
  static FusionTarget target_for(const sdk::graph::Graph& graph);
  // The kernels' source exactly as compiling `graph` would generate it (same schedule, releases
  // and in-place outputs), without building anything: CUDA C when `cuda` (whatever the values'
  // devices: ts.export.aot_compile makes an archive's PTX from it), else C++.
  static std::string generated_source(sdk::graph::Graph graph, bool cuda);

 private:
  using KernelFn = void (*)(void* const*, void* const*, const int64_t*);
  // The graph as it is scheduled: decompositions, then epilogues folded into library calls
  // (for `target`, by default the graph's own: target_for).
  static sdk::graph::Graph rewritten(sdk::graph::Graph graph, std::optional<FusionTarget> target = std::nullopt);
  // The schedule alone (generated_source): the fusion plan for `target`, releases, in-place outputs.
  CompiledGraph(sdk::graph::Graph graph, const FusionTarget& target);
  void run_extern(ts_call call, size_t node, std::vector<sdk::TensorRef>& env);
  void plan_releases();
  // Marks the fused kernels' outputs that may be written over an input that dies there.
  void plan_in_place();
  // A fused kernel's inputs must have the geometry it was generated for; otherwise its nodes
  // run one by one through the dispatcher.
  bool inputs_match(size_t kernel, const std::vector<sdk::TensorRef>& env) const;

  sdk::graph::Graph graph_;
  FusionPlan plan_;
  std::vector<ts_operator> operators_;  // per node (nullptr for fused nodes)
  std::vector<KernelFn> kernels_;
  std::unique_ptr<CudaModule> cuda_;  // the kernels of a graph on a CUDA device
  std::vector<std::vector<int64_t>> geometry_;  // per kernel, its geometry array
  // Per step, the values no later step reads: released after it, so buffers go back to the
  // allocator as soon as eager would release them (graph outputs are kept).
  std::vector<std::vector<int64_t>> release_after_;
  LoadedLibrary library_;
};

}  // namespace tessera::inductor
