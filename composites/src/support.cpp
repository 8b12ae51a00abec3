// Registration of composites with their derived in-place / out= variants, and argument helpers.
#include "composite.h"

#include <unordered_map>

namespace tessera::composites {
namespace {

// The variant kernels run the functional operator, then write its result where the variant
// says: into self (in-place) or into out (resized to the result's shape, as PyTorch does).
enum class VariantKind { Inplace, Out };
struct VariantData {
  ts_operator functional;
  VariantKind kind;
  std::string name;
};

// Filled while the plugin registers (before any call), read-only afterwards.
std::unordered_map<ts_operator, VariantData>& variants() {
  static auto* m = new std::unordered_map<ts_operator, VariantData>;  // lives as long as the process
  return *m;
}

void run_variant(Args& a) {
  const VariantData& v = variants().at(sdk::host().call_operator_of(a.call()));
  const int n = a.size() - (v.kind == VariantKind::Out ? 1 : 0);
  TensorRef target = v.kind == VariantKind::Out ? a.tensor(n) : a.tensor(0);
  std::vector<ts_value> slots(size_t(std::max(n, 4)));
  for (int i = 0; i < n; ++i) slots[size_t(i)] = a.value(i);
  ts_stack inner{sizeof(ts_stack), slots.data(), n, int32_t(slots.size())};
  sdk::check_host(sdk::host().call_operator(a.call(), v.functional, &inner));
  TensorRef result = TensorRef::adopt(inner.values[0].u.tensor);
  if (sdk::category(result.dtype()) > sdk::category(target.dtype()) && sdk::is_inexact(result.dtype()))
    fail(TS_ERROR_TYPE, v.name, ": result type ", sdk::dtype_name(result.dtype()),
         " can't be cast to the desired output type ", sdk::dtype_name(target.dtype()));
  if (v.kind == VariantKind::Out) {
    IntList shape = shape_of(result);
    if (shape_of(target) != shape) sdk::resize(a.call(), target, shape);
  } else if (shape_of(target) != shape_of(result)) {
    fail(TS_ERROR_VALUE, v.name, ": the result's shape does not match self's (in-place ops cannot broadcast self)");
  }
  ops::copy_(target, result);
  a.return_argument(target);
}

void register_variant(sdk::Registrar& reg, ts_operator functional, VariantKind kind, const std::string& name) {
  ts_operator variant = sdk::host().find_operator(name.c_str());
  if (!variant) fail(TS_ERROR, "composites: operator '", name, "' is not defined by the host");
  variants().emplace(variant, VariantData{functional, kind, name});
  reg.kernel(name.c_str(), TS_KEY_COMPOSITE_IMPLICIT, run_variant);
}

}  // namespace

void composite(sdk::Registrar& reg, const char* op, sdk::KernelFn fn, bool inplace, bool out, const char* out_name) {
  reg.kernel(op, TS_KEY_COMPOSITE_IMPLICIT, fn);
  std::string full(op), base = full, overload;
  if (auto dot = full.find('.'); dot != std::string::npos) {
    base = full.substr(0, dot);
    overload = full.substr(dot + 1);
  }
  ts_operator functional = sdk::host().find_operator(op);
  if (!functional) fail(TS_ERROR, "composites: operator '", op, "' is not defined by the host");
  if (inplace) {
    register_variant(reg, functional, VariantKind::Inplace, base + "_" + (overload.empty() ? "" : "." + overload));
  }
  if (out) {
    std::string name = out_name ? std::string(out_name)
                                : base + "." + (overload.empty() || overload == "Tensor" ? "out" : overload + "_out");
    register_variant(reg, functional, VariantKind::Out, name);
  }
}

int64_t wrap_dim(const char* op, int64_t d, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);
  if (d < -n || d >= n)
    fail(TS_ERROR_INDEX, op, ": dimension out of range (expected to be in range of [", -n, ", ", n - 1, "], but got ",
         d, ")");
  return d < 0 ? d + n : d;
}

IntList shape_of(const TensorRef& t) { return IntList(t.sizes().begin(), t.sizes().end()); }

TensorRef scalar_tensor(const TensorRef& t, const sdk::ScalarArg& s) {
  switch (s.kind) {
    case sdk::ScalarArg::Double: return ops::full({}, Scalar(s.d), sdk::host().default_float_dtype(), t.device());
    case sdk::ScalarArg::Bool: return ops::full({}, Scalar(s.i != 0), int32_t(TS_BOOL), t.device());
    default: return ops::full({}, Scalar(s.i), int32_t(TS_INT64), t.device());
  }
}

TensorRef zero_like_scalar(const TensorRef& t) { return ops::zeros({}, t.dtype(), t.device()); }

bool host_flag(const TensorRef& flag) {
  if (flag.device().type != 0) return false;  // device type 0 is the CPU
  TensorRef b = flag.dtype() == TS_BOOL ? flag : ops::ne(flag, Scalar(0));
  return *b.data<bool>();
}

void return_tensors(Args& a, std::vector<TensorRef> results) {
  std::vector<ts_value> values;
  for (auto& r : results) values.push_back(Args::tensor_value(std::move(r)));
  switch (values.size()) {
    case 1: a.returns({values[0]}); break;
    case 2: a.returns({values[0], values[1]}); break;
    case 3: a.returns({values[0], values[1], values[2]}); break;
    case 4: a.returns({values[0], values[1], values[2], values[3]}); break;
    default: fail(TS_ERROR, "composites: return_tensors supports 1 to 4 results");
  }
}

void return_tensor_list(Args& a, const std::vector<TensorRef>& results) {
  thread_local std::vector<ts_tensor> returned;
  returned.clear();  // the receiver took over the previous list's references
  for (const TensorRef& r : results) returned.push_back(r.new_reference());
  ts_value v{TS_VALUE_TENSOR_LIST, 0, {}};
  v.u.tensors.data = returned.data();
  v.u.tensors.size = int64_t(returned.size());
  a.returns({v});
}

IntList broadcast_shape(const char* op, const std::vector<TensorRef>& ts) {
  IntList shape;
  for (const auto& t : ts) {
    IntList s = shape_of(t);
    if (s.size() > shape.size()) shape.insert(shape.begin(), s.size() - shape.size(), 1);
    size_t lead = shape.size() - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& v = shape[lead + i];
      if (v == s[i] || s[i] == 1) continue;
      if (v != 1)
        fail(TS_ERROR_VALUE, op, ": The size of tensor a (", v, ") must match the size of tensor b (", s[i],
             ") at non-singleton dimension ", lead + i);
      v = s[i];
    }
  }
  return shape;
}

}  // namespace tessera::composites
