#pragma once
// What a loaded Program holds, and how it runs: the graph's nodes prepared once as boxed stacks
// (operator resolved, non-tensor arguments boxed), so a run only fills in tensors and calls.
#include <tessera/boxing.h>
#include <tessera/dispatcher.h>
#include <tessera/export/program.h>
#include <tessera/sdk/graph_ir.h>

#include "archive.h"

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::exported {

namespace graph = tessera::sdk::graph;

// One node, ready to call. Non-copyable: `slots` points into the node's own lists.
struct PreparedNode {
  OperatorHandle op = nullptr;
  std::vector<ts_value> slots;  // argument template, sized max(arguments, returns)
  int32_t n_args = 0;
  std::vector<std::pair<int32_t, int64_t>> tensor_args;                // slot, value id
  std::vector<std::pair<int32_t, std::vector<int64_t>>> tensor_lists;  // slot, value ids (-1: None)
  std::vector<std::vector<int64_t>> outputs;
  std::vector<int64_t> release_after;  // values whose last use is this node
  std::vector<std::unique_ptr<std::vector<int64_t>>> int_lists;
  std::vector<std::unique_ptr<std::vector<double>>> double_lists;
  std::vector<std::unique_ptr<std::string>> strings;

  PreparedNode() = default;
  PreparedNode(const PreparedNode&) = delete;
  PreparedNode& operator=(const PreparedNode&) = delete;
  PreparedNode(PreparedNode&&) = default;
};

// The graph at one set of dynamic dim sizes.
struct Plan {
  std::vector<PreparedNode> nodes;
};

// An integer of the graph that follows the dynamic dims: a node's argument (node, arg, element)
// or a value's geometry (value >= 0: its shape[dim], strides[dim] or storage offset).
struct SymbolicInt {
  enum class Field { Argument, Shape, Strides, Offset };
  Field field = Field::Argument;
  int64_t node = 0, arg = 0, element = -1;          // element -1: an int argument, else an ints element
  int64_t value = -1, dim = 0;
  std::vector<std::pair<int64_t, std::vector<int64_t>>> terms;  // coefficient, symbol indices
};

struct Program::Impl {
  std::string where;
  nlohmann::json metadata;
  graph::Graph graph;                   // at the example sizes
  std::vector<OperatorHandle> ops;      // per node
  size_t n_state = 0;                   // graph inputs [0, n_state) are parameters and buffers
  std::vector<std::string> state_names;
  std::vector<Tensor> state, constants;
  std::vector<InputInfo> inputs;
  std::vector<std::vector<int64_t>> input_symbols;  // per input, per dim: symbol index or -1
  std::vector<std::pair<int64_t, int64_t>> symbol_ranges;
  std::vector<SymbolicInt> symbolic_ints;
  size_t n_user_outputs = 0;
  std::vector<std::pair<size_t, int64_t>> state_writes;  // state index <- value id, after a run
  std::vector<std::string> plugins;
  Device device{"cpu"};

  // Ahead-of-time kernels (LoadOptions::allow_native), per size set. The inductor takes each on
  // the first run at its sizes, so an archive with many size sets loads as fast as one with one.
  struct NativeKernels {
    std::string options;  // inductor::compile's: "prebuilt=<the library's path>"
    mutable std::once_flag compiled;
    mutable int64_t handle = -1;
  };
  std::map<std::vector<int64_t>, NativeKernels> native;  // for the program's device now
  // Per target ("cpu", "cuda"), per size set, inductor::compile's options for the archive's
  // kernels; `native` is filled from the program device's target (select_native_kernels).
  std::map<std::string, std::map<std::vector<int64_t>, std::string>> native_options;
  OperatorHandle inductor_compile = nullptr, inductor_run = nullptr;
  // The inductor's handle of the kernels for `sizes` (compiled from the prebuilt library once).
  int64_t native_handle(const NativeKernels& kernels, const std::vector<int64_t>& sizes) const;
  std::string native_reason = "not asked (LoadOptions::allow_native is false)";

  mutable std::mutex plans_mutex;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans;
  mutable std::mutex run_mutex;  // taken by runs of a program that writes its state

  std::vector<int64_t> check_inputs(const std::vector<Tensor>& given) const;
  std::shared_ptr<const Plan> plan_for(const std::vector<int64_t>& sizes) const;
  // The graph with every symbolic integer evaluated at `sizes`.
  graph::Graph graph_at(const std::vector<int64_t>& sizes) const;
};

// Builds an Impl from an archive's parts (archive.h); ValueError naming what is wrong.
std::shared_ptr<Program::Impl> make_program(const nlohmann::json& metadata, const std::string& graph_text,
                                            const std::string& program_text, detail::SharedBytes weights,
                                            const std::string& where);
// Sets up the archive's ahead-of-time kernels when they suit this machine (native_aot.cpp);
// otherwise records why not in native_reason.
void attach_native_kernels(Program::Impl& p, const std::map<std::string, detail::SharedBytes>& parts);
// Fills p.native with the kernels for p.device's type (none: native_reason says why).
void select_native_kernels(Program::Impl& p);

}  // namespace tessera::exported
