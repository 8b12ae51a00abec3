#pragma once
// Operator schemas in PyTorch's schema language, e.g.
//   aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
// parse_schema() turns the text into a FunctionSchema; FunctionSchema::to_string() prints
// it back in canonical form, so parse_schema(s.to_string()) == s for every parsed s.
// Malformed text raises tessera::SchemaError naming what was expected, what was found and
// the 0-based character position in the text.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// The type of an argument or return: a base kind plus list/optional decorations.
struct SchemaType {
  enum class Kind {
    Tensor,
    Int,
    Float,
    Bool,
    Scalar,
    ScalarType,
    Str,
    Device,
    Layout,
    MemoryFormat,
    Generator,
    Dimname,
    Any
  };
  Kind kind = Kind::Tensor;
  bool is_list = false;                              // int[], Tensor[], int[2]
  std::optional<int64_t> fixed_size = std::nullopt;  // N of int[N]
  bool optional = false;          // Tensor?, int?, int[]? (the '?' after the list)
  bool element_optional = false;  // Tensor?[]

  // The schema spelling without alias annotation, e.g. "int[2]?", "Tensor?[]".
  // SymInt is parsed as Int and so prints as "int".
  std::string to_string() const;
  bool operator==(const SchemaType&) const = default;
};

// The spelling of a base kind: "Tensor", "int", "float", "ScalarType", ...
std::string_view to_string(SchemaType::Kind kind);

// Alias annotation of a Tensor: "(a)" reads set a, "(a!)" writes it. The "-> *" part of
// "(a -> *)" is accepted but not kept.
struct AliasInfo {
  std::string set;
  bool is_write = false;
  std::string to_string() const;  // "(a)" or "(a!)"
  bool operator==(const AliasInfo&) const = default;
};

// A parsed default value. Values are checked against the argument's type, and converted
// where the type says so: an integer on a float becomes Float, an integer list on float[]
// becomes FloatList, an empty list takes its element's kind (FloatList, BoolList, else
// IntList), and a single number or bool on a fixed-size list (int[2] stride=1) is repeated
// N times into a list. `text` always keeps the default exactly as written.
struct DefaultValue {
  enum class Kind { None, Bool, Int, Float, Str, IntList, FloatList, BoolList, Identifier };
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // Str: the unescaped string; Identifier: the identifier
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<bool> bools;
  std::string text;  // the default exactly as written, e.g. "'mean'", "[0, 1]", "1e-05"

  // `text` when set, otherwise a spelling built from the value.
  std::string to_string() const;
  bool operator==(const DefaultValue&) const = default;
};

struct Argument {
  std::string name;  // may be empty for returns
  SchemaType type;
  std::optional<DefaultValue> default_value;
  bool kwarg_only = false;
  std::optional<AliasInfo> alias;

  // e.g. "Tensor(a!) out", "int[1]? dim=None", "Tensor" (an unnamed return).
  std::string to_string() const;
  bool operator==(const Argument&) const = default;
};

struct FunctionSchema {
  std::string ns;        // "aten" in "aten::add.Tensor"; empty if none given
  std::string name;      // "add"
  std::string overload;  // "Tensor"; empty if none
  std::vector<Argument> arguments;
  std::vector<Argument> returns;
  bool is_vararg = false;  // "..." as the last argument
  bool is_varret = false;  // "-> ..." or "..." as the last return

  std::string qualified_name() const;  // "ns::name.overload" without empty parts
  std::string to_string() const;       // canonical text; parse_schema(to_string()) round-trips
  bool is_mutable() const;             // some argument has a write alias (a!)
  bool is_view() const;                // some return aliases an argument's set without write
  std::optional<size_t> argument_index(std::string_view name) const;
  bool operator==(const FunctionSchema&) const = default;
};

// Parses `ns::name.overload(args) -> returns`. Throws SchemaError on malformed text.
FunctionSchema parse_schema(std::string_view text);

}  // namespace tessera
