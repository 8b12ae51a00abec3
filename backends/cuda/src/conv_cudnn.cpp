// convolution and convolution_backward through cuDNN (the legacy convolution API, still part of
// cuDNN 9): 1-D and 2-D, batched or not, stride, padding, dilation, groups, optional bias, as
// the CPU plugin (backends/cpu/src/nn_conv.cpp) and PyTorch. Built only when CMake finds cuDNN
// (TESSERA_HAS_CUDNN); without it, and in the ROCm build, convolutions run on the CPU through
// the host's fallback. A 1-D convolution is a 2-D one with H = 1.
//
// float32 uses FMA kernels unless cuda::set_allow_tf32(True) (the switch matmuls use), so
// results match the CPU to float32 precision by default; float16/bfloat16 use tensor cores and
// accumulate in float; float64 runs cuDNN's double kernels.
#include "cuda_plugin.h"
#include "cudnn_support.h"
#include "workspace.h"

#include <tessera/sdk/conv_geometry.h>

#include <cudnn.h>

#include <array>
#include <climits>
#include <optional>
#include <mutex>
#include <vector>

namespace tessera::gpu {

namespace {

using FilterDesc = Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc = Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                            cudnnDestroyConvolutionDescriptor>;

// ---- geometry and checks: the SDK's rules and messages, as on the CPU
using Geometry = sdk::ConvGeometry;

void check_operands(const char* op, const TensorRef& input, const TensorRef& weight) {
  TS_SDK_CHECK(sdk::is_floating(input.dtype()), TS_ERROR_TYPE, op, ": expected input of a floating point dtype, got ",
               sdk::dtype_name(input.dtype()));
  TS_SDK_CHECK(weight.dtype() == input.dtype(), TS_ERROR_TYPE, op, ": expected weight to have the input's dtype ",
               sdk::dtype_name(input.dtype()), ", got ", sdk::dtype_name(weight.dtype()));
}

// cuDNN's legacy API takes int dims and at most 2^31 - 1 elements per tensor.
void check_int_sized(const char* op, const Geometry& g) {
  for (int64_t v : {g.n * g.c_in * g.in_plane(), g.n * g.c_out * g.out_plane(), g.c_out * g.patch()})
    TS_SDK_CHECK(v <= INT_MAX, TS_ERROR_VALUE, op, ": a tensor of ", v, " elements is larger than cuDNN's limit of ",
                 INT_MAX, " elements on ", kName);
}

// A contiguous 5-D (NCDHW) tensor descriptor.
void set_5d(cudnnTensorDescriptor_t d, cudnnDataType_t dt, std::array<int64_t, 5> sizes, const char* what) {
  int dims[5], strides[5];
  int64_t stride = 1;
  for (int i = 4; i >= 0; --i) {
    dims[i] = int(sizes[size_t(i)]);
    strides[i] = int(stride);
    stride *= sizes[size_t(i)];
  }
  check_dnn(cudnnSetTensorNdDescriptor(d, dt, 5, dims, strides), what);
}

// The descriptors of one convolution, and the math type its algorithms must use.
struct Problem {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  bool fma_only = false;  // float32 without TF32
  bool is_double = false;

  Problem(const Geometry& g, int32_t dtype) {
    const cudnnDataType_t dt = dnn_type(dtype);
    is_double = dtype == TS_FLOAT64;
    if (g.spatial == 3) {
      set_5d(x.d, dt, {g.n, g.c_in, g.d, g.h, g.w}, "cudnnSetTensorNdDescriptor (input)");
      set_5d(y.d, dt, {g.n, g.c_out, g.od, g.oh, g.ow}, "cudnnSetTensorNdDescriptor (output)");
      const int filter[5] = {int(g.c_out), int(g.cg_in()), int(g.kd), int(g.kh), int(g.kw)};
      check_dnn(cudnnSetFilterNdDescriptor(w.d, dt, CUDNN_TENSOR_NCHW, 5, filter), "cudnnSetFilterNdDescriptor");
      const int pad[3] = {int(g.pd), int(g.ph), int(g.pw)}, stride[3] = {int(g.sd), int(g.sh), int(g.sw)},
                dilation[3] = {int(g.dd), int(g.dh), int(g.dw)};
      check_dnn(cudnnSetConvolutionNdDescriptor(conv.d, 3, pad, stride, dilation, CUDNN_CROSS_CORRELATION,
                                                is_double ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT),
                "cudnnSetConvolutionNdDescriptor");
    } else {  // 1-D as 2-D with height 1
      check_dnn(cudnnSetTensor4dDescriptor(x.d, CUDNN_TENSOR_NCHW, dt, int(g.n), int(g.c_in), int(g.h), int(g.w)),
                "cudnnSetTensor4dDescriptor (input)");
      check_dnn(cudnnSetTensor4dDescriptor(y.d, CUDNN_TENSOR_NCHW, dt, int(g.n), int(g.c_out), int(g.oh), int(g.ow)),
                "cudnnSetTensor4dDescriptor (output)");
      check_dnn(cudnnSetFilter4dDescriptor(w.d, dt, CUDNN_TENSOR_NCHW, int(g.c_out), int(g.cg_in()), int(g.kh),
                                           int(g.kw)),
                "cudnnSetFilter4dDescriptor");
      check_dnn(cudnnSetConvolution2dDescriptor(conv.d, int(g.ph), int(g.pw), int(g.sh), int(g.sw), int(g.dh),
                                                int(g.dw), CUDNN_CROSS_CORRELATION,
                                                is_double ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT),
                "cudnnSetConvolution2dDescriptor");
    }
    check_dnn(cudnnSetConvolutionGroupCount(conv.d, int(g.groups)), "cudnnSetConvolutionGroupCount");
    fma_only = dtype == TS_FLOAT32 && !allow_tf32();
    cudnnMathType_t math = fma_only ? CUDNN_FMA_MATH
                           : dtype == TS_FLOAT16 || dtype == TS_BFLOAT16 ? CUDNN_TENSOR_OP_MATH
                                                                          : CUDNN_DEFAULT_MATH;
    check_dnn(cudnnSetConvolutionMathType(conv.d, math), "cudnnSetConvolutionMathType");
  }
  // Scaling factors: double for double data, float otherwise (cuDNN's rule).
  const void* one() const { return is_double ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f); }
  const void* zero() const { return is_double ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f); }

 private:
  double one_d = 1, zero_d = 0;
  float one_f = 1, zero_f = 0;
};

// Tries the heuristics' algorithms best first; the first whose run succeeds (`run(algo,
// may_release_cache)` returns its status) wins. Workspaces are probed without emptying the cache
// (an algorithm whose workspace does not fit is skipped, not an out-of-memory); only when every
// usable algorithm failed so is the best of those retried with the cache released. FMA-only
// problems keep CUDNN_FMA_MATH on the descriptor, so cuDNN refuses (NOT_SUPPORTED) an algorithm
// that would need tensor cores and the next one is tried; otherwise the descriptor takes the math
// type the heuristics rated. `Perf` is one of cuDNN's *AlgoPerf_t.
template <class Perf, class Run>
void run_best(const char* what, const Problem& p, const Perf* perfs, int count, Run run) {
  cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
  const Perf* first_without_memory = nullptr;
  auto attempt = [&](const Perf& perf, bool may_release_cache) {
    if (!p.fma_only) check_dnn(cudnnSetConvolutionMathType(p.conv.d, perf.mathType), "cudnnSetConvolutionMathType");
    return run(perf.algo, may_release_cache);
  };
  for (int i = 0; i < count; ++i) {
    const Perf& perf = perfs[i];
    if (perf.status != CUDNN_STATUS_SUCCESS) continue;
    last = attempt(perf, false);
    if (last == CUDNN_STATUS_SUCCESS) return;
    if (last == CUDNN_STATUS_ALLOC_FAILED && !first_without_memory) first_without_memory = &perf;
    // Try the next algorithm only when this one could not be used (not for execution failures).
    if (last != CUDNN_STATUS_NOT_SUPPORTED && last != CUDNN_STATUS_BAD_PARAM && last != CUDNN_STATUS_ALLOC_FAILED)
      break;
  }
  if (first_without_memory && (last == CUDNN_STATUS_ALLOC_FAILED || last == CUDNN_STATUS_NOT_SUPPORTED ||
                               last == CUDNN_STATUS_BAD_PARAM)) {
    last = attempt(*first_without_memory, true);
    if (last == CUDNN_STATUS_SUCCESS) return;
  }
  check_dnn(last, what);
}

// Zeros over a fresh (contiguous) tensor.
void zero_fill(const TensorRef& t) {
  if (t.numel())
    check(gpuMemsetAsync(t.data(), 0, size_t(t.numel() * t.itemsize()), stream_for(t.device().index)),
          "zero-filling a tensor");
}

// y (shape g.out_shape, contiguous) += bias over the channel dim, through the element-wise engine.
void add_bias(ts_call call, const Geometry& g, const TensorRef& y, const TensorRef& bias) {
  std::vector<int64_t> strides(g.out_shape.size(), 0);
  strides[size_t(g.channel_dim)] = bias.stride(0);
  TensorRef b = restride(call, bias, y.sizes(), strides, bias.storage_offset());
  Loop L = make_loop("convolution", y.sizes(), {&y, &y, &b});
  launch_binary(BinaryOp::Add, compute_for(y.dtype()), L, stream_for(y.device().index));
}

// convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, int groups)
void convolution_k(sdk::Args& a) {
  const char* op = "convolution";
  TensorRef input = a.tensor(0), weight = a.tensor(1);
  std::optional<TensorRef> bias = a.optional_tensor(2);
  if (bias) common_device(op, {&input, &weight, &*bias});
  else common_device(op, {&input, &weight});
  check_operands(op, input, weight);
  Geometry g = sdk::conv_geometry(op, input, weight, a.int_list(3), a.int_list(4), a.int_list(5), a.to_int(6));
  if (bias) {
    TS_SDK_CHECK(bias->dtype() == input.dtype(), TS_ERROR_TYPE, op, ": expected bias to have the input's dtype ",
                 sdk::dtype_name(input.dtype()), ", got ", sdk::dtype_name(bias->dtype()));
    TS_SDK_CHECK(bias->dim() == 1 && bias->size(0) == g.c_out, TS_ERROR_VALUE, op, ": expected bias of shape [",
                 g.c_out, "] (the weight's out channels), got ", shape_text(bias->sizes()));
  }
  check_int_sized(op, g);
  const int32_t index = input.device().index;
  DeviceGuard guard(index);
  TensorRef y = empty_on(a.call(), g.out_shape, input.dtype(), input.device());
  if (y.numel() == 0) return a.return_tensor(std::move(y));
  if (g.c_in == 0) {
    zero_fill(y);  // an empty sum
  } else {
    TensorRef x = contiguous(a.call(), input, input.dtype()), w = contiguous(a.call(), weight, weight.dtype());
    Problem p(g, input.dtype());
    cudnnHandle_t h = handle_for(index);
    cudnnConvolutionFwdAlgoPerf_t perfs[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    check_dnn(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x.d, p.w.d, p.conv.d, p.y.d, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                     &count, perfs),
              "cudnnGetConvolutionForwardAlgorithm_v7");
    run_best("cudnnConvolutionForward", p, perfs, count, [&](cudnnConvolutionFwdAlgo_t algo, bool may_release_cache) {
      size_t bytes = 0;
      cudnnStatus_t s = cudnnGetConvolutionForwardWorkspaceSize(h, p.x.d, p.w.d, p.conv.d, p.y.d, algo, &bytes);
      if (s != CUDNN_STATUS_SUCCESS) return s;
      Workspace ws(index, bytes, stream_for(index), may_release_cache);
      if (!ws.ok) return CUDNN_STATUS_ALLOC_FAILED;
      return cudnnConvolutionForward(h, p.one(), p.x.d, x.data(), p.w.d, w.data(), p.conv.d, algo, ws.ptr, bytes,
                                     p.zero(), p.y.d, y.data());
    });
  }
  if (bias) add_bias(a.call(), g, y, *bias);
  a.return_tensor(std::move(y));
}

// grad_bias[c] = sum of grad_output over (n, oh, ow), through the reduction kernel.
void bias_grad(const Geometry& g, const TensorRef& gy, const TensorRef& gb) {
  Reduction r;
  const int64_t plane = g.out_plane();
  r.ndim_kept = 1;
  r.ndim_reduced = 2;
  r.sizes[0] = g.c_out, r.sizes[1] = g.n, r.sizes[2] = plane;
  r.in.strides[0] = plane, r.in.strides[1] = g.c_out * plane, r.in.strides[2] = 1;
  r.kept = g.c_out;
  r.reduced = g.n * plane;
  r.in.data = first_element(gy);
  r.in.dtype = gy.dtype();
  r.in.itemsize = int32_t(gy.itemsize());
  r.out.data = first_element(gb);
  r.out.dtype = gb.dtype();
  r.out.itemsize = int32_t(gb.itemsize());
  run_reduction(ReduceOp::Sum, compute_for(gb.dtype()), r, gb.device().index);
}

// gx = the gradient of the convolution `p` with respect to its input, for gy (all contiguous).
void backward_data(cudnnHandle_t h, const Problem& p, int32_t index, const TensorRef& w, const TensorRef& gy,
                   const TensorRef& gx) {
  cudnnConvolutionBwdDataAlgoPerf_t perfs[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int count = 0;
  check_dnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w.d, p.y.d, p.conv.d, p.x.d,
                                                        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perfs),
            "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  run_best("cudnnConvolutionBackwardData", p, perfs, count,
           [&](cudnnConvolutionBwdDataAlgo_t algo, bool may_release_cache) {
    size_t bytes = 0;
    cudnnStatus_t s = cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w.d, p.y.d, p.conv.d, p.x.d, algo, &bytes);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    Workspace ws(index, bytes, stream_for(index), may_release_cache);
    if (!ws.ok) return CUDNN_STATUS_ALLOC_FAILED;
    return cudnnConvolutionBackwardData(h, p.one(), p.w.d, w.data(), p.y.d, gy.data(), p.conv.d, algo, ws.ptr, bytes,
                                        p.zero(), p.x.d, gx.data());
  });
}

// convolution_backward_input(Tensor grad_output, Tensor weight, int[] input_size, int[] stride,
//   int[] padding, int[] dilation, int groups) -> grad_input (a transposed convolution's forward)
void convolution_backward_input_k(sdk::Args& a) {
  const char* op = "convolution_backward_input";
  TensorRef grad_out = a.tensor(0), weight = a.tensor(1);
  const std::span<const int64_t> input_size = a.int_list(2);
  common_device(op, {&grad_out, &weight});
  TS_SDK_CHECK(sdk::is_floating(grad_out.dtype()), TS_ERROR_TYPE, op, ": expected a floating grad_output, got ",
               sdk::dtype_name(grad_out.dtype()));
  TS_SDK_CHECK(weight.dtype() == grad_out.dtype(), TS_ERROR_TYPE, op, ": expected weight to have grad_output's dtype ",
               sdk::dtype_name(grad_out.dtype()), ", got ", sdk::dtype_name(weight.dtype()));
  for (int64_t s : input_size)
    TS_SDK_CHECK(s >= 0, TS_ERROR_VALUE, op, ": expected a non-negative input_size, got ", shape_text(input_size));
  Geometry g = sdk::conv_geometry(op, input_size, weight, a.int_list(3), a.int_list(4), a.int_list(5), a.to_int(6));
  TS_SDK_CHECK(grad_out.shape_vector() == g.out_shape, TS_ERROR_VALUE, op, ": expected grad_output of shape ",
               shape_text(g.out_shape), " (the output of a convolution of an ", shape_text(input_size),
               " input), got ", shape_text(grad_out.sizes()));
  check_int_sized(op, g);
  const int32_t index = grad_out.device().index, dtype = grad_out.dtype();
  DeviceGuard guard(index);
  TensorRef gx = empty_on(a.call(), input_size, dtype, grad_out.device());
  if (g.n == 0 || g.c_in == 0 || g.c_out == 0 || g.out_plane() == 0) {
    zero_fill(gx);  // a sum over nothing
  } else if (gx.numel()) {
    TensorRef gy = contiguous(a.call(), grad_out, dtype), w = contiguous(a.call(), weight, dtype);
    backward_data(handle_for(index), Problem(g, dtype), index, w, gy, gx);
  }
  a.return_tensor(std::move(gx));
}

// convolution_backward(Tensor grad_output, Tensor input, Tensor weight, int[] stride, int[] padding,
//                      int[] dilation, int groups) -> (grad_input, grad_weight, grad_bias)
void convolution_backward_k(sdk::Args& a) {
  const char* op = "convolution_backward";
  TensorRef grad_out = a.tensor(0), input = a.tensor(1), weight = a.tensor(2);
  common_device(op, {&grad_out, &input, &weight});
  check_operands(op, input, weight);
  TS_SDK_CHECK(grad_out.dtype() == input.dtype(), TS_ERROR_TYPE, op, ": expected grad_output to have the input's dtype ",
               sdk::dtype_name(input.dtype()), ", got ", sdk::dtype_name(grad_out.dtype()));
  Geometry g = sdk::conv_geometry(op, input, weight, a.int_list(3), a.int_list(4), a.int_list(5), a.to_int(6));
  TS_SDK_CHECK(grad_out.shape_vector() == g.out_shape, TS_ERROR_VALUE, op, ": expected grad_output of shape ",
               shape_text(g.out_shape), " (the convolution's output), got ", shape_text(grad_out.sizes()));
  check_int_sized(op, g);
  const int32_t index = input.device().index, dtype = input.dtype();
  DeviceGuard guard(index);
  TensorRef gx = empty_on(a.call(), input.sizes(), dtype, input.device());
  TensorRef gw = empty_on(a.call(), weight.sizes(), dtype, input.device());
  const int64_t bias_shape[1] = {g.c_out};
  TensorRef gb = empty_on(a.call(), bias_shape, dtype, input.device());
  TensorRef gy = contiguous(a.call(), grad_out, dtype);
  if (g.n == 0 || g.c_in == 0 || g.c_out == 0) {
    zero_fill(gx);  // a sum over nothing
    zero_fill(gw);
  } else {
    TensorRef x = contiguous(a.call(), input, dtype), w = contiguous(a.call(), weight, dtype);
    Problem p(g, dtype);
    cudnnHandle_t h = handle_for(index);
    backward_data(h, p, index, w, gy, gx);
    cudnnConvolutionBwdFilterAlgoPerf_t fperfs[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int count = 0;
    check_dnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x.d, p.y.d, p.conv.d, p.w.d,
                                                            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, fperfs),
              "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    run_best("cudnnConvolutionBackwardFilter", p, fperfs, count,
             [&](cudnnConvolutionBwdFilterAlgo_t algo, bool may_release_cache) {
      size_t bytes = 0;
      cudnnStatus_t s = cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x.d, p.y.d, p.conv.d, p.w.d, algo, &bytes);
      if (s != CUDNN_STATUS_SUCCESS) return s;
      Workspace ws(index, bytes, stream_for(index), may_release_cache);
      if (!ws.ok) return CUDNN_STATUS_ALLOC_FAILED;
      return cudnnConvolutionBackwardFilter(h, p.one(), p.x.d, x.data(), p.y.d, gy.data(), p.conv.d, algo, ws.ptr,
                                            bytes, p.zero(), p.w.d, gw.data());
    });
  }
  bias_grad(g, gy, gb);
  a.returns({sdk::Args::tensor_value(std::move(gx)), sdk::Args::tensor_value(std::move(gw)),
             sdk::Args::tensor_value(std::move(gb))});
}

}  // namespace

void register_conv_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("convolution", key, convolution_k);
  reg.kernel("convolution_backward", key, convolution_backward_k);
  reg.kernel("convolution_backward_input", key, convolution_backward_input_k);
}

}  // namespace tessera::gpu
