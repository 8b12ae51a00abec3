// The graph IR's serialised form (sdk/include/tessera/sdk/graph_ir.h): every argument kind
// round-trips (non-finite doubles included), and each malformed input is refused with a
// message naming what is wrong.
#include <tessera/sdk/graph_ir.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace g = tessera::sdk::graph;
using ::testing::HasSubstr;

namespace {

g::Value value(int64_t id, g::ValueKind kind, std::vector<int64_t> shape) {
  g::Value v;
  v.id = id;
  v.kind = kind;
  v.shape = shape;
  int64_t stride = 1;
  v.strides.assign(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) v.strides[d] = stride, stride *= shape[d];
  return v;
}

g::Graph sample_graph() {
  g::Graph graph;
  graph.values = {value(0, g::ValueKind::Input, {2, 3}), value(1, g::ValueKind::Constant, {3}),
                  value(2, g::ValueKind::Node, {2, 3}), value(3, g::ValueKind::Node, {2, 3})};
  graph.values[3].alias_of = 0;
  graph.inputs = {0};
  graph.constants = {1};
  graph.outputs = {2};
  graph.mutated_inputs = {{0, 3}};
  using K = g::Arg::Kind;
  g::Node node;
  node.op = "fancy.op";
  auto arg = [](K kind) {
    g::Arg a;
    a.kind = kind;
    return a;
  };
  g::Arg t = arg(K::Tensor);
  t.tensor = 0;
  g::Arg list = arg(K::TensorList);
  list.tensors = {0, -1, 1};
  g::Arg i = arg(K::Int);
  i.i = -7;
  g::Arg d = arg(K::Double);
  d.d = std::numeric_limits<double>::infinity();
  g::Arg nan = arg(K::Double);
  nan.d = std::nan("");
  g::Arg b = arg(K::Bool);
  b.i = 1;
  g::Arg ints = arg(K::Ints);
  ints.ints = {1, -1};
  g::Arg doubles = arg(K::Doubles);
  doubles.doubles = {0.5, -std::numeric_limits<double>::infinity()};
  g::Arg str = arg(K::Str);
  str.str = "tanh";
  g::Arg dtype = arg(K::Dtype);
  dtype.i = TS_FLOAT64;
  g::Arg device = arg(K::Device);
  device.device = {1, 3};
  node.args = {t, list, i, d, nan, b, ints, doubles, str, dtype, device, arg(K::None)};
  node.outputs = {{2}};
  graph.nodes.push_back(node);
  g::Node inplace;
  inplace.op = "add_.Scalar";
  inplace.args = {t, i, i};
  inplace.outputs = {{3}};
  inplace.mutates = {0};
  graph.nodes.push_back(inplace);
  return graph;
}

TEST(GraphIr, EveryArgumentKindRoundTrips) {
  const g::Graph graph = g::parse(g::to_json(sample_graph()));
  ASSERT_EQ(graph.values.size(), 4u);
  EXPECT_EQ(graph.values[3].alias_of, 0);
  EXPECT_EQ(graph.values[1].kind, g::ValueKind::Constant);
  EXPECT_EQ(graph.values[0].strides, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(graph.mutated_inputs, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}}));
  const auto& a = graph.nodes[0].args;
  EXPECT_EQ(a[0].tensor, 0);
  EXPECT_EQ(a[1].tensors, (std::vector<int64_t>{0, -1, 1}));
  EXPECT_EQ(a[2].i, -7);
  EXPECT_TRUE(std::isinf(a[3].d) && a[3].d > 0);
  EXPECT_TRUE(std::isnan(a[4].d));
  EXPECT_EQ(a[5].i, 1);
  EXPECT_EQ(a[6].ints, (std::vector<int64_t>{1, -1}));
  EXPECT_TRUE(std::isinf(a[7].doubles[1]) && a[7].doubles[1] < 0);
  EXPECT_EQ(a[8].str, "tanh");
  EXPECT_EQ(a[9].i, TS_FLOAT64);
  EXPECT_EQ(a[10].device.type, 1);
  EXPECT_EQ(a[10].device.index, 3);
  EXPECT_EQ(a[11].kind, g::Arg::Kind::None);
  EXPECT_TRUE(graph.nodes[1].in_place());
  EXPECT_EQ(graph.nodes[1].output(), 3);
}

void expect_refused(const std::string& text, const std::string& message) {
  try {
    g::parse(text);
    ADD_FAILURE() << "parsed: " << text;
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr(message));
  }
}

TEST(GraphIr, MalformedGraphsAreRefusedByName) {
  expect_refused("{", "not valid JSON");
  expect_refused(R"({"format": "onnx", "version": 1})", "expected format 'tessera.graph', got \"onnx\"");
  expect_refused(R"({"format": "tessera.graph", "version": 2})", "understands versions 1..1, got version 2");
  std::string text = g::to_json(sample_graph());
  std::string bad_ref = text;
  bad_ref.replace(bad_ref.find("\"outputs\":[2]"), 13, "\"outputs\":[9]");
  expect_refused(bad_ref, "refers to value 9, but there are 4 values");
  std::string bad_strides = text;
  bad_strides.replace(bad_strides.find("\"strides\":[3,1]"), 15, "\"strides\":[1]");
  expect_refused(bad_strides, "value 0 has 2 sizes but 1 strides");
  std::string bad_kind = text;
  bad_kind.replace(bad_kind.find("\"kind\":\"input\""), 14, "\"kind\":\"weird\"");
  expect_refused(bad_kind, "value kind must be input, constant or node, got 'weird'");
  std::string missing = text;
  missing.replace(missing.find("\"nodes\""), 7, "\"nodez\"");
  expect_refused(missing, "malformed graph");
}

}  // namespace
