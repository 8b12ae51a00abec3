// libtessera_inductor.so: Tessera's graph compiler, a plugin like any device. It implements
// the compiler interface (sdk/README.md, "Compiler plugins") as operators:
//   inductor::compile(str graph, str options) -> int      a serialised graph -> a handle
//   inductor::run(int handle, Tensor[] arguments) -> Tensor[]   inputs then constants -> outputs
//   inductor::describe(int handle) -> str
//   inductor::release(int handle) -> ()
//   inductor::library(int handle) -> str      the fused kernels' shared object ("" if none)
//   inductor::target() -> str                 the CPU features kernels are compiled for
//   inductor::generate(str graph, str target) -> str   the kernels' source for "cpu" (C++) or
//                                             "cuda" (CUDA C), the graph's devices aside
//   inductor::nvrtc(str source, str arch, bool cached) -> str   CUDA C -> PTX with NVRTC (no GPU
//                                             needed); cached: through the on-disk cache
// compile's options: "prebuilt=<path>" loads kernels built ahead of time (an export archive's)
// instead of compiling; they must come from the same graph and inductor version.
// "runtime_sizes" generates kernels that read their sizes at run time, so graphs that differ
// only in sizes share one library (ts.compile's dynamic shapes).
// A compiled graph runs as one operator call, so the profiler and devices see it as such.
#include "compiled_graph.h"

#include <map>
#include <memory>
#include <mutex>

namespace tessera::inductor {
namespace {

std::mutex registry_mutex;
std::map<int64_t, std::shared_ptr<CompiledGraph>> registry;
int64_t next_handle = 1;

std::shared_ptr<CompiledGraph> lookup(const char* op, int64_t handle) {
  std::lock_guard lock(registry_mutex);
  auto it = registry.find(handle);
  if (it == registry.end()) sdk::fail(TS_ERROR_VALUE, op, ": no compiled graph has handle ", handle);
  return it->second;
}

void compile(sdk::Args& a) {
  const std::string_view text = *a.optional_str(0);
  sdk::graph::Graph graph;
  try {
    graph = sdk::graph::parse(text);
  } catch (const std::exception& e) {
    sdk::fail(TS_ERROR_VALUE, "inductor::compile: ", e.what());
  }
  std::string prebuilt;
  bool runtime_sizes = false;
  if (auto options = a.optional_str(1); options && !options->empty()) {
    std::string_view o = *options;
    if (o == "runtime_sizes")
      runtime_sizes = true;
    else if (o.rfind("prebuilt=", 0) == 0)
      prebuilt = std::string(o.substr(9));
    else
      sdk::fail(TS_ERROR_VALUE, "inductor::compile: unknown options '", o, "' (known: prebuilt=<path>, runtime_sizes)");
  }
  std::shared_ptr<CompiledGraph> compiled;
  try {
    compiled = std::make_shared<CompiledGraph>(std::move(graph), prebuilt, runtime_sizes);
  } catch (const sdk::Error&) {
    throw;
  } catch (const std::exception& e) {
    sdk::fail(TS_ERROR, "inductor::compile: ", e.what());
  }
  std::lock_guard lock(registry_mutex);
  const int64_t handle = next_handle++;
  registry[handle] = std::move(compiled);
  a.returns({sdk::value(handle)});
}

void run(sdk::Args& a) {
  auto compiled = lookup("inductor::run", a.to_int(0));
  std::vector<sdk::TensorRef> arguments = a.tensor_list(1);
  std::vector<sdk::TensorRef> results = compiled->run(a.call(), arguments);
  thread_local std::vector<ts_tensor> handles;  // the Tensor[] return lives until our next call
  handles.clear();
  for (auto& t : results) handles.push_back(t.defined() ? t.new_reference() : nullptr);
  ts_value v{TS_VALUE_TENSOR_LIST, 0, {}};
  v.u.tensors.data = handles.data();
  v.u.tensors.size = int64_t(handles.size());
  a.returns({v});
}

void describe(sdk::Args& a) {
  thread_local std::string text;
  text = lookup("inductor::describe", a.to_int(0))->describe();
  ts_value v{TS_VALUE_STRING, 0, {}};
  v.u.str = text.c_str();
  a.returns({v});
}

void return_string(sdk::Args& a, std::string value) {
  thread_local std::string text;
  text = std::move(value);
  ts_value v{TS_VALUE_STRING, 0, {}};
  v.u.str = text.c_str();
  a.returns({v});
}

void library(sdk::Args& a) { return_string(a, lookup("inductor::library", a.to_int(0))->library_path()); }
void target(sdk::Args& a) { return_string(a, KernelCache::instance().cpu_features()); }

void generate(sdk::Args& a) {
  sdk::graph::Graph graph;
  try {
    graph = sdk::graph::parse(*a.optional_str(0));
  } catch (const std::exception& e) {
    sdk::fail(TS_ERROR_VALUE, "inductor::generate: ", e.what());
  }
  const std::string target(*a.optional_str(1));
  if (target != "cpu" && target != "cuda")
    sdk::fail(TS_ERROR_VALUE, "inductor::generate: target must be 'cpu' or 'cuda', got '", target, "'");
  return_string(a, CompiledGraph::generated_source(std::move(graph), target == "cuda"));
}

void nvrtc(sdk::Args& a) {
  try {
    const std::string source(*a.optional_str(0)), arch(*a.optional_str(1));
    const Nvrtc& nvrtc = Nvrtc::instance();
    return_string(a, a.to_bool(2) ? nvrtc.cached_compile(source, arch) : nvrtc.compile(source, arch));
  } catch (const std::runtime_error& e) {
    sdk::fail(TS_ERROR, "inductor::nvrtc: ", e.what());
  }
}

void release(sdk::Args& a) {
  const int64_t handle = a.to_int(0);
  std::lock_guard lock(registry_mutex);
  registry.erase(handle);
  a.returns({});
}

void cache_dir(sdk::Args& a) {
  thread_local std::string text;
  text = KernelCache::instance().directory();
  ts_value v{TS_VALUE_STRING, 0, {}};
  v.u.str = text.c_str();
  a.returns({v});
}

void register_inductor(sdk::Registrar& reg) {
  struct Op {
    const char* schema;
    const char* name;
    sdk::KernelFn fn;
  };
  const Op ops[] = {
      {"inductor::compile(str graph, str options='') -> int", "inductor::compile", compile},
      {"inductor::run(int handle, Tensor[] arguments) -> Tensor[]", "inductor::run", run},
      {"inductor::describe(int handle) -> str", "inductor::describe", describe},
      {"inductor::release(int handle) -> ()", "inductor::release", release},
      {"inductor::cache_dir() -> str", "inductor::cache_dir", cache_dir},
      {"inductor::library(int handle) -> str", "inductor::library", library},
      {"inductor::target() -> str", "inductor::target", target},
      {"inductor::generate(str graph, str target) -> str", "inductor::generate", generate},
      {"inductor::nvrtc(str source, str arch, bool cached=False) -> str", "inductor::nvrtc", nvrtc},
  };
  for (const Op& op : ops) {
    reg.def(op.schema);
    reg.kernel(op.name, TS_KEY_CATCH_ALL, op.fn);
  }
}

}  // namespace
}  // namespace tessera::inductor

// Needs host ABI 1.2 (Tensor[] returns).
TESSERA_PLUGIN("inductor", "0.1.0", 2, tessera::inductor::register_inductor)
