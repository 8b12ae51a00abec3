#pragma once
// Boxing helpers behind the generated tessera/sdk/ops.h: typed operator calls from plugin code
// over the C ABI. A call reports failures on sdk::current_call() and throws sdk::HostFailure,
// which the kernel edge (run_kernel) turns back into a status.
#include <tessera/sdk/plugin.h>

#include <deque>
#include <optional>
#include <tuple>
#include <vector>

namespace tessera::sdk {

// A Scalar argument or return: integer, floating or boolean.
struct Scalar {
  ts_value_tag tag = TS_VALUE_INT;
  int64_t i = 0;
  double d = 0;
  Scalar() = default;
  Scalar(int v) : i(v) {}                                     // NOLINT
  Scalar(int64_t v) : i(v) {}                                 // NOLINT
  Scalar(double v) : tag(TS_VALUE_DOUBLE), d(v) {}            // NOLINT
  Scalar(bool v) : tag(TS_VALUE_BOOL), i(v) {}                // NOLINT
  Scalar(const ScalarArg& s)                                  // NOLINT
      : tag(s.kind == ScalarArg::Double ? TS_VALUE_DOUBLE : TS_VALUE_INT), i(s.i), d(s.d) {}
  double to_double() const { return tag == TS_VALUE_DOUBLE ? d : double(i); }
};

namespace detail {

inline ts_operator resolve(const char* name) {
  ts_operator op = host().find_operator(name);
  if (!op) throw Error(TS_ERROR, cat("operator '", name, "' is not defined by the host"));
  return op;
}

// Keeps the arrays that list arguments point into alive for the call.
struct ListHolder {
  std::deque<std::vector<ts_tensor>> tensors;
};

inline ts_value box(ListHolder&, const TensorRef& t) {
  return t.defined() ? value(t) : none();
}
inline ts_value box(ListHolder& h, const std::vector<TensorRef>& ts) {
  auto& handles = h.tensors.emplace_back();
  for (const TensorRef& t : ts) handles.push_back(t.handle());
  ts_value v{TS_VALUE_TENSOR_LIST, 0, {}};
  v.u.tensors.data = handles.data();
  v.u.tensors.size = int64_t(handles.size());
  return v;
}
inline ts_value box(ListHolder&, int64_t i) { return value(i); }
inline ts_value box(ListHolder&, double d) { return value(d); }
inline ts_value box(ListHolder&, bool b) { return value(b); }
inline ts_value box(ListHolder&, int32_t dtype) { return dtype_value(dtype); }
inline ts_value box(ListHolder&, ts_device d) { ts_value v{TS_VALUE_DEVICE, 0, {}}; v.u.device = d; return v; }
inline ts_value box(ListHolder&, const char* s) {
  if (!s) return none();
  ts_value v{TS_VALUE_STRING, 0, {}};
  v.u.str = s;
  return v;
}
inline ts_value box(ListHolder&, Scalar s) {
  ts_value v{s.tag, 0, {}};
  if (s.tag == TS_VALUE_DOUBLE) v.u.d = s.d;
  else if (s.tag == TS_VALUE_BOOL) v.u.b = int32_t(s.i);
  else v.u.i = s.i;
  return v;
}
inline ts_value box(ListHolder&, const std::vector<int64_t>& l) { return int_list_value(l); }
inline ts_value box(ListHolder&, const std::vector<double>& l) {
  ts_value v{TS_VALUE_DOUBLE_LIST, 0, {}};
  v.u.doubles.data = l.data();
  v.u.doubles.size = int64_t(l.size());
  return v;
}
template <class T>
ts_value box(ListHolder& h, const std::optional<T>& o) {
  return o ? box(h, *o) : none();
}

inline void call(ts_operator op, ts_value* slots, int n_args, int capacity, int n_returns) {
  ts_stack stack{sizeof(ts_stack), slots, n_args, capacity};
  check_host(host().call_operator(current_call(), op, &stack));
  if (stack.size != n_returns) throw Error(TS_ERROR, cat("an operator left ", stack.size, " values, expected ", n_returns));
}

template <class T> T unbox(const ts_value& v);
template <> inline TensorRef unbox<TensorRef>(const ts_value& v) {
  return v.tag == TS_VALUE_TENSOR && v.u.tensor ? TensorRef::adopt(v.u.tensor) : TensorRef();
}
template <> inline int64_t unbox<int64_t>(const ts_value& v) { return v.tag == TS_VALUE_DOUBLE ? int64_t(v.u.d) : v.u.i; }
template <> inline double unbox<double>(const ts_value& v) { return v.tag == TS_VALUE_DOUBLE ? v.u.d : double(v.u.i); }
template <> inline bool unbox<bool>(const ts_value& v) { return v.u.b != 0; }
template <> inline Scalar unbox<Scalar>(const ts_value& v) {
  if (v.tag == TS_VALUE_DOUBLE) return Scalar(v.u.d);
  if (v.tag == TS_VALUE_BOOL) return Scalar(v.u.b != 0);
  return Scalar(v.u.i);
}

}  // namespace detail
}  // namespace tessera::sdk
