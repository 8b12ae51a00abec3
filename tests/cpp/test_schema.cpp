// Tests of the operator schema parser: every parsed field of PyTorch-style schemas, the
// canonical printing and its round trip, aliasing queries, and the errors on bad text.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "tessera/error.h"
#include "tessera/schema.h"

namespace tessera {
// So that a failed EXPECT_EQ on schemas prints them readably.
void PrintTo(const FunctionSchema& schema, std::ostream* os) { *os << schema.to_string(); }
}  // namespace tessera

namespace {

using tessera::AliasInfo;
using tessera::Argument;
using tessera::DefaultValue;
using tessera::FunctionSchema;
using tessera::parse_schema;
using tessera::SchemaError;
using tessera::SchemaType;
using TK = tessera::SchemaType::Kind;
using VK = tessera::DefaultValue::Kind;

// Checks the type of `a` in one line: kind, list, fixed size, optional, element optional.
void expect_type(const Argument& a, TK kind, bool is_list = false,
                 std::optional<int64_t> fixed_size = std::nullopt, bool optional = false,
                 bool element_optional = false) {
  SCOPED_TRACE("argument '" + a.name + "'");
  EXPECT_EQ(a.type.kind, kind);
  EXPECT_EQ(a.type.is_list, is_list);
  EXPECT_EQ(a.type.fixed_size, fixed_size);
  EXPECT_EQ(a.type.optional, optional);
  EXPECT_EQ(a.type.element_optional, element_optional);
}

void expect_alias(const Argument& a, const std::string& set, bool is_write) {
  SCOPED_TRACE("argument '" + a.name + "'");
  ASSERT_TRUE(a.alias.has_value());
  EXPECT_EQ(a.alias->set, set);
  EXPECT_EQ(a.alias->is_write, is_write);
}

// ---- valid schemas, field by field ------------------------------------------------------

TEST(SchemaParse, AddTensor) {
  auto s = parse_schema("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  EXPECT_EQ(s.ns, "aten");
  EXPECT_EQ(s.name, "add");
  EXPECT_EQ(s.overload, "Tensor");
  EXPECT_EQ(s.qualified_name(), "aten::add.Tensor");
  EXPECT_FALSE(s.is_vararg);
  EXPECT_FALSE(s.is_varret);
  ASSERT_EQ(s.arguments.size(), 3u);
  EXPECT_EQ(s.arguments[0].name, "self");
  expect_type(s.arguments[0], TK::Tensor);
  EXPECT_FALSE(s.arguments[0].kwarg_only);
  EXPECT_FALSE(s.arguments[0].alias.has_value());
  EXPECT_FALSE(s.arguments[0].default_value.has_value());
  EXPECT_EQ(s.arguments[1].name, "other");
  expect_type(s.arguments[1], TK::Tensor);
  EXPECT_FALSE(s.arguments[1].kwarg_only);
  EXPECT_EQ(s.arguments[2].name, "alpha");
  expect_type(s.arguments[2], TK::Scalar);
  EXPECT_TRUE(s.arguments[2].kwarg_only);
  ASSERT_TRUE(s.arguments[2].default_value.has_value());
  EXPECT_EQ(s.arguments[2].default_value->kind, VK::Int);
  EXPECT_EQ(s.arguments[2].default_value->i, 1);
  EXPECT_EQ(s.arguments[2].default_value->text, "1");
  ASSERT_EQ(s.returns.size(), 1u);
  EXPECT_EQ(s.returns[0].name, "");
  expect_type(s.returns[0], TK::Tensor);
  EXPECT_FALSE(s.returns[0].alias.has_value());
  EXPECT_FALSE(s.is_mutable());
  EXPECT_FALSE(s.is_view());
  EXPECT_EQ(s.argument_index("self"), 0u);
  EXPECT_EQ(s.argument_index("alpha"), 2u);
  EXPECT_EQ(s.argument_index("beta"), std::nullopt);
}

TEST(SchemaParse, SumDimIntList) {
  auto s = parse_schema(
      "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, "
      "ScalarType? dtype=None) -> Tensor");
  EXPECT_EQ(s.qualified_name(), "aten::sum.dim_IntList");
  ASSERT_EQ(s.arguments.size(), 4u);
  EXPECT_EQ(s.arguments[1].name, "dim");
  expect_type(s.arguments[1], TK::Int, /*is_list=*/true, 1, /*optional=*/true);
  EXPECT_FALSE(s.arguments[1].default_value.has_value());
  EXPECT_FALSE(s.arguments[1].kwarg_only);
  EXPECT_EQ(s.arguments[2].name, "keepdim");
  expect_type(s.arguments[2], TK::Bool);
  ASSERT_TRUE(s.arguments[2].default_value);
  EXPECT_EQ(s.arguments[2].default_value->kind, VK::Bool);
  EXPECT_FALSE(s.arguments[2].default_value->b);
  EXPECT_EQ(s.arguments[2].default_value->text, "False");
  EXPECT_FALSE(s.arguments[2].kwarg_only);
  EXPECT_EQ(s.arguments[3].name, "dtype");
  expect_type(s.arguments[3], TK::ScalarType, false, std::nullopt, /*optional=*/true);
  EXPECT_TRUE(s.arguments[3].kwarg_only);
  ASSERT_TRUE(s.arguments[3].default_value);
  EXPECT_EQ(s.arguments[3].default_value->kind, VK::None);
  EXPECT_EQ(s.arguments[3].default_value->text, "None");
  EXPECT_EQ(s.arguments[1].type.to_string(), "int[1]?");
}

TEST(SchemaParse, AddInplaceIsMutable) {
  auto s = parse_schema(
      "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)");
  EXPECT_EQ(s.name, "add_");
  EXPECT_EQ(s.overload, "Tensor");
  ASSERT_EQ(s.arguments.size(), 3u);
  expect_alias(s.arguments[0], "a", true);
  expect_type(s.arguments[0], TK::Tensor);
  EXPECT_FALSE(s.arguments[1].alias.has_value());
  ASSERT_EQ(s.returns.size(), 1u);
  expect_alias(s.returns[0], "a", true);
  EXPECT_TRUE(s.is_mutable());
  EXPECT_FALSE(s.is_view());  // the return aliases self, but as a write
  EXPECT_EQ(s.arguments[0].to_string(), "Tensor(a!) self");
}

TEST(SchemaParse, AddOut) {
  auto s = parse_schema(
      "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)");
  EXPECT_EQ(s.ns, "");
  EXPECT_EQ(s.name, "add");
  EXPECT_EQ(s.overload, "out");
  EXPECT_EQ(s.qualified_name(), "add.out");
  ASSERT_EQ(s.arguments.size(), 4u);
  EXPECT_EQ(s.arguments[3].name, "out");
  EXPECT_TRUE(s.arguments[3].kwarg_only);
  EXPECT_TRUE(s.arguments[2].kwarg_only);
  expect_alias(s.arguments[3], "a", true);
  EXPECT_FALSE(s.arguments[3].default_value.has_value());
  expect_alias(s.returns.at(0), "a", true);
  EXPECT_TRUE(s.is_mutable());
  EXPECT_FALSE(s.is_view());
  EXPECT_EQ(s.argument_index("out"), 3u);
}

TEST(SchemaParse, MaxDimNamedReturns) {
  auto s = parse_schema(
      "aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)");
  ASSERT_EQ(s.arguments.size(), 3u);
  expect_type(s.arguments[1], TK::Int);
  EXPECT_EQ(s.arguments[1].name, "dim");
  ASSERT_EQ(s.returns.size(), 2u);
  EXPECT_EQ(s.returns[0].name, "values");
  EXPECT_EQ(s.returns[1].name, "indices");
  expect_type(s.returns[0], TK::Tensor);
  expect_type(s.returns[1], TK::Tensor);
  EXPECT_FALSE(s.returns[0].default_value.has_value());
  EXPECT_FALSE(s.returns[0].kwarg_only);
}

TEST(SchemaParse, UnnamedTupleReturns) {
  auto s = parse_schema(
      "aten::sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor, Tensor)");
  ASSERT_EQ(s.returns.size(), 2u);
  EXPECT_EQ(s.returns[0].name, "");
  EXPECT_EQ(s.returns[1].name, "");
  EXPECT_EQ(s.arguments[1].default_value->kind, VK::Int);
  EXPECT_EQ(s.arguments[1].default_value->i, -1);
  EXPECT_EQ(s.arguments[1].default_value->text, "-1");
}

TEST(SchemaParse, Cat) {
  auto s = parse_schema("aten::cat(Tensor[] tensors, int dim=0) -> Tensor");
  EXPECT_EQ(s.overload, "");
  EXPECT_EQ(s.qualified_name(), "aten::cat");
  ASSERT_EQ(s.arguments.size(), 2u);
  EXPECT_EQ(s.arguments[0].name, "tensors");
  expect_type(s.arguments[0], TK::Tensor, /*is_list=*/true);
  EXPECT_EQ(s.arguments[1].default_value->kind, VK::Int);
  EXPECT_EQ(s.arguments[1].default_value->i, 0);
}

TEST(SchemaParse, IndexTensorOptionalElements) {
  auto s = parse_schema("aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor");
  ASSERT_EQ(s.arguments.size(), 2u);
  expect_type(s.arguments[1], TK::Tensor, /*is_list=*/true, std::nullopt, /*optional=*/false,
              /*element_optional=*/true);
  EXPECT_EQ(s.arguments[1].type.to_string(), "Tensor?[]");
}

TEST(SchemaParse, TransposeIsView) {
  auto s = parse_schema("aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)");
  EXPECT_EQ(s.overload, "int");
  expect_alias(s.arguments[0], "a", false);
  expect_alias(s.returns.at(0), "a", false);
  EXPECT_EQ(s.arguments[1].name, "dim0");
  EXPECT_EQ(s.arguments[2].name, "dim1");
  EXPECT_FALSE(s.is_mutable());
  EXPECT_TRUE(s.is_view());
}

TEST(SchemaParse, DivTensorModeOptionalStr) {
  auto s = parse_schema(
      "aten::div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor");
  EXPECT_EQ(s.overload, "Tensor_mode");
  ASSERT_EQ(s.arguments.size(), 3u);
  EXPECT_EQ(s.arguments[2].name, "rounding_mode");
  expect_type(s.arguments[2], TK::Str, false, std::nullopt, /*optional=*/true);
  EXPECT_TRUE(s.arguments[2].kwarg_only);
  EXPECT_FALSE(s.arguments[2].default_value.has_value());
}

TEST(SchemaParse, LayerNorm) {
  auto s = parse_schema(
      "aten::layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, "
      "Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor");
  ASSERT_EQ(s.arguments.size(), 6u);
  expect_type(s.arguments[1], TK::Int, /*is_list=*/true);  // SymInt reads as int
  expect_type(s.arguments[2], TK::Tensor, false, std::nullopt, /*optional=*/true);
  EXPECT_EQ(s.arguments[2].default_value->kind, VK::None);
  const DefaultValue& eps = *s.arguments[4].default_value;
  EXPECT_EQ(eps.kind, VK::Float);
  EXPECT_DOUBLE_EQ(eps.f, 1e-05);
  EXPECT_EQ(eps.text, "1e-05");
  EXPECT_EQ(s.arguments[5].default_value->kind, VK::Bool);
  EXPECT_TRUE(s.arguments[5].default_value->b);
  EXPECT_EQ(s.arguments[1].type.to_string(), "int[]");
}

TEST(SchemaParse, EmptyReturns) {
  auto s = parse_schema("aten::_foreach_add_.Scalar(Tensor(a!)[] self, Scalar scalar) -> ()");
  EXPECT_TRUE(s.returns.empty());
  EXPECT_FALSE(s.is_varret);
  expect_type(s.arguments[0], TK::Tensor, /*is_list=*/true);
  expect_alias(s.arguments[0], "a", true);
  EXPECT_TRUE(s.is_mutable());
  EXPECT_FALSE(s.is_view());
  EXPECT_EQ(s.to_string(), "aten::_foreach_add_.Scalar(Tensor(a!)[] self, Scalar scalar) -> ()");
}

TEST(SchemaParse, NoArguments) {
  auto s = parse_schema("aten::_cuda_clear() -> ()");
  EXPECT_TRUE(s.arguments.empty());
  EXPECT_TRUE(s.returns.empty());
  EXPECT_EQ(s.to_string(), "aten::_cuda_clear() -> ()");
}

TEST(SchemaParse, Conv2dFixedSizeListDefaults) {
  auto s = parse_schema(
      "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, "
      "SymInt[2] padding=0, SymInt[2] dilation=[1, 1], SymInt groups=1) -> Tensor");
  ASSERT_EQ(s.arguments.size(), 7u);
  expect_type(s.arguments[3], TK::Int, /*is_list=*/true, 2);
  // A single value on int[N] stands for N copies; the text is kept as written.
  const DefaultValue& stride = *s.arguments[3].default_value;
  EXPECT_EQ(stride.kind, VK::IntList);
  EXPECT_EQ(stride.ints, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(stride.text, "1");
  EXPECT_EQ(s.arguments[4].default_value->ints, (std::vector<int64_t>{0, 0}));
  const DefaultValue& dilation = *s.arguments[5].default_value;
  EXPECT_EQ(dilation.kind, VK::IntList);
  EXPECT_EQ(dilation.ints, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(dilation.text, "[1, 1]");
  EXPECT_EQ(s.arguments[6].default_value->kind, VK::Int);
  EXPECT_EQ(s.arguments[3].to_string(), "int[2] stride=1");
}

TEST(SchemaParse, StringAndIdentifierDefaults) {
  auto s = parse_schema(
      "aten::f(Tensor self, str reduction=\"mean\", str padding='valid', int mode=Mean, "
      "ScalarType dtype=long, MemoryFormat memory_format=contiguous_format, "
      "Device device=\"cpu\", str esc=\"a\\\"b\\n\") -> Tensor");
  ASSERT_EQ(s.arguments.size(), 8u);
  const DefaultValue& reduction = *s.arguments[1].default_value;
  EXPECT_EQ(reduction.kind, VK::Str);
  EXPECT_EQ(reduction.s, "mean");
  EXPECT_EQ(reduction.text, "\"mean\"");
  const DefaultValue& padding = *s.arguments[2].default_value;
  EXPECT_EQ(padding.kind, VK::Str);
  EXPECT_EQ(padding.s, "valid");
  EXPECT_EQ(padding.text, "'valid'");
  const DefaultValue& mode = *s.arguments[3].default_value;
  EXPECT_EQ(mode.kind, VK::Identifier);
  EXPECT_EQ(mode.s, "Mean");
  EXPECT_EQ(s.arguments[4].default_value->kind, VK::Identifier);
  EXPECT_EQ(s.arguments[4].default_value->s, "long");
  expect_type(s.arguments[5], TK::MemoryFormat);
  EXPECT_EQ(s.arguments[5].default_value->s, "contiguous_format");
  EXPECT_EQ(s.arguments[5].default_value->text, "contiguous_format");
  EXPECT_EQ(s.arguments[6].default_value->kind, VK::Str);
  EXPECT_EQ(s.arguments[6].default_value->s, "cpu");
  EXPECT_EQ(s.arguments[7].default_value->s, "a\"b\n");
  EXPECT_EQ(s.arguments[7].default_value->text, "\"a\\\"b\\n\"");
}

TEST(SchemaParse, FactoryKeywordArguments) {
  auto s = parse_schema(
      "aten::empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, "
      "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None, "
      "Generator? generator=None, Dimname[1]? names=None) -> Tensor");
  ASSERT_EQ(s.arguments.size(), 8u);
  const TK kinds[] = {TK::Int,  TK::ScalarType,   TK::Layout,    TK::Device,
                      TK::Bool, TK::MemoryFormat, TK::Generator, TK::Dimname};
  for (size_t k = 0; k < s.arguments.size(); ++k) {
    EXPECT_EQ(s.arguments[k].type.kind, kinds[k]) << k;
    EXPECT_EQ(s.arguments[k].kwarg_only, k > 0) << k;
    if (k > 0) {
      EXPECT_TRUE(s.arguments[k].type.optional) << k;
      EXPECT_EQ(s.arguments[k].default_value->kind, VK::None) << k;
    }
  }
  expect_type(s.arguments[7], TK::Dimname, true, 1, true);
}

TEST(SchemaParse, NumberDefaults) {
  auto s = parse_schema(
      "f(float a=1.0, float b=-1e-5, float c=1e+3, float d=inf, float e=-inf, float g=2, "
      "Scalar h=0.5, int i=+3, int j=-9223372036854775808, float k=.25, Scalar l=True) -> ()");
  auto value = [&](const char* name) {
    return *s.arguments[*s.argument_index(name)].default_value;
  };
  EXPECT_EQ(value("a").kind, VK::Float);
  EXPECT_DOUBLE_EQ(value("a").f, 1.0);
  EXPECT_EQ(value("a").text, "1.0");
  EXPECT_DOUBLE_EQ(value("b").f, -1e-5);
  EXPECT_DOUBLE_EQ(value("c").f, 1000.0);
  EXPECT_EQ(value("d").kind, VK::Float);
  EXPECT_EQ(value("d").f, std::numeric_limits<double>::infinity());
  EXPECT_EQ(value("e").f, -std::numeric_limits<double>::infinity());
  // An integer written on a float argument is read as that float.
  EXPECT_EQ(value("g").kind, VK::Float);
  EXPECT_DOUBLE_EQ(value("g").f, 2.0);
  EXPECT_EQ(value("g").text, "2");
  EXPECT_EQ(value("h").kind, VK::Float);
  EXPECT_DOUBLE_EQ(value("h").f, 0.5);
  EXPECT_EQ(value("i").kind, VK::Int);
  EXPECT_EQ(value("i").i, 3);
  EXPECT_EQ(value("j").i, std::numeric_limits<int64_t>::min());
  EXPECT_DOUBLE_EQ(value("k").f, 0.25);
  EXPECT_EQ(value("l").kind, VK::Bool);
  EXPECT_TRUE(value("l").b);
}

TEST(SchemaParse, ListDefaults) {
  auto s = parse_schema(
      "f(int[] a=[], int[] b=[0, 1], float[] c=[1.0,2.0], bool[3] d=[True, False, True], "
      "float[] e=[1, 2.5], float[] g=[1, 2], float[] h=[], bool[] i=[], int[1] j=[], "
      "Tensor[] k=[], int[]? l=None, int[2] m=[-1, -2]) -> ()");
  auto value = [&](const char* name) {
    return *s.arguments[*s.argument_index(name)].default_value;
  };
  EXPECT_EQ(value("a").kind, VK::IntList);
  EXPECT_TRUE(value("a").ints.empty());
  EXPECT_EQ(value("a").text, "[]");
  EXPECT_EQ(value("b").kind, VK::IntList);
  EXPECT_EQ(value("b").ints, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(value("c").kind, VK::FloatList);
  EXPECT_EQ(value("c").floats, (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(value("c").text, "[1.0,2.0]");
  EXPECT_EQ(value("d").kind, VK::BoolList);
  EXPECT_EQ(value("d").bools, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(value("e").kind, VK::FloatList);
  EXPECT_EQ(value("e").floats, (std::vector<double>{1.0, 2.5}));
  EXPECT_EQ(value("g").kind, VK::FloatList);
  EXPECT_EQ(value("g").floats, (std::vector<double>{1.0, 2.0}));
  EXPECT_TRUE(value("g").ints.empty());
  EXPECT_EQ(value("h").kind, VK::FloatList);
  EXPECT_EQ(value("i").kind, VK::BoolList);
  EXPECT_EQ(value("j").kind, VK::IntList);  // amax writes int[1] dim=[]
  EXPECT_EQ(value("k").kind, VK::IntList);
  EXPECT_EQ(value("l").kind, VK::None);
  EXPECT_EQ(value("m").ints, (std::vector<int64_t>{-1, -2}));
}

TEST(SchemaParse, ReturnTypes) {
  struct Case {
    const char* text;
    TK kind;
    bool is_list;
  };
  const Case cases[] = {
      {"aten::size.int(Tensor self, int dim) -> int", TK::Int, false},
      {"aten::is_nonzero(Tensor self) -> bool", TK::Bool, false},
      {"aten::_local_scalar_dense(Tensor self) -> Scalar", TK::Scalar, false},
      {"aten::q_scale(Tensor self) -> float", TK::Float, false},
      {"aten::unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]", TK::Tensor, true},
      {"aten::chunk(Tensor self, int chunks, int dim=0) -> Tensor[]", TK::Tensor, true},
      {"aten::result_type.Tensor(Tensor tensor, Tensor other) -> ScalarType", TK::ScalarType,
       false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto s = parse_schema(c.text);
    ASSERT_EQ(s.returns.size(), 1u);
    EXPECT_EQ(s.returns[0].type.kind, c.kind);
    EXPECT_EQ(s.returns[0].type.is_list, c.is_list);
    EXPECT_EQ(s.returns[0].name, "");
  }
}

TEST(SchemaParse, SplitWithArrowAliasIsView) {
  auto s = parse_schema(
      "aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]");
  // The "-> *" part is accepted and dropped.
  expect_alias(s.arguments[0], "a", false);
  expect_alias(s.returns.at(0), "a", false);
  EXPECT_TRUE(s.is_view());
  EXPECT_EQ(s.arguments[0].to_string(), "Tensor(a) self");
}

TEST(SchemaParse, AllBaseTypes) {
  auto s = parse_schema(
      "t(Tensor a, int b, SymInt c, float d, bool e, Scalar f, ScalarType g, str h, Device i, "
      "Layout j, MemoryFormat k, Generator l, Dimname m, Any n) -> Any");
  const TK kinds[] = {TK::Tensor,       TK::Int,        TK::Int,     TK::Float,  TK::Bool,
                      TK::Scalar,       TK::ScalarType, TK::Str,     TK::Device, TK::Layout,
                      TK::MemoryFormat, TK::Generator,  TK::Dimname, TK::Any};
  ASSERT_EQ(s.arguments.size(), std::size(kinds));
  for (size_t k = 0; k < s.arguments.size(); ++k)
    EXPECT_EQ(s.arguments[k].type.kind, kinds[k]) << k;
  EXPECT_EQ(s.returns.at(0).type.kind, TK::Any);
  EXPECT_EQ(s.arguments[2].type.to_string(), "int");
}

TEST(SchemaParse, Varargs) {
  auto print = parse_schema("prim::Print(...) -> ()");
  EXPECT_TRUE(print.is_vararg);
  EXPECT_FALSE(print.is_varret);
  EXPECT_TRUE(print.arguments.empty());

  auto format = parse_schema("aten::format(str self, ...) -> str");
  EXPECT_TRUE(format.is_vararg);
  ASSERT_EQ(format.arguments.size(), 1u);
  EXPECT_EQ(format.returns.at(0).type.kind, TK::Str);

  auto tuple = parse_schema("prim::TupleConstruct(...) -> ...");
  EXPECT_TRUE(tuple.is_vararg);
  EXPECT_TRUE(tuple.is_varret);
  EXPECT_TRUE(tuple.returns.empty());
  EXPECT_EQ(tuple.to_string(), "prim::TupleConstruct(...) -> ...");

  auto mixed = parse_schema("f(Tensor a, *, int b, ...) -> (Tensor, ...)");
  EXPECT_TRUE(mixed.is_vararg);
  EXPECT_TRUE(mixed.is_varret);
  EXPECT_TRUE(mixed.arguments[1].kwarg_only);
  EXPECT_EQ(mixed.returns.size(), 1u);
  EXPECT_EQ(mixed.to_string(), "f(Tensor a, *, int b, ...) -> (Tensor, ...)");
}

TEST(SchemaParse, FlexibleWhitespace) {
  auto canonical =
      parse_schema("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  auto spaced = parse_schema(
      "  aten::add.Tensor (\n  Tensor  self ,Tensor other,\t*,Scalar alpha = 1 )->Tensor  ");
  EXPECT_EQ(spaced, canonical);
  auto tight = parse_schema("max.dim(Tensor self,int dim)->(Tensor values,Tensor indices)");
  EXPECT_EQ(tight.to_string(), "max.dim(Tensor self, int dim) -> (Tensor values, Tensor indices)");
  auto types = parse_schema("f(Tensor ( a ! ) [ ] x, int [ 2 ] ? y, Tensor ? [ ] z) -> ( )");
  expect_alias(types.arguments[0], "a", true);
  expect_type(types.arguments[0], TK::Tensor, true);
  expect_type(types.arguments[1], TK::Int, true, 2, true);
  expect_type(types.arguments[2], TK::Tensor, true, std::nullopt, false, true);
}

TEST(SchemaParse, SingleNamedReturnAndParenthesisedSingle) {
  auto named = parse_schema("f(Tensor(a!) self) -> (Tensor(a!) out)");
  ASSERT_EQ(named.returns.size(), 1u);
  EXPECT_EQ(named.returns[0].name, "out");
  EXPECT_EQ(named.to_string(), "f(Tensor(a!) self) -> (Tensor(a!) out)");
  auto single = parse_schema("f(Tensor self) -> (Tensor)");
  EXPECT_EQ(single.to_string(), "f(Tensor self) -> Tensor");
  // A bare single return may be named too; it prints in parentheses.
  auto bare_named = parse_schema("f(Tensor self) -> Tensor out");
  EXPECT_EQ(bare_named.returns.at(0).name, "out");
  EXPECT_EQ(bare_named.to_string(), "f(Tensor self) -> (Tensor out)");
}

// ---- printing ---------------------------------------------------------------------------

TEST(SchemaPrint, TypeAliasAndDefaultSpellings) {
  SchemaType t{TK::Int, /*is_list=*/true, 2, /*optional=*/true};
  EXPECT_EQ(t.to_string(), "int[2]?");
  EXPECT_EQ((SchemaType{TK::Tensor, true, std::nullopt, false, true}).to_string(), "Tensor?[]");
  EXPECT_EQ((SchemaType{TK::Float, false, std::nullopt, true}).to_string(), "float?");
  EXPECT_EQ((AliasInfo{"a", true}).to_string(), "(a!)");
  EXPECT_EQ((AliasInfo{"b", false}).to_string(), "(b)");
  EXPECT_EQ(tessera::to_string(TK::MemoryFormat), "MemoryFormat");

  // Without `text`, a default is spelled from its value.
  DefaultValue f;
  f.kind = VK::Float;
  f.f = 2.0;
  EXPECT_EQ(f.to_string(), "2.0");
  DefaultValue s;
  s.kind = VK::Str;
  s.s = "a\"b";
  EXPECT_EQ(s.to_string(), "\"a\\\"b\"");
  DefaultValue l;
  l.kind = VK::BoolList;
  l.bools = {true, false};
  EXPECT_EQ(l.to_string(), "[True, False]");
  DefaultValue n;
  EXPECT_EQ(n.to_string(), "None");
}

TEST(SchemaPrint, BuiltSchemaPrintsAndParses) {
  FunctionSchema s;
  s.ns = "my";
  s.name = "op";
  Argument self{"self", SchemaType{.kind = TK::Tensor}, std::nullopt, false, AliasInfo{"a", false}};
  Argument scale{"scale", SchemaType{.kind = TK::Float}, DefaultValue{}, true, std::nullopt};
  scale.default_value->kind = VK::Float;
  scale.default_value->f = 0.5;
  s.arguments = {self, scale};
  s.returns = {
      Argument{"", SchemaType{.kind = TK::Tensor}, std::nullopt, false, AliasInfo{"a", false}}};
  EXPECT_EQ(s.to_string(), "my::op(Tensor(a) self, *, float scale=0.5) -> Tensor(a)");
  auto back = parse_schema(s.to_string());
  EXPECT_EQ(back.arguments[1].default_value->f, 0.5);
  EXPECT_TRUE(back.is_view());
}

// ---- round trip -------------------------------------------------------------------------

const char* const kValidSchemas[] = {
    "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? "
    "dtype=None) -> Tensor",
    "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
    "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    "aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
    "aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!) "
    "max_values) -> (Tensor(a!) values, Tensor(b!) indices)",
    "aten::sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor, Tensor)",
    "aten::cat(Tensor[] tensors, int dim=0) -> Tensor",
    "aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
    "aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)",
    "aten::div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor",
    "aten::layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? "
    "bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor",
    "aten::_foreach_add_.Scalar(Tensor(a!)[] self, Scalar scalar) -> ()",
    "aten::_cuda_clear() -> ()",
    "aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] "
    "padding=0, SymInt[2] dilation=[1, 1], SymInt groups=1) -> Tensor",
    "aten::f(Tensor self, str reduction=\"mean\", str padding='valid', int mode=Mean, ScalarType "
    "dtype=long, MemoryFormat memory_format=contiguous_format, Device device=\"cpu\", str "
    "esc=\"a\\\"b\\n\") -> Tensor",
    "aten::empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, "
    "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    "f(float a=1.0, float b=-1e-5, float c=1e+3, float d=inf, float e=-inf, float g=2, Scalar "
    "h=0.5, int i=+3, float k=.25) -> ()",
    "f(int[] a=[], int[] b=[0, 1], float[] c=[1.0,2.0], bool[3] d=[True, False, True], float[] "
    "e=[1, 2.5], int[1] j=[]) -> ()",
    "aten::unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]",
    "aten::size.int(Tensor self, int dim) -> int",
    "aten::is_nonzero(Tensor self) -> bool",
    "aten::_local_scalar_dense(Tensor self) -> Scalar",
    "aten::q_scale(Tensor self) -> float",
    "aten::normal.Tensor_float(Tensor mean, float std=1, *, Generator? generator=None) -> Tensor",
    "aten::sum.dim_DimnameList(Tensor self, Dimname[1] dim, bool keepdim=False, *, ScalarType? "
    "dtype=None) -> Tensor",
    "t(Tensor a, int b, SymInt c, float d, bool e, Scalar f, ScalarType g, str h, Device i, Layout "
    "j, MemoryFormat k, Generator l, Dimname m, Any n) -> Any",
    "prim::Print(...) -> ()",
    "aten::format(str self, ...) -> str",
    "prim::TupleConstruct(...) -> ...",
    "f(Tensor a, *, int b, ...) -> (Tensor, ...)",
    "f(Tensor(a!) self) -> (Tensor(a!) out)",
    "f(Tensor a) -> Tensor out",
    "aten::contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) -> "
    "Tensor(a)",
    "  aten::add.Tensor (\n  Tensor  self ,Tensor other,\t*,Scalar alpha = 1 )->Tensor  ",
};

TEST(SchemaRoundTrip, ParseOfToStringIsEqual) {
  for (const char* text : kValidSchemas) {
    SCOPED_TRACE(text);
    FunctionSchema s = parse_schema(text);
    std::string printed = s.to_string();
    FunctionSchema again = parse_schema(printed);
    EXPECT_EQ(again, s) << printed;
    EXPECT_EQ(again.to_string(), printed);  // printing is a fixed point
  }
}

TEST(SchemaRoundTrip, CanonicalTextPrintsUnchanged) {
  // Schemas already in canonical spelling print back exactly.
  const char* canonical[] = {
      "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
      "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? "
      "dtype=None) -> Tensor",
      "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
      "aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
      "aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
      "aten::layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? "
      "bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensor",
      "aten::cat(Tensor[] tensors, int dim=0) -> Tensor",
  };
  for (const char* text : canonical) EXPECT_EQ(parse_schema(text).to_string(), text);
}

// ---- aliasing queries -------------------------------------------------------------------

TEST(SchemaAliasing, MutableAndView) {
  struct Case {
    const char* text;
    bool is_mutable;
    bool is_view;
  };
  const Case cases[] = {
      {"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", false, false},
      {"aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", true,
       false},
      {"add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)", true,
       false},
      {"aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", false, true},
      {"aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
       false, true},
      {"aten::_foreach_add_.Scalar(Tensor(a!)[] self, Scalar scalar) -> ()", true, false},
      // A read alias on an argument alone does not make a view.
      {"f(Tensor(a) self) -> Tensor", false, false},
      // A return alias naming no argument's set is not a view of an input.
      {"f(Tensor(a) self) -> Tensor(b)", false, false},
      // Writes one input and returns a view of another.
      {"f(Tensor(a!) x, Tensor(b) y) -> Tensor(b)", true, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto s = parse_schema(c.text);
    EXPECT_EQ(s.is_mutable(), c.is_mutable);
    EXPECT_EQ(s.is_view(), c.is_view);
  }
}

// ---- errors -----------------------------------------------------------------------------

struct BadSchema {
  const char* text;
  const char* expected;  // the part after "expected "
  const char* found;     // the part after "found "
  size_t position;
};

const BadSchema kBadSchemas[] = {
    // missing parentheses
    {"add(Tensor self, Tensor other", "',' or ')'", "end of input", 29},
    {"add Tensor self) -> Tensor", "'(' after the operator name", "'Tensor'", 4},
    {"foo(Tensor a) -> (Tensor a", "',' or ')'", "end of input", 26},
    // unknown type
    {"foo(Tensorx a) -> Tensor", "a type name", "'Tensorx'", 4},
    {"foo(Tensor a) -> Tensorx", "a type name", "'Tensorx'", 17},
    // duplicate names
    {"foo(Tensor a, Tensor a) -> Tensor", "a unique argument name",
     "'a' (already the name of argument 0)", 21},
    {"foo(Tensor a) -> (Tensor x, Tensor x)", "a unique return name", "'x'", 35},
    // defaults of the wrong type
    {"foo(int x=True) -> Tensor", "a default value of type 'int'", "'True'", 10},
    {"foo(Tensor x=1) -> Tensor", "a default value of type 'Tensor'", "'1'", 13},
    {"foo(int y=None) -> Tensor", "a default value of type 'int'", "'None'", 10},
    {"foo(int x=1.5) -> Tensor", "a default value of type 'int'", "'1.5'", 10},
    {"foo(int x=\"a\") -> Tensor", "a default value of type 'int'", "'\"a\"'", 10},
    {"foo(int[] x=1) -> Tensor", "a default value of type 'int[]'", "'1'", 12},
    {"foo(bool x=[True]) -> Tensor", "a default value of type 'bool'", "'[True]'", 11},
    {"foo(float x=[1.5]) -> Tensor", "a default value of type 'float'", "'[1.5]'", 12},
    {"foo(bool[] x=[1]) -> Tensor", "a default value of type 'bool[]'", "'[1]'", 13},
    {"foo(Tensor x=contiguous_format) -> Tensor", "a default value of type 'Tensor'",
     "'contiguous_format'", 13},
    // '*' misuse
    {"foo(Tensor a, *, *, Tensor b) -> Tensor", "at most one '*'", "a second '*'", 17},
    {"foo(Tensor a, *) -> Tensor", "',' and a keyword-only argument after '*'", "')'", 15},
    {"foo(..., Tensor a) -> Tensor", "')' after '...'", "','", 7},
    // strings and numbers
    {"foo(str s=\"abc) -> Tensor", "a closing \"",
     "end of input (the string begun at position 10 is unterminated)", 25},
    {"foo(str s='abc) -> Tensor", "a closing '", "end of input", 25},
    {"foo(int x=- 1) -> Tensor", "a number", "a blank", 11},
    {"foo(int x=99999999999999999999) -> Tensor", "an integer that fits in 64 bits",
     "'99999999999999999999'", 10},
    {"foo(float x=1e) -> Tensor", "the digits of an exponent", "')'", 14},
    {"foo(float x=-) -> Tensor", "a number", "')'", 13},
    {"foo(int x=) -> Tensor", "a default value", "')'", 10},
    {"foo(int[] x=[1, True]) -> Tensor", "a number like the rest of the list", "'True'", 16},
    {"foo(int[] x=[1, 2) -> Tensor", "',' or ']'", "')'", 17},
    // trailing garbage and missing parts
    {"foo(Tensor a) -> Tensor out junk", "end of input", "'junk'", 28},
    {"foo(Tensor a) -> Tensor;", "end of input", "';'", 23},
    {"foo(Tensor self) -> Tensor self=1", "end of input", "'='", 31},
    {"(Tensor a) -> Tensor", "an operator name", "'('", 0},
    {"", "an operator name", "end of input", 0},
    {"aten::(Tensor a) -> Tensor", "an operator name after '::'", "'('", 6},
    {"foo.(Tensor a) -> Tensor", "an overload name after '.'", "'('", 4},
    {"foo(Tensor a) Tensor", "'->' before the returns", "'Tensor'", 14},
    {"foo(Tensor a) ->", "a type name", "end of input", 16},
    {"foo(Tensor a,) -> Tensor", "a type name", "')'", 13},
    {"foo(Tensor) -> Tensor", "an argument name", "')'", 10},
    // malformed types and annotations
    {"foo(Tensor(a! self) -> Tensor", "')' to close the alias annotation", "'self'", 14},
    {"foo(Tensor() self) -> Tensor", "an alias set name", "')'", 11},
    {"foo(int(a) x) -> Tensor", "a name after type 'int' (alias annotations are for Tensor)", "'('",
     7},
    {"foo(int[2 x) -> Tensor", "']' to close the list type", "'x'", 10},
    {"foo(Tensor?? x) -> Tensor", "an argument name", "'?'", 11},
    {"foo(int[][] x) -> Tensor", "an argument name", "'['", 9},
};

TEST(SchemaErrors, MalformedSchemasThrowWithDetails) {
  for (const auto& bad : kBadSchemas) {
    SCOPED_TRACE(bad.text);
    try {
      parse_schema(bad.text);
      ADD_FAILURE() << "no SchemaError";
    } catch (const SchemaError& e) {
      std::string message = e.what();
      EXPECT_EQ(e.kind(), tessera::Error::Kind::Schema);
      EXPECT_NE(message.find(std::string("schema \"") + bad.text + "\""), std::string::npos)
          << message;
      EXPECT_NE(message.find(std::string("expected ") + bad.expected), std::string::npos)
          << message;
      EXPECT_NE(message.find(std::string("found ") + bad.found), std::string::npos) << message;
      EXPECT_NE(message.find("at position " + std::to_string(bad.position) + ","),
                std::string::npos)
          << message;
    }
  }
}

TEST(SchemaErrors, FullMessageShape) {
  try {
    parse_schema("add(Tensor self, Tensor other");
    FAIL() << "no SchemaError";
  } catch (const SchemaError& e) {
    EXPECT_STREQ(e.what(),
                 "schema \"add(Tensor self, Tensor other\" : expected ',' or ')' at position 29, "
                 "found end of input");
  }
}

TEST(SchemaErrors, IsATesseraError) {
  EXPECT_THROW(parse_schema("foo(Tensor a"), tessera::Error);
  EXPECT_THROW(parse_schema("foo(Tensor a"), SchemaError);
  EXPECT_NO_THROW(parse_schema("foo(Tensor a) -> Tensor"));
}

}  // namespace
