// The last of PyTorch's Core ATen operators that need windows or sampling: 3-D pooling, fold
// (col2im) and unfold (im2col), grid sampling and embedding bags. Each is written over
// differentiable primitives (index_select, gather, index_add, index_put, matmul), never over
// as_strided views (which autograd does not differentiate), so backward comes from the primitives.
#include "composite.h"

#include <tessera/sdk/pool_geometry.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera::composites {
namespace {

constexpr int32_t kLong = TS_INT64;
const ts_device kHost{0, 0};

// An int[n] argument: n values, or one repeated (PyTorch's int[3] also takes a single int).
IntList n_ints(const char* op, const char* name, std::span<const int64_t> v, size_t n) {
  if (v.size() == 1) return IntList(n, v[0]);
  if (v.size() != n) fail(TS_ERROR_VALUE, op, ": expected ", name, " to be a single int or ", n, " ints, got ", sdk::shape_text(v));
  return IntList(v.begin(), v.end());
}

// The value of a one-element integer tensor, read on the host (copied there from a device).
int64_t host_int(const TensorRef& t) {
  TensorRef c = ops::contiguous(ops::to(t, kLong));
  if (c.device().type != 0) {
    TensorRef host = ops::empty(shape_of(c), kLong, kHost);
    ops::copy_(host, c);
    c = host;
  }
  return *c.data<int64_t>();
}

TensorRef column(const TensorRef& v) { return ops::unsqueeze(v, 1); }
TensorRef arange_long(int64_t n, ts_device device) { return ops::arange(Scalar(n), kLong, device); }

// ---------------------------------------------------------------------------- windows
// The positions o * stride + j * dilation of every window element along one dim, flat (out * k).
TensorRef window_positions(int64_t out, int64_t k, int64_t stride, int64_t dilation, ts_device device) {
  TensorRef starts = column(ops::mul(arange_long(out, device), Scalar(stride)));
  return ops::reshape(ops::add(starts, ops::mul(arange_long(k, device), Scalar(dilation))), {-1});
}

// x's last out.size() dims cut into windows: (..., o1, k1, o2, k2, ...). One index_select per dim
// (a copy, not a view: index_select has a derivative, as_strided has none).
TensorRef windows(TensorRef x, const IntList& out, const IntList& k, const IntList& stride, const IntList& dilation) {
  const int64_t lead = x.dim() - int64_t(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t d = lead + 2 * int64_t(i);
    x = ops::index_select(x, d, window_positions(out[i], k[i], stride[i], dilation[i], x.device()));
    IntList shape = shape_of(x);
    shape[size_t(d)] = out[i];
    shape.insert(shape.begin() + d + 1, k[i]);
    x = ops::reshape(x, shape);
  }
  return x;
}

// (..., o1, k1, ..., on, kn) -> (..., o1, ..., on, k1, ..., kn): outputs first, window last.
TensorRef windows_last(const TensorRef& w, size_t n) {
  const int64_t lead = w.dim() - 2 * int64_t(n);
  IntList perm;
  for (int64_t d = 0; d < lead; ++d) perm.push_back(d);
  for (size_t i = 0; i < n; ++i) perm.push_back(lead + 2 * int64_t(i));
  for (size_t i = 0; i < n; ++i) perm.push_back(lead + 2 * int64_t(i) + 1);
  return ops::permute(w, perm);
}

// ---------------------------------------------------------------------------- 3-D pooling
// An unbatched (`layout`, `rank` dims) or batched (N, `layout`) input with non-zero sizes in all
// but the batch dim.
void check_maybe_batched(const char* op, const TensorRef& x, int64_t rank, const char* layout) {
  if (x.dim() != rank && x.dim() != rank + 1)
    fail(TS_ERROR_VALUE, op, ": expected a ", rank, "-D (", layout, ") or ", rank + 1, "-D (N, ", layout,
         ") input, got ", x.dim(), "-D input of shape ", sdk::shape_text(x.sizes()));
  for (int64_t d = x.dim() - rank; d < x.dim(); ++d)
    if (x.size(d) == 0)
      fail(TS_ERROR_VALUE, op, ": expected an input with non-zero sizes in all but the batch dim, got shape ",
           sdk::shape_text(x.sizes()));
}

// A (C, D, H, W) or (N, C, D, H, W) floating input with non-zero sizes but for the batch.
void check_volume(const char* op, const TensorRef& x) {
  check_maybe_batched(op, x, 4, "C, D, H, W");
  if (!sdk::is_floating(x.dtype()))
    fail(TS_ERROR_TYPE, op, ": expected a floating point input, got ", sdk::dtype_name(x.dtype()));
}

struct Pool3d {
  IntList in, k, stride, pad, dilation, out;
};

// avg_pool3d's and max_pool3d's arguments from index 1: kernel_size, stride (empty: the kernel),
// padding, [dilation,] ceil_mode; PyTorch's limits and output size.
Pool3d pool3d_geometry(const char* op, const TensorRef& x, Args& a, bool has_dilation) {
  Pool3d g;
  g.k = n_ints(op, "kernel_size", a.int_list(1), 3);
  g.stride = a.int_list(2).empty() ? g.k : n_ints(op, "stride", a.int_list(2), 3);
  g.pad = n_ints(op, "padding", a.int_list(3), 3);
  g.dilation = has_dilation ? n_ints(op, "dilation", a.int_list(4), 3) : IntList{1, 1, 1};
  const bool ceil_mode = a.to_bool(has_dilation ? 5 : 4);
  for (int i = 0; i < 3; ++i) {
    if (g.k[i] <= 0) fail(TS_ERROR_VALUE, op, ": expected kernel_size > 0, got ", sdk::shape_text(g.k));
    if (g.stride[i] <= 0) fail(TS_ERROR_VALUE, op, ": expected stride > 0, got ", sdk::shape_text(g.stride));
    if (g.dilation[i] <= 0) fail(TS_ERROR_VALUE, op, ": expected dilation > 0, got ", sdk::shape_text(g.dilation));
    if (g.pad[i] < 0 || g.pad[i] > g.k[i] / 2)
      fail(TS_ERROR_VALUE, op, ": expected padding to be at most half of kernel_size, got padding ", sdk::shape_text(g.pad),
           " and kernel_size ", sdk::shape_text(g.k));
  }
  for (int i = 0; i < 3; ++i) {
    g.in.push_back(x.size(x.dim() - 3 + i));
    g.out.push_back(sdk::pooled_size(g.in[size_t(i)], g.k[i], g.pad[i], g.stride[i], g.dilation[i], ceil_mode));
  }
  if (g.out[0] < 1 || g.out[1] < 1 || g.out[2] < 1)
    fail(TS_ERROR_VALUE, op, ": the output would be empty: input ", sdk::shape_text(g.in), " with kernel_size ", sdk::shape_text(g.k),
         ", stride ", sdk::shape_text(g.stride), ", padding ", sdk::shape_text(g.pad), " and dilation ",
         sdk::shape_text(g.dilation), " gives ", sdk::shape_text(g.out));
  return g;
}

IntList with_lead(const TensorRef& x, int64_t spatial, const IntList& tail) {
  IntList shape(x.sizes().begin(), x.sizes().end() - spatial);
  shape.insert(shape.end(), tail.begin(), tail.end());
  return shape;
}

// max_pool3d_with_indices: the maximum of each window and its flat index into D * H * W. The
// input is padded with -inf (so padding never wins), on the right as far as ceil mode's last
// window reaches; the window values are gathered at their argmax (so the gradient reaches only
// the chosen element, as in PyTorch), and the same windows over a tensor of flat positions give
// the index.
void max_pool3d_with_indices(Args& a) {
  const char* op = "max_pool3d_with_indices";
  TensorRef x = a.tensor(0);
  check_volume(op, x);
  Pool3d g = pool3d_geometry(op, x, a, true);
  IntList pads;  // constant_pad_nd's order: the last dim first
  for (int i = 2; i >= 0; --i) {
    int64_t reach = (g.out[size_t(i)] - 1) * g.stride[size_t(i)] + (g.k[size_t(i)] - 1) * g.dilation[size_t(i)] + 1;
    pads.push_back(g.pad[size_t(i)]);
    pads.push_back(std::max<int64_t>(0, reach - g.pad[size_t(i)] - g.in[size_t(i)]));
  }
  TensorRef padded = ops::constant_pad_nd(x, pads, Scalar(-std::numeric_limits<double>::infinity()));
  const int64_t window = g.k[0] * g.k[1] * g.k[2];
  IntList out_shape = with_lead(x, 3, {g.out[0], g.out[1], g.out[2], window});
  TensorRef w = ops::reshape(windows_last(windows(padded, g.out, g.k, g.stride, g.dilation), 3), out_shape);
  const int64_t last = w.dim() - 1;
  TensorRef arg = ops::argmax(w, last, true);
  TensorRef values = ops::squeeze(ops::gather(w, last, arg), last);

  // Flat input positions of the padded volume (those of padding are never chosen).
  TensorRef pos = ops::zeros({1, 1, 1}, kLong, x.device());
  for (int i = 0; i < 3; ++i) {
    int64_t n = padded.size(padded.dim() - 3 + i);
    TensorRef coord = ops::sub(arange_long(n, x.device()), Scalar(g.pad[size_t(i)]));
    IntList view{1, 1, 1};
    view[size_t(i)] = n;
    pos = ops::add(ops::mul(pos, Scalar(g.in[size_t(i)])), ops::reshape(coord, view));
  }
  TensorRef pos_w = ops::reshape(windows_last(windows(pos, g.out, g.k, g.stride, g.dilation), 3),
                                 {g.out[0], g.out[1], g.out[2], window});
  TensorRef indices = ops::squeeze(ops::gather(ops::expand(pos_w, out_shape), last, arg), last);
  return_tensors(a, {values, indices});
}

// The (out x in) 0/1 matrix of one dim's windows: row o covers [o * stride - pad, + k) of the input.
TensorRef window_matrix(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad, int32_t dtype, ts_device device) {
  TensorRef start = column(ops::sub(ops::mul(arange_long(out, device), Scalar(stride)), Scalar(pad)));
  TensorRef i = arange_long(in, device);
  return ops::to(ops::logical_and(ops::ge(i, start), ops::lt(i, ops::add(start, Scalar(k)))), dtype);
}

// y = x with its dim d mapped through `m` (out x in): a matmul over that dim.
TensorRef apply_along(const TensorRef& x, int64_t d, const TensorRef& m) {
  const int64_t last = x.dim() - 1;
  return ops::movedim(ops::matmul(ops::movedim(x, d, last), ops::transpose(m, 0, 1)), last, d);
}

// How many elements each window of one dim divides by: PyTorch clips a window to the padded
// input when count_include_pad (ceil mode's overhang does not count), else to the input.
TensorRef window_counts(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad, bool include_pad, ts_device device) {
  TensorRef start = ops::sub(ops::mul(arange_long(out, device), Scalar(stride)), Scalar(pad));
  TensorRef end = ops::clamp(ops::add(start, Scalar(k)), std::nullopt, Scalar(in + pad));
  if (include_pad) return ops::sub(end, start);
  return ops::sub(ops::clamp(end, std::nullopt, Scalar(in)), ops::clamp(start, Scalar(0), std::nullopt));
}

// avg_pool3d: windows are boxes, so the window sums are three matmuls (one per dim) with 0/1
// window matrices; then a division by the divisor (PyTorch's count rule or divisor_override).
void avg_pool3d(Args& a) {
  const char* op = "avg_pool3d";
  TensorRef x = a.tensor(0);
  check_volume(op, x);
  Pool3d g = pool3d_geometry(op, x, a, false);
  const bool include_pad = a.to_bool(5);
  const std::optional<int64_t> divisor = a.optional_int(6);
  if (divisor && *divisor == 0) fail(TS_ERROR_VALUE, op, ": expected a non-zero divisor_override, got 0");
  TensorRef sums = x;
  for (int i = 0; i < 3; ++i)
    sums = apply_along(sums, x.dim() - 3 + i,
                       window_matrix(g.in[size_t(i)], g.out[size_t(i)], g.k[size_t(i)], g.stride[size_t(i)], g.pad[size_t(i)],
                                     x.dtype(), x.device()));
  if (divisor) return a.return_tensor(ops::div(sums, Scalar(double(*divisor))));
  TensorRef count = ops::ones({1, 1, 1}, kLong, x.device());
  for (int i = 0; i < 3; ++i) {
    IntList view{1, 1, 1};
    view[size_t(i)] = g.out[size_t(i)];
    count = ops::mul(count, ops::reshape(window_counts(g.in[size_t(i)], g.out[size_t(i)], g.k[size_t(i)], g.stride[size_t(i)],
                                                       g.pad[size_t(i)], include_pad, x.device()),
                                         view));
  }
  a.return_tensor(ops::div(sums, ops::to(count, x.dtype())));
}

// The (out x in) averaging matrix of one dim of adaptive pooling: window o is
// [floor(o * in / out), ceil((o + 1) * in / out)).
TensorRef adaptive_matrix(int64_t in, int64_t out, int32_t dtype, ts_device device) {
  TensorRef o = arange_long(out, device);
  TensorRef start = ops::div(ops::mul(o, Scalar(in)), Scalar(out), "floor");
  TensorRef end = ops::div(ops::add(ops::mul(o, Scalar(in)), Scalar(in + out - 1)), Scalar(out), "floor");
  TensorRef i = arange_long(in, device);
  TensorRef inside = ops::to(ops::logical_and(ops::ge(i, column(start)), ops::lt(i, column(end))), dtype);
  return ops::div(inside, ops::to(column(ops::sub(end, start)), dtype));
}

void adaptive_avg_pool3d(Args& a) {
  const char* op = "_adaptive_avg_pool3d";
  TensorRef x = a.tensor(0);
  check_volume(op, x);
  IntList size = n_ints(op, "output_size", a.int_list(1), 3);
  for (int64_t s : size)
    if (s < 0) fail(TS_ERROR_VALUE, op, ": expected output_size >= 0, got ", sdk::shape_text(size));
  TensorRef out = x;
  for (int i = 0; i < 3; ++i) {
    int64_t d = x.dim() - 3 + i;
    out = apply_along(out, d, adaptive_matrix(x.size(d), size[size_t(i)], x.dtype(), x.device()));
  }
  a.return_tensor(std::move(out));
}

// ---------------------------------------------------------------------------- im2col / col2im
struct Blocks {
  IntList k, dilation, pad, stride, count;  // count: sliding blocks along H and W
};

// The shared arguments of im2col and col2im (kernel_size, dilation, padding, stride from `first`)
// and the number of blocks over an (h, w) plane.
Blocks blocks_of(const char* op, Args& a, int first, int64_t h, int64_t w) {
  Blocks b;
  b.k = n_ints(op, "kernel_size", a.int_list(first), 2);
  b.dilation = n_ints(op, "dilation", a.int_list(first + 1), 2);
  b.pad = n_ints(op, "padding", a.int_list(first + 2), 2);
  b.stride = n_ints(op, "stride", a.int_list(first + 3), 2);
  for (int i = 0; i < 2; ++i) {
    if (b.k[i] <= 0) fail(TS_ERROR_VALUE, op, ": expected kernel_size > 0, got ", sdk::shape_text(b.k));
    if (b.dilation[i] <= 0) fail(TS_ERROR_VALUE, op, ": expected dilation > 0, got ", sdk::shape_text(b.dilation));
    if (b.pad[i] < 0) fail(TS_ERROR_VALUE, op, ": expected padding >= 0, got ", sdk::shape_text(b.pad));
    if (b.stride[i] <= 0) fail(TS_ERROR_VALUE, op, ": expected stride > 0, got ", sdk::shape_text(b.stride));
  }
  const int64_t plane[2] = {h, w};
  for (int i = 0; i < 2; ++i) {
    int64_t span = plane[i] + 2 * b.pad[i] - b.dilation[i] * (b.k[i] - 1) - 1;
    b.count.push_back(span < 0 ? 0 : span / b.stride[i] + 1);
  }
  if (b.count[0] < 1 || b.count[1] < 1)
    fail(TS_ERROR_VALUE, op, ": the plane ", h, "x", w, " with kernel_size ", sdk::shape_text(b.k), ", dilation ",
         sdk::shape_text(b.dilation), ", padding ", sdk::shape_text(b.pad), " and stride ", sdk::shape_text(b.stride),
         " has no sliding blocks");
  return b;
}

// im2col (F.unfold): (N, C, H, W) -> (N, C * kh * kw, L), each column one block's values.
void im2col(Args& a) {
  const char* op = "im2col";
  TensorRef x = a.tensor(0);
  if (x.dim() != 3 && x.dim() != 4)
    fail(TS_ERROR_VALUE, op, ": expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got ", x.dim(), "-D input of shape ",
         sdk::shape_text(x.sizes()));
  for (int64_t d = x.dim() - 3; d < x.dim(); ++d)
    if (x.size(d) == 0)
      fail(TS_ERROR_VALUE, op, ": expected an input with non-zero sizes in all but the batch dim, got shape ",
           sdk::shape_text(x.sizes()));
  const bool batched = x.dim() == 4;
  TensorRef in = batched ? x : ops::unsqueeze(x, 0);
  Blocks b = blocks_of(op, a, 1, in.size(2), in.size(3));
  TensorRef padded = ops::constant_pad_nd(in, {b.pad[1], b.pad[1], b.pad[0], b.pad[0]}, Scalar(0));
  TensorRef w = windows(padded, b.count, b.k, b.stride, b.dilation);  // (N, C, bh, kh, bw, kw)
  TensorRef cols = ops::reshape(ops::permute(w, {0, 1, 3, 5, 2, 4}),
                                {in.size(0), in.size(1) * b.k[0] * b.k[1], b.count[0] * b.count[1]});
  a.return_tensor(batched ? cols : ops::squeeze(cols, 0));
}

// col2im (F.fold): the inverse layout of im2col, overlapping values summed: index_add of every
// column entry into its position in the padded plane, then the padding cut away.
void col2im(Args& a) {
  const char* op = "col2im";
  TensorRef x = a.tensor(0);
  IntList size = n_ints(op, "output_size", a.int_list(1), 2);
  check_maybe_batched(op, x, 2, "C * kh * kw, L");
  if (size[0] <= 0 || size[1] <= 0) fail(TS_ERROR_VALUE, op, ": expected output_size > 0, got ", sdk::shape_text(size));
  const bool batched = x.dim() == 3;
  TensorRef cols = batched ? x : ops::unsqueeze(x, 0);
  Blocks b = blocks_of(op, a, 2, size[0], size[1]);
  const int64_t window = b.k[0] * b.k[1], blocks = b.count[0] * b.count[1];
  if (cols.size(1) % window != 0)
    fail(TS_ERROR_VALUE, op, ": expected the size of input's dimension ", x.dim() - 2,
         " to be divisible by the product of kernel_size ", sdk::shape_text(b.k), ", got ", cols.size(1));
  if (cols.size(2) != blocks)
    fail(TS_ERROR_VALUE, op, ": output_size ", sdk::shape_text(size), " with kernel_size ", sdk::shape_text(b.k), ", dilation ",
         sdk::shape_text(b.dilation), ", padding ", sdk::shape_text(b.pad), " and stride ", sdk::shape_text(b.stride), " has ",
         blocks, " sliding blocks, but input's last dimension is ", cols.size(2));
  const int64_t n = cols.size(0), c = cols.size(1) / window;
  const int64_t ph = size[0] + 2 * b.pad[0], pw = size[1] + 2 * b.pad[1];
  ts_device device = x.device();
  // The padded-plane position of entry (kh, kw, bh, bw): row kh * dil + bh * stride, likewise columns.
  TensorRef rows = ops::add(ops::reshape(ops::mul(arange_long(b.k[0], device), Scalar(b.dilation[0])), {b.k[0], 1, 1, 1}),
                            ops::reshape(ops::mul(arange_long(b.count[0], device), Scalar(b.stride[0])), {1, 1, b.count[0], 1}));
  TensorRef cols_at = ops::add(ops::reshape(ops::mul(arange_long(b.k[1], device), Scalar(b.dilation[1])), {1, b.k[1], 1, 1}),
                               ops::reshape(ops::mul(arange_long(b.count[1], device), Scalar(b.stride[1])), {1, 1, 1, b.count[1]}));
  TensorRef target = ops::reshape(ops::add(ops::mul(rows, Scalar(pw)), cols_at), {-1});
  TensorRef plane = ops::index_add(ops::zeros({n, c, ph * pw}, x.dtype(), device), 2, target,
                                   ops::reshape(cols, {n, c, window * blocks}));
  TensorRef out = ops::reshape(plane, {n, c, ph, pw});
  out = ops::contiguous(ops::narrow(ops::narrow(out, 2, b.pad[0], size[0]), 3, b.pad[1], size[1]));
  a.return_tensor(batched ? out : ops::squeeze(out, 0));
}

// ---------------------------------------------------------------------------- grid_sampler_2d
enum Interpolation : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

// A grid coordinate in [-1, 1] as a pixel coordinate: -1 and 1 are the corner pixels' centres
// with align_corners, else the corners' outer edges.
TensorRef unnormalize(const TensorRef& g, int64_t size, bool align_corners) {
  if (align_corners) return ops::mul(ops::add(g, Scalar(1)), Scalar(double(size - 1) / 2));
  return ops::div(ops::sub(ops::mul(ops::add(g, Scalar(1)), Scalar(double(size))), Scalar(1)), Scalar(2.0));
}

// x reflected into [low2 / 2, high2 / 2] (the bounds given doubled, so half-pixel ones are whole).
TensorRef reflect(const TensorRef& x, int64_t low2, int64_t high2) {
  if (low2 == high2) return ops::mul(x, Scalar(0));
  const double low = double(low2) / 2, span = double(high2 - low2) / 2;
  TensorRef d = ops::abs(ops::sub(x, Scalar(low)));
  TensorRef extra = ops::fmod(d, ops::full({}, Scalar(span), x.dtype(), x.device()));
  TensorRef even = ops::eq(ops::fmod(ops::floor(ops::div(d, Scalar(span))), Scalar(2)), Scalar(0));
  return ops::where(even, ops::add(extra, Scalar(low)), ops::add(ops::neg(extra), Scalar(span + low)));
}

// The padding mode applied to a pixel coordinate: border clips it into the image, reflection
// mirrors it at the image's edges (then clips); zeros leaves it (samples outside read zero).
TensorRef pad_coordinate(const TensorRef& x, int64_t size, int64_t padding, bool align_corners) {
  if (padding == kZeros) return x;
  TensorRef c = x;
  if (padding == kReflection) c = align_corners ? reflect(x, 0, 2 * (size - 1)) : reflect(x, -1, 2 * size - 1);
  return ops::clamp(c, Scalar(0), Scalar(size - 1));
}

struct Plane {
  TensorRef flat;  // (N, C, H * W)
  int64_t n, c, h, w, oh, ow;
};

// The input at integer pixel coordinates (ix, iy) (floating, (N, oh, ow)), times `weight`; zero
// where the coordinate lies outside the image.
TensorRef sample(const Plane& p, const TensorRef& ix, const TensorRef& iy, const TensorRef& weight) {
  TensorRef inside = ops::logical_and(ops::logical_and(ops::ge(ix, Scalar(0)), ops::le(ix, Scalar(p.w - 1))),
                                      ops::logical_and(ops::ge(iy, Scalar(0)), ops::le(iy, Scalar(p.h - 1))));
  TensorRef xi = ops::to(ops::clamp(ix, Scalar(0), Scalar(p.w - 1)), kLong);
  TensorRef yi = ops::to(ops::clamp(iy, Scalar(0), Scalar(p.h - 1)), kLong);
  TensorRef at = ops::reshape(ops::add(ops::mul(yi, Scalar(p.w)), xi), {p.n, 1, p.oh * p.ow});
  TensorRef values = ops::reshape(ops::gather(p.flat, 2, ops::expand(at, {p.n, p.c, p.oh * p.ow})), {p.n, p.c, p.oh, p.ow});
  TensorRef w = ops::where(inside, weight, ops::zeros({}, weight.dtype(), weight.device()));
  return ops::mul(values, ops::unsqueeze(w, 1));
}

// Keys' cubic convolution weights (A = -0.75) of the four neighbours x0 - 1 .. x0 + 2 at t = x - x0.
std::vector<TensorRef> cubic_weights(const TensorRef& t) {
  const double A = -0.75;
  auto near = [&](const TensorRef& s) {  // |s| <= 1: ((A + 2) s - (A + 3)) s^2 + 1
    return ops::add(ops::mul(ops::mul(ops::sub(ops::mul(s, Scalar(A + 2)), Scalar(A + 3)), s), s), Scalar(1));
  };
  auto far = [&](const TensorRef& s) {  // 1 < |s| < 2: ((A s - 5A) s + 8A) s - 4A
    return ops::sub(ops::mul(ops::add(ops::mul(ops::sub(ops::mul(s, Scalar(A)), Scalar(5 * A)), s), Scalar(8 * A)), s), Scalar(4 * A));
  };
  TensorRef one_minus = ops::sub(ops::ones({}, t.dtype(), t.device()), t);
  return {far(ops::add(t, Scalar(1))), near(t), near(one_minus), far(ops::add(one_minus, Scalar(1)))};
}

void grid_sampler_2d(Args& a) {
  const char* op = "grid_sampler_2d";
  TensorRef input = a.tensor(0), grid = a.tensor(1);
  const int64_t mode = a.to_int(2), padding = a.to_int(3);
  const bool align = a.to_bool(4);
  if (input.dim() != 4 || grid.dim() != 4)
    fail(TS_ERROR_VALUE, op, ": expected a 4-D input (N, C, H, W) and a 4-D grid (N, H_out, W_out, 2), got input of shape ",
         sdk::shape_text(input.sizes()), " and grid of shape ", sdk::shape_text(grid.sizes()));
  if (grid.size(3) != 2) fail(TS_ERROR_VALUE, op, ": expected grid's last dim to have size 2, got grid of shape ", sdk::shape_text(grid.sizes()));
  if (input.size(0) != grid.size(0))
    fail(TS_ERROR_VALUE, op, ": expected input and grid to have the same batch size, got input of shape ", sdk::shape_text(input.sizes()),
         " and grid of shape ", sdk::shape_text(grid.sizes()));
  if (input.size(2) == 0 || input.size(3) == 0)
    fail(TS_ERROR_VALUE, op, ": expected an input with non-empty spatial dims, got shape ", sdk::shape_text(input.sizes()));
  if (!sdk::is_floating(input.dtype()) || grid.dtype() != input.dtype())
    fail(TS_ERROR_TYPE, op, ": expected a floating point input and a grid of the same dtype, got ", sdk::dtype_name(input.dtype()),
         " and ", sdk::dtype_name(grid.dtype()));
  if (mode < kBilinear || mode > kBicubic)
    fail(TS_ERROR_VALUE, op, ": interpolation_mode must be 0 (bilinear), 1 (nearest) or 2 (bicubic), got ", mode);
  if (padding < kZeros || padding > kReflection)
    fail(TS_ERROR_VALUE, op, ": padding_mode must be 0 (zeros), 1 (border) or 2 (reflection), got ", padding);
  Plane p{ops::reshape(input, {input.size(0), input.size(1), input.size(2) * input.size(3)}),
          input.size(0), input.size(1), input.size(2), input.size(3), grid.size(1), grid.size(2)};
  TensorRef ix = unnormalize(ops::select(grid, 3, 0), p.w, align), iy = unnormalize(ops::select(grid, 3, 1), p.h, align);
  TensorRef one = ops::ones({}, input.dtype(), input.device());

  if (mode == kNearest) {  // the nearest pixel, ties to even (nearbyint)
    ix = ops::round(pad_coordinate(ix, p.w, padding, align));
    iy = ops::round(pad_coordinate(iy, p.h, padding, align));
    return a.return_tensor(sample(p, ix, iy, ops::expand(one, shape_of(ix))));
  }
  if (mode == kBilinear) {  // the four neighbours weighted by the opposite areas
    ix = pad_coordinate(ix, p.w, padding, align);
    iy = pad_coordinate(iy, p.h, padding, align);
    TensorRef x0 = ops::floor(ix), y0 = ops::floor(iy);
    TensorRef x1 = ops::add(x0, Scalar(1)), y1 = ops::add(y0, Scalar(1));
    TensorRef east = ops::sub(ix, x0), west = ops::sub(x1, ix), south = ops::sub(iy, y0), north = ops::sub(y1, iy);
    TensorRef out = sample(p, x0, y0, ops::mul(west, north));
    out = ops::add(out, sample(p, x1, y0, ops::mul(east, north)));
    out = ops::add(out, sample(p, x0, y1, ops::mul(west, south)));
    return a.return_tensor(ops::add(out, sample(p, x1, y1, ops::mul(east, south))));
  }
  // Bicubic: 4 x 4 neighbours of the unpadded coordinate; the padding mode applies to each
  // neighbour's own coordinate.
  TensorRef x0 = ops::floor(ix), y0 = ops::floor(iy);
  std::vector<TensorRef> wx = cubic_weights(ops::sub(ix, x0)), wy = cubic_weights(ops::sub(iy, y0));
  TensorRef out;
  for (int j = 0; j < 4; ++j) {
    TensorRef yj = pad_coordinate(ops::add(y0, Scalar(j - 1)), p.h, padding, align);
    for (int i = 0; i < 4; ++i) {
      TensorRef xi = pad_coordinate(ops::add(x0, Scalar(i - 1)), p.w, padding, align);
      TensorRef term = sample(p, ops::floor(xi), ops::floor(yj), ops::mul(wx[size_t(i)], wy[size_t(j)]));
      out = out.handle() ? ops::add(out, term) : term;
    }
  }
  a.return_tensor(std::move(out));
}

// ---------------------------------------------------------------------------- _embedding_bag
enum BagMode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

// Bags of embedding rows reduced by sum, mean or max. offsets[b] starts bag b (with
// include_last_offset, the last offset ends the last bag). Returns the output, each index's bag
// (offset2bag), the bags' sizes without padding_idx entries, and max's row indices (for sum and
// mean, what PyTorch returns there: zeros, or the bag sizes).
void embedding_bag(Args& a) {
  const char* op = "_embedding_bag";
  TensorRef weight = a.tensor(0), indices = a.tensor(1), offsets = a.tensor(2);
  const bool scale_grad_by_freq = a.to_bool(3), sparse = a.to_bool(5), include_last = a.to_bool(7);
  const int64_t mode = a.to_int(4), padding_idx = a.to_int(8);
  std::optional<TensorRef> per_sample = a.optional_tensor(6);
  if (weight.dim() != 2) fail(TS_ERROR_VALUE, op, ": expected a 2-D weight, got shape ", sdk::shape_text(weight.sizes()));
  if (indices.dim() != 1) fail(TS_ERROR_VALUE, op, ": expected 1-D indices, got shape ", sdk::shape_text(indices.sizes()));
  if (offsets.dim() != 1) fail(TS_ERROR_VALUE, op, ": expected 1-D offsets, got shape ", sdk::shape_text(offsets.sizes()));
  for (const TensorRef* t : {&indices, &offsets})
    if (t->dtype() != TS_INT64 && t->dtype() != TS_INT32)
      fail(TS_ERROR_TYPE, op, ": expected indices and offsets of dtype int64 or int32, got ", sdk::dtype_name(t->dtype()));
  if (mode < kSum || mode > kMax) fail(TS_ERROR_VALUE, op, ": mode must be 0 (sum), 1 (mean) or 2 (max), got ", mode);
  if (sparse) fail(TS_ERROR_NOT_IMPLEMENTED, op, ": sparse gradients are not supported; use sparse=False");
  if (per_sample) {
    if (mode != kSum)
      fail(TS_ERROR_NOT_IMPLEMENTED, op, ": per_sample_weights is only supported for mode='sum' (got mode='",
           mode == kMean ? "mean" : "max", "')");
    if (per_sample->dim() != 1 || per_sample->size(0) != indices.numel())
      fail(TS_ERROR_VALUE, op, ": expected per_sample_weights of the shape of indices (", indices.numel(), "), got ",
           sdk::shape_text(per_sample->sizes()));
  }
  if (include_last && offsets.numel() < 1) fail(TS_ERROR_VALUE, op, ": include_last_offset needs at least one offset");
  if (offsets.device().type == 0 && offsets.numel() > 0 && host_int(ops::select(offsets, 0, 0)) != 0)
    fail(TS_ERROR_VALUE, op, ": offsets[0] has to be 0 (the first bag starts at position 0), got ",
         host_int(ops::select(offsets, 0, 0)));

  ts_device device = weight.device();
  const int64_t n = indices.numel(), dim = weight.size(1), bags = offsets.numel() - (include_last ? 1 : 0);
  TensorRef idx = ops::to(indices, kLong), off = ops::to(offsets, kLong);
  TensorRef starts = ops::narrow(off, 0, 0, bags);
  TensorRef pos = arange_long(n, device);
  // Each index's bag: the last bag starting at or before it.
  TensorRef bag = ops::clamp(ops::sub(ops::searchsorted(starts, pos, false, true), Scalar(1)), Scalar(0),
                             Scalar(std::max<int64_t>(bags - 1, 0)));
  TensorRef counted = padding_idx >= 0 ? ops::ne(idx, Scalar(padding_idx)) : ops::ones({n}, int32_t(TS_BOOL), device);
  // With include_last_offset, indices past the last offset belong to no bag's values.
  TensorRef used = include_last ? ops::logical_and(counted, ops::lt(pos, ops::select(off, 0, bags))) : counted;
  TensorRef bag_size = ops::index_add(ops::zeros({bags}, kLong, device), 0, bag, ops::to(counted, kLong));
  // embedding (not index_select): its derivative knows padding_idx and scale_grad_by_freq.
  TensorRef rows = ops::embedding(weight, idx, padding_idx, scale_grad_by_freq, false);

  TensorRef output, max_indices;
  if (mode == kMax) {
    // Bags as the rows of a dense (bags, longest, dim) block, unused slots -inf; the maximum is
    // gathered at the argmax, so only the chosen row gets the gradient.
    TensorRef slot = ops::sub(pos, ops::index_select(starts, 0, bag));
    const int64_t longest = n == 0 ? 0 : host_int(ops::amax(slot, IntList{0})) + 1;
    const double lowest = -std::numeric_limits<double>::infinity();
    TensorRef values = ops::where(column(used), rows, ops::full({}, Scalar(lowest), weight.dtype(), device));
    TensorRef block = ops::index_put(ops::full({bags, longest, dim}, Scalar(lowest), weight.dtype(), device), {bag, slot}, values, false);
    TensorRef which = ops::index_put(ops::zeros({bags, longest}, kLong, device), {bag, slot}, idx, false);
    TensorRef nonempty = column(ops::gt(bag_size, Scalar(0)));
    if (longest == 0) {  // no indices: zeros, as the sum of no rows (so they stay in the graph, as PyTorch's do)
      output = ops::contiguous(ops::expand(ops::sum(rows, IntList{0}, true), {bags, dim}));
      max_indices = ops::zeros({bags, dim}, kLong, device);
    } else {
      TensorRef arg = ops::argmax(block, int64_t(1), true);  // (bags, 1, dim)
      output = ops::where(nonempty, ops::squeeze(ops::gather(block, 1, arg), 1), ops::zeros({}, weight.dtype(), device));
      max_indices = ops::where(nonempty, ops::gather(which, 1, ops::squeeze(arg, 1)), ops::zeros({}, kLong, device));
    }
  } else {
    TensorRef scale = ops::to(used, weight.dtype());
    if (per_sample) scale = ops::mul(scale, *per_sample);
    output = ops::index_add(ops::zeros({bags, dim}, weight.dtype(), device), 0, bag, ops::mul(rows, column(scale)));
    if (mode == kMean) output = ops::div(output, column(ops::to(ops::clamp(bag_size, Scalar(1), std::nullopt), weight.dtype())));
    max_indices = mode == kMean ? bag_size : ops::zeros({bags}, kLong, device);
  }
  // PyTorch's sum without padding_idx over float32 / half rows skips offset2bag (returns it empty).
  const bool fast_sum = mode == kSum && padding_idx < 0 && weight.dtype() != TS_FLOAT64;
  TensorRef offset2bag = fast_sum ? ops::zeros({0}, kLong, device) : bag;
  return_tensors(a, {output, offset2bag, mode == kSum ? ops::zeros({bags}, kLong, device) : bag_size, max_indices});
}

}  // namespace

void register_pooling_sampling(sdk::Registrar& reg) {
  composite(reg, "max_pool3d_with_indices", max_pool3d_with_indices);
  composite(reg, "avg_pool3d", avg_pool3d);
  composite(reg, "_adaptive_avg_pool3d", adaptive_avg_pool3d);
  composite(reg, "im2col", im2col);
  composite(reg, "col2im", col2im);
  composite(reg, "grid_sampler_2d", grid_sampler_2d);
  composite(reg, "_embedding_bag", embedding_bag);
}

}  // namespace tessera::composites
