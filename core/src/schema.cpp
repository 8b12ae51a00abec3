// Recursive-descent parser for operator schemas, and their canonical printing.
//
// Grammar (whitespace is allowed between any two tokens):
//   schema    := qualname '(' [arg {',' arg}] ')' '->' returns
//   qualname  := [ident '::'] ident ['.' ident]
//   arg       := '*' | '...' | type ident ['=' default]       ('...' only last)
//   type      := base [alias] ['?'] ['[' [N] ']' ['?']]
//   alias     := '(' (ident | '*') ['!'] ['->' (ident | '*')] ')'
//   returns   := '...' | type [ident] | '(' [ret {',' ret}] ')'
//   default   := None | True | False | number | string | list | ident
#include "tessera/schema.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "tessera/error.h"

namespace tessera {
namespace {

using TypeKind = SchemaType::Kind;
using ValueKind = DefaultValue::Kind;

struct TypeSpelling {
  std::string_view spelling;
  TypeKind kind;
};
// The first spelling of each kind is the canonical one; SymInt is an Int for us.
constexpr TypeSpelling kTypeSpellings[] = {
    {"Tensor", TypeKind::Tensor},
    {"int", TypeKind::Int},
    {"SymInt", TypeKind::Int},
    {"float", TypeKind::Float},
    {"bool", TypeKind::Bool},
    {"Scalar", TypeKind::Scalar},
    {"ScalarType", TypeKind::ScalarType},
    {"str", TypeKind::Str},
    {"Device", TypeKind::Device},
    {"Layout", TypeKind::Layout},
    {"MemoryFormat", TypeKind::MemoryFormat},
    {"Generator", TypeKind::Generator},
    {"Dimname", TypeKind::Dimname},
    {"Any", TypeKind::Any},
};
constexpr std::string_view kTypeExpected =
    "a type name (Tensor, int, SymInt, float, bool, Scalar, ScalarType, str, Device, Layout, "
    "MemoryFormat, Generator, Dimname, Any)";

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Shortest spelling that reads back as the same double and still looks like a float.
std::string float_text(double f) {
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  std::string out = fmt::format("{}", f);
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";
  return out;
}

std::string quoted_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

// Type spelling with the alias annotation in its place: after the base name, before the
// '?' and list suffix ("Tensor(a!)[]", "Tensor(a)?").
std::string type_text(const SchemaType& t, const std::optional<AliasInfo>& alias) {
  std::string out(to_string(t.kind));
  if (alias) out += alias->to_string();
  if (t.element_optional) out += '?';
  if (t.is_list) out += t.fixed_size ? fmt::format("[{}]", *t.fixed_size) : std::string("[]");
  if (t.optional) out += '?';
  return out;
}

class SchemaParser {
 public:
  explicit SchemaParser(std::string_view text) : text_(text) {}

  FunctionSchema parse() {
    FunctionSchema schema;
    parse_qualified_name(schema);
    parse_arguments(schema);
    if (!try_consume("->")) fail_here("'->' before the returns");
    parse_returns(schema);
    skip_ws();
    if (pos_ < text_.size()) fail_here("end of input");
    return schema;
  }

 private:
  // ---- errors --------------------------------------------------------------------------

  [[noreturn]] void fail(size_t at, std::string_view expected, std::string_view found) const {
    raise<SchemaError>("schema \"{}\" : expected {} at position {}, found {}", text_, expected, at,
                       found);
  }
  [[noreturn]] void fail_here(std::string_view expected) const {
    fail(pos_, expected, describe(pos_));
  }
  // What sits at `at`: a whole word when it starts one, else the single character.
  std::string describe(size_t at) const {
    if (at >= text_.size()) return "end of input";
    if (text_[at] == ' ' || text_[at] == '\t' || text_[at] == '\n' || text_[at] == '\r') {
      return "a blank";
    }
    size_t end = at;
    while (end < text_.size() && is_ident_char(text_[end])) ++end;
    if (end == at) end = at + 1;
    return fmt::format("'{}'", text_.substr(at, end - at));
  }

  // ---- tokens --------------------------------------------------------------------------

  void skip_ws() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  // Next non-blank character, or '\0' at the end.
  char peek() {
    skip_ws();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool try_consume(std::string_view token) {
    skip_ws();
    if (text_.substr(pos_).starts_with(token)) {
      pos_ += token.size();
      return true;
    }
    return false;
  }
  void expect(std::string_view token, std::string_view expected) {
    if (!try_consume(token)) fail_here(expected);
  }
  std::string parse_identifier(std::string_view expected) {
    if (!is_ident_start(peek())) fail_here(expected);
    size_t start = pos_;
    while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }
  // True when the identifier `word` starts at `at` and is not the prefix of a longer one.
  bool word_at(size_t at, std::string_view word) const {
    size_t end = at + word.size();
    return text_.substr(at).starts_with(word) &&
           (end >= text_.size() || !is_ident_char(text_[end]));
  }
  bool at_word(std::string_view word) {
    skip_ws();
    return word_at(pos_, word);
  }

  // ---- name and argument lists ---------------------------------------------------------

  void parse_qualified_name(FunctionSchema& schema) {
    std::string first = parse_identifier("an operator name");
    if (try_consume("::")) {
      schema.ns = std::move(first);
      schema.name = parse_identifier("an operator name after '::'");
    } else {
      schema.name = std::move(first);
    }
    if (try_consume(".")) schema.overload = parse_identifier("an overload name after '.'");
  }

  void parse_arguments(FunctionSchema& schema) {
    expect("(", "'(' after the operator name");
    if (try_consume(")")) return;
    bool kwarg_only = false;
    while (true) {
      skip_ws();
      size_t item_pos = pos_;
      if (try_consume("...")) {
        schema.is_vararg = true;
        expect(")", "')' after '...' (it must be the last argument)");
        return;
      }
      if (try_consume("*")) {
        if (kwarg_only) fail(item_pos, "at most one '*'", "a second '*'");
        kwarg_only = true;
        // A '*' must be followed by the keyword-only arguments it introduces.
        expect(",", "',' and a keyword-only argument after '*'");
        continue;
      }
      Argument arg = parse_argument(/*is_return=*/false, schema.arguments);
      arg.kwarg_only = kwarg_only;
      schema.arguments.push_back(std::move(arg));
      if (try_consume(",")) continue;
      if (try_consume(")")) return;
      fail_here("',' or ')'");
    }
  }

  void parse_returns(FunctionSchema& schema) {
    if (try_consume("...")) {
      schema.is_varret = true;
      return;
    }
    if (!try_consume("(")) {
      schema.returns.push_back(parse_argument(/*is_return=*/true, schema.returns));
      return;
    }
    if (try_consume(")")) return;  // "()": no returns
    while (true) {
      if (try_consume("...")) {
        schema.is_varret = true;
        expect(")", "')' after '...' (it must be the last return)");
        return;
      }
      Argument ret = parse_argument(/*is_return=*/true, schema.returns);
      schema.returns.push_back(std::move(ret));
      if (try_consume(",")) continue;
      if (try_consume(")")) return;
      fail_here("',' or ')'");
    }
  }

  // `previous` are the arguments (or returns) already parsed, to reject a repeated name.
  Argument parse_argument(bool is_return, const std::vector<Argument>& previous) {
    Argument arg;
    arg.type = parse_type(arg.alias);
    skip_ws();
    size_t name_pos = pos_;
    if (is_return) {
      // Return names are optional: "(Tensor values, Tensor indices)" or "(Tensor, Tensor)".
      if (is_ident_start(peek())) arg.name = parse_identifier("a return name");
    } else {
      arg.name = parse_identifier("an argument name");
    }
    if (!arg.name.empty()) {
      for (size_t k = 0; k < previous.size(); ++k) {
        if (previous[k].name == arg.name) {
          fail(name_pos, fmt::format("a unique {} name", is_return ? "return" : "argument"),
               fmt::format("'{}' (already the name of {} {})", arg.name,
                           is_return ? "return" : "argument", k));
        }
      }
    }
    if (!is_return && try_consume("=")) arg.default_value = parse_default(arg.type);
    return arg;
  }

  // ---- types ---------------------------------------------------------------------------

  SchemaType parse_type(std::optional<AliasInfo>& alias) {
    skip_ws();
    size_t type_pos = pos_;
    std::string word = parse_identifier(kTypeExpected);
    SchemaType type;
    bool known = false;
    for (const auto& entry : kTypeSpellings) {
      if (entry.spelling == word) {
        type.kind = entry.kind;
        known = true;
        break;
      }
    }
    if (!known) fail(type_pos, kTypeExpected, fmt::format("'{}'", word));

    if (peek() == '(') {
      // Only tensors (or Any, which may hold one) can share storage with each other.
      if (type.kind != TypeKind::Tensor && type.kind != TypeKind::Any) {
        fail(pos_, fmt::format("a name after type '{}' (alias annotations are for Tensor)", word),
             "'('");
      }
      alias = parse_alias();
    }
    if (try_consume("?")) {
      if (peek() != '[') {
        type.optional = true;
        return type;
      }
      type.element_optional = true;  // "Tensor?[]": a list of optional elements
    }
    if (try_consume("[")) {
      type.is_list = true;
      if (is_digit(peek())) type.fixed_size = parse_list_size();
      expect("]", "']' to close the list type");
      if (try_consume("?")) type.optional = true;
    }
    return type;
  }

  int64_t parse_list_size() {
    size_t start = pos_;
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(text_.data() + start, text_.data() + pos_, n);
    if (ec != std::errc()) {
      fail(start, "a list size that fits in 64 bits",
           fmt::format("'{}'", text_.substr(start, pos_ - start)));
    }
    return n;
  }

  AliasInfo parse_alias() {
    expect("(", "'('");
    AliasInfo info;
    info.set = try_consume("*") ? std::string("*")
                                : parse_identifier("an alias set name such as 'a' or 'a!'");
    if (try_consume("!")) info.is_write = true;
    // "(a -> *)": the sets after the arrow only matter to graph passes we don't have; the
    // annotation is accepted so that PyTorch schemas parse, and the arrow is dropped.
    if (try_consume("->")) {
      if (!try_consume("*")) parse_identifier("'*' or an alias set name after '->'");
    }
    expect(")", "')' to close the alias annotation");
    return info;
  }

  // ---- defaults ------------------------------------------------------------------------

  DefaultValue parse_default(const SchemaType& type) {
    skip_ws();
    size_t start = pos_;
    DefaultValue value = parse_default_literal();
    value.text = std::string(text_.substr(start, pos_ - start));
    check_default(type, value, start);
    return value;
  }

  DefaultValue parse_default_literal() {
    char c = peek();
    if (c == '[') return parse_list_literal();
    if (c == '"' || c == '\'') return parse_string_literal();
    if (is_digit(c) || c == '-' || c == '+' || c == '.') return parse_number();
    DefaultValue value;
    if (!is_ident_start(c)) fail_here("a default value");
    if (at_word("inf")) return parse_number();
    std::string word = parse_identifier("a default value");
    if (word == "None") {
      value.kind = ValueKind::None;
    } else if (word == "True" || word == "False") {
      value.kind = ValueKind::Bool;
      value.b = word == "True";
    } else {
      // An enumerator such as contiguous_format, long or Mean; its meaning is the type's.
      value.kind = ValueKind::Identifier;
      value.s = std::move(word);
    }
    return value;
  }

  // Integers (-1, +3) and floats (1.0, -1e-5, 1e+3, .5, inf, -inf).
  DefaultValue parse_number() {
    skip_ws();
    size_t start = pos_;
    bool negative = false;
    if (text_[pos_] == '+' || text_[pos_] == '-') negative = text_[pos_++] == '-';
    DefaultValue value;
    if (word_at(pos_, "inf")) {  // no blank between the sign and "inf"
      pos_ += 3;
      value.kind = ValueKind::Float;
      value.f = negative ? -std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::infinity();
      return value;
    }
    size_t digits_start = pos_;
    size_t mantissa_digits = 0;
    bool is_float = false;
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_, ++mantissa_digits;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      is_float = true;
      ++pos_;
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_, ++mantissa_digits;
    }
    if (mantissa_digits == 0) fail(digits_start, "a number", describe(digits_start));
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      is_float = true;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      size_t exponent_start = pos_;
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
      if (pos_ == exponent_start) fail(pos_, "the digits of an exponent", describe(pos_));
    }
    // from_chars takes a '-' but not a '+', so a leading '+' is left out.
    size_t from = text_[start] == '+' ? start + 1 : start;
    const char* first = text_.data() + from;
    const char* last = text_.data() + pos_;
    std::string_view written = text_.substr(start, pos_ - start);
    if (is_float) {
      value.kind = ValueKind::Float;
      auto [ptr, ec] = std::from_chars(first, last, value.f);
      if (ec != std::errc() || ptr != last) {
        fail(start, "a float that fits in a double", fmt::format("'{}'", written));
      }
    } else {
      value.kind = ValueKind::Int;
      auto [ptr, ec] = std::from_chars(first, last, value.i);
      if (ec != std::errc() || ptr != last) {
        fail(start, "an integer that fits in 64 bits", fmt::format("'{}'", written));
      }
    }
    return value;
  }

  // "mean" or 'mean', with backslash escapes (\n, \t, \\, \', \").
  DefaultValue parse_string_literal() {
    size_t start = pos_;
    char quote = text_[pos_++];
    DefaultValue value;
    value.kind = ValueKind::Str;
    while (true) {
      if (pos_ >= text_.size()) {
        fail(pos_, fmt::format("a closing {}", quote),
             fmt::format("end of input (the string begun at position {} is unterminated)", start));
      }
      char c = text_[pos_++];
      if (c == quote) break;
      if (c == '\\' && pos_ < text_.size()) {
        char escaped = text_[pos_++];
        value.s += escaped == 'n' ? '\n' : escaped == 't' ? '\t' : escaped;
      } else {
        value.s += c;
      }
    }
    return value;
  }

  // [], [0, 1], [1.0, 2.0], [True, False]. Integers among floats become floats.
  DefaultValue parse_list_literal() {
    expect("[", "'['");
    DefaultValue value;
    value.kind = ValueKind::IntList;  // an empty list is re-kinded by check_default
    if (try_consume("]")) return value;
    std::vector<DefaultValue> elements;
    std::optional<bool> bools;  // whether the list holds bools, fixed by its first element
    while (true) {
      skip_ws();
      size_t element_pos = pos_;
      DefaultValue element;
      char c = peek();
      if (is_digit(c) || c == '-' || c == '+' || c == '.' || at_word("inf")) {
        element = parse_number();
      } else if (at_word("True") || at_word("False")) {
        element.kind = ValueKind::Bool;
        element.b = at_word("True");
        pos_ += element.b ? 4 : 5;
      } else {
        fail_here("a number, True or False in the list");
      }
      bool is_bool = element.kind == ValueKind::Bool;
      if (bools && *bools != is_bool) {
        fail(element_pos,
             *bools ? "True or False like the rest of the list"
                    : "a number like the rest of the list",
             describe(element_pos));
      }
      bools = is_bool;
      elements.push_back(std::move(element));
      if (try_consume(",")) continue;
      if (try_consume("]")) break;
      fail_here("',' or ']'");
    }
    bool any_float = false;
    for (const auto& e : elements) any_float |= e.kind == ValueKind::Float;
    value.kind = *bools      ? ValueKind::BoolList
                 : any_float ? ValueKind::FloatList
                             : ValueKind::IntList;
    for (const auto& e : elements) {
      if (value.kind == ValueKind::BoolList)
        value.bools.push_back(e.b);
      else if (value.kind == ValueKind::IntList)
        value.ints.push_back(e.i);
      else
        value.floats.push_back(e.kind == ValueKind::Float ? e.f : static_cast<double>(e.i));
    }
    return value;
  }

  // Rejects a default that cannot be a value of `type` (int x=True, Tensor x=1) and
  // converts it to the type's own kind where that is lossless (see DefaultValue).
  void check_default(const SchemaType& type, DefaultValue& value, size_t at) const {
    auto wrong = [&] {
      fail(at, fmt::format("a default value of type '{}'", type.to_string()),
           fmt::format("'{}'", value.text));
    };
    const TypeKind elem = type.kind;
    if (elem == TypeKind::Any) return;  // Any holds whatever was written
    if (value.kind == ValueKind::None) {
      if (!type.optional) wrong();
      return;
    }
    bool list_value = value.kind == ValueKind::IntList || value.kind == ValueKind::FloatList ||
                      value.kind == ValueKind::BoolList;
    if (list_value) {
      if (!type.is_list) wrong();
      bool empty = value.ints.empty() && value.floats.empty() && value.bools.empty();
      if (empty) {
        value.kind = elem == TypeKind::Float  ? ValueKind::FloatList
                     : elem == TypeKind::Bool ? ValueKind::BoolList
                                              : ValueKind::IntList;
        return;
      }
      switch (value.kind) {
        case ValueKind::IntList:
          if (elem == TypeKind::Float) {
            value.kind = ValueKind::FloatList;
            value.floats.assign(value.ints.begin(), value.ints.end());
            value.ints.clear();
          } else if (elem != TypeKind::Int && elem != TypeKind::Scalar) {
            wrong();
          }
          return;
        case ValueKind::FloatList:
          if (elem != TypeKind::Float && elem != TypeKind::Scalar) wrong();
          return;
        default:  // BoolList
          if (elem != TypeKind::Bool) wrong();
          return;
      }
    }
    // A single value on a list type is only meaningful for int[N]-style fixed sizes,
    // where it stands for N copies (PyTorch writes int[2] stride=1).
    if (type.is_list && !type.fixed_size) wrong();
    // The value is repeated N times in memory: refuse an N no real schema writes (found by
    // fuzzing: "float[66666666661] xs=6" asked for 500 GB).
    constexpr int64_t kMaxRepeated = 4096;
    if (type.is_list && *type.fixed_size > kMaxRepeated)
      fail(at, fmt::format("a list size of at most {} for a single default value", kMaxRepeated),
           fmt::format("{}", *type.fixed_size));

    switch (value.kind) {
      case ValueKind::Bool:
        if (elem != TypeKind::Bool && elem != TypeKind::Scalar) wrong();
        break;
      case ValueKind::Int:
        if (elem == TypeKind::Float) {
          value.kind = ValueKind::Float;
          value.f = static_cast<double>(value.i);
          value.i = 0;
        } else if (elem != TypeKind::Int && elem != TypeKind::Scalar) {
          wrong();
        }
        break;
      case ValueKind::Float:
        if (elem != TypeKind::Float && elem != TypeKind::Scalar) wrong();
        break;
      case ValueKind::Str:
        // Devices and dimension names are also written as strings ("cpu", "N").
        if (elem != TypeKind::Str && elem != TypeKind::Device && elem != TypeKind::Dimname) {
          wrong();
        }
        break;
      case ValueKind::Identifier:
        // Enumerators name ints (Mean), dtypes (long), layouts, memory formats, devices.
        if (elem == TypeKind::Tensor || elem == TypeKind::Bool || elem == TypeKind::Float ||
            elem == TypeKind::Str || elem == TypeKind::Generator) {
          wrong();
        }
        break;
      default:
        break;
    }
    if (type.is_list && value.kind != ValueKind::Identifier)
      expand_to_list(value, *type.fixed_size);
  }

  // int[2] stride=1 -> ints {1, 1}; the text stays "1".
  static void expand_to_list(DefaultValue& value, int64_t n) {
    auto count = static_cast<size_t>(n);
    switch (value.kind) {
      case ValueKind::Bool:
        value.kind = ValueKind::BoolList;
        value.bools.assign(count, value.b);
        value.b = false;
        break;
      case ValueKind::Int:
        value.kind = ValueKind::IntList;
        value.ints.assign(count, value.i);
        value.i = 0;
        break;
      case ValueKind::Float:
        value.kind = ValueKind::FloatList;
        value.floats.assign(count, value.f);
        value.f = 0;
        break;
      default:
        break;  // strings stay single values
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string_view to_string(SchemaType::Kind kind) {
  for (const auto& entry : kTypeSpellings) {
    if (entry.kind == kind) return entry.spelling;
  }
  return "?";
}

std::string SchemaType::to_string() const { return type_text(*this, std::nullopt); }

std::string AliasInfo::to_string() const { return fmt::format("({}{})", set, is_write ? "!" : ""); }

std::string DefaultValue::to_string() const {
  if (!text.empty()) return text;
  auto join = [](const auto& items, auto&& one) {
    std::string out = "[";
    for (size_t k = 0; k < items.size(); ++k) out += (k ? ", " : "") + one(items[k]);
    return out + "]";
  };
  switch (kind) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return b ? "True" : "False";
    case Kind::Int:
      return fmt::format("{}", i);
    case Kind::Float:
      return float_text(f);
    case Kind::Str:
      return quoted_string(s);
    case Kind::IntList:
      return join(ints, [](int64_t v) { return fmt::format("{}", v); });
    case Kind::FloatList:
      return join(floats, [](double v) { return float_text(v); });
    case Kind::BoolList:
      return join(bools, [](bool v) { return std::string(v ? "True" : "False"); });
    case Kind::Identifier:
      return s;
  }
  return text;
}

std::string Argument::to_string() const {
  std::string out = type_text(type, alias);
  if (!name.empty()) out += " " + name;
  if (default_value) out += "=" + default_value->to_string();
  return out;
}

std::string FunctionSchema::qualified_name() const {
  std::string out = ns.empty() ? name : ns + "::" + name;
  if (!overload.empty()) out += "." + overload;
  return out;
}

std::string FunctionSchema::to_string() const {
  std::string out = qualified_name() + "(";
  bool star_written = false;
  const char* separator = "";
  for (const auto& arg : arguments) {
    out += separator;
    separator = ", ";
    if (arg.kwarg_only && !star_written) {
      out += "*, ";
      star_written = true;
    }
    out += arg.to_string();
  }
  if (is_vararg) out += std::string(separator) + "...";
  out += ") -> ";
  // A single unnamed return is written bare; anything else needs the tuple parentheses.
  if (returns.empty() && is_varret) return out + "...";
  if (returns.size() == 1 && !is_varret && returns[0].name.empty()) {
    return out + returns[0].to_string();
  }
  out += "(";
  for (size_t k = 0; k < returns.size(); ++k) out += (k ? ", " : "") + returns[k].to_string();
  if (is_varret) out += returns.empty() ? "..." : ", ...";
  return out + ")";
}

bool FunctionSchema::is_mutable() const {
  for (const auto& arg : arguments) {
    if (arg.alias && arg.alias->is_write) return true;
  }
  return false;
}

bool FunctionSchema::is_view() const {
  for (const auto& ret : returns) {
    if (!ret.alias || ret.alias->is_write) continue;
    for (const auto& arg : arguments) {
      if (arg.alias && arg.alias->set == ret.alias->set) return true;
    }
  }
  return false;
}

std::optional<size_t> FunctionSchema::argument_index(std::string_view name) const {
  for (size_t k = 0; k < arguments.size(); ++k) {
    if (arguments[k].name == name) return k;
  }
  return std::nullopt;
}

FunctionSchema parse_schema(std::string_view text) { return SchemaParser(text).parse(); }

}  // namespace tessera
