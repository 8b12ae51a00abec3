// Device-versus-CPU comparison with dtype-based tolerances.
#include "compare.h"

#include <cmath>

namespace tessera::conformance {

std::string Tolerance::str() const { return rtol == 0 && atol == 0 ? "exact" : fmt::format("rtol {:g} atol {:g}", rtol, atol); }

Tolerance tolerance_for(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float64: return {1e-7, 1e-7};
    case ScalarType::Float32: return {1e-4, 1e-5};
    case ScalarType::Float16: return {1e-2, 1e-3};
    case ScalarType::BFloat16: return {2e-2, 1e-2};
    default: return {0, 0};
  }
}

Outcome run(OperatorHandle op, ts_stack* stack) {
  Outcome out;
  try {
    Dispatcher::instance().call(op, stack);
    out.returns.assign(stack->values, stack->values + stack->size);
    for (auto& v : out.returns)
      if (v.tag == TS_VALUE_TENSOR && v.u.tensor) out.tensors.push_back(Tensor::adopt(v.u.tensor));
  } catch (const Error& e) {
    out.error = e.kind();
    out.message = e.what();
  } catch (const std::exception& e) {
    out.error = Error::Kind::Runtime;
    out.message = e.what();
  }
  return out;
}

namespace {
std::string_view kind_name(Error::Kind k) {
  switch (k) {
    case Error::Kind::Type: return "TypeError";
    case Error::Kind::Value: return "ValueError";
    case Error::Kind::Index: return "IndexError";
    case Error::Kind::NotImplemented: return "NotImplementedError";
    case Error::Kind::OutOfMemory: return "OutOfMemoryError";
    default: return "RuntimeError";
  }
}

Verdict fail(Verdict v, std::string why) {
  v.passed = false;
  v.why = std::move(why);
  return v;
}

std::string scalar_text(const ts_value& v) {
  switch (v.tag) {
    case TS_VALUE_INT: return std::to_string(v.u.i);
    case TS_VALUE_DOUBLE: return fmt::format("{}", v.u.d);
    case TS_VALUE_BOOL: return v.u.b ? "true" : "false";
    case TS_VALUE_NONE: return "None";
    default: return fmt::format("<value tag {}>", v.tag);
  }
}
}  // namespace

Verdict compare(const Outcome& device, const Outcome& cpu, Device expected_device, bool values_are_random) {
  Verdict v;
  if (device.error || cpu.error) {
    if (device.error && cpu.error && *device.error == *cpu.error) return v;  // both refuse alike
    if (device.error)
      return fail(v, fmt::format("device raised {} where CPU succeeded{}: {}", kind_name(*device.error),
                                 cpu.error ? fmt::format(" (CPU raised {})", kind_name(*cpu.error)) : "", device.message));
    return fail(v, fmt::format("CPU raised {} where the device succeeded: {}", kind_name(*cpu.error), cpu.message));
  }
  if (device.returns.size() != cpu.returns.size())
    return fail(v, fmt::format("{} returns on the device, {} on CPU", device.returns.size(), cpu.returns.size()));
  size_t t = 0;
  for (size_t r = 0; r < cpu.returns.size(); ++r) {
    const ts_value &d = device.returns[r], &c = cpu.returns[r];
    if (d.tag != c.tag) return fail(v, fmt::format("return {}: value kinds differ ({} vs {})", r, d.tag, c.tag));
    if (c.tag != TS_VALUE_TENSOR) {
      if (scalar_text(d) != scalar_text(c))
        return fail(v, fmt::format("return {}: {} on the device, {} on CPU", r, scalar_text(d), scalar_text(c)));
      continue;
    }
    if (!d.u.tensor || !c.u.tensor) continue;
    const Tensor &dt = device.tensors[t], &ct = cpu.tensors[t];
    ++t;
    if (dt.dtype() != ct.dtype())
      return fail(v, fmt::format("return {}: dtype {} on the device, {} on CPU", r, name(dt.dtype()), name(ct.dtype())));
    if (dt.shape() != ct.shape())
      return fail(v, fmt::format("return {}: shape [{}] on the device, [{}] on CPU", r, fmt::join(dt.sizes(), ", "),
                                 fmt::join(ct.sizes(), ", ")));
    if (dt.device() != expected_device)
      return fail(v, fmt::format("return {}: the result lives on {}, expected {}", r, dt.device().str(),
                                 expected_device.str()));
    if (values_are_random) continue;
    Tolerance tol = tolerance_for(ct.dtype());
    v.tolerance = tol;
    auto dv = dt.to_double_vector(), cv = ct.to_double_vector();
    for (size_t i = 0; i < cv.size(); ++i) {
      if (std::isnan(dv[i]) && std::isnan(cv[i])) continue;
      if (std::isinf(cv[i]) && dv[i] == cv[i]) continue;
      double err = std::fabs(dv[i] - cv[i]);
      if (std::isnan(err)) err = INFINITY;
      v.max_abs_error = std::max(v.max_abs_error, err);
      if (!(err <= tol.atol + tol.rtol * std::fabs(cv[i])))
        return fail(v, fmt::format("return {}: element {} is {} on the device, {} on CPU (|diff| {:g} > {})", r, i,
                                   dv[i], cv[i], err, tol.str()));
    }
  }
  return v;
}

}  // namespace tessera::conformance
