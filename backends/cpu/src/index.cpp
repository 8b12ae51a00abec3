// Indexing kernels of the CPU plugin: index_select, gather, scatter (src and value forms, and
// in place). Elements are moved as words of the dtype's width, so only the index type (int64
// or int32) and the element width are template parameters. Every index is checked before
// anything is written: an out-of-range index raises IndexError and leaves the target untouched.
#include "kernels.h"
#include "strided.h"

#include <array>
#include <cstring>

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::TensorRef;
using strided::str;
using Shape = std::vector<int64_t>;

// Sizes and strides with a 0-d tensor seen as one element in one dim (as PyTorch treats it).
struct Geometry {
  Shape sizes, strides;
  explicit Geometry(const TensorRef& t) : sizes(t.shape_vector()), strides(t.strides().begin(), t.strides().end()) {
    if (sizes.empty()) sizes = {1}, strides = {0};
  }
};

// Calls f(I{}) with I the C type of the index tensor's dtype.
template <class F>
void with_index_type(const char* op, const TensorRef& index, F&& f) {
  switch (index.dtype()) {
    case TS_INT64: f(int64_t{}); break;
    case TS_INT32: f(int32_t{}); break;
    default:
      sdk::fail(TS_ERROR_TYPE, op, ": expected index of dtype int64 or int32, got ", sdk::dtype_name(index.dtype()));
  }
}

// Raises IndexError for the first index outside [0, size).
template <class I>
void check_range(const char* op, const TensorRef& index, int64_t dim, int64_t size) {
  Geometry g(index);
  const I* p = index.data<I>();
  strided::for_each_offset<1>(g.sizes, {g.strides.data()}, [&](const std::array<int64_t, 1>& off) {
    const int64_t v = p[off[0]];
    if (v < 0 || v >= size)
      sdk::fail(TS_ERROR_INDEX, op, ": index ", v, " is out of range for dimension ", dim, " with size ", size);
  });
}

void check_same_device(const char* op, const TensorRef& self, const TensorRef& other, const char* what) {
  if (other.device().type != self.device().type)
    sdk::fail(TS_ERROR_VALUE, op, ": expected ", what, " on the same device as self (type ", self.device().type,
              "), got device type ", other.device().type);
}

// The out= argument at `out_arg`: dtype checked against self, not overlapping self or the
// index, resized to `shape` when it differs.
TensorRef prepare_out(const char* op, const Args& a, int out_arg, const TensorRef& self, const TensorRef& index,
                      const Shape& shape) {
  TensorRef out = a.tensor(out_arg);
  if (out.dtype() != self.dtype())
    sdk::fail(TS_ERROR_TYPE, op, ": expected out of dtype ", sdk::dtype_name(self.dtype()), " (like self), got ",
              sdk::dtype_name(out.dtype()));
  auto check = [&] {
    if (strided::overlaps(out, self) || strided::overlaps(out, index))
      sdk::fail(TS_ERROR_VALUE, op, ": out must not overlap self or index");
  };
  check();  // before resizing, so that a refused out is left as it was
  if (out.shape_vector() != shape) {
    sdk::resize(a.call(), out, shape);
    check();
  }
  return out;
}

// ---- index_select: out.select(dim, i) = self.select(dim, index[i])

struct IndexSelect {
  TensorRef self, index;
  int64_t dim = 0;
  Shape out_shape;
};

IndexSelect plan_index_select(const Args& a) {
  const char* op = "index_select";
  IndexSelect p{a.tensor(0), a.tensor(2), 0, {}};
  p.dim = strided::wrap_dim(op, a.to_int(1), p.self.dim());
  check_same_device(op, p.self, p.index, "index");
  if (p.index.dim() > 1)
    sdk::fail(TS_ERROR_VALUE, op, ": expected a 0-d or 1-D index, got ", p.index.dim(), " dimensions (shape ",
              str(p.index.sizes()), ")");
  const int64_t size = p.self.dim() == 0 ? 1 : p.self.size(p.dim);
  with_index_type(op, p.index, [&](auto i) { check_range<decltype(i)>(op, p.index, p.dim, size); });
  if (p.self.dim() == 0) p.out_shape = p.index.shape_vector();
  else (p.out_shape = p.self.shape_vector())[size_t(p.dim)] = p.index.numel();
  return p;
}

template <class I, class W>
void index_select_loop(const IndexSelect& p, const TensorRef& out) {
  Geometry self(p.self), index(p.index);
  Shape out_sizes = self.sizes;
  out_sizes[size_t(p.dim)] = p.index.numel();
  // out has self's rank, or is 0-d / index-shaped when self is 0-d.
  const Shape out_strides = out.dim() == 0 ? Shape{0} : Shape(out.strides().begin(), out.strides().end());
  const I* idx = p.index.data<I>();
  const int64_t idx_stride = index.strides[0], dim = p.dim;
  const W* src = p.self.data<W>();
  W* dst = out.data<W>();
  // Slices of the other dims: rows big enough for memcpy-like copies go slice by slice.
  Shape slice = self.sizes, src_strides = self.strides, dst_strides = out_strides;
  const int64_t src_step = src_strides[size_t(dim)], dst_step = dst_strides[size_t(dim)];
  slice.erase(slice.begin() + dim);
  src_strides.erase(src_strides.begin() + dim);
  dst_strides.erase(dst_strides.begin() + dim);
  const int64_t n = p.index.numel(), slice_numel = strided::numel(slice);
  if (slice_numel >= 64 && strided::is_contiguous(slice, src_strides) && strided::is_contiguous(slice, dst_strides)) {
    // Dense rows (an embedding lookup, say): one memcpy per index, over threads.
#pragma omp parallel for num_threads(strided::threads_for(n * slice_numel)) schedule(static)
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + i * dst_step, src + int64_t(idx[i * idx_stride]) * src_step, size_t(slice_numel) * sizeof(W));
    return;
  }
  if (slice_numel >= 64) {
    for (int64_t i = 0; i < n; ++i)
      strided::copy_elements(slice, dst + i * dst_step, dst_strides, src + int64_t(idx[i * idx_stride]) * src_step,
                             src_strides, sizeof(W));
    return;
  }
  // Small slices: one pass over out; operand 2 counts the position along dim.
  Shape position(out_sizes.size(), 0), src_zeroed = self.strides;
  position[size_t(dim)] = 1;
  src_zeroed[size_t(dim)] = 0;
  strided::for_each_offset<3>(out_sizes, {out_strides.data(), src_zeroed.data(), position.data()},
                              [&](const std::array<int64_t, 3>& off) {
                                dst[off[0]] = src[off[1] + int64_t(idx[off[2] * idx_stride]) * src_step];
                              });
}

void run_index_select(const IndexSelect& p, const TensorRef& out) {
  if (out.numel() == 0) return;
  with_index_type("index_select", p.index, [&](auto i) {
    strided::with_word(p.self.itemsize(), [&](auto w) { index_select_loop<decltype(i), decltype(w)>(p, out); });
  });
}

void index_select_kernel(Args& a) {
  IndexSelect p = plan_index_select(a);
  TensorRef out = sdk::empty(a.call(), p.out_shape, p.self.dtype(), p.self.device());
  run_index_select(p, out);
  a.return_tensor(std::move(out));
}

void index_select_out_kernel(Args& a) {
  IndexSelect p = plan_index_select(a);
  TensorRef out = prepare_out("index_select", a, 3, p.self, p.index, p.out_shape);
  run_index_select(p, out);
  out.bump_version();
  a.return_argument(out);
}

// ---- gather: out[i][j] = self[index[i][j]][j] (dim 0), out has index's shape

// Checks the shapes shared by gather and scatter: index has self's rank and fits inside self
// except along dim; for scatter it also has src's rank and fits inside src in every dim.
void check_index_shape(const char* op, const TensorRef& self, const TensorRef& index, int64_t dim,
                       const TensorRef* src) {
  if (index.dim() != self.dim())
    sdk::fail(TS_ERROR_VALUE, op, ": expected index to have as many dimensions as self (", self.dim(), "), got ",
              index.dim(), " (index shape ", str(index.sizes()), ", self shape ", str(self.sizes()), ")");
  for (int64_t d = 0; d < index.dim(); ++d)
    if (d != dim && index.size(d) > self.size(d))
      sdk::fail(TS_ERROR_VALUE, op, ": expected index.size(", d, ") <= self.size(", d, "), got index shape ",
                str(index.sizes()), " and self shape ", str(self.sizes()));
  if (!src) return;
  if (src->dim() != self.dim())
    sdk::fail(TS_ERROR_VALUE, op, ": expected src to have as many dimensions as self (", self.dim(), "), got ",
              src->dim());
  for (int64_t d = 0; d < index.dim(); ++d)
    if (index.size(d) > src->size(d))
      sdk::fail(TS_ERROR_VALUE, op, ": expected index.size(", d, ") <= src.size(", d, "), got index shape ",
                str(index.sizes()), " and src shape ", str(src->sizes()));
}

struct Gather {
  TensorRef self, index;
  int64_t dim = 0;
};

Gather plan_gather(const Args& a) {
  const char* op = "gather";
  Gather p{a.tensor(0), a.tensor(2), 0};
  p.dim = strided::wrap_dim(op, a.to_int(1), p.self.dim());
  check_same_device(op, p.self, p.index, "index");
  with_index_type(op, p.index, [](auto) {});
  check_index_shape(op, p.self, p.index, p.dim, nullptr);
  const int64_t size = p.self.dim() == 0 ? 1 : p.self.size(p.dim);
  with_index_type(op, p.index, [&](auto i) { check_range<decltype(i)>(op, p.index, p.dim, size); });
  return p;
}

template <class I, class W>
void gather_loop(const Gather& p, const TensorRef& out) {
  Geometry self(p.self), index(p.index), result(out);
  const int64_t src_step = self.strides[size_t(p.dim)];
  self.strides[size_t(p.dim)] = 0;
  const I* idx = p.index.data<I>();
  const W* src = p.self.data<W>();
  W* dst = out.data<W>();
  strided::for_each_offset<3>(index.sizes, {result.strides.data(), index.strides.data(), self.strides.data()},
                              [&](const std::array<int64_t, 3>& off) {
                                dst[off[0]] = src[off[2] + int64_t(idx[off[1]]) * src_step];
                              });
}

void run_gather(const Gather& p, const TensorRef& out) {
  with_index_type("gather", p.index, [&](auto i) {
    strided::with_word(p.self.itemsize(), [&](auto w) { gather_loop<decltype(i), decltype(w)>(p, out); });
  });
}

void gather_kernel(Args& a) {
  Gather p = plan_gather(a);
  TensorRef out = sdk::empty(a.call(), p.index.sizes(), p.self.dtype(), p.self.device());
  run_gather(p, out);
  a.return_tensor(std::move(out));
}

void gather_out_kernel(Args& a) {
  Gather p = plan_gather(a);
  TensorRef out = prepare_out("gather", a, 3, p.self, p.index, p.index.shape_vector());
  run_gather(p, out);
  out.bump_version();
  a.return_argument(out);
}

// ---- scatter: target[index[i][j]][j] = src[i][j] (dim 0), or = value

// The value of a Scalar in `dtype`, as the low bytes of a buffer as wide as the widest element
// (complex128).
using ValueBits = std::array<unsigned char, 16>;
ValueBits scalar_bits(const sdk::ScalarArg& value, int32_t dtype) {
  ValueBits bits{};
  TS_DISPATCH_ALL_AND_COMPLEX(dtype, sdk::fail(TS_ERROR_TYPE, "scatter: unsupported dtype ", dtype), {
    scalar_t v;
    if constexpr (std::is_same_v<scalar_t, bool>) v = value.to_double() != 0;
    else if constexpr (std::is_integral_v<scalar_t>)
      v = value.kind == sdk::ScalarArg::Double ? static_cast<scalar_t>(value.d) : static_cast<scalar_t>(value.i);
    else v = scalar_t(static_cast<sdk::opmath_t<scalar_t>>(value.to_double()));
    std::memcpy(bits.data(), &v, sizeof v);
  });
  return bits;
}

// Writes into `target` (self's shape): src elements, or `value_bits` when src is null.
template <class I, class W>
void scatter_loop(const TensorRef& target, int64_t dim, const TensorRef& index, const TensorRef* src,
                  const ValueBits& value_bits) {
  Geometry dst(target), idx_geom(index);
  const int64_t dst_step = dst.strides[size_t(dim)];
  dst.strides[size_t(dim)] = 0;
  const I* idx = index.data<I>();
  W* out = target.data<W>();
  if (src) {
    Geometry s(*src);
    const W* in = src->data<W>();
    strided::for_each_offset<3>(idx_geom.sizes, {dst.strides.data(), idx_geom.strides.data(), s.strides.data()},
                                [&](const std::array<int64_t, 3>& off) {
                                  out[off[0] + int64_t(idx[off[1]]) * dst_step] = in[off[2]];
                                });
  } else {
    W value;
    static_assert(sizeof(W) <= sizeof(ValueBits));
    std::memcpy(&value, value_bits.data(), sizeof value);
    strided::for_each_offset<2>(idx_geom.sizes, {dst.strides.data(), idx_geom.strides.data()},
                                [&](const std::array<int64_t, 2>& off) {
                                  out[off[0] + int64_t(idx[off[1]]) * dst_step] = value;
                                });
  }
}

// Scatters into `target` (self itself, or a copy of it); validates everything first.
void scatter_into(const Args& a, const char* op, const TensorRef& self, const TensorRef& target, bool has_src) {
  const int64_t dim = strided::wrap_dim(op, a.to_int(1), self.dim());
  TensorRef index = a.tensor(2);
  check_same_device(op, self, index, "index");
  with_index_type(op, index, [](auto) {});
  std::optional<TensorRef> src;
  ValueBits value_bits{};
  if (has_src) {
    src = a.tensor(3);
    check_same_device(op, self, *src, "src");
    if (src->dtype() != self.dtype())
      sdk::fail(TS_ERROR_TYPE, op, ": expected src of dtype ", sdk::dtype_name(self.dtype()), " (like self), got ",
                sdk::dtype_name(src->dtype()));
  } else {
    value_bits = scalar_bits(a.scalar(3), self.dtype());
  }
  check_index_shape(op, self, index, dim, src ? &*src : nullptr);
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  with_index_type(op, index, [&](auto i) {
    using I = decltype(i);
    check_range<I>(op, index, dim, size);
    strided::with_word(self.itemsize(), [&](auto w) {
      scatter_loop<I, decltype(w)>(target, dim, index, src ? &*src : nullptr, value_bits);
    });
  });
}

TensorRef copy_of(const Args& a, const TensorRef& self) {
  TensorRef copy = sdk::empty(a.call(), self.sizes(), self.dtype(), self.device());
  strided::copy_tensor(copy, self);
  return copy;
}

void scatter_src_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  TensorRef out = copy_of(a, self);
  scatter_into(a, "scatter", self, out, true);
  a.return_tensor(std::move(out));
}

void scatter_value_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  TensorRef out = copy_of(a, self);
  scatter_into(a, "scatter", self, out, false);
  a.return_tensor(std::move(out));
}

void scatter_src_inplace_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  scatter_into(a, "scatter_", self, self, true);
  self.bump_version();
  a.return_argument(self);
}

void scatter_value_inplace_kernel(Args& a) {
  TensorRef self = a.tensor(0);
  scatter_into(a, "scatter_", self, self, false);
  self.bump_version();
  a.return_argument(self);
}

}  // namespace

void register_index_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("index_select", key, index_select_kernel);
  reg.kernel("index_select.out", key, index_select_out_kernel);
  reg.kernel("gather", key, gather_kernel);
  reg.kernel("gather.out", key, gather_out_kernel);
  reg.kernel("scatter.src", key, scatter_src_kernel);
  reg.kernel("scatter.value", key, scatter_value_kernel);
  reg.kernel("scatter_.src", key, scatter_src_inplace_kernel);
  reg.kernel("scatter_.value", key, scatter_value_inplace_kernel);
}

}  // namespace tessera::cpu
