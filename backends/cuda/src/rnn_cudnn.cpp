// _rnn_layer and _rnn_layer_backward through cuDNN's RNN API (the v8 functions, in cuDNN 9): one
// layer and one direction of an RNN (tanh or relu), LSTM or GRU over a whole float32 sequence, as
// the CPU's oneDNN kernels (backends/cpu/src/nn_rnn.cpp) with the same operands and shape rules
// (sdk/rnn_geometry.h). cuDNN's gate order is PyTorch's (LSTM i, f, g, o; GRU r, z, n with the
// "linear before reset" formula), so the weights are copied gate block by gate block into cuDNN's
// weight space at the addresses cudnnGetRNNWeightParams gives, and the gradients come back the
// same way. A reverse layer runs forward over the time-flipped sequence. The workspace the
// forward returns for the backward is cuDNN's reserve space.
#include "cuda_plugin.h"
#include "cudnn_support.h"
#include "workspace.h"

#include <tessera/sdk/rnn_geometry.h>

#include <climits>
#include <optional>
#include <vector>

namespace tessera::gpu {
namespace {

using sdk::RnnGeometry;
using RnnDesc = Descriptor<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using RnnDataDesc = Descriptor<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor, cudnnDestroyRNNDataDescriptor>;
using DropoutDesc = Descriptor<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor, cudnnDestroyDropoutDescriptor>;

cudnnRNNMode_t cell_mode(int64_t mode) {
  switch (mode) {
    case sdk::kRnnTanh: return CUDNN_RNN_TANH;
    case sdk::kRnnRelu: return CUDNN_RNN_RELU;
    case sdk::kRnnLstm: return CUDNN_LSTM;
    default: return CUDNN_GRU;
  }
}

// The operands, checked (shapes by the SDK's rules) and made contiguous.
struct Operands {
  RnnGeometry g;
  TensorRef input, w_ih, w_hh, b_ih, b_hh, hx, cx;  // b_*, cx may be undefined
  int32_t index = 0;
  ts_device device{};
};

Operands operands(sdk::Args& a, const char* op, int mode_at, int reverse_at) {
  TensorRef input = a.tensor(0), w_ih = a.tensor(1), w_hh = a.tensor(2), hx = a.tensor(5);
  std::optional<TensorRef> b_ih = a.optional_tensor(3), b_hh = a.optional_tensor(4), cx = a.optional_tensor(6);
  std::vector<const TensorRef*> all{&input, &w_ih, &w_hh, &hx};
  for (auto* t : {&b_ih, &b_hh, &cx})
    if (*t) all.push_back(&**t);
  Operands o;
  o.device = input.device();
  for (const TensorRef* t : all) {
    TS_SDK_CHECK(t->device().type == o.device.type && t->device().index == o.device.index, TS_ERROR_VALUE, op,
                 ": expected every tensor on ", device_str(o.device), ", got one on ", device_str(t->device()));
    TS_SDK_CHECK(t->dtype() == TS_FLOAT32, TS_ERROR_TYPE, op,
                 ": expected float32 tensors (other dtypes take the composite path), got ",
                 sdk::dtype_name(t->dtype()));
  }
  o.g = sdk::rnn_geometry(op, input, w_ih, w_hh, b_ih, b_hh, hx, cx, a.to_int(mode_at), a.to_bool(reverse_at));
  TS_SDK_CHECK(o.g.T * o.g.N * std::max(o.g.I, o.g.H) <= INT_MAX && o.g.T <= INT_MAX && o.g.N <= INT_MAX,
               TS_ERROR_VALUE, op, ": a sequence of ", o.g.T, " x ", o.g.N, " is larger than cuDNN's int sizes");
  o.index = o.device.index;
  auto dense = [&](const TensorRef& t) { return contiguous(a.call(), t, TS_FLOAT32); };
  o.input = dense(input);
  o.w_ih = dense(w_ih);
  o.w_hh = dense(w_hh);
  o.hx = dense(hx);
  if (b_ih) o.b_ih = dense(*b_ih);
  if (b_hh) o.b_hh = dense(*b_hh);
  if (o.g.mode == sdk::kRnnLstm) o.cx = dense(*cx);
  return o;
}

void copy_async(void* dst, const void* src, size_t bytes, int32_t index) {
  if (bytes) check(gpuMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_for(index)), "rnn: copy");
}

void zero_async(void* dst, size_t bytes, int32_t index) {
  if (bytes) check(gpuMemsetAsync(dst, 0, bytes, stream_for(index)), "rnn: zero fill");
}

// A [T, N, X] contiguous sequence with its time steps in reverse order.
TensorRef time_flipped(ts_call call, const TensorRef& seq, int32_t index) {
  TensorRef out = empty_on(call, seq.sizes(), seq.dtype(), seq.device());
  const int64_t T = seq.size(0);
  const size_t step = size_t(seq.numel() / std::max<int64_t>(T, 1)) * seq.itemsize();
  for (int64_t t = 0; t < T; ++t) copy_async(first_element(out) + t * step, first_element(seq) + (T - 1 - t) * step,
                                             step, index);
  return out;
}

// The cuDNN descriptors of one layer, its weight space and its scratch sizes.
struct Layer {
  RnnDesc rnn;
  DropoutDesc dropout;
  RnnDataDesc x, y;
  TensorDesc h, c;
  size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  std::vector<int32_t> lengths;  // every sequence is T long

  Layer(cudnnHandle_t handle, const RnnGeometry& g, bool train) {
    check_dnn(cudnnSetDropoutDescriptor(dropout.d, handle, 0.0f, nullptr, 0, 0), "cudnnSetDropoutDescriptor");
    check_dnn(cudnnSetRNNDescriptor_v8(rnn.d, CUDNN_RNN_ALGO_STANDARD, cell_mode(g.mode), CUDNN_RNN_DOUBLE_BIAS,
                                       CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
                                       allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH, int32_t(g.I),
                                       int32_t(g.H), int32_t(g.H), 1, dropout.d, CUDNN_RNN_PADDED_IO_DISABLED),
              "cudnnSetRNNDescriptor_v8");
    lengths.assign(size_t(g.N), int32_t(g.T));
    check_dnn(cudnnSetRNNDataDescriptor(x.d, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, int(g.T),
                                        int(g.N), int(g.I), lengths.data(), nullptr),
              "cudnnSetRNNDataDescriptor (input)");
    check_dnn(cudnnSetRNNDataDescriptor(y.d, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, int(g.T),
                                        int(g.N), int(g.H), lengths.data(), nullptr),
              "cudnnSetRNNDataDescriptor (output)");
    const int dims[3] = {1, int(g.N), int(g.H)}, strides[3] = {int(g.N * g.H), int(g.H), 1};
    check_dnn(cudnnSetTensorNdDescriptor(h.d, CUDNN_DATA_FLOAT, 3, dims, strides), "cudnnSetTensorNdDescriptor (h)");
    check_dnn(cudnnSetTensorNdDescriptor(c.d, CUDNN_DATA_FLOAT, 3, dims, strides), "cudnnSetTensorNdDescriptor (c)");
    check_dnn(cudnnGetRNNWeightSpaceSize(handle, rnn.d, &weight_bytes), "cudnnGetRNNWeightSpaceSize");
    check_dnn(cudnnGetRNNTempSpaceSizes(handle, rnn.d, train ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                                        x.d, &work_bytes, &reserve_bytes),
              "cudnnGetRNNTempSpaceSizes");
  }
};

// Where gate block `id` of the weights (ids 0..G-1 input side, G..2G-1 hidden side) and its bias
// live in a weight space.
struct Block {
  void* matrix = nullptr;
  void* bias = nullptr;
};

Block block_of(cudnnHandle_t handle, const Layer& L, void* space, int32_t id) {
  TensorDesc m, b;
  Block out;
  check_dnn(cudnnGetRNNWeightParams(handle, L.rnn.d, 0, L.weight_bytes, space, id, m.d, &out.matrix, b.d, &out.bias),
            "cudnnGetRNNWeightParams");
  return out;
}

// Copies between PyTorch's [G*H, X] weights / [G*H] biases and the weight space, gate by gate:
// to_space true fills the space (undefined biases as zeros), false reads gradients out of it.
void exchange_weights(cudnnHandle_t handle, const Layer& L, void* space, const Operands& o, const TensorRef& w_ih,
                      const TensorRef& w_hh, const TensorRef& b_ih, const TensorRef& b_hh, bool to_space) {
  const RnnGeometry& g = o.g;
  const int64_t G = sdk::rnn_gates(g.mode);
  const size_t bias_bytes = size_t(g.H) * sizeof(float);
  for (int32_t side = 0; side < 2; ++side) {
    const TensorRef& w = side == 0 ? w_ih : w_hh;
    const TensorRef& b = side == 0 ? b_ih : b_hh;
    const size_t matrix_bytes = size_t(g.H * (side == 0 ? g.I : g.H)) * sizeof(float);
    for (int64_t gate = 0; gate < G; ++gate) {
      Block blk = block_of(handle, L, space, int32_t(side * G + gate));
      char* w_gate = first_element(w) + gate * matrix_bytes;
      if (to_space) copy_async(blk.matrix, w_gate, matrix_bytes, o.index);
      else copy_async(w_gate, blk.matrix, matrix_bytes, o.index);
      if (!blk.bias) continue;
      if (!b.defined()) {
        if (to_space) zero_async(blk.bias, bias_bytes, o.index);
        continue;
      }
      char* b_gate = first_element(b) + gate * bias_bytes;
      if (to_space) copy_async(blk.bias, b_gate, bias_bytes, o.index);
      else copy_async(b_gate, blk.bias, bias_bytes, o.index);
    }
  }
}

// The devSeqLengths cuDNN reads on the device: N lengths of T.
struct DeviceLengths {
  Workspace buffer;
  DeviceLengths(const Layer& L, int32_t index)
      : buffer(index, L.lengths.size() * sizeof(int32_t), stream_for(index)) {
    TS_SDK_CHECK(buffer.ok, TS_ERROR_OUT_OF_MEMORY, kName, ": rnn: no device memory for the sequence lengths");
    if (buffer.ptr)
      check(gpuMemcpyAsync(buffer.ptr, L.lengths.data(), L.lengths.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                           stream_for(index)),
            "rnn: copying the sequence lengths");
  }
  const int32_t* ptr() const { return static_cast<const int32_t*>(buffer.ptr); }
};

// _rnn_layer(input, weight_ih, weight_hh, bias_ih?, bias_hh?, hx, cx?, mode, reverse, train)
//   -> (output [T, N, H], hy [N, H], cy [N, H] or [0], workspace (uint8, empty unless train))
void rnn_layer_k(sdk::Args& a) {
  const char* op = "_rnn_layer";
  Operands o = operands(a, op, 7, 8);
  const RnnGeometry& g = o.g;
  const bool train = a.to_bool(9), lstm = g.mode == sdk::kRnnLstm;
  DeviceGuard guard(o.index);
  const int64_t out_shape[3] = {g.T, g.N, g.H}, state_shape[2] = {g.N, g.H}, none[1] = {0};
  TensorRef output = empty_on(a.call(), out_shape, TS_FLOAT32, o.device);
  TensorRef hy = empty_on(a.call(), state_shape, TS_FLOAT32, o.device);
  TensorRef cy = empty_on(a.call(), lstm ? std::span<const int64_t>(state_shape) : std::span<const int64_t>(none),
                          TS_FLOAT32, o.device);
  auto finish = [&](TensorRef workspace) {
    a.returns({sdk::Args::tensor_value(std::move(output)), sdk::Args::tensor_value(std::move(hy)),
               sdk::Args::tensor_value(std::move(cy)), sdk::Args::tensor_value(std::move(workspace))});
  };
  if (g.T == 0 || g.N == 0) {  // nothing to run: the state passes through
    copy_async(first_element(hy), first_element(o.hx), size_t(hy.numel()) * sizeof(float), o.index);
    if (lstm) copy_async(first_element(cy), first_element(o.cx), size_t(cy.numel()) * sizeof(float), o.index);
    return finish(empty_on(a.call(), none, TS_UINT8, o.device));
  }
  cudnnHandle_t handle = handle_for(o.index);
  Layer L(handle, g, train);
  Workspace weights(o.index, L.weight_bytes, stream_for(o.index)), work(o.index, L.work_bytes, stream_for(o.index));
  TS_SDK_CHECK(weights.ok && work.ok, TS_ERROR_OUT_OF_MEMORY, kName, ": ", op, ": no device memory for cuDNN's ",
               L.weight_bytes + L.work_bytes, "-byte weight and work spaces");
  exchange_weights(handle, L, weights.ptr, o, o.w_ih, o.w_hh, o.b_ih, o.b_hh, true);
  const int64_t reserve_shape[1] = {train ? int64_t(L.reserve_bytes) : 0};
  TensorRef reserve = empty_on(a.call(), reserve_shape, TS_UINT8, o.device);
  TensorRef x = g.reverse ? time_flipped(a.call(), o.input, o.index) : o.input;
  TensorRef y = g.reverse ? empty_on(a.call(), out_shape, TS_FLOAT32, o.device) : output;
  DeviceLengths lengths(L, o.index);
  check_dnn(cudnnRNNForward(handle, L.rnn.d, train ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, lengths.ptr(),
                            L.x.d, x.data(), L.y.d, y.data(), L.h.d, o.hx.data(), hy.data(), L.c.d,
                            lstm ? o.cx.data() : nullptr, lstm ? cy.data() : nullptr, L.weight_bytes, weights.ptr,
                            L.work_bytes, work.ptr, train ? L.reserve_bytes : 0, train ? reserve.data() : nullptr),
            "cudnnRNNForward");
  if (g.reverse) output = time_flipped(a.call(), y, o.index);
  finish(std::move(reserve));
}

// A gradient argument as a dense float32 tensor of `shape`: zeros when it is None.
TensorRef grad_or_zeros(sdk::Args& a, int i, std::span<const int64_t> shape, const Operands& o, const char* op,
                        const char* what) {
  std::optional<TensorRef> grad = a.optional_tensor(i);
  if (!grad || !grad->defined()) {
    TensorRef z = empty_on(a.call(), shape, TS_FLOAT32, o.device);
    zero_async(z.data(), size_t(z.numel()) * sizeof(float), o.index);
    return z;
  }
  TS_SDK_CHECK(grad->dtype() == TS_FLOAT32, TS_ERROR_TYPE, op, ": expected ", what, " of dtype float32, got ",
               sdk::dtype_name(grad->dtype()));
  TS_SDK_CHECK(grad->shape_vector() == std::vector<int64_t>(shape.begin(), shape.end()), TS_ERROR_VALUE, op,
               ": expected ", what, " of shape ", shape_text(shape), ", got ", shape_text(grad->sizes()));
  return contiguous(a.call(), *grad, TS_FLOAT32);
}

// _rnn_layer_backward(input, weight_ih, weight_hh, bias_ih?, bias_hh?, hx, cx?, output, hy, cy,
//   workspace, grad_output?, grad_hy?, grad_cy?, mode, reverse)
//   -> (grad_input, grad_weight_ih, grad_weight_hh, grad_bias_ih, grad_bias_hh, grad_hx, grad_cx)
void rnn_layer_backward_k(sdk::Args& a) {
  const char* op = "_rnn_layer_backward";
  Operands o = operands(a, op, 14, 15);
  const RnnGeometry& g = o.g;
  const bool lstm = g.mode == sdk::kRnnLstm;
  DeviceGuard guard(o.index);
  const int64_t G = sdk::rnn_gates(g.mode);
  const int64_t out_shape[3] = {g.T, g.N, g.H}, state_shape[2] = {g.N, g.H}, none[1] = {0}, bias_shape[1] = {G * g.H};
  TensorRef output = contiguous(a.call(), a.tensor(7), TS_FLOAT32), workspace = a.tensor(10);
  TensorRef g_out = grad_or_zeros(a, 11, out_shape, o, op, "grad_output");
  TensorRef g_hy = grad_or_zeros(a, 12, state_shape, o, op, "grad_hy");
  TensorRef g_cy = lstm ? grad_or_zeros(a, 13, state_shape, o, op, "grad_cy") : TensorRef();
  TensorRef g_input = empty_on(a.call(), o.input.sizes(), TS_FLOAT32, o.device);
  TensorRef g_w_ih = empty_on(a.call(), o.w_ih.sizes(), TS_FLOAT32, o.device);
  TensorRef g_w_hh = empty_on(a.call(), o.w_hh.sizes(), TS_FLOAT32, o.device);
  TensorRef g_b_ih = empty_on(a.call(), bias_shape, TS_FLOAT32, o.device);
  TensorRef g_b_hh = empty_on(a.call(), bias_shape, TS_FLOAT32, o.device);
  TensorRef g_hx = empty_on(a.call(), state_shape, TS_FLOAT32, o.device);
  TensorRef g_cx = empty_on(a.call(), lstm ? std::span<const int64_t>(state_shape) : std::span<const int64_t>(none),
                            TS_FLOAT32, o.device);
  auto finish = [&] {
    a.returns({sdk::Args::tensor_value(std::move(g_input)), sdk::Args::tensor_value(std::move(g_w_ih)),
               sdk::Args::tensor_value(std::move(g_w_hh)), sdk::Args::tensor_value(std::move(g_b_ih)),
               sdk::Args::tensor_value(std::move(g_b_hh)), sdk::Args::tensor_value(std::move(g_hx)),
               sdk::Args::tensor_value(std::move(g_cx))});
  };
  if (g.T == 0 || g.N == 0) {  // the state passed through; the weights had no effect
    for (const TensorRef* t : {&g_input, &g_w_ih, &g_w_hh, &g_b_ih, &g_b_hh})
      zero_async(t->data(), size_t(t->numel()) * sizeof(float), o.index);
    copy_async(first_element(g_hx), first_element(g_hy), size_t(g_hx.numel()) * sizeof(float), o.index);
    if (lstm) copy_async(first_element(g_cx), first_element(g_cy), size_t(g_cx.numel()) * sizeof(float), o.index);
    return finish();
  }
  cudnnHandle_t handle = handle_for(o.index);
  Layer L(handle, g, true);
  TS_SDK_CHECK(workspace.dtype() == TS_UINT8 && size_t(workspace.numel()) == L.reserve_bytes, TS_ERROR_VALUE, op,
               ": the workspace holds ", workspace.numel(), " bytes; cuDNN needs ", L.reserve_bytes,
               " (was the forward run with train=True, at these sizes?)");
  Workspace weights(o.index, L.weight_bytes, stream_for(o.index)), dweights(o.index, L.weight_bytes, stream_for(o.index));
  Workspace work(o.index, L.work_bytes, stream_for(o.index)), reserve(o.index, L.reserve_bytes, stream_for(o.index));
  TS_SDK_CHECK(weights.ok && dweights.ok && work.ok && reserve.ok, TS_ERROR_OUT_OF_MEMORY, kName, ": ", op,
               ": no device memory for cuDNN's weight, work and reserve spaces");
  exchange_weights(handle, L, weights.ptr, o, o.w_ih, o.w_hh, o.b_ih, o.b_hh, true);
  zero_async(dweights.ptr, L.weight_bytes, o.index);  // the weight gradients are added into it
  // cuDNN writes into the reserve space as it goes: a copy keeps the saved one for a second
  // backward (retain_graph).
  copy_async(reserve.ptr, workspace.data(), L.reserve_bytes, o.index);
  TensorRef x = g.reverse ? time_flipped(a.call(), o.input, o.index) : o.input;
  TensorRef y = g.reverse ? time_flipped(a.call(), output, o.index) : output;
  TensorRef dy = g.reverse ? time_flipped(a.call(), g_out, o.index) : g_out;
  TensorRef dx = g_input;  // the flipped sequence's gradient when reverse, flipped back at the end
  DeviceLengths lengths(L, o.index);
  check_dnn(cudnnRNNBackwardData_v8(handle, L.rnn.d, lengths.ptr(), L.y.d, y.data(), dy.data(), L.x.d, dx.data(),
                                    L.h.d, o.hx.data(), g_hy.data(), g_hx.data(), L.c.d, lstm ? o.cx.data() : nullptr,
                                    lstm ? g_cy.data() : nullptr, lstm ? g_cx.data() : nullptr, L.weight_bytes,
                                    weights.ptr, L.work_bytes, work.ptr, L.reserve_bytes, reserve.ptr),
            "cudnnRNNBackwardData_v8");
  check_dnn(cudnnRNNBackwardWeights_v8(handle, L.rnn.d, CUDNN_WGRAD_MODE_ADD, lengths.ptr(), L.x.d, x.data(), L.h.d,
                                       o.hx.data(), L.y.d, y.data(), L.weight_bytes, dweights.ptr, L.work_bytes,
                                       work.ptr, L.reserve_bytes, reserve.ptr),
            "cudnnRNNBackwardWeights_v8");
  exchange_weights(handle, L, dweights.ptr, o, g_w_ih, g_w_hh, g_b_ih, g_b_hh, false);
  if (g.reverse) g_input = time_flipped(a.call(), dx, o.index);
  finish();
}

}  // namespace

void register_rnn_kernels(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.kernel("_rnn_layer", key, rnn_layer_k);
  reg.kernel("_rnn_layer_backward", key, rnn_layer_backward_k);
}

}  // namespace tessera::gpu
