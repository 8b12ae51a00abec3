#pragma once
// The graph IR's serialised form, read and written header-only: the capture plugin (tracer)
// writes it, compilers (Tessera's own and a vendor's), export and the C++ runtime read it.
// A consumer needs this header and nlohmann/json, nothing of the host's C++.
//
// Format "tessera.graph", version 1 (JSON):
//   { "format": "tessera.graph", "version": 1,
//     "values":  [ {"id", "kind": "input"|"constant"|"node", "dtype", "shape", "strides",
//                   "storage_offset", "device": [type, index], "alias_of": id | -1} ],
//     "inputs":    [value id, ...]     graph inputs, in call order
//     "constants": [value id, ...]     tensors the function read but did not receive
//                                      (parameters, closures); passed after the inputs
//     "nodes":     [ {"op": "add.Tensor", "args": [arg, ...], "outputs": [id | [ids]],
//                     "mutates": [argument index, ...], "grad_enabled": false (only when so)} ]
//     "outputs":   [value id, ...]
//     "mutated_inputs": [[input position, value id holding its final contents], ...] }
// An arg is {"tensor": id}, {"tensors": [id | null, ...]}, {"int": n}, {"double": x | "inf" |
// "-inf" | "nan"}, {"bool": b}, {"ints": [...]}, {"doubles": [...]}, {"str": s},
// {"dtype": code}, {"device": [type, index]} or {"none": null}, in the operator's schema order
// (the boxed stack the dispatcher saw). Nodes are in execution order; an in-place node's
// output is a new value id for the mutated tensor (SSA), listed in "mutates" by argument.
// Readers refuse another format or a newer version with a message naming both.
#include <tessera/abi.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tessera::sdk::graph {

inline constexpr const char* kFormat = "tessera.graph";
inline constexpr int kVersion = 1;

enum class ValueKind { Input, Constant, Node };

// Row-major strides of a dense tensor of `shape` (a size-0 dim counts as 1, as PyTorch's).
inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t step = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = step;
    step *= shape[d] > 1 ? shape[d] : 1;
  }
  return strides;
}

struct Value {
  int64_t id = 0;
  ValueKind kind = ValueKind::Node;
  int32_t dtype = TS_FLOAT32;
  std::vector<int64_t> shape, strides;
  int64_t storage_offset = 0;
  ts_device device{0, 0};
  int64_t alias_of = -1;  // the value whose storage this one views, or -1

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
  bool is_contiguous() const {
    int64_t expected = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      if (shape[d] != 1 && strides[d] != expected) return false;
      expected *= shape[d];
    }
    return true;
  }
};

struct Arg {
  enum class Kind { None, Tensor, TensorList, Int, Double, Bool, Ints, Doubles, Str, Dtype, Device };
  Kind kind = Kind::None;
  int64_t tensor = -1;                // Tensor: value id
  std::vector<int64_t> tensors;       // TensorList: value ids, -1 for None
  int64_t i = 0;                      // Int, Dtype, Bool
  double d = 0;                       // Double
  std::vector<int64_t> ints;          // Ints
  std::vector<double> doubles;        // Doubles
  std::string str;                    // Str
  ts_device device{0, 0};             // Device
};

struct Node {
  std::string op;                          // full operator name, "add.Tensor"
  std::vector<Arg> args;
  std::vector<std::vector<int64_t>> outputs;  // one entry per return; a Tensor[] return has several ids
  std::vector<int> mutates;                // argument positions written in place
  bool grad_enabled = true;                // false: called under no_grad (written only then)
  bool in_place() const { return !mutates.empty(); }
  // The single tensor output of the common one-return case, or -1.
  int64_t output() const { return outputs.size() == 1 && outputs[0].size() == 1 ? outputs[0][0] : -1; }
};

struct Graph {
  std::vector<Value> values;  // values[id].id == id
  std::vector<int64_t> inputs, constants, outputs;
  std::vector<std::pair<int64_t, int64_t>> mutated_inputs;
  std::vector<Node> nodes;

  const Value& value(int64_t id) const {
    if (id < 0 || id >= int64_t(values.size()))
      throw std::out_of_range("tessera.graph: value id " + std::to_string(id) + " is out of range 0.." +
                              std::to_string(values.size()));
    return values[size_t(id)];
  }
};

namespace detail {
inline nlohmann::json double_json(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}
inline double json_double(const nlohmann::json& j) {
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    throw std::invalid_argument("tessera.graph: a double is a number, \"inf\", \"-inf\" or \"nan\", got \"" + s + "\"");
  }
  return j.get<double>();
}
inline const char* kind_name(ValueKind k) {
  return k == ValueKind::Input ? "input" : k == ValueKind::Constant ? "constant" : "node";
}
inline ValueKind kind_from(const std::string& s) {
  if (s == "input") return ValueKind::Input;
  if (s == "constant") return ValueKind::Constant;
  if (s == "node") return ValueKind::Node;
  throw std::invalid_argument("tessera.graph: value kind must be input, constant or node, got '" + s + "'");
}

inline nlohmann::json arg_json(const Arg& a) {
  using K = Arg::Kind;
  nlohmann::json j = nlohmann::json::object();
  switch (a.kind) {
    case K::None: j["none"] = nullptr; break;
    case K::Tensor: j["tensor"] = a.tensor; break;
    case K::TensorList: {
      nlohmann::json ids = nlohmann::json::array();
      for (int64_t id : a.tensors) ids.push_back(id < 0 ? nlohmann::json() : nlohmann::json(id));
      j["tensors"] = ids;
      break;
    }
    case K::Int: j["int"] = a.i; break;
    case K::Double: j["double"] = double_json(a.d); break;
    case K::Bool: j["bool"] = a.i != 0; break;
    case K::Ints: j["ints"] = a.ints; break;
    case K::Doubles: {
      nlohmann::json xs = nlohmann::json::array();
      for (double x : a.doubles) xs.push_back(double_json(x));
      j["doubles"] = xs;
      break;
    }
    case K::Str: j["str"] = a.str; break;
    case K::Dtype: j["dtype"] = a.i; break;
    case K::Device: j["device"] = {a.device.type, a.device.index}; break;
  }
  return j;
}

inline Arg arg_from(const nlohmann::json& j) {
  using K = Arg::Kind;
  if (!j.is_object() || j.size() != 1)
    throw std::invalid_argument("tessera.graph: an argument is an object with one key, got " + j.dump());
  const auto it = j.begin();  // (not j.items(): its proxy would die before `key` is read)
  const std::string key = it.key();
  const nlohmann::json& v = it.value();
  Arg a;
  if (key == "none") a.kind = K::None;
  else if (key == "tensor") a.kind = K::Tensor, a.tensor = v.get<int64_t>();
  else if (key == "tensors") {
    a.kind = K::TensorList;
    for (const auto& id : v) a.tensors.push_back(id.is_null() ? -1 : id.get<int64_t>());
  } else if (key == "int") a.kind = K::Int, a.i = v.get<int64_t>();
  else if (key == "double") a.kind = K::Double, a.d = json_double(v);
  else if (key == "bool") a.kind = K::Bool, a.i = v.get<bool>();
  else if (key == "ints") a.kind = K::Ints, a.ints = v.get<std::vector<int64_t>>();
  else if (key == "doubles") {
    a.kind = K::Doubles;
    for (const auto& x : v) a.doubles.push_back(json_double(x));
  } else if (key == "str") a.kind = K::Str, a.str = v.get<std::string>();
  else if (key == "dtype") a.kind = K::Dtype, a.i = v.get<int64_t>();
  else if (key == "device") a.kind = K::Device, a.device = {v.at(0).get<int32_t>(), v.at(1).get<int32_t>()};
  else throw std::invalid_argument("tessera.graph: unknown argument kind '" + key + "'");
  return a;
}
}  // namespace detail

inline std::string to_json(const Graph& g) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  nlohmann::json values = nlohmann::json::array();
  for (const Value& v : g.values)
    values.push_back({{"id", v.id}, {"kind", detail::kind_name(v.kind)}, {"dtype", v.dtype}, {"shape", v.shape},
                      {"strides", v.strides}, {"storage_offset", v.storage_offset},
                      {"device", {v.device.type, v.device.index}}, {"alias_of", v.alias_of}});
  j["values"] = values;
  j["inputs"] = g.inputs;
  j["constants"] = g.constants;
  j["outputs"] = g.outputs;
  nlohmann::json mutated = nlohmann::json::array();
  for (auto [position, id] : g.mutated_inputs) mutated.push_back({position, id});
  j["mutated_inputs"] = mutated;
  nlohmann::json nodes = nlohmann::json::array();
  for (const Node& n : g.nodes) {
    nlohmann::json args = nlohmann::json::array();
    for (const Arg& a : n.args) args.push_back(detail::arg_json(a));
    nlohmann::json outputs = nlohmann::json::array();
    for (const auto& ids : n.outputs) outputs.push_back(ids.size() == 1 ? nlohmann::json(ids[0]) : nlohmann::json(ids));
    nlohmann::json node = {{"op", n.op}, {"args", args}, {"outputs", outputs}, {"mutates", n.mutates}};
    if (!n.grad_enabled) node["grad_enabled"] = false;
    nodes.push_back(std::move(node));
  }
  j["nodes"] = nodes;
  return j.dump();
}

// Every number outside a "double"/"doubles" argument must be an integer: converting a float
// such as 1e53 to an integer field would be undefined behaviour, not an error.
inline void check_integers(const nlohmann::json& j, bool floats_allowed = false) {
  if (j.is_number_float() && !floats_allowed)
    throw std::invalid_argument("tessera.graph: " + j.dump() + " where an integer is expected");
  if (j.is_array())
    for (const auto& x : j) check_integers(x, floats_allowed);
  if (j.is_object())
    for (const auto& [key, x] : j.items()) check_integers(x, key == "double" || key == "doubles");
}

// Parses and checks a serialised graph; throws std::invalid_argument naming what is wrong.
inline Graph parse(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw std::invalid_argument("tessera.graph: the text is not valid JSON");
  if (!j.is_object() || j.value("format", std::string()) != kFormat)
    throw std::invalid_argument(std::string("tessera.graph: expected format '") + kFormat + "', got " +
                                (j.is_object() && j.contains("format") ? j["format"].dump() : std::string("none")));
  check_integers(j);
  const int64_t version = j.value("version", int64_t(0));
  if (version < 1 || version > kVersion)
    throw std::invalid_argument("tessera.graph: this reader understands versions 1.." + std::to_string(kVersion) +
                                ", got version " + std::to_string(version));
  Graph g;
  try {
    for (const auto& v : j.at("values")) {
      Value value;
      value.id = v.at("id").get<int64_t>();
      if (value.id != int64_t(g.values.size()))
        throw std::invalid_argument("tessera.graph: value ids must be 0, 1, 2... in order; value " +
                                    std::to_string(g.values.size()) + " has id " + std::to_string(value.id));
      value.kind = detail::kind_from(v.at("kind").get<std::string>());
      value.dtype = v.at("dtype").get<int32_t>();
      value.shape = v.at("shape").get<std::vector<int64_t>>();
      value.strides = v.at("strides").get<std::vector<int64_t>>();
      value.storage_offset = v.value("storage_offset", int64_t(0));
      value.device = {v.at("device").at(0).get<int32_t>(), v.at("device").at(1).get<int32_t>()};
      value.alias_of = v.value("alias_of", int64_t(-1));
      if (value.shape.size() != value.strides.size())
        throw std::invalid_argument("tessera.graph: value " + std::to_string(value.id) + " has " +
                                    std::to_string(value.shape.size()) + " sizes but " +
                                    std::to_string(value.strides.size()) + " strides");
      g.values.push_back(std::move(value));
    }
    g.inputs = j.at("inputs").get<std::vector<int64_t>>();
    g.constants = j.at("constants").get<std::vector<int64_t>>();
    g.outputs = j.at("outputs").get<std::vector<int64_t>>();
    for (const auto& m : j.value("mutated_inputs", nlohmann::json::array()))
      g.mutated_inputs.emplace_back(m.at(0).get<int64_t>(), m.at(1).get<int64_t>());
    for (const auto& n : j.at("nodes")) {
      Node node;
      node.op = n.at("op").get<std::string>();
      for (const auto& a : n.at("args")) node.args.push_back(detail::arg_from(a));
      for (const auto& o : n.at("outputs"))
        node.outputs.push_back(o.is_array() ? o.get<std::vector<int64_t>>() : std::vector<int64_t>{o.get<int64_t>()});
      node.mutates = n.value("mutates", std::vector<int>());
      node.grad_enabled = n.value("grad_enabled", true);
      g.nodes.push_back(std::move(node));
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("tessera.graph: malformed graph: ") + e.what());
  }
  auto check_id = [&](int64_t id, const char* where) {
    if (id < 0 || id >= int64_t(g.values.size()))
      throw std::invalid_argument(std::string("tessera.graph: ") + where + " refers to value " + std::to_string(id) +
                                  ", but there are " + std::to_string(g.values.size()) + " values");
  };
  for (int64_t id : g.inputs) check_id(id, "inputs");
  for (int64_t id : g.constants) check_id(id, "constants");
  for (int64_t id : g.outputs) check_id(id, "outputs");
  for (const Node& n : g.nodes) {
    for (const Arg& a : n.args) {
      if (a.kind == Arg::Kind::Tensor) check_id(a.tensor, n.op.c_str());
      for (int64_t id : a.tensors)
        if (id >= 0) check_id(id, n.op.c_str());
    }
    for (const auto& ids : n.outputs)
      for (int64_t id : ids)
        if (id >= 0) check_id(id, n.op.c_str());  // -1: an undefined optional tensor
  }
  return g;
}

}  // namespace tessera::sdk::graph
