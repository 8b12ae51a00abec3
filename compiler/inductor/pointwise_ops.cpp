#include "pointwise_ops.h"

#include <cmath>
#include <cstdio>
#include <unordered_map>

namespace tessera::inductor {
namespace {

namespace g = sdk::graph;
using Kind = g::Arg::Kind;

// A number as a C literal of `ctype`, exact for doubles (hex float), inf and NaN spelled out.
std::string literal(double x, const std::string& ctype) {
  if (std::isnan(x)) return "(" + ctype + ")__builtin_nan(\"\")";
  if (std::isinf(x)) return std::string(x > 0 ? "" : "-") + "(" + ctype + ")__builtin_inf()";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", x);
  return "((" + ctype + ")" + buf + ")";
}

std::optional<double> scalar(const g::Node& n, size_t i) {
  if (i >= n.args.size()) return std::nullopt;
  const g::Arg& a = n.args[i];
  if (a.kind == Kind::Double) return a.d;
  if (a.kind == Kind::Int || a.kind == Kind::Bool) return double(a.i);
  return std::nullopt;
}
bool is_tensor(const g::Node& n, size_t i) { return i < n.args.size() && n.args[i].kind == Kind::Tensor; }
bool is_none(const g::Node& n, size_t i) { return i >= n.args.size() || n.args[i].kind == Kind::None; }

// The C function of a math function for `ctype` ("sinf" / "sin").
std::string fn(const char* name, const std::string& ctype) { return ctype == "float" ? std::string(name) + "f" : name; }

struct Ctx {
  const g::Node& n;
  const OperandFn& x;
  const std::string& t;
  bool fast_trig;
  std::string lit(double v) const { return literal(v, t); }
};
using Lowering = std::function<std::optional<std::string>(const Ctx&)>;

Lowering unary(const char* f) {
  return [f](const Ctx& c) -> std::optional<std::string> {
    if (!is_tensor(c.n, 0)) return std::nullopt;
    return fn(f, c.t) + "(" + c.x(0) + ")";
  };
}
Lowering unary_expr(std::function<std::string(const std::string& a, const Ctx&)> body) {
  return [body](const Ctx& c) -> std::optional<std::string> {
    if (!is_tensor(c.n, 0)) return std::nullopt;
    return body("(" + c.x(0) + ")", c);
  };
}
// sin or cos: the library's, or with fast_trig in float the prelude's ts_fast_sin/cos.
Lowering trigonometric(const char* f) {
  return [f](const Ctx& c) -> std::optional<std::string> {
    if (!is_tensor(c.n, 0)) return std::nullopt;
    if (c.fast_trig && c.t == "float") return std::string("ts_fast_") + f + "(" + c.x(0) + ")";
    return fn(f, c.t) + "(" + c.x(0) + ")";
  };
}
// a OP b (* alpha), with b a tensor (Tensor overload) or a number (Scalar overload).
Lowering binary(const char* op, bool has_alpha) {
  return [op, has_alpha](const Ctx& c) -> std::optional<std::string> {
    if (!is_tensor(c.n, 0)) return std::nullopt;
    std::string b;
    if (is_tensor(c.n, 1)) b = c.x(1);
    else if (auto s = scalar(c.n, 1)) b = c.lit(*s);
    else return std::nullopt;
    if (has_alpha) {
      auto alpha = scalar(c.n, 2);
      if (!alpha) return std::nullopt;
      if (*alpha != 1) b = "(" + b + ") * " + c.lit(*alpha);
    }
    return "(" + c.x(0) + ") " + op + " (" + b + ")";
  };
}
Lowering binary_fn(std::function<std::string(const std::string&, const std::string&, const Ctx&)> body) {
  return [body](const Ctx& c) -> std::optional<std::string> {
    if (!is_tensor(c.n, 0)) return std::nullopt;
    std::string b;
    if (is_tensor(c.n, 1)) b = c.x(1);
    else if (auto s = scalar(c.n, 1)) b = c.lit(*s);
    else return std::nullopt;
    return body("(" + c.x(0) + ")", "(" + b + ")", c);
  };
}
// NaN-propagating max/min, as torch.maximum and clamp.
std::string nan_max(const std::string& a, const std::string& b) { return "ts_max(" + a + ", " + b + ")"; }
std::string nan_min(const std::string& a, const std::string& b) { return "ts_min(" + a + ", " + b + ")"; }
// clamp of `a` against the number `bound` from below ("lo") or above ("hi"): one compare unless
// the bound is NaN (then the two-tensor form, which returns the NaN).
std::string clamp_against(const std::string& a, double bound, const char* side, const Ctx& c) {
  if (std::isnan(bound)) return (side == std::string("lo") ? nan_max : nan_min)(a, c.lit(bound));
  return std::string("ts_clamp_") + side + "(" + a + ", " + c.lit(bound) + ")";
}

const std::unordered_map<std::string, Lowering>& table() {
  static const std::unordered_map<std::string, Lowering> t = {
      {"add.Tensor", binary("+", true)},
      {"add.Scalar", binary("+", true)},
      {"sub.Tensor", binary("-", true)},
      {"sub.Scalar", binary("-", true)},
      {"mul.Tensor", binary("*", false)},
      {"mul.Scalar", binary("*", false)},
      {"div.Tensor", binary("/", false)},
      {"div.Scalar", binary("/", false)},
      {"rsub.Scalar", binary_fn([](auto& a, auto& b, auto&) { return b + " - " + a; })},
      {"maximum", binary_fn([](auto& a, auto& b, auto&) { return nan_max(a, b); })},
      {"minimum", binary_fn([](auto& a, auto& b, auto&) { return nan_min(a, b); })},
      {"pow.Tensor_Scalar", [](const Ctx& c) -> std::optional<std::string> {
         auto e = scalar(c.n, 1);
         if (!is_tensor(c.n, 0) || !e) return std::nullopt;
         const std::string a = "(" + c.x(0) + ")";
         if (*e == 2) return a + " * " + a;
         if (*e == 1) return a;
         if (*e == 0.5) return "__builtin_sqrt" + std::string(c.t == "float" ? "f" : "") + a;
         return fn("pow", c.t) + "(" + a + ", " + c.lit(*e) + ")";
       }},
      {"neg", unary_expr([](auto& a, auto&) { return "-" + a; })},
      {"abs", unary_expr([](auto& a, const Ctx& c) { return std::string("__builtin_fabs") + (c.t == "float" ? "f" : "") + a; })},
      {"sqrt", unary_expr([](auto& a, const Ctx& c) { return std::string("__builtin_sqrt") + (c.t == "float" ? "f" : "") + a; })},
      {"rsqrt", unary_expr([](auto& a, const Ctx& c) {
         return c.lit(1) + " / " + std::string("__builtin_sqrt") + (c.t == "float" ? "f" : "") + a; })},
      {"reciprocal", unary_expr([](auto& a, const Ctx& c) { return c.lit(1) + " / " + a; })},
      {"relu", unary_expr([](auto& a, const Ctx& c) { return "(" + a + " > " + c.lit(0) + " ? " + a + " : (" + a + " != " + a + " ? " + a + " : " + c.lit(0) + "))"; })},
      {"sigmoid", unary_expr([](auto& a, const Ctx& c) { return c.lit(1) + " / (" + c.lit(1) + " + " + fn("exp", c.t) + "(-" + a + "))"; })},
      {"silu", unary_expr([](auto& a, const Ctx& c) { return a + " / (" + c.lit(1) + " + " + fn("exp", c.t) + "(-" + a + "))"; })},
      {"tanh", unary_expr([](auto& a, auto&) { return "ts_tanh(" + a + ")"; })},
      {"sin", trigonometric("sin")},
      {"cos", trigonometric("cos")},
      {"tan", unary("tan")},
      {"exp", unary("exp")},
      {"expm1", unary("expm1")},
      {"log", unary("log")},
      {"log1p", unary("log1p")},
      {"log2", unary("log2")},
      {"log10", unary("log10")},
      {"erf", unary("erf")},
      {"atan", unary("atan")},
      {"floor", unary_expr([](auto& a, const Ctx& c) { return std::string("__builtin_floor") + (c.t == "float" ? "f" : "") + a; })},
      {"ceil", unary_expr([](auto& a, const Ctx& c) { return std::string("__builtin_ceil") + (c.t == "float" ? "f" : "") + a; })},
      {"trunc", unary_expr([](auto& a, const Ctx& c) { return std::string("__builtin_trunc") + (c.t == "float" ? "f" : "") + a; })},
      {"gelu", [](const Ctx& c) -> std::optional<std::string> {
         if (!is_tensor(c.n, 0)) return std::nullopt;
         const std::string a = "(" + c.x(0) + ")";
         const std::string mode = c.n.args.size() > 1 && c.n.args[1].kind == Kind::Str ? c.n.args[1].str : "none";
         if (mode == "none" && c.t == "float") return "ts_gelu_erf(" + a + ")";  // the CPU plugin's formula
         if (mode == "none")
           return c.lit(0.5) + " * " + a + " * (" + c.lit(1) + " + " + fn("erf", c.t) + "(" + a + " * " +
                  c.lit(M_SQRT1_2) + "))";
         if (mode == "tanh" && c.t == "float") return "ts_gelu_tanh(" + a + ")";
         if (mode == "tanh")
           return c.lit(0.5) + " * " + a + " * (" + c.lit(1) + " + ts_tanh(" + c.lit(std::sqrt(2 / M_PI)) + " * (" +
                  a + " + " + c.lit(0.044715) + " * " + a + " * " + a + " * " + a + ")))";
         return std::nullopt;
       }},
      {"leaky_relu", [](const Ctx& c) -> std::optional<std::string> {
         auto slope = scalar(c.n, 1);
         if (!is_tensor(c.n, 0) || !slope) return std::nullopt;
         const std::string a = "(" + c.x(0) + ")";
         return "(" + a + " > " + c.lit(0) + " ? " + a + " : " + a + " * " + c.lit(*slope) + ")";
       }},
      {"clamp", [](const Ctx& c) -> std::optional<std::string> {
         if (!is_tensor(c.n, 0)) return std::nullopt;
         std::string r = c.x(0);
         if (auto lo = scalar(c.n, 1)) r = clamp_against(r, *lo, "lo", c);
         else if (!is_none(c.n, 1)) return std::nullopt;
         if (auto hi = scalar(c.n, 2)) r = clamp_against(r, *hi, "hi", c);
         else if (!is_none(c.n, 2)) return std::nullopt;
         return r;
       }},
      {"clamp_min", binary_fn([](auto& a, auto& b, auto&) { return nan_max(a, b); })},
      {"clamp_max", binary_fn([](auto& a, auto& b, auto&) { return nan_min(a, b); })},
      {"gelu_backward", [](const Ctx& c) -> std::optional<std::string> {
         if (!is_tensor(c.n, 0) || !is_tensor(c.n, 1)) return std::nullopt;
         const std::string g = "(" + c.x(0) + ")", x = "(" + c.x(1) + ")";
         const std::string mode = c.n.args.size() > 2 && c.n.args[2].kind == Kind::Str ? c.n.args[2].str : "none";
         if (mode == "none" && c.t == "float") return g + " * ts_gelu_erf_grad(" + x + ")";
         if (mode == "none")  // d/dx x Phi(x) = Phi(x) + x phi(x)
           return g + " * (" + c.lit(0.5) + " * (" + c.lit(1) + " + " + fn("erf", c.t) + "(" + x + " * " +
                  c.lit(M_SQRT1_2) + ")) + " + x + " * " + fn("exp", c.t) + "(" + c.lit(-0.5) + " * " + x + " * " + x +
                  ") * " + c.lit(0.5 * M_2_SQRTPI * M_SQRT1_2) + ")";
         if (mode == "tanh" && c.t == "float") return g + " * ts_gelu_tanh_grad(" + x + ")";
         if (mode == "tanh") {
           const double k = std::sqrt(2 / M_PI);
           const std::string t = "ts_tanh(" + c.lit(k) + " * (" + x + " + " + c.lit(0.044715) + " * " + x + " * " + x +
                                 " * " + x + "))";
           return g + " * ts_gelu_tanh_grad(" + x + ", " + t + ", " + c.lit(k) + ")";
         }
         return std::nullopt;
       }},
      {"threshold_backward", [](const Ctx& c) -> std::optional<std::string> {  // relu's backward
         auto th = scalar(c.n, 2);
         if (!is_tensor(c.n, 0) || !is_tensor(c.n, 1) || !th) return std::nullopt;
         return "(" + c.x(1) + " <= " + c.lit(*th) + " ? " + c.lit(0) + " : " + c.x(0) + ")";
       }},
      {"masked_fill.Scalar", [](const Ctx& c) -> std::optional<std::string> {
         auto v = scalar(c.n, 2);
         if (!is_tensor(c.n, 0) || !is_tensor(c.n, 1) || !v) return std::nullopt;
         return "(" + c.x(1) + " ? " + c.lit(*v) + " : " + c.x(0) + ")";
       }},
      {"where.self", [](const Ctx& c) -> std::optional<std::string> {
         if (!is_tensor(c.n, 0) || !is_tensor(c.n, 1) || !is_tensor(c.n, 2)) return std::nullopt;
         return "(" + c.x(0) + " ? " + c.x(1) + " : " + c.x(2) + ")";
       }},
  };
  return t;
}

}  // namespace

bool is_pointwise(const std::string& op) { return table().count(op) != 0; }

int bool_argument(const std::string& op) {
  if (op == "where.self") return 0;
  if (op == "masked_fill.Scalar") return 1;
  return -1;
}

std::optional<std::string> lower_pointwise(const g::Node& node, const OperandFn& operand, const std::string& ctype,
                                           bool fast_trig) {
  auto it = table().find(node.op);
  if (it == table().end()) return std::nullopt;
  return it->second(Ctx{node, operand, ctype, fast_trig});
}

bool is_trigonometric(const std::string& op) { return op == "sin" || op == "cos"; }

}  // namespace tessera::inductor
