// Accumulating index ops and the backward of two views:
//   scatter_add     self[index[i][j]][j] += src[i][j]   (dim 0)
//   index_add       self.select(dim, index[i]) += alpha * source.select(dim, i)
//   slice_backward  zeros(input_sizes) with grad_output written into the slice
//   select_backward zeros(input_sizes) with grad_output written into the selected plane
// Every index is checked before anything is written (IndexError naming the op). The
// accumulating loops split the dims other than `dim` over threads: positions that differ
// there write different elements of self, so the threads never collide, and each element sums
// its contributions in index order. Every dtype (bool adds as logical or).
#include "nn_norm.h"

#include "strided.h"
#include "tensor_iterator.h"

#include <cstring>

namespace tessera::cpu {
namespace {

using namespace norm;
using sdk::Args;
using sdk::fail;
using strided::str;
using Shape = std::vector<int64_t>;

// Sizes / strides with a 0-d tensor seen as one element in one dim (as PyTorch does).
struct Geometry {
  Shape sizes, strides;
  explicit Geometry(const TensorRef& t) : sizes(t.shape_vector()), strides(t.strides().begin(), t.strides().end()) {
    if (sizes.empty()) sizes = {1}, strides = {0};
  }
};

// a + b, with bool as logical or and the 16-bit floats through float.
template <class T> inline T add(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else return T(sdk::opmath_t<T>(a) + sdk::opmath_t<T>(b));
}
template <class T> inline T mul(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a && b;
  else return T(sdk::opmath_t<T>(a) * sdk::opmath_t<T>(b));
}

// True when two positions of `t` may share memory (a zero stride on a dim of size > 1): the
// loops then run on one thread.
bool self_overlapping(const TensorRef& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) == 0) return true;
  return false;
}

template <class F>
void with_index_type(const char* op, const TensorRef& index, F&& f) {
  switch (index.dtype()) {
    case TS_INT64: f(int64_t{}); break;
    case TS_INT32: f(int32_t{}); break;
    default:
      fail(TS_ERROR_TYPE, op, ": expected index of dtype int64 or int32, got ", sdk::dtype_name(index.dtype()));
  }
}

// IndexError for the first index outside [0, size).
void check_range(const char* op, const TensorRef& index, int64_t dim, int64_t size) {
  Geometry g(index);
  with_index_type(op, index, [&](auto type) {
    using I = decltype(type);
    const I* p = index.data<I>();
    strided::for_each_offset<1>(g.sizes, {g.strides.data()}, [&](const std::array<int64_t, 1>& off) {
      const int64_t v = int64_t(p[off[0]]);
      if (v < 0 || v >= size)
        fail(TS_ERROR_INDEX, op, ": index ", v, " is out of range for dimension ", dim, " with size ", size);
    });
  });
}

// A new contiguous copy of self (the functional variants accumulate into it).
TensorRef copy_of(ts_call call, const TensorRef& self) {
  TensorRef copy = sdk::empty(call, self.sizes(), self.dtype(), self.device());
  strided::copy_tensor(copy, self);
  return copy;
}

// The dims other than `dim` of a Geometry.
Shape without(const Shape& v, int64_t dim) {
  Shape out = v;
  out.erase(out.begin() + dim);
  return out;
}

// ---- scatter_add

struct ScatterAdd {
  TensorRef index, src;
  int64_t dim = 0;
};

ScatterAdd plan_scatter_add(const char* op, const Args& a, const TensorRef& self) {
  ScatterAdd p{a.tensor(2), a.tensor(3), 0};
  check_cpu_all(op, {&self, &p.index, &p.src});
  p.dim = strided::wrap_dim(op, a.to_int(1), self.dim());
  with_index_type(op, p.index, [](auto) {});
  if (p.src.dtype() != self.dtype())
    fail(TS_ERROR_TYPE, op, ": expected src of dtype ", sdk::dtype_name(self.dtype()), " (like self), got ",
         sdk::dtype_name(p.src.dtype()));
  if (p.index.numel() == 0) return p;
  if (p.index.dim() != self.dim() || p.src.dim() != self.dim())
    fail(TS_ERROR_VALUE, op, ": expected index and src to have as many dimensions as self (", self.dim(),
         "), got index shape ", str(p.index.sizes()), " and src shape ", str(p.src.sizes()));
  for (int64_t d = 0; d < self.dim(); ++d)
    if ((d != p.dim && p.index.size(d) > self.size(d)) || p.index.size(d) > p.src.size(d))
      fail(TS_ERROR_VALUE, op, ": expected index.size(", d, ") <= src.size(", d, ") and, but for dim ", p.dim,
           ", <= self.size(", d, "); got index shape ", str(p.index.sizes()), ", src shape ", str(p.src.sizes()),
           " and self shape ", str(self.sizes()));
  check_range(op, p.index, p.dim, self.dim() == 0 ? 1 : self.size(p.dim));
  return p;
}

template <class T, class I>
void scatter_add_loop(const TensorRef& target, const ScatterAdd& p) {
  Geometry t(target), idx(p.index), src(p.src);
  const int64_t dim = p.dim, len = idx.sizes[size_t(dim)];
  const Shape other = without(idx.sizes, dim);
  LoopGeometry geom(3, other);
  geom.set_operand(0, other, without(t.strides, dim), sizeof(T));
  geom.set_operand(1, other, without(idx.strides, dim), sizeof(I));
  geom.set_operand(2, other, without(src.strides, dim), sizeof(T));
  geom.coalesce();
  const int64_t t_step = t.strides[size_t(dim)] * int64_t(sizeof(T));
  const int64_t i_step = idx.strides[size_t(dim)] * int64_t(sizeof(I));
  const int64_t s_step = src.strides[size_t(dim)] * int64_t(sizeof(T));
  char* t_base = static_cast<char*>(target.data());
  char* i_base = static_cast<char*>(p.index.data());
  char* s_base = static_cast<char*>(p.src.data());
  const int64_t n_other = geom.numel();
  const int64_t grain = self_overlapping(target) ? n_other : std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, len));
  parallel_for(n_other, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = 0; i < len; ++i) {
      char* base[3] = {t_base, i_base + i * i_step, s_base + i * s_step};
      geom.run_range(base, b, e, [&](char** d, const int64_t* s, int64_t n) {
        for (int64_t k = 0; k < n; ++k) {
          const int64_t v = int64_t(*reinterpret_cast<const I*>(d[1] + k * s[1]));
          T& dst = *reinterpret_cast<T*>(d[0] + k * s[0] + v * t_step);
          dst = add(dst, *reinterpret_cast<const T*>(d[2] + k * s[2]));
        }
      });
    }
  });
}

void run_scatter_add(const char* op, const TensorRef& target, const ScatterAdd& p) {
  if (p.index.numel() == 0) return;
  with_index_type(op, p.index, [&](auto type) {
    TS_DISPATCH_ALL_AND_COMPLEX(target.dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"),
                                scatter_add_loop<scalar_t, decltype(type)>(target, p));
  });
}

void scatter_add_kernel(Args& a) {
  const TensorRef self = a.tensor(0);
  const ScatterAdd p = plan_scatter_add("scatter_add", a, self);
  TensorRef out = copy_of(a.call(), self);
  run_scatter_add("scatter_add", out, p);
  a.return_tensor(std::move(out));
}

void scatter_add_inplace_kernel(Args& a) {
  const TensorRef self = a.tensor(0);
  const ScatterAdd p = plan_scatter_add("scatter_add_", a, self);
  run_scatter_add("scatter_add_", self, p);
  self.bump_version();
  a.return_argument(self);
}

// ---- index_add

struct IndexAdd {
  TensorRef index, source;
  int64_t dim = 0;
  sdk::ScalarArg alpha;
};

IndexAdd plan_index_add(const char* op, const Args& a, const TensorRef& self) {
  IndexAdd p{a.tensor(2), a.tensor(3), 0, a.scalar(4)};
  check_cpu_all(op, {&self, &p.index, &p.source});
  p.dim = strided::wrap_dim(op, a.to_int(1), self.dim());
  with_index_type(op, p.index, [](auto) {});
  if (p.index.dim() > 1)
    fail(TS_ERROR_VALUE, op, ": expected a 0-d or 1-D index, got shape ", str(p.index.sizes()));
  if (p.source.dtype() != self.dtype())
    fail(TS_ERROR_TYPE, op, ": expected source of dtype ", sdk::dtype_name(self.dtype()), " (like self), got ",
         sdk::dtype_name(p.source.dtype()));
  if (!sdk::is_inexact(self.dtype()) && p.alpha.kind == sdk::ScalarArg::Double)
    fail(TS_ERROR_TYPE, op, ": expected an integral alpha for a self of dtype ", sdk::dtype_name(self.dtype()),
         ", got ", p.alpha.d);
  // source has self's shape but for `dim`, where it has one entry per index.
  Geometry s(self), src(p.source);
  bool ok = p.source.dim() == self.dim() || (p.source.dim() <= 1 && self.dim() <= 1);
  for (size_t d = 0; ok && d < s.sizes.size(); ++d)
    ok = int64_t(d) == p.dim ? src.sizes[d] == p.index.numel() : src.sizes[d] == s.sizes[d];
  if (!ok)
    fail(TS_ERROR_VALUE, op, ": expected source of shape ", str(self.sizes()), " but with ", p.index.numel(),
         " (the number of indices) in dimension ", p.dim, ", got ", str(p.source.sizes()));
  check_range(op, p.index, p.dim, s.sizes[size_t(p.dim)]);
  return p;
}

template <class T, class I>
void index_add_loop(const TensorRef& target, const IndexAdd& p) {
  Geometry t(target), src(p.source), idx(p.index);
  const int64_t dim = p.dim, len = p.index.numel();
  const Shape other = without(t.sizes, dim);
  LoopGeometry geom(2, other);
  geom.set_operand(0, other, without(t.strides, dim), sizeof(T));
  geom.set_operand(1, other, without(src.strides, dim), sizeof(T));
  geom.coalesce();
  const int64_t t_step = t.strides[size_t(dim)] * int64_t(sizeof(T));
  const int64_t s_step = src.strides[size_t(dim)] * int64_t(sizeof(T));
  const I* ip = p.index.data<I>();
  const int64_t ip_step = idx.strides[0];
  const T alpha = scalar_to<T>(p.alpha);
  const bool unit = alpha == T(1);
  char* t_base = static_cast<char*>(target.data());
  char* s_base = static_cast<char*>(p.source.data());
  const int64_t n_other = geom.numel();
  const int64_t grain = self_overlapping(target) ? n_other : std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, len));
  parallel_for(n_other, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = 0; i < len; ++i) {
      char* base[2] = {t_base + int64_t(ip[i * ip_step]) * t_step, s_base + i * s_step};
      geom.run_range(base, b, e, [&](char** d, const int64_t* s, int64_t n) {
        for (int64_t k = 0; k < n; ++k) {
          T& dst = *reinterpret_cast<T*>(d[0] + k * s[0]);
          const T v = *reinterpret_cast<const T*>(d[1] + k * s[1]);
          dst = add(dst, unit ? v : mul(alpha, v));
        }
      });
    }
  });
}

void run_index_add(const char* op, const TensorRef& target, const IndexAdd& p) {
  if (p.index.numel() == 0 || target.numel() == 0) return;
  with_index_type(op, p.index, [&](auto type) {
    TS_DISPATCH_ALL_AND_COMPLEX(target.dtype(), fail(TS_ERROR_TYPE, op, ": unsupported dtype"),
                                index_add_loop<scalar_t, decltype(type)>(target, p));
  });
}

void index_add_kernel(Args& a) {
  const TensorRef self = a.tensor(0);
  const IndexAdd p = plan_index_add("index_add", a, self);
  TensorRef out = copy_of(a.call(), self);
  run_index_add("index_add", out, p);
  a.return_tensor(std::move(out));
}

void index_add_inplace_kernel(Args& a) {
  const TensorRef self = a.tensor(0);
  const IndexAdd p = plan_index_add("index_add_", a, self);
  run_index_add("index_add_", self, p);
  self.bump_version();
  a.return_argument(self);
}

// ---- slice_backward / select_backward

Shape sizes_arg(const char* op, const Args& a, int i) {
  const auto s = a.int_list(i);
  Shape sizes(s.begin(), s.end());
  for (int64_t v : sizes)
    if (v < 0) fail(TS_ERROR_VALUE, op, ": expected non-negative input_sizes, got ", str(sizes));
  if (sizes.empty()) fail(TS_ERROR_VALUE, op, ": expected input_sizes of at least one dimension, got []");
  return sizes;
}

// Writes grad into a zero tensor of `sizes` through the view (view_sizes, view_strides, offset).
TensorRef scatter_view(const char* op, const Args& a, const TensorRef& grad, const Shape& sizes,
                       const Shape& view_sizes, const Shape& view_strides, int64_t offset) {
  if (!std::equal(view_sizes.begin(), view_sizes.end(), grad.sizes().begin(), grad.sizes().end()))
    fail(TS_ERROR_VALUE, op, ": expected grad_output of shape ", str(view_sizes), " for input_sizes ", str(sizes),
         ", got ", str(grad.sizes()));
  TensorRef out = zeros(a.call(), sizes, grad.dtype());
  if (grad.numel() > 0)
    strided::copy_elements(view_sizes, static_cast<char*>(out.data()) + offset * out.itemsize(), view_strides,
                           grad.data(), grad.strides(), grad.itemsize());
  return out;
}

// slice_backward(Tensor grad_output, int[] input_sizes, int dim, int start, int end, int step)
// start / end are normalised as slice does (negative counts from the end, then clamped).
void slice_backward_kernel(Args& a) {
  const char* op = "slice_backward";
  const TensorRef grad = a.tensor(0);
  check_cpu_all(op, {&grad});
  const Shape sizes = sizes_arg(op, a, 1);
  const int64_t dim = strided::wrap_dim(op, a.to_int(2), int64_t(sizes.size()));
  int64_t start = a.to_int(3), end = a.to_int(4);
  const int64_t step = a.to_int(5);
  if (step <= 0) fail(TS_ERROR_VALUE, op, ": expected a positive step, got ", step);
  const int64_t size = sizes[size_t(dim)];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape view_sizes = sizes, view_strides = strided::contiguous_strides(sizes);
  const int64_t offset = start * view_strides[size_t(dim)];
  view_sizes[size_t(dim)] = (end - start + step - 1) / step;
  view_strides[size_t(dim)] *= step;
  a.return_tensor(scatter_view(op, a, grad, sizes, view_sizes, view_strides, offset));
}

// select_backward(Tensor grad_output, int[] input_sizes, int dim, int index)
void select_backward_kernel(Args& a) {
  const char* op = "select_backward";
  const TensorRef grad = a.tensor(0);
  check_cpu_all(op, {&grad});
  const Shape sizes = sizes_arg(op, a, 1);
  const int64_t dim = strided::wrap_dim(op, a.to_int(2), int64_t(sizes.size()));
  int64_t index = a.to_int(3);
  const int64_t size = sizes[size_t(dim)];
  if (index < -size || index >= size)
    fail(TS_ERROR_INDEX, op, ": index ", index, " is out of range for dimension ", dim, " with size ", size);
  if (index < 0) index += size;
  const Shape strides = strided::contiguous_strides(sizes);
  a.return_tensor(scatter_view(op, a, grad, sizes, without(sizes, dim), without(strides, dim),
                               index * strides[size_t(dim)]));
}

}  // namespace

void register_accumulate_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("scatter_add", key, scatter_add_kernel);
  reg.kernel("scatter_add_", key, scatter_add_inplace_kernel);
  reg.kernel("index_add", key, index_add_kernel);
  reg.kernel("index_add_", key, index_add_inplace_kernel);
  reg.kernel("slice_backward", key, slice_backward_kernel);
  reg.kernel("select_backward", key, select_backward_kernel);
}

}  // namespace tessera::cpu
