// cpu::linear_epilogue(Tensor input, Tensor weight, Tensor? bias, str activation) -> Tensor:
// act(input @ weight + bias) as one oneDNN matmul, the bias and the activation applied by the
// primitive to each tile of the product while it is in cache (a post-op), so the product is
// written once and never read back. The inductor (compiler/inductor/library_epilogues.cpp) folds
// matmul -> add(bias) -> activation chains of compiled graphs into it; eager never calls it.
//   input  [..., K] float32, dense rows; weight [K, N] float32, any strides (a Linear's weight
//   transposed is the [K, N] view with strides (1, K)); bias [N] or None.
//   activation: "none", "relu", "gelu" (erf), "gelu_tanh", "tanh", "sigmoid", "silu".
// Primitives are cached by geometry, strides and activation.
#include "kernels.h"
#include "nn_norm.h"  // check_cpu_all
#include "onednn_support.h"

#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace tessera::cpu {
namespace {

using sdk::Args;
using sdk::fail;
using sdk::TensorRef;
using dnnl::memory;
using dt = dnnl::memory::data_type;

// The eltwise post-op of an activation name (nullopt: none), as PyTorch's functions compute them.
std::optional<dnnl::algorithm> activation_algorithm(std::string_view name) {
  if (name == "none") return std::nullopt;
  if (name == "relu") return dnnl::algorithm::eltwise_relu;
  if (name == "gelu") return dnnl::algorithm::eltwise_gelu_erf;
  if (name == "gelu_tanh") return dnnl::algorithm::eltwise_gelu_tanh;
  if (name == "tanh") return dnnl::algorithm::eltwise_tanh;
  if (name == "sigmoid") return dnnl::algorithm::eltwise_logistic;
  if (name == "silu") return dnnl::algorithm::eltwise_swish;  // x * sigmoid(alpha * x), alpha 1
  fail(TS_ERROR_VALUE, "cpu::linear_epilogue: activation must be one of none, relu, gelu, gelu_tanh, tanh, sigmoid, "
                       "silu; got '", name, "'");
}

struct Matmul {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

// (m, k, n, weight strides, has bias, the activation's dnnl::algorithm or -1)
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool, int>;

Matmul make_matmul(const Key& key) {
  const auto& [m, k, n, ws0, ws1, has_bias, activation_code] = key;
  const memory::desc src({m, k}, dt::f32, memory::dims{k, 1});
  const memory::desc weights({k, n}, dt::f32, memory::dims{ws0, ws1});
  const memory::desc bias({1, n}, dt::f32, memory::dims{n, 1});
  const memory::desc dst({m, n}, dt::f32, memory::dims{n, 1});
  dnnl::primitive_attr attr = user_scratchpad_attributes();
  if (activation_code >= 0) {
    const auto activation = dnnl::algorithm(activation_code);
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, activation, activation == dnnl::algorithm::eltwise_swish ? 1.0f : 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::desc desc = has_bias ? dnnl::matmul::desc(src, weights, bias, dst)
                                           : dnnl::matmul::desc(src, weights, dst);
  dnnl::matmul::primitive_desc pd(desc, attr, onednn_engine());
  return Matmul{pd, dnnl::matmul(pd)};
}

void linear_epilogue_kernel(Args& a) {
  const char* op = "cpu::linear_epilogue";
  const TensorRef input = a.tensor(0), weight = a.tensor(1);
  const std::optional<TensorRef> bias = a.optional_tensor(2);
  const std::string_view activation_name = a.optional_str(3).value_or("none");
  const auto activation = activation_algorithm(activation_name);
  norm::check_cpu_all(op, {&input, &weight});
  for (const auto& [what, t] : {std::pair{"input", &input}, std::pair{"weight", &weight}})
    if (t->dtype() != TS_FLOAT32) fail(TS_ERROR_TYPE, op, ": expected a float32 ", what, ", got ", sdk::dtype_name(t->dtype()));
  if (input.dim() < 1 || weight.dim() != 2 || input.size(input.dim() - 1) != weight.size(0))
    fail(TS_ERROR_VALUE, op, ": expected input [..., K] and weight [K, N], got ", sdk::shape_text(input.sizes()),
         " and ", sdk::shape_text(weight.sizes()));
  const int64_t k = weight.size(0), n = weight.size(1), m = k ? input.numel() / k : 0;
  if (!input.is_contiguous()) fail(TS_ERROR_VALUE, op, ": expected a contiguous input");
  if (bias) {
    norm::check_cpu_all(op, {&*bias});
    if (bias->dtype() != TS_FLOAT32) fail(TS_ERROR_TYPE, op, ": expected a float32 bias, got ", sdk::dtype_name(bias->dtype()));
    if (bias->dim() != 1 || bias->size(0) != n || !bias->is_contiguous())
      fail(TS_ERROR_VALUE, op, ": expected a dense bias of shape [", n, "], got ", sdk::shape_text(bias->sizes()));
  }
  std::vector<int64_t> shape = input.shape_vector();
  shape.back() = n;
  TensorRef out = sdk::empty(a.call(), shape, TS_FLOAT32, kCpuDevice);
  if (m == 0 || n == 0) return a.return_tensor(std::move(out));
  if (k == 0) fail(TS_ERROR_VALUE, op, ": an empty inner dimension is not supported");
  const Key key{m, k, n, weight.stride(0), weight.stride(1), bias.has_value(),
                activation ? int(*activation) : -1};
  static PrimitiveCache<Key, Matmul> cache;
  const auto mm = cache.get(key, [&] { return make_matmul(key); });
  auto wrap = [](const memory::desc& d, const void* p) { return memory(d, onednn_engine(), const_cast<void*>(p)); };
  dnnl::stream s(onednn_engine());
  memory scratch(mm->pd.scratchpad_desc(), onednn_engine());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(mm->pd.src_desc(), input.data<float>())},
                                       {DNNL_ARG_WEIGHTS, wrap(mm->pd.weights_desc(), weight.data<float>())},
                                       {DNNL_ARG_DST, wrap(mm->pd.dst_desc(), out.data<float>())},
                                       {DNNL_ARG_SCRATCHPAD, scratch}};
  if (bias) args.emplace(DNNL_ARG_BIAS, wrap(mm->pd.bias_desc(), bias->data<float>()));
  try {
    mm->prim.execute(s, args);
    s.wait();
  } catch (const dnnl::error& e) {
    fail(TS_ERROR, op, ": oneDNN matmul failed: ", e.what());
  }
  a.return_tensor(std::move(out));
}

}  // namespace

void register_linear_epilogue(sdk::Registrar& reg, ts_dispatch_key key) {
  reg.def("cpu::linear_epilogue(Tensor input, Tensor weight, Tensor? bias=None, str activation=\"none\") -> Tensor");
  reg.kernel("cpu::linear_epilogue", key, linear_epilogue_kernel);
}

}  // namespace tessera::cpu
