// Loading a program from its archive parts and running it through the dispatcher.
#include "program_impl.h"

#include "archive.h"

#include <tessera/cpp/autograd.h>
#include <tessera/error.h>
#include <tessera/runtime.h>
#include <tessera/safetensors.h>
#include <tessera/sdk/dtype.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

namespace tessera::exported {
namespace {

using json = nlohmann::json;
using Kind = SchemaType::Kind;

// Does a recorded argument fit the operator's schema type? A graph from a newer or damaged
// archive must fail here with a message, not in a kernel reading the wrong union member.
bool fits(const SchemaType& t, const graph::Arg& a) {
  using A = graph::Arg::Kind;
  if (t.kind == Kind::Any) return true;
  switch (a.kind) {
    case A::None: return t.optional;
    case A::Tensor: return t.kind == Kind::Tensor && !t.is_list;
    case A::TensorList: return t.kind == Kind::Tensor && t.is_list;
    case A::Int:
      return !t.is_list && (t.kind == Kind::Int || t.kind == Kind::Scalar || t.kind == Kind::Layout ||
                            t.kind == Kind::MemoryFormat) ;
    case A::Double: return !t.is_list && (t.kind == Kind::Float || t.kind == Kind::Scalar);
    case A::Bool: return !t.is_list && (t.kind == Kind::Bool || t.kind == Kind::Scalar);
    case A::Ints: return t.is_list && (t.kind == Kind::Int || t.kind == Kind::Bool || t.kind == Kind::Scalar);
    case A::Doubles: return t.is_list && (t.kind == Kind::Float || t.kind == Kind::Scalar);
    case A::Str: return !t.is_list && t.kind == Kind::Str;
    case A::Dtype: return !t.is_list && t.kind == Kind::ScalarType && sdk::dtype_valid(int32_t(a.i));
    case A::Device: return !t.is_list && t.kind == Kind::Device;
  }
  return false;
}

const char* arg_kind_name(graph::Arg::Kind k) {
  using A = graph::Arg::Kind;
  switch (k) {
    case A::None: return "None";
    case A::Tensor: return "Tensor";
    case A::TensorList: return "Tensor[]";
    case A::Int: return "int";
    case A::Double: return "float";
    case A::Bool: return "bool";
    case A::Ints: return "int[]";
    case A::Doubles: return "float[]";
    case A::Str: return "str";
    case A::Dtype: return "ScalarType";
    case A::Device: return "Device";
  }
  return "?";
}

// The operator of a node: found in the dispatcher, or after loading the plugin its namespace
// names ("autograd::detach" -> libtessera_autograd.so). Core operators ("add.Tensor") are
// always defined; their kernels come from the device's plugin, loaded on first use.
OperatorHandle resolve(const std::string& name, const std::string& where, std::set<std::string>& plugins) {
  Dispatcher& d = Dispatcher::instance();
  if (OperatorHandle op = d.find(name)) return op;
  size_t colon = name.find("::");
  if (colon != std::string::npos) {
    std::string ns = name.substr(0, colon);
    // A plugin name is a file name part: nothing like "../" may steer which library loads.
    bool plain = !ns.empty() && std::all_of(ns.begin(), ns.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (!plain)
      raise<ValueError>("export archive '{}': the graph calls operator '{}', whose namespace is no plugin name", where,
                        name);
    plugins.insert(ns);
    load_named_plugin(ns);
    if (OperatorHandle op = d.find(name)) return op;
  }
  raise<ValueError>("export archive '{}': the graph calls operator '{}', which no loaded plugin provides (plugin "
                    "search path: {})", where, name, plugin_search_path_text());
}

void check_id(const graph::Graph& g, int64_t id, const std::string& where, const char* what) {
  if (id < 0 || size_t(id) >= g.values.size())
    raise<ValueError>("export archive '{}': graph.json: {} refers to value {}, outside 0..{}", where, what, id,
                      g.values.size());
}

const json& field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) raise<ValueError>("export archive '{}': program.json lacks '{}'", where, key);
  return j[key];
}

// Validates every node against its operator and the value table.
void check_graph(const graph::Graph& g, const std::vector<OperatorHandle>& ops, const std::string& where) {
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const graph::Node& n = g.nodes[k];
    const FunctionSchema& s = ops[k]->schema();
    if (!s.is_vararg && n.args.size() != s.arguments.size())
      raise<ValueError>("export archive '{}': graph.json: node {} calls {} with {} arguments; its schema takes {}", where,
                        k, n.op, n.args.size(), s.arguments.size());
    for (size_t a = 0; a < n.args.size() && a < s.arguments.size(); ++a) {
      if (!fits(s.arguments[a].type, n.args[a]))
        raise<ValueError>("export archive '{}': graph.json: node {} ({}) argument '{}' is {}; the schema expects {}",
                          where, k, n.op, s.arguments[a].name, arg_kind_name(n.args[a].kind),
                          s.arguments[a].type.to_string());
      if (n.args[a].kind == graph::Arg::Kind::Tensor) check_id(g, n.args[a].tensor, where, "a node argument");
      for (int64_t id : n.args[a].tensors)
        if (id >= 0) check_id(g, id, where, "a node argument");
    }
    if (n.outputs.size() > std::max<size_t>(size_t(ops[k]->num_returns()), 1) && !s.is_varret)
      raise<ValueError>("export archive '{}': graph.json: node {} ({}) has {} outputs; the schema returns {}", where, k,
                        n.op, n.outputs.size(), ops[k]->num_returns());
    for (const auto& ids : n.outputs)
      for (int64_t id : ids)
        if (id >= 0) check_id(g, id, where, "a node output");
  }
  for (int64_t id : g.inputs) check_id(g, id, where, "an input");
  for (int64_t id : g.constants) check_id(g, id, where, "a constant");
  for (int64_t id : g.outputs) check_id(g, id, where, "an output");
}

int64_t evaluate(const SymbolicInt& s, const std::vector<int64_t>& sizes) {
  int64_t v = 0;
  for (const auto& [coef, symbols] : s.terms) {
    int64_t term = coef;
    for (int64_t i : symbols) term *= sizes[size_t(i)];
    v += term;
  }
  return v;
}

}  // namespace

std::shared_ptr<Program::Impl> make_program(const json& metadata, const std::string& graph_text,
                                            const std::string& program_text, detail::SharedBytes weights,
                                            const std::string& where) {
  auto impl = std::make_shared<Program::Impl>();
  Program::Impl& p = *impl;
  p.where = where;
  p.metadata = metadata;
  try {
    p.graph = graph::parse(graph_text);
  } catch (const std::exception& e) {
    raise<ValueError>("export archive '{}': graph.json: {}", where, e.what());
  }
  const graph::Graph& g = p.graph;
  json program = json::parse(program_text, nullptr, false);
  try {
    graph::check_integers(program);  // program.json holds no floats at all
  } catch (const std::invalid_argument& e) {
    raise<ValueError>("export archive '{}': program.json: {}", where, e.what());
  }
  // Compared as JSON values: value("format", std::string()) would throw json's type_error on a
  // number there, which is no ValueError.
  if (!program.is_object() || !program.contains("format") || program["format"] != "tessera.exported_program" ||
      !program.contains("version") || program["version"] != 1)
    raise<ValueError>("export archive '{}': program.json is not a 'tessera.exported_program' version 1", where);

  try {
    // Operators first: an archive needing a plugin this process lacks fails before weights load.
    std::set<std::string> plugins;
    for (const graph::Node& n : g.nodes) p.ops.push_back(resolve(n.op, where, plugins));
    p.plugins.assign(plugins.begin(), plugins.end());
    check_graph(g, p.ops, where);

    if (weights.checked.valid()) weights.checked.get();  // the weights' checksum, checked meanwhile
    // The weights' tensors view the part's buffer (no copy); it lives as long as they do.
    SafetensorsContents contents =
        view_safetensors_contents(std::move(weights.data), weights.size, where + ":weights.safetensors");
    std::map<std::string, Tensor> by_name;
    for (auto& [name, t] : contents.tensors) by_name.emplace(name, t);
    auto weight = [&](const std::string& target) -> Tensor {
      auto it = by_name.find(target);
      if (it == by_name.end()) raise<ValueError>("export archive '{}': weights.safetensors lacks '{}'", where, target);
      return it->second;
    };

    const json& sig = field(program, "signature", where);
    size_t n_user = 0;
    std::vector<std::string> user_names;
    for (const json& s : field(sig, "inputs", where)) {
      std::string kind = s.at("kind").get<std::string>();
      if (kind == "parameter" || kind == "buffer") {
        std::string target = s.at("target").get<std::string>();
        p.state_names.push_back(target);
        p.state.push_back(weight(target));
      } else if (kind == "constant_tensor") {
        p.constants.push_back(weight(s.at("target").get<std::string>()));
      } else if (kind == "user_input") {
        ++n_user;
        user_names.push_back(s.at("name").get<std::string>());
      } else {
        raise<ValueError>("export archive '{}': program.json: unknown input kind '{}'", where, kind);
      }
    }
    p.n_state = p.state.size();
    if (g.inputs.size() != p.n_state + n_user || g.constants.size() != p.constants.size())
      raise<ValueError>("export archive '{}': graph.json has {} inputs and {} constants; program.json's signature "
                        "names {} and {}", where, g.inputs.size(), g.constants.size(), p.n_state + n_user,
                        p.constants.size());

    for (const json& s : field(program, "symbols", where)) {
      int64_t lo = s.at("min").get<int64_t>(), hi = s.at("max").get<int64_t>();
      if (lo < 0 || hi < lo) raise<ValueError>("export archive '{}': program.json: a dim's range [{}, {}] is empty", where, lo, hi);
      p.symbol_ranges.emplace_back(lo, hi);
    }
    std::vector<std::string> symbol_names;
    for (const json& s : program["symbols"]) symbol_names.push_back(s.at("name").get<std::string>());
    const json& inputs = field(program, "inputs", where);
    if (inputs.size() != n_user)
      raise<ValueError>("export archive '{}': program.json describes {} inputs; the signature has {}", where,
                        inputs.size(), n_user);
    for (size_t k = 0; k < n_user; ++k) {
      const json& in = inputs[k];
      InputInfo info;
      info.name = user_names[k];
      info.path = in.at("path").get<std::string>();
      info.dtype = ScalarType(g.values[size_t(g.inputs[p.n_state + k])].dtype);
      std::vector<int64_t> symbols;
      for (const json& d : in.at("dims")) {
        if (d.is_number_integer()) {
          info.dims.push_back(d.get<int64_t>());
          info.dim_names.emplace_back();
          info.dim_ranges.emplace_back(d.get<int64_t>(), d.get<int64_t>());
          symbols.push_back(-1);
        } else {
          int64_t sym = d.at("sym").get<int64_t>();
          if (sym < 0 || size_t(sym) >= p.symbol_ranges.size())
            raise<ValueError>("export archive '{}': program.json: input {} names dim symbol {}, of {}", where,
                              info.name, sym, p.symbol_ranges.size());
          info.dims.push_back(-1);
          info.dim_names.push_back(symbol_names[size_t(sym)]);
          info.dim_ranges.push_back(p.symbol_ranges[size_t(sym)]);
          symbols.push_back(sym);
        }
      }
      p.inputs.push_back(std::move(info));
      p.input_symbols.push_back(std::move(symbols));
    }
    for (const json& s : field(program, "symbolic_ints", where)) {
      const json& path = s.at("path");
      SymbolicInt si;
      auto read_terms = [&] {
        for (const json& t : s.at("expr")) {
          std::vector<int64_t> syms = t.at(1).get<std::vector<int64_t>>();
          for (int64_t i : syms)
            if (i < 0 || size_t(i) >= p.symbol_ranges.size())
              raise<ValueError>("export archive '{}': program.json: a symbolic int names dim symbol {}", where, i);
          si.terms.emplace_back(t.at(0).get<int64_t>(), std::move(syms));
        }
      };
      if (path.at(0) == "v") {  // a value's geometry: what a compiler generates code for
        si.value = path.at(1).get<int64_t>();
        check_id(g, si.value, where, "a symbolic int");
        const graph::Value& v = g.values[size_t(si.value)];
        std::string what = path.at(2).get<std::string>();
        si.field = what == "shape" ? SymbolicInt::Field::Shape
                   : what == "strides" ? SymbolicInt::Field::Strides : SymbolicInt::Field::Offset;
        if (what != "shape" && what != "strides" && what != "storage_offset")
          raise<ValueError>("export archive '{}': program.json: a symbolic int names the '{}' of a value", where, what);
        if (si.field != SymbolicInt::Field::Offset) {
          si.dim = path.at(3).get<int64_t>();
          if (si.dim < 0 || size_t(si.dim) >= v.shape.size() || v.strides.size() != v.shape.size())
            raise<ValueError>("export archive '{}': program.json: a symbolic int names dim {} of value {}", where, si.dim, si.value);
        }
        read_terms();
        p.symbolic_ints.push_back(std::move(si));
        continue;
      }
      si.node = path.at(1).get<int64_t>();
      si.arg = path.at(2).get<int64_t>();
      si.element = path.size() > 3 ? path.at(3).get<int64_t>() : -1;
      if (si.node < 0 || size_t(si.node) >= g.nodes.size() || si.arg < 0 ||
          size_t(si.arg) >= g.nodes[size_t(si.node)].args.size())
        raise<ValueError>("export archive '{}': program.json: a symbolic int names node {} argument {}, not in the graph",
                          where, si.node, si.arg);
      const graph::Arg& a = g.nodes[size_t(si.node)].args[size_t(si.arg)];
      bool ok = si.element < 0 ? a.kind == graph::Arg::Kind::Int
                               : a.kind == graph::Arg::Kind::Ints && size_t(si.element) < a.ints.size();
      if (!ok) raise<ValueError>("export archive '{}': program.json: a symbolic int names node {} argument {}, which is no int", where, si.node, si.arg);
      read_terms();
      p.symbolic_ints.push_back(std::move(si));
    }
    size_t n_outputs = 0;
    for (const json& s : field(sig, "outputs", where)) {
      std::string kind = s.at("kind").get<std::string>();
      size_t position = n_outputs++;
      if (position >= g.outputs.size())
        raise<ValueError>("export archive '{}': program.json names more outputs than graph.json has", where);
      if (kind == "user_output") {
        ++p.n_user_outputs;
      } else if (kind == "buffer_mutation" || kind == "parameter_mutation") {
        std::string target = s.at("target").get<std::string>();
        auto it = std::find(p.state_names.begin(), p.state_names.end(), target);
        if (it == p.state_names.end())
          raise<ValueError>("export archive '{}': program.json: a mutation names '{}', not a parameter or buffer", where, target);
        p.state_writes.emplace_back(size_t(it - p.state_names.begin()), g.outputs[position]);
      } else if (kind != "user_input_mutation") {
        raise<ValueError>("export archive '{}': program.json: unknown output kind '{}'", where, kind);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    raise<ValueError>("export archive '{}': program.json is malformed ({})", where, e.what());
  }
  if (!p.inputs.empty() || !p.state.empty()) {
    Device origin = p.state.empty() ? Device("cpu") : p.state.front().device();
    p.device = origin;
  }
  return impl;
}

std::vector<int64_t> Program::Impl::check_inputs(const std::vector<Tensor>& given) const {
  if (given.size() != inputs.size())
    raise<ValueError>("exported program '{}': expected {} inputs, got {}", where, inputs.size(), given.size());
  std::vector<int64_t> sizes(symbol_ranges.size(), -1);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const InputInfo& info = inputs[k];
    const Tensor& t = given[k];
    if (!t.defined()) raise<ValueError>("exported program '{}': input {} is an undefined tensor", where, info.name);
    if (t.dtype() != info.dtype)
      raise<ValueError>("exported program '{}': expected input {} of dtype {}, got {}", where, info.name,
                        name(info.dtype), name(t.dtype()));
    if (t.device() != device)
      raise<ValueError>("exported program '{}': expected input {} on {} (the program's device), got {}", where, info.name,
                        device.str(), t.device().str());
    if (size_t(t.dim()) != info.dims.size())
      raise<ValueError>("exported program '{}': expected input {} of rank {}, got rank {} (shape [{}])", where,
                        info.name, info.dims.size(), t.dim(), fmt::join(t.sizes(), ", "));
    for (size_t d = 0; d < info.dims.size(); ++d) {
      int64_t got = t.sizes()[d];
      if (info.dims[d] >= 0) {
        if (got != info.dims[d])
          raise<ValueError>("exported program '{}': expected input {}.shape[{}] == {} (a static dim), got {}", where,
                            info.name, d, info.dims[d], got);
        continue;
      }
      auto [lo, hi] = info.dim_ranges[d];
      if (got < lo || got > hi)
        raise<ValueError>("exported program '{}': expected input {}.shape[{}] (dim '{}') in [{}, {}], got {}", where,
                          info.name, d, info.dim_names[d], lo, hi, got);
      int64_t& s = sizes[size_t(input_symbols[k][d])];
      if (s >= 0 && s != got)
        raise<ValueError>("exported program '{}': dim '{}' is {} in an earlier input and {} at {}.shape[{}]", where,
                          info.dim_names[d], s, got, info.name, d);
      s = got;
    }
  }
  return sizes;
}

namespace {

// Boxes a node's non-tensor arguments once; tensors are filled in per run.
PreparedNode prepare(const graph::Node& n, OperatorHandle op) {
  PreparedNode p;
  p.op = op;
  p.n_args = int32_t(n.args.size());
  p.slots.resize(std::max(n.args.size(), std::max(n.outputs.size(), size_t(op->num_returns()))) + 1);
  p.outputs = n.outputs;
  for (size_t i = 0; i < n.args.size(); ++i) {
    const graph::Arg& a = n.args[i];
    ts_value& v = p.slots[i];
    using A = graph::Arg::Kind;
    switch (a.kind) {
      case A::None: v.tag = TS_VALUE_NONE; break;
      case A::Tensor: v.tag = TS_VALUE_TENSOR; p.tensor_args.emplace_back(int32_t(i), a.tensor); break;
      case A::TensorList: v.tag = TS_VALUE_TENSOR_LIST; p.tensor_lists.emplace_back(int32_t(i), a.tensors); break;
      case A::Int: tessera::detail::box(v, a.i); break;
      case A::Double: tessera::detail::box(v, a.d); break;
      case A::Bool: tessera::detail::box(v, a.i != 0); break;
      case A::Ints: {
        auto& l = *p.int_lists.emplace_back(std::make_unique<std::vector<int64_t>>(a.ints));
        tessera::detail::box(v, l);
        break;
      }
      case A::Doubles: {
        auto& l = *p.double_lists.emplace_back(std::make_unique<std::vector<double>>(a.doubles));
        tessera::detail::box(v, l);
        break;
      }
      case A::Str: {
        auto& s = *p.strings.emplace_back(std::make_unique<std::string>(a.str));
        tessera::detail::box(v, s);
        break;
      }
      case A::Dtype: tessera::detail::box(v, ScalarType(a.i)); break;
      case A::Device: v.tag = TS_VALUE_DEVICE, v.u.device = a.device; break;
    }
  }
  return p;
}

}  // namespace

graph::Graph Program::Impl::graph_at(const std::vector<int64_t>& sizes) const {
  graph::Graph g = graph;
  for (const SymbolicInt& s : symbolic_ints) {
    const int64_t v = evaluate(s, sizes);
    switch (s.field) {
      case SymbolicInt::Field::Argument: {
        graph::Arg& a = g.nodes[size_t(s.node)].args[size_t(s.arg)];
        (s.element < 0 ? a.i : a.ints[size_t(s.element)]) = v;
        break;
      }
      case SymbolicInt::Field::Shape: g.values[size_t(s.value)].shape[size_t(s.dim)] = v; break;
      case SymbolicInt::Field::Strides: g.values[size_t(s.value)].strides[size_t(s.dim)] = v; break;
      case SymbolicInt::Field::Offset: g.values[size_t(s.value)].storage_offset = v; break;
    }
  }
  return g;
}

std::shared_ptr<const Plan> Program::Impl::plan_for(const std::vector<int64_t>& sizes) const {
  std::lock_guard lock(plans_mutex);
  auto it = plans.find(sizes);
  if (it != plans.end()) return it->second;
  graph::Graph g = graph_at(sizes);
  // Values are released after their last use, unless the caller gets them back.
  std::vector<int64_t> last_use(g.values.size(), -1);
  for (size_t k = 0; k < g.nodes.size(); ++k)
    for (const graph::Arg& a : g.nodes[k].args) {
      if (a.kind == graph::Arg::Kind::Tensor) last_use[size_t(a.tensor)] = int64_t(k);
      for (int64_t id : a.tensors)
        if (id >= 0) last_use[size_t(id)] = int64_t(k);
    }
  for (int64_t id : g.outputs) last_use[size_t(id)] = int64_t(g.nodes.size());
  auto plan = std::make_shared<Plan>();
  plan->nodes.reserve(g.nodes.size());
  for (size_t k = 0; k < g.nodes.size(); ++k) plan->nodes.push_back(prepare(g.nodes[k], ops[k]));
  for (size_t id = 0; id < last_use.size(); ++id)
    if (last_use[id] >= 0 && size_t(last_use[id]) < g.nodes.size())
      plan->nodes[size_t(last_use[id])].release_after.push_back(int64_t(id));
  // A cache per distinct size set; a server sees few (batch sizes), so no eviction.
  plans.emplace(sizes, plan);
  return plan;
}

std::vector<Tensor> Program::run(const std::vector<Tensor>& given) const { return execute(given, nullptr); }

std::vector<NodeTime> Program::profile(const std::vector<Tensor>& inputs, int repeats) const {
  if (repeats < 1) raise<ValueError>("exported program profile: repeats must be >= 1, got {}", repeats);
  const graph::Graph& g = impl_->graph;
  std::vector<std::vector<double>> samples;
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    execute(inputs, &times);
    samples.resize(times.size());
    for (size_t k = 0; k < times.size(); ++k) samples[k].push_back(times[k]);
  }
  // One entry per node, or one for the whole graph when the ahead-of-time kernels ran it.
  const bool native = samples.size() != g.nodes.size();
  std::vector<NodeTime> out;
  for (size_t k = 0; k < samples.size(); ++k) {
    std::sort(samples[k].begin(), samples[k].end());
    out.push_back({native ? "inductor::run" : g.nodes[k].op, samples[k][samples[k].size() / 2]});
  }
  return out;
}

std::vector<Tensor> Program::execute(const std::vector<Tensor>& given, std::vector<double>* node_us) const {
  const Impl& p = *impl_;
  std::vector<int64_t> sizes = p.check_inputs(given);
  auto native = p.native.find(sizes);
  std::shared_ptr<const Plan> plan = native == p.native.end() ? p.plan_for(sizes) : nullptr;
  std::unique_lock state_lock(p.run_mutex, std::defer_lock);
  if (!p.state_writes.empty()) state_lock.lock();
  // Inference: nothing records gradients (the autograd plugin is not loaded for it).
  std::optional<autograd::NoGradGuard> no_grad;
  if (autograd::is_loaded()) no_grad.emplace();

  const graph::Graph& g = p.graph;
  std::vector<Tensor> env(g.values.size());
  for (size_t k = 0; k < p.n_state; ++k) env[size_t(g.inputs[k])] = p.state[k];
  for (size_t k = 0; k < given.size(); ++k) env[size_t(g.inputs[p.n_state + k])] = given[k];
  for (size_t k = 0; k < p.constants.size(); ++k) env[size_t(g.constants[k])] = p.constants[k];

  std::vector<ts_value> slots;
  std::vector<std::vector<ts_tensor>> lists;
  Dispatcher& dispatcher = Dispatcher::instance();
  if (node_us) node_us->clear();
  if (!plan) {  // the archive's kernels for these sizes: one call of the compiled graph
    std::vector<Tensor> arguments;
    for (int64_t id : g.inputs) arguments.push_back(env[size_t(id)]);
    for (int64_t id : g.constants) arguments.push_back(env[size_t(id)]);
    ts_value stack_slots[2];
    tessera::detail::box(stack_slots[0], p.native_handle(native->second, sizes));
    tessera::detail::box(stack_slots[1], arguments);
    ts_stack stack{sizeof(ts_stack), stack_slots, 2, 2};
    auto start = std::chrono::steady_clock::now();
    dispatcher.call(p.inductor_run, &stack);
    if (node_us)
      node_us->push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    std::vector<Tensor> results = tessera::detail::unbox<std::vector<Tensor>>(stack_slots[0]);
    if (results.size() != g.outputs.size())
      raise<RuntimeError>("exported program '{}': the ahead-of-time kernels returned {} outputs, the graph has {}",
                          p.where, results.size(), g.outputs.size());
    for (size_t k = 0; k < results.size(); ++k) env[size_t(g.outputs[k])] = results[k];
  }
  static const std::vector<PreparedNode> kNoNodes;
  for (const PreparedNode& n : plan ? plan->nodes : kNoNodes) {
    slots.assign(n.slots.begin(), n.slots.end());
    for (auto [slot, id] : n.tensor_args) tessera::detail::box(slots[size_t(slot)], env[size_t(id)]);
    lists.resize(n.tensor_lists.size());
    for (size_t l = 0; l < n.tensor_lists.size(); ++l) {
      auto& [slot, ids] = n.tensor_lists[l];
      lists[l].clear();
      for (int64_t id : ids) lists[l].push_back(id < 0 ? nullptr : env[size_t(id)].handle());
      ts_value& v = slots[size_t(slot)];
      v.u.tensors.data = lists[l].data();
      v.u.tensors.size = int64_t(lists[l].size());
    }
    ts_stack stack{sizeof(ts_stack), slots.data(), n.n_args, int32_t(slots.size())};
    if (node_us) {
      auto start = std::chrono::steady_clock::now();
      dispatcher.call(n.op, &stack);
      node_us->push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    } else {
      dispatcher.call(n.op, &stack);
    }
    for (size_t r = 0; r < n.outputs.size() && int32_t(r) < stack.size; ++r) {
      const ts_value& out = slots[r];
      if (out.tag == TS_VALUE_TENSOR_LIST) {
        std::vector<Tensor> parts = tessera::detail::unbox<std::vector<Tensor>>(out);
        for (size_t j = 0; j < parts.size() && j < n.outputs[r].size(); ++j)
          if (n.outputs[r][j] >= 0) env[size_t(n.outputs[r][j])] = std::move(parts[j]);
      } else if (out.tag == TS_VALUE_TENSOR) {
        Tensor t = tessera::detail::unbox_tensor(out);
        if (!n.outputs[r].empty() && n.outputs[r][0] >= 0) env[size_t(n.outputs[r][0])] = std::move(t);
      }
    }
    for (int64_t id : n.release_after) env[size_t(id)] = Tensor();
  }
  std::vector<Tensor> outputs;
  outputs.reserve(p.n_user_outputs);
  for (size_t k = 0; k < p.n_user_outputs; ++k) outputs.push_back(env[size_t(g.outputs[k])]);
  // Buffers the graph wrote out of place (a new tensor holding the new statistics) are copied
  // back, so the next run sees them; ones written in place are the state tensors themselves.
  for (auto [index, id] : p.state_writes) {
    const Tensor& value = env[size_t(id)];
    if (value.defined() && value.handle() != p.state[index].handle()) const_cast<Tensor&>(p.state[index]).copy_(value);
  }
  return outputs;
}

Program& Program::to(const Device& device) {
  Impl& p = *impl_;
  std::lock_guard lock(p.run_mutex);
  for (Tensor& t : p.state) t = t.to(device);
  for (Tensor& t : p.constants) t = t.to(device);
  // Operator arguments that name the export device (a factory's device=) follow the program.
  for (graph::Node& n : p.graph.nodes)
    for (graph::Arg& a : n.args)
      if (a.kind == graph::Arg::Kind::Device && Device::from_abi(a.device) == p.device) a.device = device.to_abi();
  p.device = device;
  if (!p.native_options.empty()) select_native_kernels(p);  // the kernels for the new device's type
  std::lock_guard plans_lock(p.plans_mutex);
  p.plans.clear();
  return *this;
}

Device Program::device() const { return impl_->device; }
const std::vector<InputInfo>& Program::inputs() const { return impl_->inputs; }
size_t Program::num_outputs() const { return impl_->n_user_outputs; }
std::vector<std::string> Program::plugins() const { return impl_->plugins; }

std::vector<std::string> Program::operators() const {
  std::set<std::string> names;
  for (const graph::Node& n : impl_->graph.nodes) names.insert(n.op);
  return {names.begin(), names.end()};
}

std::map<std::string, std::string> Program::metadata() const {
  std::map<std::string, std::string> out;
  for (auto& [k, v] : impl_->metadata.items())
    if (k != "parts") out[k] = v.is_string() ? v.get<std::string>() : v.dump();
  return out;
}

std::vector<std::pair<std::string, Tensor>> Program::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < impl_->state.size(); ++k) out.emplace_back(impl_->state_names[k], impl_->state[k]);
  return out;
}

std::string Program::describe() const {
  const Impl& p = *impl_;
  std::string text = fmt::format("exported program '{}' on {}: {} nodes, {} operators, {} weights\n", p.where,
                                 p.device.str(), p.graph.nodes.size(), operators().size(), p.state.size());
  for (const InputInfo& in : p.inputs) {
    std::vector<std::string> dims;
    for (size_t d = 0; d < in.dims.size(); ++d)
      dims.push_back(in.dims[d] >= 0 ? std::to_string(in.dims[d])
                                     : fmt::format("{}[{}..{}]", in.dim_names[d], in.dim_ranges[d].first,
                                                   in.dim_ranges[d].second));
    text += fmt::format("  input {}: {} [{}]\n", in.name, name(in.dtype), fmt::join(dims, ", "));
  }
  text += fmt::format("  outputs: {}\n", p.n_user_outputs);
  text += p.native.empty() ? fmt::format("  kernels: the portable graph (ahead-of-time kernels: {})\n", p.native_reason)
                           : fmt::format("  kernels: ahead-of-time, for {} size set(s); other sizes run the portable graph\n",
                                         p.native.size());
  return text;
}

namespace {

Program load_parts(detail::ArchiveParts parts, const LoadOptions& options, const std::string& where) {
  auto impl = make_program(parts.metadata, parts.graph, parts.program, std::move(parts.weights), where);
  if (options.allow_native) attach_native_kernels(*impl, parts.extra);
  return Program(impl);
}

}  // namespace

Program load_from_memory(std::span<const std::byte> archive, const LoadOptions& options, const std::string& where) {
  return load_parts(detail::read_archive(archive, where), options, where);
}

bool Program::native() const { return !impl_->native.empty(); }
const std::string& Program::native_reason() const { return impl_->native_reason; }

Program load(const std::string& path, const LoadOptions& options) {
  auto file = std::make_shared<detail::MappedFile>(path);
  return load_parts(detail::read_archive(file->bytes(), path, file), options, path);
}

}  // namespace tessera::exported
