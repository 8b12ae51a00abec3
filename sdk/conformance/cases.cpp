// Input generation from an operator's schema. Tensor arguments get random values of the
// case's dtype in the case's shape family; other arguments take their schema default, or a
// small value chosen by type and name (dim -> 0, size -> the case shape, Scalar -> 2, ...).
#include "cases.h"

#include <random>

namespace tessera::conformance {

namespace {
using Kind = SchemaType::Kind;

bool is_out(const Argument& a) { return a.alias && a.alias->is_write && a.kwarg_only; }

int tensor_argument_count(const FunctionSchema& s) {
  int n = 0;
  for (const auto& a : s.arguments)
    if (a.type.kind == Kind::Tensor && !is_out(a)) ++n;
  return n;
}

bool has_device_argument(const FunctionSchema& s) {
  for (const auto& a : s.arguments)
    if (a.type.kind == Kind::Device) return true;
  return false;
}

// Shape of the first tensor argument and of the others, per layout.
std::vector<int64_t> main_shape(Layout l) {
  switch (l) {
    case Layout::ZeroSize: return {0, 4};
    case Layout::Scalar0d: return {};
    default: return {3, 4};
  }
}
std::vector<int64_t> other_shape(Layout l) { return l == Layout::Broadcast ? std::vector<int64_t>{4} : main_shape(l); }

Tensor random_tensor(const std::vector<int64_t>& shape, ScalarType dtype, std::mt19937_64& rng) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) {
    if (dtype == ScalarType::Bool) x = double(rng() % 2);
    else if (dtype == ScalarType::UInt8) x = double(rng() % 10);
    else if (is_floating_point(dtype)) x = std::uniform_real_distribution<double>(-2, 2)(rng);
    else x = double(int64_t(rng() % 11) - 5);
  }
  return tensor_from_values(v, shape, dtype);
}

// The value of an argument that is not a tensor and has no default; nullopt if none fits.
std::optional<ts_value> invent(const Argument& a, const Case& c, const std::vector<int64_t>& shape,
                               std::deque<std::vector<int64_t>>& lists) {
  ts_value v{TS_VALUE_NONE, 0, {}};
  const std::string& n = a.name;
  if (a.type.is_list) {
    if (a.type.kind != Kind::Int) return a.type.optional ? std::optional(v) : std::nullopt;
    auto& l = lists.emplace_back();
    if (n == "dims") l = {1, 0};
    else if (n == "dim") l = {0};
    else l = shape;
    if (n == "dims" && shape.size() < 2) l.assign(shape.size(), 0);
    v.tag = TS_VALUE_INT_LIST;
    v.u.ints = {l.data(), int64_t(l.size())};
    return v;
  }
  switch (a.type.kind) {
    case Kind::Int:
      v.tag = TS_VALUE_INT;
      v.u.i = n == "dim1" ? 1 : n == "n" ? 3 : n == "steps" ? 4 : n == "high" ? 10 : n == "length" ? 1
            : (n == "dim" || n == "dim0" || n == "index" || n == "start" || n == "low") ? 0 : 1;
      return v;
    case Kind::Scalar:
      v.tag = TS_VALUE_INT;
      v.u.i = n == "end" ? 5 : n == "start" ? 0 : 2;
      return v;
    case Kind::Float: v.tag = TS_VALUE_DOUBLE; v.u.d = 0.5; return v;
    case Kind::Bool: v.tag = TS_VALUE_BOOL; v.u.b = 0; return v;
    case Kind::ScalarType: v.tag = TS_VALUE_DTYPE; v.u.i = int64_t(c.dtype); return v;
    default: return a.type.optional ? std::optional(v) : std::nullopt;
  }
}

// A schema default as a boxed value; strings and lists are kept alive by the caller's deques.
ts_value from_default(const DefaultValue& d, std::deque<std::vector<int64_t>>& ints,
                      std::deque<std::vector<double>>& doubles, std::deque<std::string>& strings) {
  ts_value v{TS_VALUE_NONE, 0, {}};
  switch (d.kind) {
    case DefaultValue::Kind::Bool: v.tag = TS_VALUE_BOOL; v.u.b = d.b; break;
    case DefaultValue::Kind::Int: v.tag = TS_VALUE_INT; v.u.i = d.i; break;
    case DefaultValue::Kind::Float: v.tag = TS_VALUE_DOUBLE; v.u.d = d.f; break;
    case DefaultValue::Kind::Str: v.tag = TS_VALUE_STRING; v.u.str = strings.emplace_back(d.s).c_str(); break;
    case DefaultValue::Kind::IntList: {
      auto& l = ints.emplace_back(d.ints);
      v.tag = TS_VALUE_INT_LIST;
      v.u.ints = {l.data(), int64_t(l.size())};
      break;
    }
    case DefaultValue::Kind::BoolList:
    case DefaultValue::Kind::FloatList: {
      auto& l = doubles.emplace_back(d.floats.begin(), d.floats.end());
      if (d.kind == DefaultValue::Kind::BoolList) l.assign(d.bools.begin(), d.bools.end());
      v.tag = TS_VALUE_DOUBLE_LIST;
      v.u.doubles = {l.data(), int64_t(l.size())};
      break;
    }
    default: break;  // None, identifiers (contiguous_format...): passed as None
  }
  return v;
}
}  // namespace

std::string_view layout_name(Layout l) {
  switch (l) {
    case Layout::Basic: return "basic";
    case Layout::ZeroSize: return "zero-size";
    case Layout::Scalar0d: return "0-dim";
    case Layout::Broadcast: return "broadcast";
    case Layout::NonContiguous: return "non-contiguous";
  }
  return "?";
}

std::string Case::label() const { return fmt::format("{}, {}", name(dtype), layout_name(layout)); }

Plan plan_for(OperatorHandle op) {
  const FunctionSchema& s = op->schema();
  Plan plan;
  static const char* const kRandom[] = {"empty", "rand", "randn", "randint"};
  for (const char* r : kRandom) plan.values_are_random |= s.name == r;
  for (const auto& a : s.arguments) {
    if (a.type.kind == Kind::Tensor && a.type.element_optional) {
      plan.unsupported = fmt::format("argument '{}' is {}: no generator for optional tensor lists", a.name,
                                     a.type.to_string());
      return plan;
    }
  }
  int tensors = tensor_argument_count(s);
  if (tensors == 0 && !has_device_argument(s)) {
    plan.unsupported = "no tensor or device argument: nothing selects the device";
    return plan;
  }
  std::vector<Layout> layouts = {Layout::Basic, Layout::ZeroSize};
  if (tensors > 0) {
    layouts.push_back(Layout::Scalar0d);
    if (tensors > 1) layouts.push_back(Layout::Broadcast);
    layouts.push_back(Layout::NonContiguous);
  }
  // The real dtypes. Complex ones (ABI 1.5) are opt-in for a device (its kernels choose to accept
  // them), so the kit does not hold a device that predates them to complex results.
  for (int d = 0; d <= TS_FLOAT64; ++d)
    for (Layout l : layouts) plan.cases.push_back({ScalarType(d), l});
  return plan;
}

std::optional<Inputs> Inputs::make(OperatorHandle op, const Case& c, Device device, int32_t device_key, uint64_t seed,
                                   std::string& skip_reason) {
  const FunctionSchema& s = op->schema();
  Inputs in;
  std::mt19937_64 rng(seed);
  const bool non_contiguous = c.layout == Layout::NonContiguous;
  OperatorHandle transpose_op = Dispatcher::instance().find("transpose.int");
  if (non_contiguous) {
    const KernelEntry* k = transpose_op ? transpose_op->kernel(device_key) : nullptr;
    if (!k || k->fallthrough) {
      skip_reason = "the device has no transpose.int kernel to make a non-contiguous view";
      return std::nullopt;
    }
  }
  const bool factory = tensor_argument_count(s) == 0;
  int tensor_index = 0;
  for (const auto& a : s.arguments) {
    ts_value cpu_v{TS_VALUE_NONE, 0, {}}, dev_v{TS_VALUE_NONE, 0, {}};
    const auto shape = tensor_index == 0 ? main_shape(c.layout) : other_shape(c.layout);
    if (a.type.kind == Kind::Tensor && a.type.is_list) {
      auto& cpu_list = in.cpu_.lists.emplace_back();
      auto& dev_list = in.device_.lists.emplace_back();
      for (int i = 0; i < 2; ++i) {
        cpu_list.push_back(random_tensor(main_shape(c.layout), c.dtype, rng));
        dev_list.push_back(to_device(cpu_list.back(), device));
      }
      cpu_v.tag = dev_v.tag = TS_VALUE_TENSOR_LIST;
      cpu_v.u.tensors = {reinterpret_cast<const ts_tensor*>(cpu_list.data()), 2};
      dev_v.u.tensors = {reinterpret_cast<const ts_tensor*>(dev_list.data()), 2};
      ++tensor_index;
    } else if (a.type.kind == Kind::Tensor) {
      Tensor cpu, dev;
      if (is_out(a)) {
        cpu = empty({0}, c.dtype);
        dev = to_device(cpu, device);
      } else {
        ScalarType dtype = (a.name == "mask" || a.name == "condition") ? ScalarType::Bool
                           : a.name == "index"                          ? ScalarType::Int64
                                                                        : c.dtype;
        auto base_shape = shape;
        if (non_contiguous) std::swap(base_shape[0], base_shape[1]);
        Tensor base = a.name == "index" ? zeros(base_shape, dtype) : random_tensor(base_shape, dtype, rng);
        cpu = non_contiguous ? transpose(base, 0, 1) : base;
        dev = to_device(base, device);
        if (non_contiguous) dev = transpose(dev, 0, 1);  // the device's own view kernel
        ++tensor_index;
      }
      cpu_v.tag = dev_v.tag = TS_VALUE_TENSOR;
      cpu_v.u.tensor = in.cpu_.tensors.emplace_back(cpu).handle();
      dev_v.u.tensor = in.device_.tensors.emplace_back(dev).handle();
    } else if (a.type.kind == Kind::Device) {
      cpu_v.tag = dev_v.tag = TS_VALUE_DEVICE;
      cpu_v.u.device = Device(Device::kCpuType, 0).to_abi();
      dev_v.u.device = device.to_abi();
    } else if (factory && a.type.kind == Kind::ScalarType) {
      cpu_v.tag = TS_VALUE_DTYPE;
      cpu_v.u.i = int64_t(c.dtype);
      dev_v = cpu_v;
    } else if (a.default_value) {
      cpu_v = dev_v = from_default(*a.default_value, in.int_lists_, in.double_lists_, in.strings_);
    } else if (auto v = invent(a, c, main_shape(c.layout), in.int_lists_)) {
      cpu_v = dev_v = *v;
    } else {
      skip_reason = fmt::format("no value for argument '{}' of type {}", a.name, a.type.to_string());
      return std::nullopt;
    }
    in.cpu_.values.push_back(cpu_v);
    in.device_.values.push_back(dev_v);
  }
  for (Side* side : {&in.cpu_, &in.device_}) {
    int n = int(side->values.size());
    side->values.resize(size_t(std::max<int>(n, int(s.returns.size())) + 1));
    side->stack = ts_stack{sizeof(ts_stack), side->values.data(), n, int32_t(side->values.size())};
  }
  return in;
}

}  // namespace tessera::conformance
