#include "compiled_graph.h"
#include "cpp_codegen.h"
#include "cuda_codegen.h"
#include "decompositions.h"
#include "library_epilogues.h"
#include "pointwise_ops.h"

#include <tessera/sdk/graph_call.h>

#include <dlfcn.h>

#include <algorithm>
#include <set>

namespace tessera::inductor {
namespace {
namespace g = sdk::graph;

// Whether `t`'s handle has no holder but the caller's one reference (ABI 1.8; older hosts: no).
bool sole_reference(const sdk::TensorRef& t) {
  const ts_host_api& h = sdk::host();
  return t.defined() && TS_STRUCT_HAS(&h, ts_host_api, tensor_use_count) && h.tensor_use_count &&
         h.tensor_use_count(t.handle()) == 1;
}
}

g::Graph CompiledGraph::rewritten(g::Graph graph, std::optional<FusionTarget> target) {
  const FusionTarget for_target = target ? *target : target_for(graph);
  return fold_library_epilogues(decompose_for_fusion(std::move(graph)), for_target);
}

FusionTarget CompiledGraph::target_for(const g::Graph& graph) {
  FusionTarget cpu;
  if (!TS_STRUCT_HAS(&sdk::host(), ts_host_api, device_type_id)) return cpu;
  const int32_t cuda = sdk::host().device_type_id("cuda");
  if (cuda < 0) return cpu;
  for (const g::Value& v : graph.values)
    if (v.device.type == cuda) return FusionTarget{cuda, false, false};
  return cpu;
}

CompiledGraph::CompiledGraph(g::Graph graph, const std::string& prebuilt, bool runtime_sizes)
    : graph_(rewritten(std::move(graph))), plan_(plan_fusion(graph_, target_for(graph_))) {
  operators_.assign(graph_.nodes.size(), nullptr);
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    operators_[n] = sdk::host().find_operator(graph_.nodes[n].op.c_str());
    if (!operators_[n])
      throw sdk::Error(TS_ERROR_VALUE, "inductor::compile: the graph calls operator '" + graph_.nodes[n].op +
                                           "', which is not registered in this process");
  }
  const bool on_cuda = !plan_.kernels.empty() && graph_.value(plan_.kernels[0].outputs[0]).device.type != 0;
  if (on_cuda && prebuilt.empty() && !Nvrtc::instance().available())
    plan_ = plan_fusion(graph_, FusionTarget{});  // no NVRTC: the CUDA nodes stay dispatcher calls
  plan_releases();
  plan_in_place();
  if (plan_.kernels.empty()) return;
  if (on_cuda) {
    // CUDA: sizes are literals (an NVRTC build is cheap next to a C++ one). Prebuilt kernels
    // (an export archive's) are PTX checked against this graph's source; they need no NVRTC.
    const int32_t index = graph_.value(plan_.kernels[0].outputs[0]).device.index;
    const std::string source = generate_cuda(graph_, plan_);
    const std::string ptx = prebuilt.empty()
                                ? Nvrtc::instance().cached_compile(source, CudaModule::architecture(index))
                                : prebuilt_ptx(prebuilt, source);
    cuda_ = std::make_unique<CudaModule>(ptx, index, plan_.kernels.size());
    return;
  }
  CodegenOptions options;
  options.vector_math = KernelCache::instance().vector_math_available();
  options.runtime_sizes = runtime_sizes;
  GeneratedSource generated = generate_cpp(graph_, plan_, options);
  const std::string& source = generated.source;
  geometry_ = std::move(generated.geometry);
  library_ = prebuilt.empty() ? KernelCache::instance().load(source) : KernelCache::instance().load_prebuilt(prebuilt, source);
  for (size_t k = 0; k < plan_.kernels.size(); ++k) {
    auto fn = reinterpret_cast<KernelFn>(dlsym(library_.handle, kernel_symbol(k).c_str()));
    if (!fn) throw sdk::Error(TS_ERROR, "inductor: '" + library_.path + "' has no " + kernel_symbol(k));
    kernels_.push_back(fn);
  }
}

CompiledGraph::CompiledGraph(g::Graph graph, const FusionTarget& target)
    : graph_(rewritten(std::move(graph), target)), plan_(plan_fusion(graph_, target)) {
  plan_releases();
  plan_in_place();
}

std::string CompiledGraph::generated_source(g::Graph graph, bool cuda) {
  int32_t device_type = 0;  // CUDA C for the graph as its values are: fused on their own device type
  for (const g::Value& v : graph.values) device_type = v.device.type;
  const CompiledGraph schedule(std::move(graph), cuda ? FusionTarget{device_type, false, false} : FusionTarget{});
  if (cuda) return generate_cuda(schedule.graph_, schedule.plan_);
  CodegenOptions options;
  options.vector_math = KernelCache::instance().vector_math_available();
  return generate_cpp(schedule.graph_, schedule.plan_, options).source;
}

void CompiledGraph::plan_releases() {
  const size_t none = plan_.steps.size();
  std::vector<size_t> last(graph_.values.size(), none);  // last step reading or writing each value
  auto touch = [&](int64_t id, size_t step) {
    if (id >= 0) last[size_t(id)] = last[size_t(id)] == none ? step : std::max(last[size_t(id)], step);
  };
  auto touch_node = [&](const g::Node& node, size_t step) {
    for (const g::Arg& a : node.args) {
      if (a.kind == g::Arg::Kind::Tensor) touch(a.tensor, step);
      for (int64_t id : a.tensors) touch(id, step);
    }
    for (const auto& ids : node.outputs)
      for (int64_t id : ids) touch(id, step);
  };
  for (size_t s = 0; s < plan_.steps.size(); ++s) {
    const Step& step = plan_.steps[s];
    if (step.kind == Step::Kind::Extern) {
      touch_node(graph_.nodes[step.index], s);
      continue;
    }
    const FusedKernel& k = plan_.kernels[step.index];
    for (int64_t id : k.inputs) touch(id, s);
    for (int64_t id : k.outputs) touch(id, s);
  }
  std::vector<bool> keep(graph_.values.size(), false);
  for (int64_t id : graph_.outputs) keep[size_t(id)] = true;
  release_after_.assign(plan_.steps.size(), {});
  for (size_t id = 0; id < last.size(); ++id)
    if (!keep[id] && last[id] != none) release_after_[last[id]].push_back(int64_t(id));
}

void CompiledGraph::plan_in_place() {
  // A value some other value views (or that views another) shares its storage: never reused.
  std::vector<bool> aliased(graph_.values.size(), false);
  for (const g::Value& v : graph_.values)
    if (v.alias_of >= 0) aliased[size_t(v.alias_of)] = aliased[size_t(v.id)] = true;
  std::vector<bool> external(graph_.values.size(), false);  // the caller's tensors, and results
  for (int64_t id : graph_.inputs) external[size_t(id)] = true;
  for (int64_t id : graph_.constants) external[size_t(id)] = true;
  for (int64_t id : graph_.outputs) external[size_t(id)] = true;
  for (size_t s = 0; s < plan_.steps.size(); ++s) {
    if (plan_.steps[s].kind != Step::Kind::Fused) continue;
    FusedKernel& k = plan_.kernels[plan_.steps[s].index];
    k.in_place.assign(k.outputs.size(), -1);
    // Element-wise kernels only: each reads input element i before writing output element i and
    // never reads element i again (the sin/cos chunks redo a chunk from its inputs: excluded).
    if (k.head != RowHead::None) continue;
    bool trig = false;
    for (size_t n : k.nodes) trig |= is_trigonometric(graph_.nodes[n].op);
    if (trig) continue;
    const std::vector<int64_t>& dying = release_after_[s];
    std::vector<bool> taken(k.inputs.size(), false);
    for (size_t o = 0; o < k.outputs.size(); ++o) {
      const g::Value& out = graph_.value(k.outputs[o]);
      for (size_t i = 0; i < k.inputs.size(); ++i) {
        const int64_t id = k.inputs[i];
        const g::Value& in = graph_.value(id);
        if (taken[i] || external[size_t(id)] || aliased[size_t(id)] || in.dtype != out.dtype || in.shape != out.shape ||
            !in.is_contiguous() || std::find(dying.begin(), dying.end(), id) == dying.end())
          continue;
        k.in_place[o] = int(i);
        taken[i] = true;
        break;
      }
    }
  }
}

void CompiledGraph::run_extern(ts_call call, size_t n, std::vector<sdk::TensorRef>& env) {
  g::call_node(call, operators_[n], graph_.nodes[n], env);
}

bool CompiledGraph::inputs_match(size_t kernel, const std::vector<sdk::TensorRef>& env) const {
  for (int64_t id : plan_.kernels[kernel].inputs) {
    const sdk::TensorRef& t = env[size_t(id)];
    const g::Value& v = graph_.value(id);
    if (!t.defined() || t.dtype() != v.dtype || !std::ranges::equal(t.sizes(), v.shape) ||
        !std::ranges::equal(t.strides(), v.strides))
      return false;
  }
  return true;
}

std::vector<sdk::TensorRef> CompiledGraph::run(ts_call call, const std::vector<sdk::TensorRef>& arguments) {
  const size_t expected = graph_.inputs.size() + graph_.constants.size();
  if (arguments.size() != expected)
    throw sdk::Error(TS_ERROR_VALUE, sdk::cat("inductor::run: the graph takes ", graph_.inputs.size(), " inputs and ",
                                              graph_.constants.size(), " constants (", expected, " tensors), got ",
                                              arguments.size()));
  std::vector<sdk::TensorRef> env(graph_.values.size());
  for (size_t i = 0; i < graph_.inputs.size(); ++i) env[size_t(graph_.inputs[i])] = arguments[i];
  for (size_t i = 0; i < graph_.constants.size(); ++i)
    env[size_t(graph_.constants[i])] = arguments[graph_.inputs.size() + i];
  std::vector<void*> in, out;
  for (const Step& step : plan_.steps) {
    const size_t s = size_t(&step - plan_.steps.data());
    struct Release {  // after the step, also when it throws
      std::vector<sdk::TensorRef>& env;
      const std::vector<int64_t>& ids;
      ~Release() {
        for (int64_t id : ids) env[size_t(id)] = sdk::TensorRef();
      }
    } release{env, release_after_[s]};
    if (step.kind == Step::Kind::Extern) {
      run_extern(call, step.index, env);
      continue;
    }
    const FusedKernel& k = plan_.kernels[step.index];
    if (!inputs_match(step.index, env)) {
      for (size_t n : k.prologue) run_extern(call, n, env);
      if (k.head != RowHead::None) run_extern(call, k.head_node, env);
      for (size_t n : k.nodes) run_extern(call, n, env);
      continue;
    }
    in.clear();
    out.clear();
    for (int64_t id : k.inputs) in.push_back(env[size_t(id)].data());
    const ts_device device = env[size_t(k.inputs.empty() ? 0 : k.inputs[0])].device();
    for (size_t o = 0; o < k.outputs.size(); ++o) {
      const int64_t id = k.outputs[o];
      const g::Value& v = graph_.value(id);  // mean and rstd of a layer norm are not k.shape
      // Over a dying input that nothing else holds (the env's reference is its only one).
      const int reuse = o < k.in_place.size() ? k.in_place[o] : -1;
      if (reuse >= 0 && sole_reference(env[size_t(k.inputs[size_t(reuse)])])) {
        env[size_t(id)] = env[size_t(k.inputs[size_t(reuse)])];
      } else {
        env[size_t(id)] = sdk::empty(call, v.shape, v.dtype, k.inputs.empty() ? ts_device{0, 0} : device);
      }
      out.push_back(env[size_t(id)].data());
    }
    if (cuda_) {
      in.insert(in.end(), out.begin(), out.end());  // the kernel's parameters: inputs, then outputs
      int64_t numel = 1;
      for (int64_t d : k.shape) numel *= d;
      const ts_device where = env[size_t(k.outputs[0])].device();
      void* stream = TS_STRUCT_HAS(&sdk::host(), ts_host_api, native_stream)
                         ? sdk::host().native_stream(where, sdk::host().current_stream(where))
                         : nullptr;
      cuda_->launch(step.index, in, numel, stream);
      continue;
    }
    kernels_[step.index](in.data(), out.data(), geometry_[step.index].data());
  }
  std::vector<sdk::TensorRef> results;
  for (int64_t id : graph_.outputs) results.push_back(env[size_t(id)]);
  return results;
}

std::string CompiledGraph::describe() const {
  size_t fused_nodes = 0, in_place = 0;
  for (const auto& k : plan_.kernels) {
    fused_nodes += k.prologue.size() + k.nodes.size() + (k.head != RowHead::None ? 1 : 0);
    in_place += size_t(std::count_if(k.in_place.begin(), k.in_place.end(), [](int r) { return r >= 0; }));
  }
  const auto epilogues = std::count_if(graph_.nodes.begin(), graph_.nodes.end(),
                                       [](const g::Node& n) { return n.op == kLinearEpilogueOp; });
  return sdk::cat("nodes=", graph_.nodes.size(), " kernels=", plan_.kernels.size(), " fused_nodes=", fused_nodes,
                  " extern_calls=", graph_.nodes.size() - fused_nodes, " in_place=", in_place, " epilogues=", epilogues,
                  " target=", cuda_ ? "cuda" : "cpu",
                  " library=", library_.path,
                  " from_cache=", library_.from_cache ? 1 : 0);
}

}  // namespace tessera::inductor
