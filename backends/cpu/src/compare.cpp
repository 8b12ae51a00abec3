// Comparisons and logic with bool results (eq ne lt le gt ge, logical_and/or/not), and the
// selecting ops where, clamp and masked_fill.
#include "kernels.h"
#include "tensor_iterator.h"

namespace tessera::cpu {
namespace {

using sdk::fail;
using sdk::opmath_t;

// ---- comparisons: one loop per dtype for all six. Each pair of values has an order code
// (1: less, 2: equal, 4: greater, 0: unordered, i.e. a NaN) and each op is the set of codes
// for which it is true, as a bit mask indexed by the code.
enum CompareMask : unsigned {
  kEq = 1u << 2,
  kNe = 1u << 0 | 1u << 1 | 1u << 4,
  kLt = 1u << 1,
  kLe = 1u << 1 | 1u << 2,
  kGt = 1u << 4,
  kGe = 1u << 2 | 1u << 4,
};

void compare(sdk::Args& a, Variant v, bool scalar, unsigned mask, const char* base) {
  const std::string name = variant_name(base, v);
  TensorRef self = a.tensor(0);
  IterConfig cfg(a.call(), name.c_str());
  cfg.output(v, self, v == Variant::Out ? a.tensor(2) : TensorRef()).input(self).output_dtype(TS_BOOL);
  if (scalar) cfg.input(a.scalar(1));
  else cfg.input(a.tensor(1));
  TensorIterator it = cfg.build();
  if (sdk::is_complex(it.common_dtype())) {  // only (in)equality: complex numbers are not ordered
    if (mask != kEq && mask != kNe)
      fail(TS_ERROR_TYPE, name, ": complex numbers are not ordered, got ", sdk::dtype_name(it.common_dtype()));
    TS_DISPATCH_COMPLEX(it.common_dtype(), , {
      it.run([mask](char** d, const int64_t* s, int64_t n) {
        binary_row<bool, scalar_t, scalar_t>(d, s, n, [mask](scalar_t x, scalar_t y) {
          return bool((mask >> (unsigned(x == y) << 1)) & 1u);  // code 2: equal, 0: unordered
        });
      });
    });
    return a.return_argument(it.result());
  }
  TS_DISPATCH_ALL(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    it.run([mask](char** d, const int64_t* s, int64_t n) {
      binary_row<bool, scalar_t, scalar_t>(d, s, n, [mask](scalar_t x, scalar_t y) {
        const unsigned code = unsigned(M(x) < M(y)) | unsigned(M(x) == M(y)) << 1 | unsigned(M(x) > M(y)) << 2;
        return bool((mask >> code) & 1u);
      });
    });
  });
  a.return_argument(it.result());
}

// ---- logic: operands are read as bool (nonzero), results are bool.
void logical(sdk::Args& a, Variant v, int arity, bool is_and, const char* base) {
  const std::string name = variant_name(base, v);
  TensorRef self = a.tensor(0);
  IterConfig cfg(a.call(), name.c_str());
  cfg.output(v, self, v == Variant::Out ? a.tensor(arity) : TensorRef()).common_dtype(TS_BOOL).output_dtype(TS_BOOL);
  cfg.input_as(self, TS_BOOL);
  if (arity == 2) cfg.input_as(a.tensor(1), TS_BOOL);
  TensorIterator it = cfg.build();
  if (arity == 1) {
    it.run([](char** d, const int64_t* s, int64_t n) { map_row<bool, bool>(d, s, n, [](bool x) { return !x; }); });
  } else if (is_and) {
    it.run([](char** d, const int64_t* s, int64_t n) {
      binary_row<bool, bool, bool>(d, s, n, [](bool x, bool y) { return x && y; });
    });
  } else {
    it.run([](char** d, const int64_t* s, int64_t n) {
      binary_row<bool, bool, bool>(d, s, n, [](bool x, bool y) { return x || y; });
    });
  }
  a.return_argument(it.result());
}

// where.self(Tensor condition, Tensor self, Tensor other)
void where_kernel(sdk::Args& a) {
  TensorRef cond = a.tensor(0), self = a.tensor(1), other = a.tensor(2);
  if (cond.dtype() != TS_BOOL)
    fail(TS_ERROR_TYPE, "where: expected condition to be a bool tensor, got ", sdk::dtype_name(cond.dtype()));
  TensorIterator it =
      IterConfig(a.call(), "where").output(TensorRef(), false).input_as(cond, TS_BOOL).input(self).input(other).build();
  TS_DISPATCH_ALL_AND_COMPLEX(it.common_dtype(), fail(TS_ERROR_TYPE, "where: unsupported dtype"), {
    it.run([](char** d, const int64_t* s, int64_t n) {
      map_row<scalar_t, bool, scalar_t, scalar_t>(d, s, n, [](bool c, scalar_t x, scalar_t y) { return c ? x : y; });
    });
  });
  a.return_argument(it.result());
}

// clamp(Tensor self, Scalar? min=None, Scalar? max=None): min, then max (so min > max gives
// max everywhere, as in PyTorch); NaN inputs and NaN bounds give NaN.
void clamp(sdk::Args& a, Variant v) {
  const std::string name = variant_name("clamp", v);
  TensorRef self = a.tensor(0);
  const std::optional<ScalarArg> lo = a.optional_scalar(1), hi = a.optional_scalar(2);
  if (!lo && !hi) fail(TS_ERROR_VALUE, name, ": expected at least one of 'min' or 'max' to be given, got neither");
  if (self.dtype() == TS_BOOL) fail(TS_ERROR_TYPE, name, ": expected a numeric tensor, got bool");
  // The bounds promote like Python numbers: an int tensor clamped by 0.5 computes in float32.
  ResultType rt;
  rt.add_tensor(self);
  if (lo) rt.add_scalar(*lo);
  if (hi) rt.add_scalar(*hi);
  TensorIterator it = IterConfig(a.call(), name.c_str())
                          .output(v, self, v == Variant::Out ? a.tensor(3) : TensorRef())
                          .input(self)
                          .common_dtype(rt.get())
                          .build();
  TS_DISPATCH_NUMERIC(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    using M = opmath_t<scalar_t>;
    const bool has_lo = bool(lo), has_hi = bool(hi);
    const M l = has_lo ? scalar_to<M>(*lo) : M(0), h = has_hi ? scalar_to<M>(*hi) : M(0);
    it.run([=](char** d, const int64_t* s, int64_t n) {
      map_row<scalar_t, scalar_t>(d, s, n, [=](scalar_t x) {
        M y = M(x);
        if (has_lo && (y < l || l != l)) y = l;  // a NaN bound gives NaN, as torch
        if (has_hi && (y > h || h != h)) y = h;
        return scalar_t(y);
      });
    });
  });
  a.return_argument(it.result());
}

// masked_fill.Scalar(Tensor self, Tensor mask, Scalar value): the result keeps self's dtype.
void masked_fill(sdk::Args& a, Variant v) {
  const std::string name = variant_name("masked_fill", v);
  TensorRef self = a.tensor(0), mask = a.tensor(1);
  const ScalarArg value = a.scalar(2);
  if (mask.dtype() != TS_BOOL)
    fail(TS_ERROR_TYPE, name, ": expected a bool mask, got ", sdk::dtype_name(mask.dtype()));
  TensorIterator it = IterConfig(a.call(), name.c_str())
                          .output(v, self, TensorRef())
                          .common_dtype(self.dtype())
                          .input(self)
                          .input_as(mask, TS_BOOL)
                          .build();
  TS_DISPATCH_ALL_AND_COMPLEX(it.common_dtype(), fail(TS_ERROR_TYPE, name, ": unsupported dtype"), {
    const scalar_t fill = scalar_to<scalar_t>(value);
    it.run([fill](char** d, const int64_t* s, int64_t n) {
      map_row<scalar_t, scalar_t, bool>(d, s, n, [fill](scalar_t x, bool m) { return m ? fill : x; });
    });
  });
  a.return_argument(it.result());
}

template <Variant V, bool S, unsigned Mask>
void compare_k(sdk::Args& a) {
  constexpr const char* base = Mask == kEq   ? "eq"
                               : Mask == kNe ? "ne"
                               : Mask == kLt ? "lt"
                               : Mask == kLe ? "le"
                               : Mask == kGt ? "gt"
                                             : "ge";
  compare(a, V, S, Mask, base);
}
template <Variant V> void logical_and_k(sdk::Args& a) { logical(a, V, 2, true, "logical_and"); }
template <Variant V> void logical_or_k(sdk::Args& a) { logical(a, V, 2, false, "logical_or"); }
template <Variant V> void logical_not_k(sdk::Args& a) { logical(a, V, 1, false, "logical_not"); }
template <Variant V> void clamp_k(sdk::Args& a) { clamp(a, V); }
template <Variant V> void masked_fill_k(sdk::Args& a) { masked_fill(a, V); }

constexpr Variant F = Variant::Functional, I = Variant::Inplace, O = Variant::Out;

template <unsigned Mask>
void register_compare(sdk::Registrar& reg, ts_dispatch_key key, const std::string& n) {
  reg.kernel((n + ".Tensor").c_str(), key, compare_k<F, false, Mask>);
  reg.kernel((n + ".Scalar").c_str(), key, compare_k<F, true, Mask>);
  reg.kernel((n + ".out").c_str(), key, compare_k<O, false, Mask>);
}

}  // namespace

void register_compare_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  register_compare<kEq>(reg, key, "eq");
  register_compare<kNe>(reg, key, "ne");
  register_compare<kLt>(reg, key, "lt");
  register_compare<kLe>(reg, key, "le");
  register_compare<kGt>(reg, key, "gt");
  register_compare<kGe>(reg, key, "ge");
  reg.kernel("logical_and", key, logical_and_k<F>);
  reg.kernel("logical_and.out", key, logical_and_k<O>);
  reg.kernel("logical_or", key, logical_or_k<F>);
  reg.kernel("logical_or.out", key, logical_or_k<O>);
  reg.kernel("logical_not", key, logical_not_k<F>);
  reg.kernel("logical_not.out", key, logical_not_k<O>);
  reg.kernel("where.self", key, where_kernel);
  reg.kernel("clamp", key, clamp_k<F>);
  reg.kernel("clamp_", key, clamp_k<I>);
  reg.kernel("clamp.out", key, clamp_k<O>);
  reg.kernel("masked_fill.Scalar", key, masked_fill_k<F>);
  reg.kernel("masked_fill_.Scalar", key, masked_fill_k<I>);
}

}  // namespace tessera::cpu
