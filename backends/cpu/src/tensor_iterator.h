#pragma once
// The CPU plugin's one iteration engine, shared by the element-wise ops, copies and reductions:
//   LoopGeometry    sizes + per-operand byte strides of a loop nest; coalescing; a parallel
//                   walk that hands contiguous-or-strided inner rows to a loop function.
//   copy_into       broadcast + dtype conversion of one tensor into another (copy_, casts).
//   TensorIterator  broadcasting, PyTorch type promotion, casting inputs to the compute dtype,
//                   output allocation / out= resizing / in-place checks, then a LoopGeometry run.
//   ReduceGeometry  the same walk split into kept (output) dims and reduced dims.
// Kernels instantiate their arithmetic per compute dtype only: inputs are cast first.
#include "kernels.h"

#include <tessera/sdk/plugin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera::cpu {

using sdk::ScalarArg;
using sdk::TensorRef;

// Elements per thread below which a loop stays single-threaded.
inline constexpr int64_t kGrainSize = 32768;
// Operands of one loop (outputs + inputs); ops here use at most four.
inline constexpr int kMaxOperands = 8;

// A non-owning reference to a callable: the per-row call costs one indirect call.
template <class Sig> class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT: implicit, like std::function
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, A... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(a...); }) {}
  R operator()(A... a) const { return call_(obj_, a...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

// The inner loop: data[k] is operand k's first element of the row (outputs first), strides[k]
// its byte stride along the row, n the row length.
using LoopFn = FunctionRef<void(char** data, const int64_t* strides, int64_t n)>;

// ---------------------------------------------------------------------------- small helpers
std::string shape_str(std::span<const int64_t> shape);
// The number of threads kernels may use (the host's setting; 1 in a forked child).
int max_threads();
// Registers the fork handler that makes a forked child single-threaded (once; plugin load).
void install_fork_handler();
bool in_forked_child();
// Runs f(begin, end) over [0, n) in chunks of at least `grain`, in parallel when there are
// several; an exception thrown by a chunk is rethrown on the calling thread.
void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> f);
// Wraps `dim` into [0, ndim) (a 0-dim tensor accepts 0 and -1); IndexError naming `op`.
int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim);
// PyTorch broadcasting of several shapes; ValueError naming `op` when they do not broadcast.
std::vector<int64_t> broadcast_shapes(const char* op, std::span<const std::vector<int64_t>> shapes);
// Raises unless every tensor lives on the CPU.
void check_cpu(const char* op, std::span<const TensorRef* const> tensors);

// ---------------------------------------------------------------------------- dtypes
// The dtype a Python number takes as a 0-dim tensor: bool, int64 or float64.
int32_t scalar_dtype(const ScalarArg& s);
// PyTorch's can_cast: no floating -> integral, no non-bool -> bool.
bool can_cast(int32_t from, int32_t to);

// PyTorch's result_type: dimensioned tensors outrank 0-dim tensors, which outrank Python
// numbers; a lower rank only raises the result's category (bool < integral < floating).
class ResultType {
 public:
  void add_tensor(const TensorRef& t);
  void add_scalar(const ScalarArg& s);
  void add(int32_t dtype, int rank);  // rank 0: dimensioned, 1: 0-dim, 2: Python number
  // The result; `fallback` when nothing was added.
  int32_t get(int32_t fallback = TS_FLOAT32) const;

 private:
  int32_t by_rank_[3] = {-1, -1, -1};
};

// The value of a Scalar argument converted to T (bool: nonzero).
template <class T> T scalar_to(const ScalarArg& s) {
  if constexpr (std::is_same_v<T, bool>) {
    return s.kind == ScalarArg::Double ? s.d != 0 : s.i != 0;
  } else if constexpr (std::is_integral_v<T>) {
    return s.kind == ScalarArg::Double ? T(int64_t(s.d)) : T(s.i);
  } else {
    return T(s.kind == ScalarArg::Double ? s.d : double(s.i));
  }
}

// ---------------------------------------------------------------------------- LoopGeometry
// A loop nest over `ndim` dims (outermost first) with a byte stride per operand and dim.
class LoopGeometry {
 public:
  LoopGeometry() = default;
  LoopGeometry(int nops, std::vector<int64_t> sizes);
  // Operand k viewed with the loop's shape: right-aligned, broadcast dims get stride 0.
  void set_operand(int k, std::span<const int64_t> sizes, std::span<const int64_t> elem_strides, int64_t itemsize);
  // Byte stride of operand k along dim d.
  int64_t& stride(int k, int d) { return strides_[size_t(d) * nops_ + k]; }
  int64_t stride(int k, int d) const { return strides_[size_t(d) * nops_ + k]; }
  int nops() const { return nops_; }
  int ndim() const { return int(sizes_.size()); }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  int64_t numel() const;

  // Reorders dims so that operand 0 (then 1, ...) is walked in memory order, innermost last.
  void reorder_by_strides();
  // Drops size-1 dims and merges dims that are contiguous for every operand.
  void coalesce();
  // Keeps only the dims in [begin, end) (used to split kept and reduced dims).
  LoopGeometry slice_dims(int begin, int end) const;

  // Walks the linear range [begin, end) of the nest serially, row by row.
  void run_range(char* const* base, int64_t begin, int64_t end, LoopFn fn) const;
  // Walks every element, split across threads when numel is large.
  void run(char* const* base, LoopFn fn, int64_t grain = kGrainSize) const;
  // Byte offset of operand k at linear index i.
  int64_t offset_of(int k, int64_t i) const;

 private:
  int nops_ = 0;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;  // [dim][operand], bytes
};

// ---------------------------------------------------------------------------- copies
// Writes `src`, broadcast to dst's shape and converted to dst's dtype, into `dst`.
// Handles overlap between the two; does not bump dst's version.
void copy_into(ts_call call, const TensorRef& dst, const TensorRef& src, const char* op = "copy_");
// A new contiguous tensor with t's shape and values converted to `dtype`.
TensorRef convert(ts_call call, const TensorRef& t, int32_t dtype, const char* op = "to");
// `t` itself when it already has `dtype` (any layout), else a converted contiguous copy.
TensorRef to_dtype(ts_call call, const TensorRef& t, int32_t dtype, const char* op = "to");
// A 0-dim tensor holding `s` converted to `dtype`.
TensorRef scalar_tensor(ts_call call, const ScalarArg& s, int32_t dtype);
// Resizes an out= tensor to `shape` when it differs, and checks it can hold `dtype` results.
void prepare_out(ts_call call, const char* op, TensorRef& out, std::span<const int64_t> shape, int32_t dtype);

// ---------------------------------------------------------------------------- TensorIterator
// How a kernel delivers its result: a new tensor, into self (in-place) or into out=.
enum class Variant { Functional, Inplace, Out };

class TensorIterator;

// Describes an element-wise loop; build() resolves it.
class IterConfig {
 public:
  IterConfig(ts_call call, const char* op) : call_(call), op_(op) {}
  // The written tensor: undefined = allocate one; `resizable` (out=) lets it be resized,
  // otherwise (in-place) its shape must equal the broadcast shape.
  IterConfig& output(const TensorRef& out, bool resizable);
  // Output by variant: Functional allocates, Inplace writes `self`, Out writes `out`.
  IterConfig& output(Variant v, const TensorRef& self, const TensorRef& out);
  // An input promoted with the others and cast to the common dtype.
  IterConfig& input(const TensorRef& t);
  // A Python number: promoted at the lowest rank, then held as a 0-dim tensor.
  IterConfig& input(const ScalarArg& s);
  // An input outside promotion, cast to `dtype` (e.g. a bool mask).
  IterConfig& input_as(const TensorRef& t, int32_t dtype);
  // An integral or bool common dtype computes in float32 instead (exp, div...).
  IterConfig& promote_integers_to_float() { int_to_float_ = true; return *this; }
  // Forces the common dtype instead of promoting.
  IterConfig& common_dtype(int32_t dtype) { forced_common_ = dtype; return *this; }
  // The result dtype when it is not the common dtype (bool for comparisons).
  IterConfig& output_dtype(int32_t dtype) { forced_output_ = dtype; return *this; }

  TensorIterator build() const;

 private:
  friend class TensorIterator;
  struct In {
    TensorRef tensor;
    std::optional<ScalarArg> scalar;
    std::optional<int32_t> fixed_dtype;
  };
  ts_call call_;
  const char* op_;
  TensorRef out_;
  bool out_given_ = false, out_resizable_ = false;
  std::vector<In> inputs_;
  bool int_to_float_ = false;
  std::optional<int32_t> forced_common_, forced_output_;
};

// A resolved element-wise loop: operand 0 is the output, then the inputs (all cast).
class TensorIterator {
 public:
  const char* op() const { return op_; }
  int32_t common_dtype() const { return common_; }
  int32_t output_dtype() const { return out_dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return geom_.numel(); }
  // The loop's operand k (a cast temporary for a converted input).
  const TensorRef& operand(int k) const { return ops_[size_t(k)]; }
  int noperands() const { return int(ops_.size()); }

  // Runs `loop` over every element, then writes a temporary output back into the real one
  // and bumps the version of an in-place / out= output. Call once.
  void run(LoopFn loop);
  // The tensor to return: the new tensor, self, or out.
  const TensorRef& result() const { return result_; }

 private:
  friend class IterConfig;
  const char* op_ = "";
  ts_call call_ = nullptr;
  int32_t common_ = TS_FLOAT32, out_dtype_ = TS_FLOAT32;
  std::vector<int64_t> shape_;
  std::vector<TensorRef> ops_;  // output (maybe a temporary) then inputs
  TensorRef result_;            // what the kernel returns
  bool write_back_ = false;     // ops_[0] is a temporary to copy into result_
  bool bump_ = false;           // result_ is self or out=
  LoopGeometry geom_;
};

// ---------------------------------------------------------------------------- typed rows
// out[i] = f(in_0[i], in_1[i], ...) over one row of a TensorIterator. The all-contiguous case is
// a plain indexed loop the compiler vectorises; anything else walks byte strides.
template <class Out, class... In, class F, size_t... I>
inline void map_row_impl(char** d, const int64_t* s, int64_t n, F&& f, std::index_sequence<I...>) {
  if (s[0] == int64_t(sizeof(Out)) && ((s[I + 1] == int64_t(sizeof(In))) && ...)) {
    Out* out = reinterpret_cast<Out*>(d[0]);
    const std::tuple<const In*...> in{reinterpret_cast<const In*>(d[I + 1])...};
    for (int64_t i = 0; i < n; ++i) out[i] = Out(f(std::get<I>(in)[i]...));
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<Out*>(d[0] + i * s[0]) = Out(f(*reinterpret_cast<const In*>(d[I + 1] + i * s[I + 1])...));
  }
}
template <class Out, class... In, class F>
inline void map_row(char** d, const int64_t* s, int64_t n, F&& f) {
  map_row_impl<Out, In...>(d, s, n, f, std::index_sequence_for<In...>{});
}
// A binary row that also vectorises when one input is a broadcast scalar (stride 0).
template <class Out, class A, class B, class F>
inline void binary_row(char** d, const int64_t* s, int64_t n, F&& f) {
  if (s[0] == int64_t(sizeof(Out))) {
    Out* out = reinterpret_cast<Out*>(d[0]);
    if (s[1] == int64_t(sizeof(A)) && s[2] == 0) {
      const A* a = reinterpret_cast<const A*>(d[1]);
      const B b = *reinterpret_cast<const B*>(d[2]);
      for (int64_t i = 0; i < n; ++i) out[i] = Out(f(a[i], b));
      return;
    }
    if (s[1] == 0 && s[2] == int64_t(sizeof(B))) {
      const A a = *reinterpret_cast<const A*>(d[1]);
      const B* b = reinterpret_cast<const B*>(d[2]);
      for (int64_t i = 0; i < n; ++i) out[i] = Out(f(a, b[i]));
      return;
    }
  }
  map_row<Out, A, B>(d, s, n, f);
}

// Kernel names for messages: "exp", "exp_", "exp.out".
inline std::string variant_name(const char* base, Variant v) {
  return v == Variant::Inplace ? std::string(base) + "_" : v == Variant::Out ? std::string(base) + ".out" : base;
}

// ---------------------------------------------------------------------------- reductions
// Dims to reduce from an `int[1]? dim` argument: none or [] = all. Wraps negatives; IndexError
// out of range, ValueError on duplicates. A mask over the input's dims.
std::vector<bool> reduction_mask(const char* op, std::optional<std::span<const int64_t>> dims, int64_t ndim);
// The output shape of a reduction.
std::vector<int64_t> reduced_shape(std::span<const int64_t> in_shape, const std::vector<bool>& mask, bool keepdim);

// A reduction of `in` into `out` (shape reduced_shape(..., keepdim)): operand 0 = out, 1 = in.
// `kept` walks the output elements, `reduced` the input elements folded into one output
// (in row-major order of the reduced dims, so a linear index there is a flat position).
struct ReduceGeometry {
  ReduceGeometry(const TensorRef& out, const TensorRef& in, const std::vector<bool>& mask);
  LoopGeometry kept;     // operands {out, in}
  LoopGeometry reduced;  // operand {in}
  int64_t n_out = 1, n_reduce = 1;
  char* out_base = nullptr;
  char* in_base = nullptr;
};

// Drives a reduction. `Op` supplies:
//   using acc_t; acc_t identity() const;
//   void row(acc_t&, const char* p, int64_t byte_stride, int64_t n, int64_t first_index) const;
//   acc_t combine(acc_t earlier, acc_t later) const;  void write(char* out, const acc_t&) const;
// Three strategies, all parallel: few outputs with long reductions split each reduction and
// combine partials in order; outputs adjacent in memory (reducing outer dims) are folded a
// block at a time so input rows are read once, sequentially; otherwise each output folds its
// own (contiguous or strided) rows.
template <class Op>
void run_reduction(const ReduceGeometry& g, const Op& op) {
  using acc_t = typename Op::acc_t;
  if (g.n_out == 0) return;
  // Folds reduced elements [b, e) of the output whose input starts at `in`.
  auto fold = [&](const char* in, int64_t b, int64_t e) {
    acc_t acc = op.identity();
    if (g.reduced.ndim() <= 1) {
      int64_t s = g.reduced.ndim() ? g.reduced.stride(0, 0) : 0;
      if (e > b) op.row(acc, in + b * s, s, e - b, b);
    } else {
      char* base[1] = {const_cast<char*>(in)};
      int64_t index = b;
      g.reduced.run_range(base, b, e, [&](char** d, const int64_t* s, int64_t n) {
        op.row(acc, d[0], s[0], n, index);
        index += n;
      });
    }
    return acc;
  };
  const int threads = max_threads();
  if (g.n_out < threads && g.n_reduce >= 2 * kGrainSize && threads > 1) {
    for (int64_t o = 0; o < g.n_out; ++o) {
      const char* in = g.in_base + g.kept.offset_of(1, o);
      int64_t chunks = std::min<int64_t>(threads, g.n_reduce / kGrainSize);
      std::vector<acc_t> partial(size_t(chunks), op.identity());
      parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
        for (int64_t c = cb; c < ce; ++c)
          partial[size_t(c)] = fold(in, g.n_reduce * c / chunks, g.n_reduce * (c + 1) / chunks);
      });
      acc_t acc = partial[0];
      for (int64_t c = 1; c < chunks; ++c) acc = op.combine(acc, partial[size_t(c)]);
      op.write(g.out_base + g.kept.offset_of(0, o), acc);
    }
    return;
  }
  const int kd = g.kept.ndim(), rd = g.reduced.ndim();
  if (kd > 0 && rd > 0 && std::abs(g.kept.stride(1, kd - 1)) < std::abs(g.reduced.stride(0, rd - 1))) {
    constexpr int64_t kBlock = 64;
    const int64_t width = g.kept.sizes()[size_t(kd - 1)], blocks = (width + kBlock - 1) / kBlock;
    const int64_t in_step = g.kept.stride(1, kd - 1), out_step = g.kept.stride(0, kd - 1);
    const LoopGeometry outer = g.kept.slice_dims(0, kd - 1);
    const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, kBlock * g.n_reduce));
    parallel_for(outer.numel() * blocks, grain, [&](int64_t tb, int64_t te) {
      acc_t acc[kBlock];
      for (int64_t task = tb; task < te; ++task) {
        const int64_t o = task / blocks, j0 = task % blocks * kBlock, nb = std::min(kBlock, width - j0);
        char* base[1] = {g.in_base + outer.offset_of(1, o) + j0 * in_step};
        for (int64_t j = 0; j < nb; ++j) acc[j] = op.identity();
        int64_t index = 0;
        g.reduced.run_range(base, 0, g.n_reduce, [&](char** d, const int64_t* s, int64_t n) {
          for (int64_t i = 0; i < n; ++i, ++index)
            for (int64_t j = 0; j < nb; ++j) op.row(acc[j], d[0] + i * s[0] + j * in_step, in_step, 1, index);
        });
        char* out = g.out_base + outer.offset_of(0, o) + j0 * out_step;
        for (int64_t j = 0; j < nb; ++j) op.write(out + j * out_step, acc[j]);
      }
    });
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, g.n_reduce));
  parallel_for(g.n_out, grain, [&](int64_t ob, int64_t oe) {
    char* base[2] = {g.out_base, g.in_base};
    g.kept.run_range(base, ob, oe, [&](char** d, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) op.write(d[0] + i * s[0], fold(d[1] + i * s[1], 0, g.n_reduce));
    });
  });
}

}  // namespace tessera::cpu
