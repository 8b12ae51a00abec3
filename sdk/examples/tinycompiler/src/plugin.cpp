// libtessera_tinycompiler.so: the smallest compiler plugin. "Compiling" a graph parses it,
// checks every operator exists and every value is on a device it accepts (the CPU here), and
// resolves the operators once; running it calls each node through the dispatcher. A vendor's
// compiler starts here and replaces call_node with its own code for the nodes it handles.
#include <tessera/sdk/graph_call.h>
#include <tessera/sdk/graph_ir.h>
#include <tessera/sdk/plugin.h>

#include <map>
#include <memory>
#include <mutex>

namespace tiny {
namespace sdk = tessera::sdk;
namespace g = tessera::sdk::graph;

struct Compiled {
  g::Graph graph;
  std::vector<ts_operator> operators;  // per node
};

std::mutex mutex;
std::map<int64_t, std::shared_ptr<Compiled>> compiled;
int64_t next_handle = 1;

std::shared_ptr<Compiled> find(const char* op, int64_t handle) {
  std::lock_guard lock(mutex);
  auto it = compiled.find(handle);
  if (it == compiled.end()) sdk::fail(TS_ERROR_VALUE, op, ": no compiled graph has handle ", handle);
  return it->second;
}

void compile(sdk::Args& a) {
  auto c = std::make_shared<Compiled>();
  try {
    c->graph = g::parse(*a.optional_str(0));
  } catch (const std::exception& e) {
    sdk::fail(TS_ERROR_VALUE, "tinycompiler::compile: ", e.what());
  }
  for (const g::Value& v : c->graph.values)
    if (v.device.type != 0)
      sdk::fail(TS_ERROR_NOT_IMPLEMENTED, "tinycompiler::compile: value ", v.id, " is on device type ", v.device.type,
                "; this compiler handles CPU graphs only");
  for (const g::Node& n : c->graph.nodes) {
    ts_operator op = sdk::host().find_operator(n.op.c_str());
    if (!op) sdk::fail(TS_ERROR_VALUE, "tinycompiler::compile: unknown operator '", n.op, "'");
    c->operators.push_back(op);
  }
  std::lock_guard lock(mutex);
  compiled[next_handle] = c;
  a.returns({sdk::value(next_handle++)});
}

void run(sdk::Args& a) {
  auto c = find("tinycompiler::run", a.to_int(0));
  std::vector<sdk::TensorRef> arguments = a.tensor_list(1);
  const g::Graph& graph = c->graph;
  if (arguments.size() != graph.inputs.size() + graph.constants.size())
    sdk::fail(TS_ERROR_VALUE, "tinycompiler::run: expected ", graph.inputs.size() + graph.constants.size(),
              " tensors (inputs, then constants), got ", arguments.size());
  std::vector<sdk::TensorRef> env(graph.values.size());
  size_t k = 0;
  for (int64_t id : graph.inputs) env[size_t(id)] = arguments[k++];
  for (int64_t id : graph.constants) env[size_t(id)] = arguments[k++];
  for (size_t n = 0; n < graph.nodes.size(); ++n) g::call_node(a.call(), c->operators[n], graph.nodes[n], env);
  thread_local std::vector<ts_tensor> results;  // the Tensor[] return lives until our next call
  results.clear();
  for (int64_t id : graph.outputs) results.push_back(env[size_t(id)].new_reference());
  ts_value v{TS_VALUE_TENSOR_LIST, 0, {}};
  v.u.tensors.data = results.data();
  v.u.tensors.size = int64_t(results.size());
  a.returns({v});
}

void describe(sdk::Args& a) {
  thread_local std::string text;
  auto c = find("tinycompiler::describe", a.to_int(0));
  text = sdk::cat("tinycompiler: ", c->graph.nodes.size(), " nodes, run one by one");
  ts_value v{TS_VALUE_STRING, 0, {}};
  v.u.str = text.c_str();
  a.returns({v});
}

void release(sdk::Args& a) {
  std::lock_guard lock(mutex);
  compiled.erase(a.to_int(0));
  a.returns({});
}

void register_compiler(sdk::Registrar& reg) {
  struct Op {
    const char* schema;
    const char* name;
    sdk::KernelFn fn;
  };
  const Op ops[] = {
      {"tinycompiler::compile(str graph, str options='') -> int", "tinycompiler::compile", compile},
      {"tinycompiler::run(int handle, Tensor[] arguments) -> Tensor[]", "tinycompiler::run", run},
      {"tinycompiler::describe(int handle) -> str", "tinycompiler::describe", describe},
      {"tinycompiler::release(int handle) -> ()", "tinycompiler::release", release},
  };
  for (const Op& op : ops) {
    reg.def(op.schema);
    reg.kernel(op.name, TS_KEY_CATCH_ALL, op.fn);
  }
}

}  // namespace tiny

TESSERA_PLUGIN("tinycompiler", "0.1.0", 2, tiny::register_compiler)
