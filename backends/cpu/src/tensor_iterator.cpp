// The shared iteration engine: geometry, parallel walk, casts, promotion, reductions' layout.
#include "tensor_iterator.h"

#include <tessera/sdk/memory_overlap.h>

#include <omp.h>
#include <pthread.h>

#include <atomic>

#include <algorithm>
#include <cstring>
#include <exception>

namespace tessera::cpu {

using sdk::fail;

// ---------------------------------------------------------------------------- small helpers
std::string shape_str(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {
// Set in a child made by fork(): GNU OpenMP's worker threads did not survive the fork and its
// pool cannot be rebuilt, so a parallel region there would wait for them forever. The child
// runs every kernel (and oneDNN, through omp_set_num_threads) on its one thread instead.
std::atomic<bool> g_forked_child{false};

void on_fork_child() {
  g_forked_child.store(true, std::memory_order_relaxed);
  omp_set_num_threads(1);
}
}  // namespace

void install_fork_handler() {
  static const bool installed = [] { return pthread_atfork(nullptr, nullptr, on_fork_child) == 0; }();
  (void)installed;
}

bool in_forked_child() { return g_forked_child.load(std::memory_order_relaxed); }

int max_threads() {
  if (in_forked_child()) return 1;
  int n = 0;
  if (sdk::host_ptr() && sdk::host().num_threads) n = sdk::host().num_threads();
  if (n <= 0) n = omp_get_max_threads();
  return std::max(1, n);
}

void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> f) {
  if (n <= 0) return;
  const int64_t chunks = std::min<int64_t>(max_threads(), n / std::max<int64_t>(grain, 1));
  if (chunks <= 1 || omp_in_parallel()) {
    f(0, n);
    return;
  }
  // Exceptions must not leave an OpenMP region: keep the first, rethrow after the join.
  std::exception_ptr error;
#pragma omp parallel for num_threads(int(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    try {
      f(n / chunks * c + std::min(c, n % chunks), n / chunks * (c + 1) + std::min(c + 1, n % chunks));
    } catch (...) {
#pragma omp critical(tessera_cpu_parallel_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts 0 and -1
  if (dim < -n || dim >= n)
    fail(TS_ERROR_INDEX, op, ": dimension ", dim, " out of range (expected to be in range of [", -n, ", ", n - 1,
         "])");
  return dim < 0 ? dim + n : dim;
}

std::vector<int64_t> broadcast_shapes(const char* op, std::span<const std::vector<int64_t>> shapes) {
  size_t nd = 0;
  for (const auto& s : shapes) nd = std::max(nd, s.size());
  std::vector<int64_t> out(nd, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[nd - s.size() + i];
      const int64_t v = s[i];
      if (v == o || v == 1) continue;
      if (o == 1) {
        o = v;
        continue;
      }
      std::string got;
      for (size_t j = 0; j < shapes.size(); ++j) got += (j ? " and " : "") + shape_str(shapes[j]);
      fail(TS_ERROR_VALUE, op, ": expected shapes to broadcast, got ", got);
    }
  }
  return out;
}

void check_cpu(const char* op, std::span<const TensorRef* const> tensors) {
  for (const TensorRef* t : tensors)
    if (t && t->defined() && t->device().type != kCpuDevice.type)
      fail(TS_ERROR_VALUE, op, ": expected every tensor on the cpu, got one on device type ", t->device().type);
}

// ---------------------------------------------------------------------------- dtypes
int32_t scalar_dtype(const ScalarArg& s) {
  switch (s.kind) {
    case ScalarArg::Bool: return TS_BOOL;
    case ScalarArg::Int: return TS_INT64;
    default: return TS_FLOAT64;
  }
}

bool can_cast(int32_t from, int32_t to) {
  if (sdk::is_complex(from) && !sdk::is_complex(to)) return false;
  if (sdk::is_floating(from) && sdk::is_integral(to, false)) return false;
  if (from != TS_BOOL && to == TS_BOOL) return false;
  return true;
}

void ResultType::add(int32_t dtype, int rank) {
  // A Python float is the default dtype (float32 unless changed), as in PyTorch.
  if (rank == 2 && sdk::is_floating(dtype)) dtype = sdk::default_float_dtype();
  int32_t& r = by_rank_[rank];
  r = r < 0 ? dtype : sdk::promote_types(r, dtype);
}
void ResultType::add_tensor(const TensorRef& t) { add(t.dtype(), t.dim() == 0 ? 1 : 0); }
void ResultType::add_scalar(const ScalarArg& s) { add(scalar_dtype(s), 2); }

int32_t ResultType::get(int32_t fallback) const {
  // A lower rank takes part only when it is of a higher category than the higher rank.
  auto combine = [](int32_t higher, int32_t lower) {
    if (higher < 0) return lower;
    if (lower < 0 || sdk::category(lower) <= sdk::category(higher)) return higher;
    return sdk::promote_types(higher, lower);
  };
  const int32_t r = combine(by_rank_[0], combine(by_rank_[1], by_rank_[2]));
  return r < 0 ? fallback : r;
}

// ---------------------------------------------------------------------------- LoopGeometry
LoopGeometry::LoopGeometry(int nops, std::vector<int64_t> sizes)
    : nops_(nops), sizes_(std::move(sizes)), strides_(sizes_.size() * size_t(nops), 0) {
  TS_SDK_CHECK(nops > 0 && nops <= kMaxOperands, TS_ERROR, "LoopGeometry: expected 1..", kMaxOperands,
               " operands, got ", nops);
}

void LoopGeometry::set_operand(int k, std::span<const int64_t> sizes, std::span<const int64_t> elem_strides,
                               int64_t itemsize) {
  const int nd = ndim();
  const int offset = nd - int(sizes.size());
  for (int d = 0; d < nd; ++d) {
    const int sd = d - offset;
    const bool broadcast = sd < 0 || sizes[size_t(sd)] == 1;
    stride(k, d) = broadcast ? 0 : elem_strides[size_t(sd)] * itemsize;
  }
}

int64_t LoopGeometry::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes_) n *= s;
  return n;
}

void LoopGeometry::reorder_by_strides() {
  const int nd = ndim();
  if (nd <= 1) return;
  // perm[0] is the innermost dim. Compare by operand 0's strides first, skipping operands that
  // broadcast along either dim; undecided pairs keep their order (insertion sort, stable).
  std::vector<int> perm(static_cast<size_t>(nd));
  for (int i = 0; i < nd; ++i) perm[size_t(i)] = nd - 1 - i;
  auto outer_than = [&](int a, int b) {  // +1: a belongs outside b, -1: inside, 0: undecided
    for (int k = 0; k < nops_; ++k) {
      const int64_t sa = std::abs(stride(k, a)), sb = std::abs(stride(k, b));
      if (sa == 0 || sb == 0 || sa == sb) continue;
      return sa > sb ? 1 : -1;
    }
    return 0;
  };
  for (int i = 1; i < nd; ++i) {
    int cur = i;
    for (int j = i - 1; j >= 0; --j) {
      const int c = outer_than(perm[size_t(j)], perm[size_t(cur)]);
      if (c > 0) {
        std::swap(perm[size_t(j)], perm[size_t(cur)]);
        cur = j;
      } else if (c < 0) {
        break;
      }
    }
  }
  std::vector<int64_t> sizes(static_cast<size_t>(nd)), strides(strides_.size());
  for (int i = 0; i < nd; ++i) {
    const int src = perm[size_t(nd - 1 - i)];
    sizes[size_t(i)] = sizes_[size_t(src)];
    for (int k = 0; k < nops_; ++k) strides[size_t(i) * nops_ + k] = stride(k, src);
  }
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
}

void LoopGeometry::coalesce() {
  if (numel() == 0) return;  // nothing is walked; keep the shape as it is
  std::vector<int64_t> sizes, strides;
  for (int d = 0; d < ndim(); ++d) {
    if (sizes_[size_t(d)] == 1) continue;
    bool merge = !sizes.empty();
    for (int k = 0; merge && k < nops_; ++k)
      merge = strides[strides.size() - nops_ + k] == stride(k, d) * sizes_[size_t(d)];
    if (merge) {
      sizes.back() *= sizes_[size_t(d)];
      for (int k = 0; k < nops_; ++k) strides[strides.size() - nops_ + k] = stride(k, d);
    } else {
      sizes.push_back(sizes_[size_t(d)]);
      for (int k = 0; k < nops_; ++k) strides.push_back(stride(k, d));
    }
  }
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
}

LoopGeometry LoopGeometry::slice_dims(int begin, int end) const {
  LoopGeometry g(nops_, std::vector<int64_t>(sizes_.begin() + begin, sizes_.begin() + end));
  std::copy(strides_.begin() + size_t(begin) * nops_, strides_.begin() + size_t(end) * nops_, g.strides_.begin());
  return g;
}

int64_t LoopGeometry::offset_of(int k, int64_t i) const {
  int64_t off = 0;
  for (int d = ndim() - 1; d >= 0; --d) {
    off += (i % sizes_[size_t(d)]) * stride(k, d);
    i /= sizes_[size_t(d)];
  }
  return off;
}

void LoopGeometry::run_range(char* const* base, int64_t begin, int64_t end, LoopFn fn) const {
  if (begin >= end) return;
  const int nd = ndim();
  char* ptr[kMaxOperands];
  char* row[kMaxOperands];
  int64_t inner_stride[kMaxOperands] = {};
  if (nd == 0) {
    std::copy(base, base + nops_, row);
    fn(row, inner_stride, end - begin);
    return;
  }
  // The multi-index of `begin`, and each operand's pointer there.
  std::vector<int64_t> idx(static_cast<size_t>(nd));
  for (int k = 0; k < nops_; ++k) ptr[k] = base[k];
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[size_t(d)] = rem % sizes_[size_t(d)];
    rem /= sizes_[size_t(d)];
    for (int k = 0; k < nops_; ++k) ptr[k] += idx[size_t(d)] * stride(k, d);
  }
  for (int k = 0; k < nops_; ++k) inner_stride[k] = stride(k, nd - 1);
  const int64_t inner = sizes_[size_t(nd - 1)];
  while (true) {
    const int64_t n = std::min(inner - idx[size_t(nd - 1)], end - begin);
    std::copy(ptr, ptr + nops_, row);  // the loop may move its copy
    fn(row, inner_stride, n);
    begin += n;
    if (begin >= end) return;
    // Back to the row's start, then step the outer dims like an odometer.
    for (int k = 0; k < nops_; ++k) ptr[k] -= idx[size_t(nd - 1)] * inner_stride[k];
    idx[size_t(nd - 1)] = 0;
    for (int d = nd - 2; d >= 0; --d) {
      for (int k = 0; k < nops_; ++k) ptr[k] += stride(k, d);
      if (++idx[size_t(d)] < sizes_[size_t(d)]) break;
      for (int k = 0; k < nops_; ++k) ptr[k] -= stride(k, d) * sizes_[size_t(d)];
      idx[size_t(d)] = 0;
    }
  }
}

void LoopGeometry::run(char* const* base, LoopFn fn, int64_t grain) const {
  const int64_t n = numel();
  if (n == 0) return;
  parallel_for(n, grain, [&](int64_t b, int64_t e) { run_range(base, b, e, fn); });
}

// ---------------------------------------------------------------------------- casts
namespace {

template <class T> constexpr bool is_half_v = std::is_same_v<T, sdk::Half> || std::is_same_v<T, sdk::BFloat16>;

// One element converted as PyTorch does: bool is "nonzero", 16-bit floats go through float,
// floating -> integral truncates through int64 (so narrow targets wrap rather than saturate).
// Complex -> real keeps the real part (PyTorch warns; the imaginary part is discarded).
template <class D, class S> inline D convert_value(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (sdk::is_complex_v<S>) {
    if constexpr (std::is_same_v<D, bool>) return v != S(0);
    else if constexpr (sdk::is_complex_v<D>) return D(v);
    else return convert_value<D>(v.real());
  } else if constexpr (sdk::is_complex_v<D>) {
    return D(typename D::value_type(convert_value<typename D::value_type>(v)));
  } else if constexpr (is_half_v<S>) {
    return convert_value<D>(float(v));
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != S(0);
  } else if constexpr (is_half_v<D>) {
    return D(float(v));
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) {
    return D(int64_t(v));
  } else {
    return D(v);
  }
}

template <class S, class D>
void cast_row(char** data, const int64_t* s, int64_t n) {
  if (s[0] == sizeof(D) && s[1] == sizeof(S)) {
    D* out = reinterpret_cast<D*>(data[0]);
    const S* in = reinterpret_cast<const S*>(data[1]);
    for (int64_t i = 0; i < n; ++i) out[i] = convert_value<D>(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<D*>(data[0] + i * s[0]) = convert_value<D>(*reinterpret_cast<const S*>(data[1] + i * s[1]));
  }
}

using RowFn = void (*)(char**, const int64_t*, int64_t);

template <class S>
RowFn cast_row_from(int32_t dst) {
  TS_DISPATCH_ALL_AND_COMPLEX(dst, return nullptr, return &cast_row<S, scalar_t>);
  return nullptr;
}
RowFn cast_row_for(int32_t src, int32_t dst) {
  TS_DISPATCH_ALL_AND_COMPLEX(src, return nullptr, return cast_row_from<scalar_t>(dst));
  return nullptr;
}

// Same-dtype copies move bytes: one loop per element size.
template <class W>
void move_row(char** data, const int64_t* s, int64_t n) {
  if (s[0] == sizeof(W) && s[1] == sizeof(W)) {
    std::memcpy(data[0], data[1], size_t(n) * sizeof(W));
  } else if (s[0] == sizeof(W) && s[1] == 0) {  // a broadcast value (an expanded scalar's gradient)
    W value;
    std::memcpy(&value, data[1], sizeof(W));
    std::fill_n(reinterpret_cast<W*>(data[0]), n, value);
  } else {
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(data[0] + i * s[0], data[1] + i * s[1], sizeof(W));
  }
}
RowFn move_row_for(int64_t itemsize) {
  switch (itemsize) {
    case 1: return &move_row<uint8_t>;
    case 2: return &move_row<uint16_t>;
    case 4: return &move_row<uint32_t>;
    case 8: return &move_row<uint64_t>;
    default: return &move_row<std::complex<double>>;  // 16 bytes: complex128
  }
}

// A same-dtype copy whose innermost destination dim walks the source with a large stride while
// the next dim walks it densely (a transpose, `w.t().contiguous()`): copied in square tiles, so
// the rows written and the columns read both stay in cache. Element-by-element, one side misses
// the cache on every element (7x slower on a 1024x1024 float matrix).
template <class W>
void transpose_tiles(const LoopGeometry& g, char* dst, const char* src) {
  constexpr int64_t kTile = 16;
  const int nd = g.ndim();
  const int64_t rows = g.sizes()[size_t(nd - 2)], cols = g.sizes()[size_t(nd - 1)];
  const int64_t d_row = g.stride(0, nd - 2), d_col = g.stride(0, nd - 1);
  const int64_t s_row = g.stride(1, nd - 2), s_col = g.stride(1, nd - 1);
  int64_t outer = 1;
  for (int d = 0; d < nd - 2; ++d) outer *= g.sizes()[size_t(d)];
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  parallel_for(outer * row_tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / row_tiles, r0 = (t % row_tiles) * kTile;
      // The byte offsets of outer index o, walking the outer dims innermost last.
      int64_t d_off = 0, s_off = 0, rest = o;
      for (int d = nd - 3; d >= 0; --d) {
        const int64_t size = g.sizes()[size_t(d)], i = rest % size;
        rest /= size;
        d_off += i * g.stride(0, d);
        s_off += i * g.stride(1, d);
      }
      const int64_t r1 = std::min(rows, r0 + kTile);
      for (int64_t ct = 0; ct < col_tiles; ++ct) {
        const int64_t c0 = ct * kTile, c1 = std::min(cols, c0 + kTile);
        for (int64_t r = r0; r < r1; ++r) {
          // Typed loads and stores with the inner strides known: the compiler unrolls the row.
          W* out = reinterpret_cast<W*>(dst + d_off + r * d_row) + c0;
          const char* in = src + s_off + r * s_row + c0 * s_col;
          for (int64_t c = 0; c < c1 - c0; ++c) std::memcpy(out + c, in + c * s_col, sizeof(W));
        }
      }
    }
  });
}

bool copy_as_transpose(const LoopGeometry& g, char* dst, const char* src, int64_t itemsize) {
  const int nd = g.ndim();
  if (nd < 2 || g.numel() < 4096) return false;
  if (g.stride(0, nd - 1) != itemsize || g.stride(1, nd - 2) != itemsize || g.stride(1, nd - 1) == itemsize) return false;
  switch (itemsize) {
    case 1: transpose_tiles<uint8_t>(g, dst, src); return true;
    case 2: transpose_tiles<uint16_t>(g, dst, src); return true;
    case 4: transpose_tiles<uint32_t>(g, dst, src); return true;
    case 8: transpose_tiles<uint64_t>(g, dst, src); return true;
  }
  return false;
}

using sdk::has_internal_overlap;
bool overlaps(const TensorRef& a, const TensorRef& b) { return sdk::may_overlap(a, b); }

}  // namespace

void copy_into(ts_call call, const TensorRef& dst, const TensorRef& src, const char* op) {
  const TensorRef* both[] = {&dst, &src};
  check_cpu(op, both);
  const std::vector<int64_t> dshape = dst.shape_vector(), sshape = src.shape_vector();
  const std::vector<int64_t> shapes[] = {dshape, sshape};
  if (broadcast_shapes(op, shapes) != dshape)
    fail(TS_ERROR_VALUE, op, ": expected the source of shape ", shape_str(sshape), " to broadcast to the destination ",
         shape_str(dshape));
  if (dst.numel() == 0) return;
  if (has_internal_overlap(dst))
    fail(TS_ERROR_VALUE, op,
         ": unsupported operation: more than one element of the written-to tensor refers to a single memory location");
  LoopGeometry g(2, dshape);
  g.set_operand(0, dst.sizes(), dst.strides(), dst.itemsize());
  g.set_operand(1, src.sizes(), src.strides(), src.itemsize());
  TensorRef from = src;
  if (overlaps(dst, src)) {
    bool same = dst.data() == src.data() && dst.dtype() == src.dtype();
    for (int d = 0; same && d < g.ndim(); ++d) same = g.stride(0, d) == g.stride(1, d);
    if (same) return;  // copying a tensor onto itself
    // A partial overlap: read from a private copy so no element is overwritten before it is read.
    from = sdk::empty(call, sshape, src.dtype(), src.device());
    copy_into(call, from, src, op);
    g.set_operand(1, from.sizes(), from.strides(), from.itemsize());
  }
  g.reorder_by_strides();
  g.coalesce();
  const RowFn row = dst.dtype() == from.dtype() ? move_row_for(dst.itemsize()) : cast_row_for(from.dtype(), dst.dtype());
  TS_SDK_CHECK(row, TS_ERROR_TYPE, op, ": cannot convert ", sdk::dtype_name(from.dtype()), " to ",
               sdk::dtype_name(dst.dtype()));
  char* base[2] = {static_cast<char*>(dst.data()), static_cast<char*>(from.data())};
  if (dst.dtype() == from.dtype() && copy_as_transpose(g, base[0], base[1], dst.itemsize())) return;
  g.run(base, row);
}

TensorRef convert(ts_call call, const TensorRef& t, int32_t dtype, const char* op) {
  TensorRef out = sdk::empty(call, t.sizes(), dtype, t.device());
  copy_into(call, out, t, op);
  return out;
}

TensorRef to_dtype(ts_call call, const TensorRef& t, int32_t dtype, const char* op) {
  return t.dtype() == dtype ? t : convert(call, t, dtype, op);
}

TensorRef scalar_tensor(ts_call call, const ScalarArg& s, int32_t dtype) {
  TensorRef t = sdk::empty(call, {}, dtype, kCpuDevice);
  TS_DISPATCH_ALL_AND_COMPLEX(dtype, fail(TS_ERROR_TYPE, "scalar_tensor: unsupported dtype ", dtype),
                  *t.data<scalar_t>() = scalar_to<scalar_t>(s));
  return t;
}

void prepare_out(ts_call call, const char* op, TensorRef& out, std::span<const int64_t> shape, int32_t dtype) {
  const TensorRef* o[] = {&out};
  check_cpu(op, o);
  if (!can_cast(dtype, out.dtype()))
    fail(TS_ERROR_TYPE, op, ": result type ", sdk::dtype_name(dtype), " can't be cast to the desired output type ",
         sdk::dtype_name(out.dtype()));
  const auto cur = out.sizes();
  if (!std::equal(cur.begin(), cur.end(), shape.begin(), shape.end())) sdk::resize(call, out, shape);
}

// ---------------------------------------------------------------------------- TensorIterator
namespace {

// The strides a new output takes, as PyTorch's element-wise results keep their inputs' layout: the
// first input of the output's shape (not broadcast) decides; when it is dense but not row-major (a
// channels-last or transposed tensor) the output gets its dims' memory order; empty (row-major)
// when it is row-major, when none is dense, and when every input is broadcast.
std::vector<int64_t> strides_like_inputs(const std::vector<TensorRef>& ops, const std::vector<int64_t>& shape) {
  const int64_t rank = int64_t(shape.size());
  for (size_t k = 1; k < ops.size(); ++k) {
    const TensorRef& t = ops[k];
    const std::span<const int64_t> sizes = t.sizes();
    if (t.dim() != rank || !std::equal(sizes.begin(), sizes.end(), shape.begin())) continue;
    if (t.is_contiguous()) return {};
    // dims from the outermost in memory to the innermost (ties keep their order)
    std::vector<int64_t> order(static_cast<size_t>(rank));
    for (int64_t d = 0; d < rank; ++d) order[size_t(d)] = d;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
    std::vector<int64_t> strides(static_cast<size_t>(rank));
    int64_t step = 1;
    bool dense = true;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const int64_t d = *it;
      if (t.size(d) != 1 && t.stride(d) != step) dense = false;
      strides[size_t(d)] = step;
      step *= std::max<int64_t>(t.size(d), 1);
    }
    if (dense) return strides;
  }
  return {};
}

}  // namespace

IterConfig& IterConfig::output(const TensorRef& out, bool resizable) {
  out_ = out;
  out_given_ = out.defined();
  out_resizable_ = resizable;
  return *this;
}
IterConfig& IterConfig::output(Variant v, const TensorRef& self, const TensorRef& out) {
  switch (v) {
    case Variant::Functional: return output(TensorRef(), false);
    case Variant::Inplace: return output(self, false);
    default: return output(out, true);
  }
}
IterConfig& IterConfig::input(const TensorRef& t) {
  inputs_.push_back({t, std::nullopt, std::nullopt});
  return *this;
}
IterConfig& IterConfig::input(const ScalarArg& s) {
  inputs_.push_back({TensorRef(), s, std::nullopt});
  return *this;
}
IterConfig& IterConfig::input_as(const TensorRef& t, int32_t dtype) {
  inputs_.push_back({t, std::nullopt, dtype});
  return *this;
}

TensorIterator IterConfig::build() const {
  TensorIterator it;
  it.op_ = op_;
  it.call_ = call_;
  std::vector<const TensorRef*> given;
  if (out_given_) given.push_back(&out_);
  for (const In& in : inputs_)
    if (in.tensor.defined()) given.push_back(&in.tensor);
  check_cpu(op_, given);

  // Dtypes: the common (compute) dtype of the promoted inputs, and the result's.
  if (forced_common_) {
    it.common_ = *forced_common_;
  } else {
    ResultType rt;
    for (const In& in : inputs_) {
      if (in.fixed_dtype) continue;
      if (in.scalar) rt.add_scalar(*in.scalar);
      else rt.add_tensor(in.tensor);
    }
    it.common_ = rt.get();
  }
  if (int_to_float_ && !sdk::is_inexact(it.common_)) it.common_ = sdk::default_float_dtype();
  it.out_dtype_ = forced_output_.value_or(it.common_);

  // Shape: inputs broadcast together; an in-place output must already have that shape.
  std::vector<std::vector<int64_t>> shapes;
  for (const In& in : inputs_)
    shapes.push_back(in.scalar ? std::vector<int64_t>{} : in.tensor.shape_vector());
  it.shape_ = broadcast_shapes(op_, shapes);

  // Inputs, cast to the dtype the loop reads.
  it.ops_.emplace_back();
  for (const In& in : inputs_) {
    const int32_t dtype = in.fixed_dtype.value_or(it.common_);
    it.ops_.push_back(in.scalar ? scalar_tensor(call_, *in.scalar, dtype) : to_dtype(call_, in.tensor, dtype, op_));
  }

  // Output: a new tensor, or self / out= written directly or through a temporary.
  TensorRef target;
  if (out_given_) {
    target = out_;
    if (out_resizable_) {
      // Resizing may reallocate: an out= that is also an input would be read after it moved.
      if (target.shape_vector() != it.shape_)
        for (size_t k = 1; k < it.ops_.size(); ++k)
          if (overlaps(target, it.ops_[k]))
            fail(TS_ERROR_VALUE, op_, ": the out= tensor shares memory with an input and would need resizing from ",
                 shape_str(target.sizes()), " to ", shape_str(it.shape_));
      prepare_out(call_, op_, target, it.shape_, it.out_dtype_);
    } else {
      if (target.shape_vector() != it.shape_)
        fail(TS_ERROR_VALUE, op_, ": expected the in-place output of shape ", shape_str(target.sizes()),
             " to match the broadcast shape ", shape_str(it.shape_));
      if (!can_cast(it.out_dtype_, target.dtype()))
        fail(TS_ERROR_TYPE, op_, ": result type ", sdk::dtype_name(it.out_dtype_),
             " can't be cast to the desired output type ", sdk::dtype_name(target.dtype()));
    }
    if (has_internal_overlap(target))
      fail(TS_ERROR_VALUE, op_,
           ": unsupported operation: more than one element of the written-to tensor refers to a single memory "
           "location");
    it.result_ = target;
    it.bump_ = true;
  }

  const int nops = int(it.ops_.size());
  it.geom_ = LoopGeometry(nops, it.shape_);
  for (int k = 1; k < nops; ++k) {
    const TensorRef& t = it.ops_[size_t(k)];
    it.geom_.set_operand(k, t.sizes(), t.strides(), t.itemsize());
  }
  if (target.defined()) {
    it.geom_.set_operand(0, target.sizes(), target.strides(), target.itemsize());
    // Write straight into the target unless its dtype differs or it overlaps an input other
    // than element-for-element (x.add_(x) is fine, x.add_(x[0]) is not).
    bool direct = target.dtype() == it.out_dtype_;
    for (int k = 1; direct && k < nops; ++k) {
      const TensorRef& in = it.ops_[size_t(k)];
      if (!overlaps(target, in)) continue;
      bool same = in.data() == target.data() && in.itemsize() == target.itemsize();
      for (int d = 0; same && d < it.geom_.ndim(); ++d) same = it.geom_.stride(0, d) == it.geom_.stride(k, d);
      direct = same;
    }
    if (direct) {
      it.ops_[0] = target;
    } else {
      it.write_back_ = true;
    }
  }
  if (!it.ops_[0].defined()) {
    it.ops_[0] = sdk::empty(call_, it.shape_, it.out_dtype_, kCpuDevice, strides_like_inputs(it.ops_, it.shape_));
    it.geom_.set_operand(0, it.ops_[0].sizes(), it.ops_[0].strides(), it.ops_[0].itemsize());
    if (!target.defined()) it.result_ = it.ops_[0];
  }
  it.geom_.reorder_by_strides();
  it.geom_.coalesce();
  return it;
}

void TensorIterator::run(LoopFn loop) {
  char* base[kMaxOperands];
  for (size_t k = 0; k < ops_.size(); ++k) base[k] = static_cast<char*>(ops_[k].data());
  geom_.run(base, loop);
  if (write_back_) copy_into(call_, result_, ops_[0], op_);
  if (bump_) result_.bump_version();
}

// ---------------------------------------------------------------------------- reductions
std::vector<bool> reduction_mask(const char* op, std::optional<std::span<const int64_t>> dims, int64_t ndim) {
  std::vector<bool> mask(size_t(ndim), !dims || dims->empty());
  if (!dims) return mask;
  std::vector<bool> seen(size_t(std::max<int64_t>(ndim, 1)), false);
  for (int64_t d : *dims) {
    const int64_t w = wrap_dim(op, d, ndim);
    if (seen[size_t(w)]) fail(TS_ERROR_VALUE, op, ": dim ", w, " appears multiple times in the list of dims");
    seen[size_t(w)] = true;
    if (ndim > 0) mask[size_t(w)] = true;
  }
  return mask;
}

std::vector<int64_t> reduced_shape(std::span<const int64_t> in_shape, const std::vector<bool>& mask, bool keepdim) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (!mask[d]) out.push_back(in_shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

ReduceGeometry::ReduceGeometry(const TensorRef& out, const TensorRef& in, const std::vector<bool>& mask) {
  const int64_t nd = in.dim();
  const bool keepdim = out.dim() == nd;
  // Input dims reordered: kept dims first (outer), reduced dims after, each in its own order.
  // Operand 0 is the output (stride 0 along reduced dims), operand 1 the input.
  std::vector<int64_t> order, out_dim(size_t(nd), -1);
  for (int64_t d = 0, j = 0; d < nd; ++d) {
    if (!mask[size_t(d)]) order.push_back(d);
    if (!mask[size_t(d)] || keepdim) out_dim[size_t(d)] = j++;
  }
  const int n_kept = int(order.size());
  for (int64_t d = 0; d < nd; ++d)
    if (mask[size_t(d)]) order.push_back(d);
  std::vector<int64_t> sizes;
  for (int64_t d : order) sizes.push_back(in.size(d));
  LoopGeometry all(2, sizes);
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t d = order[i];
    all.stride(0, int(i)) = mask[size_t(d)] ? 0 : out.stride(out_dim[size_t(d)]) * out.itemsize();
    all.stride(1, int(i)) = in.stride(d) * in.itemsize();
  }
  kept = all.slice_dims(0, n_kept);
  const LoopGeometry folded = all.slice_dims(n_kept, int(sizes.size()));
  reduced = LoopGeometry(1, folded.sizes());
  for (int d = 0; d < folded.ndim(); ++d) reduced.stride(0, d) = folded.stride(1, d);
  kept.coalesce();
  reduced.coalesce();
  n_out = kept.numel();
  n_reduce = reduced.numel();
  out_base = static_cast<char*>(out.data());
  in_base = static_cast<char*>(in.data());
}

}  // namespace tessera::cpu
